"""Proof by recomputation (for `jobtree plan`): is this state commit exactly what one pass writes?

A commit authored as the fleet's git author with a `Spec-Commit: S` trailer claims to be the
reconciler's. Author and trailer are typed text; the content is not: a pass is deterministic, so
the state commit C on parent P at instant t (C's author time) holds exactly the `state/` (ledger
included) and `rendered/` that one pass writes from the spec at S, the state at P and the
embedded cluster of S's inventory (or, with clusters configured, the nodes C's `state/observed/`
holds, the workload outcomes C's ledger rows record, and the agent's swaps its rows name a journal
entry for (§7.5: what that pass observed and folded in), at t, and nothing
else differs from P. `verify` runs that very pass (`reconcile.plan_once` on P) and compares blob
ids. Reads Git and writes only the pass caches under the Git dir; decides nothing about what to
refuse (`plan` does).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from planner import records
from planner.reasons import Closure, Phase
from planner.world import Failover, FleetState, Lease, StatusChange
from reconciler.git import errors, ownership
from reconciler.git import read as gitread
from reconciler.passes import clusters, pipeline
from reconciler.passes import reconcile as reconciliation
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.spec import commit as speccache
from reconciler.spec.validated import Spec
from reconciler.state import codec, layout, observed
from schemas.common import format_time
from schemas.layout import SPEC_PREFIXES


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the commit is the reconciler's own; `why` says, for people, what disproves it."""

    proven: bool
    why: str = ""


def verify(repo: gitread.Repository, commit: gitread.Commit) -> Verdict:
    """Recompute the pass `commit` claims to be (parent's state, its `Spec-Commit`'s spec, its author
    time) and compare every owned file: proven only when all equal and nothing else changed."""
    spec_sha = ownership.spec_commit_of(commit.message)
    if spec_sha is None:
        return Verdict(False, "it names no Spec-Commit")
    if len(commit.parents) != 1:
        return Verdict(False, "jobtree writes one-parent commits")
    parent = commit.parents[0]
    other = ownership.outside_owned(repo, parent.tree, commit.tree)
    if other is not None:
        return Verdict(False, f"it changes {other}, but jobtree changes only state/ and rendered/")
    try:
        spec_commit = gitread.resolve(repo, spec_sha)
    except errors.RevisionNotFound:
        return Verdict(False, f"its Spec-Commit {spec_sha[:12]} is not in this repository")
    short = spec_sha[:12]
    # a pass reads the spec at its parent and names that spec's commit: the two must hold the same spec
    differs = [
        p
        for p in SPEC_PREFIXES
        if gitread.entry_at(parent.tree, p.rstrip("/")) != gitread.entry_at(spec_commit.tree, p.rstrip("/"))
    ]
    if differs:
        return Verdict(False, f"its parent's {differs[0]} differs from Spec-Commit {short}'s")
    spec, _, _ = speccache.read_spec(repo, spec_commit)  # parsed once: the pass below reads the same blobs
    author = spec.fleet.git.author
    if (commit.author.name, commit.author.email) != (author.name, author.email):
        return Verdict(False, f"jobtree.yaml at Spec-Commit {short} names {author.name} <{author.email}>")
    now = int(commit.author.time)
    at = f"for Spec-Commit {short} at {format_time(now)}"
    observer = _as_observed(repo, commit, parent, now) if spec.fleet.clusters else _embedded
    try:  # the pass itself, exactly as `reconcile` runs it on the parent (whose spec is S's)
        tree = reconciliation.plan_once(repo, str(parent.id), now, observer=observer).tree
    except pipeline.InvariantViolation:
        return Verdict(False, f"jobtree's pass {at} breaks invariants, so it commits nothing")
    except Exception as err:  # noqa: BLE001 - damaged state/ at the parent: not proven, and say why
        return Verdict(False, f"jobtree cannot plan from its parent ({type(err).__name__})")
    want = {path: (blob, gitread.BLOB_MODE) for path, blob in tree.blobs.items()}
    have = gitread.owned_files(repo, commit.tree)
    wrong = [p for p in want.keys() | have.keys() if want.get(p) != have.get(p)]
    if not wrong:
        return Verdict(True)
    was = gitread.owned_files(repo, parent.tree)
    # name a file the commit changed itself first: that is where a hand edit is
    first = min(wrong, key=lambda p: (have.get(p) == was.get(p), p))
    return Verdict(False, f"{first} differs from what jobtree computes {at}")


def _embedded(spec: Spec, state: FleetState, recorded: dict[str, bytes], now: int) -> EmbeddedCluster:
    return EmbeddedCluster(spec.inventory)


def _as_observed(
    repo: gitread.Repository, commit: gitread.Commit, parent: gitread.Commit, now: int
) -> reconciliation.Observer:
    """The configured clusters exactly as the pass that made `commit` observed them: the nodes its
    `state/observed/` holds, the workload outcomes it added to the ledger."""
    files = gitread.read_files(repo, str(commit.id), [layout.OBSERVED])
    before = gitread.list_blobs(repo, str(parent.id), [layout.LEDGER])
    events = []
    rows: list[dict[str, Any]] = []
    for path, oid in gitread.list_blobs(repo, str(commit.id), [layout.LEDGER]).items():
        if before.get(path) == oid:
            continue
        data = gitread.read_blob(repo, oid)
        old = gitread.read_blob(repo, before[path]) if path in before else b""
        added = data[len(old) :] if data.startswith(old) else data
        events += observed.workload_from_ledger(added, now)
        rows += [json.loads(line) for line in added.splitlines() if b'"journal"' in line]
    swaps = _folded(repo, commit, rows)

    def observe(spec: Spec, state: FleetState, recorded: dict[str, bytes], at: int) -> clusters.Configured:
        cluster = clusters.Recorded([c.name for c in spec.fleet.clusters], files, events)
        if swaps and cluster.names:
            cluster.journal[cluster.names[0]] = list(swaps)
        return cluster

    return observe


def _folded(repo: gitread.Repository, commit: gitread.Commit, rows: list[dict[str, Any]]) -> list[Failover]:
    """The agent's swaps the pass folded in, as its ledger rows name them (`journal`): the leases
    closed (name, closure, at) and opened (whole, as `commit`'s state holds them), and the status of
    the runs concerned as `commit` holds it."""
    if not rows:
        return []
    files = gitread.read_files(repo, str(commit.id), [layout.LEASES, layout.RUN_STATUS])
    leases: dict[str, Lease] = {}
    status: dict[str, dict[str, Any]] = {}
    for path, data in files.items():
        for doc in codec.documents(data):
            if not doc:
                continue
            if path.startswith(layout.LEASES):
                lease = records.lease_from(doc)
                leases[lease.name] = lease
            elif path.startswith(layout.RUN_STATUS):
                status[path[len(layout.RUN_STATUS) :].removesuffix(".yaml")] = doc.get("status") or {}
    out = []
    for entry in sorted({str(row["journal"]) for row in rows}):
        mine = [row for row in rows if row["journal"] == entry]
        closed = tuple((str(r["lease"]), Closure(r["reason"])) for r in mine if r["event"] == "End")
        opened = tuple(
            dataclasses.replace(leases[r["lease"]], ended=None, closure=None)
            for r in mine
            if r["event"] == "Start" and r["lease"] in leases
        )
        runs = sorted({str(r["run"]) for r in mine})
        changes = tuple(
            StatusChange(
                run, Phase(status[run]["phase"]), status[run].get("message", ""), status[run].get("cause", "")
            )
            for run in runs
            if run in status
        )
        out.append(Failover(entry, records.instant(mine[0]["at"]), closed, opened, (), changes))
    return out
