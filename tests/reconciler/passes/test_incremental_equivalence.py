"""A pass that reuses what the last pass kept commits exactly what a pass from scratch commits.

Random fleets (`bench/generate.py`, small) and random edit sequences: a new run, a deleted run, a
budget edit, a budget window opening and closing, a node failure, a run completing, time passing,
and the clone's cache lost or left stale. After each edit a person's commit lands on the remote
(`git daemon`-free: a bare repository on disk), then the same pass runs twice: in a fresh clone (no
cache, every file parsed, decoded and rendered) and in the long-lived clone that pushes, with the
caches its earlier passes left on disk, and, when the reconciler is a long-lived process
(`reconcile --interval`, the webhook), what it kept in memory (`Kept`; a restart drops it). The
two commits must be the same commit: same tree (byte for byte), same message, same parent and time.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import generate
from planner.world import FleetState, WorkloadEvent
from reconciler.git import read as gitread
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.passes.reconcile import Kept, Outcome, reconcile_once
from reconciler.spec.validated import Spec
from schemas.common import format_time, parse_time
from tests.support.git import clone, state_at, write_tree

START = parse_time(generate.START)
PERSON = ("Ada", "ada@example.com")
CACHE = ("jobtree", "cache")
KINDS = (
    "new run", "deleted run", "budget edit", "window", "node failure", "completion", "time passing",
    "cache lost", "cache stale", "restart",
)  # fmt: skip
FROM_SCRATCH = ("cache lost", "cache stale", "restart")  # edits after which state may be decoded again
EDIT = st.tuples(st.sampled_from(KINDS), st.integers(0, 10**6), st.integers(1, 300))


@dataclass
class Fleet:
    """The fleet as the person and the cluster see it between passes."""

    files: dict[str, bytes]
    teams: list[generate.Team]
    domains: list[dict[str, Any]]
    now: int = START
    failed: set[str] = field(default_factory=set)  # nodes failed so far (they stay failed)
    done: list[WorkloadEvent] = field(default_factory=list)  # outcomes the next pass observes
    edges: list[int] = field(default_factory=list)  # window starts and ends still ahead
    made: int = 0  # runs and windows added so far (for their names)
    kept: Kept | None = None  # the long-lived reconciler's memory (None: every pass a new process)

    def observer(
        self, spec: Spec, state: FleetState, recorded: dict[str, bytes], now: int
    ) -> EmbeddedCluster:
        """The embedded cluster with this step's failures and outcomes (both passes see the same)."""
        cluster = EmbeddedCluster(spec.inventory)
        for name in sorted(self.failed):
            cluster.node_event(name, "Fail", now)
        cluster.workload = list(self.done)
        return cluster


def _dump(obj: Any) -> bytes:
    return generate.dump(obj).encode()


def _new_run(fleet: Fleet, rng: random.Random) -> None:
    team = rng.choice([t for t in fleet.teams if t.level >= 2])
    fleet.made += 1
    spec: dict[str, Any] = {"owner": team.owner}
    shape = rng.choice(["plain", "grouped", "malleable"])
    if shape == "plain":
        spec["resources"] = {"gpuType": generate.FLAVOR, "totalGPUs": rng.randint(1, 8)}
        if rng.random() < 0.2:
            spec["opportunistic"] = True
    else:
        group = rng.choice([8, 16])
        spec["locality"] = {"groupGPUs": group}
        if shape == "grouped":
            spec["resources"] = {"gpuType": generate.FLAVOR, "totalGPUs": group * rng.randint(1, 6)}
        else:
            hi = rng.randint(2, 6)
            spec["resources"] = {"gpuType": generate.FLAVOR, "totalGPUs": group}
            spec["malleable"] = {"minTotalGPUs": group, "maxTotalGPUs": group * hi, "stepGPUs": group}
        if rng.random() < 0.3:
            spec["sparesPerGroup"] = rng.randint(1, 4)
    run = {
        "apiVersion": generate.API,
        "kind": "Run",
        "metadata": {"name": f"edit-{fleet.made:03d}", "namespace": team.namespace},
        "spec": spec,
    }
    fleet.files[f"runs/{team.namespace}/edit-{fleet.made:03d}.yaml"] = _dump(run)


def _budget(fleet: Fleet, rng: random.Random) -> tuple[str, dict[str, Any]]:
    path = rng.choice(sorted(p for p in fleet.files if p.startswith("budgets/")))
    return path, yaml.safe_load(fleet.files[path])


def _edit(fleet: Fleet, kind: str, pick: int, minutes: int, repo: pygit2.Repository, clone_dir: Path,
          caches: list[Path]) -> None:  # fmt: skip
    """Apply one edit to the fleet (files, cluster, clock) or to the long-lived clone's cache."""
    rng = random.Random(pick)
    runs = sorted(p for p in fleet.files if p.startswith("runs/"))
    if kind == "new run":
        _new_run(fleet, rng)
    elif kind == "deleted run" and runs:
        del fleet.files[rng.choice(runs)]
    elif kind == "budget edit":
        path, budget = _budget(fleet, rng)
        envelope = rng.choice(budget["spec"]["envelopes"])
        envelope["concurrency"] = 8 * rng.randint(1, 40)
        fleet.files[path] = _dump(budget)
    elif kind == "window":  # opens within the next hours and closes a few hours later
        path, budget = _budget(fleet, rng)
        fleet.made += 1
        start = fleet.now + 60 * minutes
        end = start + 3600 * rng.randint(1, 6)
        selector = dict(budget["spec"]["envelopes"][0]["selector"])
        budget["spec"]["envelopes"].append(
            {"name": f"window-{fleet.made:03d}", "flavor": generate.FLAVOR, "selector": selector,
             "concurrency": 8 * rng.randint(2, 16), "maxGPUHours": float(rng.randint(8, 400)),
             "start": format_time(start), "end": format_time(end)}
        )  # fmt: skip
        fleet.files[path] = _dump(budget)
        fleet.edges += [start, end]
    elif kind == "node failure":
        domain = rng.choice(fleet.domains)
        fleet.failed.add(f"{domain['name']}-n{rng.randrange(domain['nodes']):02d}")
    elif kind == "completion":
        running = sorted({x.run for x in state_at(repo).leases if x.open})
        if running:
            fleet.done.append(WorkloadEvent(rng.choice(running), "Succeed"))
    elif kind == "time passing":  # to the next window edge when one comes first: a pass at the edge
        later = fleet.now + 60 * minutes
        fleet.now = min([later, *(t for t in fleet.edges if t > fleet.now)])
    elif kind == "cache lost":
        shutil.rmtree(Path(repo.path).joinpath(*CACHE), ignore_errors=True)
    elif kind == "cache stale" and caches:  # the cache an earlier pass left, older than the branch
        shutil.rmtree(Path(repo.path).joinpath(*CACHE), ignore_errors=True)
        shutil.copytree(rng.choice(caches), Path(repo.path).joinpath(*CACHE))
    elif kind == "restart" and fleet.kept is not None:  # a long-lived reconciler restarted: memory lost
        fleet.kept = Kept()


def _person_commits(remote: pygit2.Repository, files: dict[str, bytes], now: int) -> None:
    """The spec as `files` says, committed on the remote's main over jobtree's own folders."""
    head = remote.revparse_single("refs/heads/main").peel(pygit2.Commit)
    owned = {
        path: remote[oid].data
        for path, oid in gitread.list_blobs(remote, str(head.id), gitread.OWNED_PREFIXES).items()
    }
    tree = write_tree(remote, {**owned, **files})
    if tree == head.tree.id:
        return
    who = pygit2.Signature(*PERSON, now, 0)
    remote.create_commit("refs/heads/main", who, who, "fleet: an edit\n", tree, [head.id])


def _difference(
    a: pygit2.Repository, a_commit: str | None, b: pygit2.Repository, b_commit: str | None
) -> str:
    """What differs between two commits, for a failing assertion."""
    if a_commit is None or b_commit is None:
        return f"one pass committed nothing: incremental {a_commit}, full {b_commit}"
    left, right = gitread.commit(a, a_commit), gitread.commit(b, b_commit)
    if left.message != right.message:
        return f"messages differ:\n{left.message}\n---\n{right.message}"
    files_a = gitread.owned_files(a, left.tree)
    files_b = gitread.owned_files(b, right.tree)
    paths = sorted(p for p in files_a.keys() | files_b.keys() if files_a.get(p) != files_b.get(p))
    return f"trees differ at {paths[:10]}"


def _pass(path: Path, fleet: Fleet, push: bool, kept: Kept | None = None) -> Outcome:
    return reconcile_once(path, now=fleet.now, push=push, observer=fleet.observer, kept=kept)


def play(
    seed: int, scale: float, edits: list[tuple[str, int, int]], root: Path, long_lived: bool = False
) -> list[str]:
    """Play `edits` on a generated fleet; per pass how the long-lived clone's state was read.
    `long_lived`: its reconciler keeps what it holds in memory between passes (`Kept`)."""
    made = generate.build(seed, scale)
    fleet = Fleet({p: t.encode() for p, t in generate.repo_files(made).items()}, made.teams, made.domains)
    fleet.kept = Kept() if long_lived else None
    remote_path = root / "remote.git"
    remote = pygit2.init_repository(str(remote_path), bare=True, initial_head="main")
    who = pygit2.Signature(*PERSON, START, 0)
    remote.create_commit("refs/heads/main", who, who, "fleet\n", write_tree(remote, fleet.files), [])
    work = root / "work"
    repo = clone(remote_path, work)
    caches: list[Path] = []
    read_from: list[str] = []
    for step, (kind, pick, minutes) in enumerate([("first pass", 0, 0), *edits]):
        if kind != "first pass":
            _edit(fleet, kind, pick, minutes, repo, work, caches)
            if kind != "time passing":
                fleet.now += 60  # every edit is a minute after the last pass
        _person_commits(remote, fleet.files, fleet.now)
        full_path = root / f"full-{step}.git"  # bare: no work tree to write, only the commit compared
        full = pygit2.clone_repository(str(remote_path), str(full_path), bare=True)
        from_scratch = _pass(full_path, fleet, push=False)
        incremental = _pass(work, fleet, push=True, kept=fleet.kept)
        fleet.done = []
        assert from_scratch.state_from == "decoded" and from_scratch.spec_parsed == len(
            [p for p in fleet.files if p.endswith(".yaml")]
        ), "the full pass must read everything from Git"
        assert incremental.commit == from_scratch.commit, (
            f"step {step} ({kind}, {format_time(fleet.now)}): "
            + _difference(repo, incremental.commit, full, from_scratch.commit)
        )
        read_from.append(incremental.state_from)
        if step and kind not in FROM_SCRATCH:  # only the file an edit wrote was parsed again
            assert incremental.spec_parsed <= 1, f"step {step} ({kind}): {incremental.spec_parsed} parsed"
        snapshot = root / f"cache-{step}"
        if Path(repo.path).joinpath(*CACHE).is_dir():
            shutil.copytree(Path(repo.path).joinpath(*CACHE), snapshot)
            caches.append(snapshot)
        shutil.rmtree(full_path)
    return read_from


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(1, 10_000), edits=st.lists(EDIT, min_size=5, max_size=9), long_lived=st.booleans())
def test_a_pass_from_the_last_passes_cache_commits_what_a_pass_from_scratch_commits(
    seed: int, edits: list[tuple[str, int, int]], long_lived: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        read_from = play(seed, 0.01, edits, Path(tmp), long_lived)
    # the long-lived clone really used what it kept after every pass but where it was taken away
    want = "in memory" if long_lived else "cached"
    for (kind, _, _), source in zip(edits, read_from[1:], strict=True):
        if kind not in FROM_SCRATCH:
            assert source == want, f"after {kind!r} the state was {source}, not {want}"


EVERY_KIND = [(kind, 7 * i + 1, 45) for i, kind in enumerate(KINDS)] + [
    ("time passing", 3, 300), ("new run", 11, 1), ("completion", 5, 1), ("time passing", 9, 240),
]  # fmt: skip


def test_every_kind_of_edit_in_one_sequence_keeps_the_two_passes_equal(tmp_path: Path) -> None:
    read_from = play(3, 0.01, EVERY_KIND, tmp_path)
    assert read_from[0] == "decoded"
    assert read_from.count("cached") >= len(EVERY_KIND) - 2


def test_a_long_lived_reconciler_keeps_the_two_passes_equal_from_memory(tmp_path: Path) -> None:
    read_from = play(8, 0.01, EVERY_KIND, tmp_path, long_lived=True)
    assert read_from[0] == "decoded"
    assert read_from.count("in memory") >= len(EVERY_KIND) - 3
