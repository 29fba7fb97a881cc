"""A running Run whose file turns invalid is frozen: its pods, leases and status stay as they were.

DESIGN §1 step 2: an invalid object is left out of planning, and nothing already running is
touched. The pods stay exactly as last rendered from the last valid spec (never re-rendered from
no spec, which would swap the workload for a pause container); the status keeps its width and says
which file to fix; once the file is valid again rendering resumes from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2

from reconciler.git import read as gitread
from reconciler.passes.history import History
from reconciler.passes.reconcile import reconcile_once
from reconciler.passes.simulation import Simulation
from reconciler.state import codec as statefiles
from schemas.scenario import Scenario
from tests.support.builders import a_budget, a_run, scenario
from tests.support.git import (
    HUMAN,
    T0,
    bare_remote,
    clone,
    reconciled,
    state_at,
    steady_files,
    write_tree,
)
from tests.support.scenarios import A32, at, open_leases, play, starts

WHISPER = "media-audio/whisper-finetune"
WHISPER_FILE = "runs/media-audio/whisper-finetune.yaml"
WHISPER_RENDERED = "rendered/h100-east/media-audio/"
TYPO = (b"    totalGPUs: 8\n", b"    totalGPUs: 8\n    colour: blue\n")


def commit_spec(repo: pygit2.Repository, path: str, data: bytes, message: str) -> None:
    """A person's commit changing one spec file, checked out as a reconciler's host would have it."""
    files = gitread.read_files(repo, "main")
    parent = repo.head.peel(pygit2.Commit)
    tree = write_tree(repo, {**files, path: data})
    repo.create_commit("refs/heads/main", HUMAN, HUMAN, message, tree, [parent.id])
    repo.checkout_head(strategy=pygit2.GIT_CHECKOUT_FORCE)


def whisper_files(repo: pygit2.Repository, rev: str = "main") -> dict[str, str]:
    return gitread.list_blobs(repo, rev, [WHISPER_RENDERED])


def whisper_status(repo: pygit2.Repository) -> dict[str, Any]:
    data = gitread.read_files(repo, "main", ["state/status/runs/"])[f"state/status/runs/{WHISPER}.yaml"]
    status: dict[str, Any] = statefiles.load(statefiles.RUN, data)["status"]
    return status


def rendered_paths_changed_since(repo: pygit2.Repository, since: pygit2.Oid) -> set[str]:
    changed: set[str] = set()
    for commit in repo.walk(repo.head.target):
        if commit.id == since:
            break
        diff = repo.diff(commit.parents[0], commit)
        changed |= {d.delta.new_file.path for d in diff if d.delta.new_file.path.startswith(WHISPER_RENDERED)}
    return changed


def test_a_typo_in_a_running_runs_file_leaves_its_pods_and_width_exactly_as_they_were(tmp_path: Path) -> None:
    bare_remote(tmp_path, steady_files())
    path = tmp_path / "work"
    repo = clone(tmp_path / "fleet.git", path)
    assert reconcile_once(path, now=T0).commit is not None
    want_pods = whisper_files(repo)
    want_width = whisper_status(repo)["width"]
    assert list(want_pods) == [f"{WHISPER_RENDERED}whisper-finetune.yaml"] and want_width["desired"] == 8
    good = gitread.read_files(repo, "main", [WHISPER_FILE])[WHISPER_FILE]
    commit_spec(repo, WHISPER_FILE, good.replace(*TYPO), "whisper: a typo\n")
    typo_commit = repo.head.target

    reconcile_once(path, now=T0 + 1200)
    assert whisper_files(repo) == want_pods, "the pods stay exactly as rendered from the last valid spec"
    assert rendered_paths_changed_since(repo, typo_commit) == set()
    status = whisper_status(repo)
    assert status["phase"] == "Running" and status["width"] == want_width
    assert "invalid" in status["message"] and WHISPER_FILE in status["message"]
    state = state_at(repo)
    assert sum(x.gpus for x in state.leases if x.open and x.run == WHISPER) == 8
    assert state.runs[WHISPER].width == (8, 8, 8), "the width is read back from the status file"
    assert reconcile_once(path, now=T0 + 1800).commit is None, "a frozen run settles: same inputs, no commit"

    commit_spec(repo, WHISPER_FILE, good, "whisper: typo fixed\n")
    reconcile_once(path, now=T0 + 2400)
    assert whisper_files(repo) == want_pods
    status = whisper_status(repo)
    assert status["width"] == want_width and "invalid" not in status["message"]
    assert reconcile_once(path, now=T0 + 3000).commit is None


def test_a_frozen_runs_pods_keep_their_image_and_command_not_a_pause_container(tmp_path: Path) -> None:
    bare_remote(tmp_path, steady_files())
    path = tmp_path / "work"
    repo = clone(tmp_path / "fleet.git", path)
    reconcile_once(path, now=T0)
    good = gitread.read_files(repo, "main", [WHISPER_FILE])[WHISPER_FILE]
    commit_spec(repo, WHISPER_FILE, good.replace(*TYPO), "whisper: a typo\n")
    reconcile_once(path, now=T0 + 1200)
    pods = [
        doc
        for data in gitread.read_files(repo, "main", [WHISPER_RENDERED]).values()
        for doc in statefiles.documents(data)
        if doc["kind"] == "Pod"
    ]
    assert len(pods) == 1  # 8 GPUs: one node
    for pod in pods:
        container = pod["spec"]["containers"][0]
        assert container["image"] == "ghcr.io/acme/whisper-train:2026.11"
        assert container["command"][:3] == ["python", "-m", "train"]


# ---------------------------------------------------------------------------------- simulator

TEMPLATE = {"image": "ghcr.io/t/train:1", "command": ["python", "train.py"]}


def with_template(run: dict[str, Any]) -> dict[str, Any]:
    run["spec"]["template"] = TEMPLATE
    return run


def typo(minutes: int) -> dict[str, Any]:
    return at(minutes, patch={"kind": "Run", "namespace": "t", "name": "r",
                              "merge": {"spec": {"resources": {"colour": "blue"}}}})  # fmt: skip


def fixed(minutes: int) -> dict[str, Any]:
    return at(minutes, patch={"kind": "Run", "namespace": "t", "name": "r",
                              "merge": {"spec": {"resources": {"colour": None}}}})  # fmt: skip


def frozen_doc(run: dict[str, Any], *more: dict[str, Any], until: str = "+11m") -> dict[str, Any]:
    return scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), with_template(run)]),
         at(4, checkpoint="valid"), typo(5), at(6, checkpoint="invalid"), *more],
        until=until,
    )  # fmt: skip


def test_the_simulator_keeps_a_frozen_runs_width_and_names_its_file() -> None:
    out = play(frozen_doc(a_run("t/r", "org:t").gpus(16).malleable(8, 32, 8, 16).build(), fixed(10)))
    before = out["checkpoints"]["valid"]["runs"]["t/r"]
    frozen = out["checkpoints"]["invalid"]["runs"]["t/r"]
    assert frozen["phase"] == "Running" and frozen["width"] == before["width"]
    assert frozen["message"] == "spec invalid: fix runs/t/r.yaml"
    after = out["final"]["runs"]["t/r"]
    assert after["width"] == before["width"] and "invalid" not in after["message"]


def test_simulate_with_git_never_rewrites_a_frozen_runs_pod(tmp_path: Path) -> None:
    doc = frozen_doc(a_run("t/r", "org:t").gpus(8).build(), fixed(10))
    sim = Simulation(Scenario.model_validate(doc), doc)
    sim.history = History(tmp_path / "git")
    sim.play()
    repo = sim.history.repo
    pods = [
        gitread.list_blobs(repo, str(c.id), ["rendered/"])
        for c in repo.walk(repo.references["refs/heads/main"].target, pygit2.enums.SortMode.REVERSE)
        if c.author.email == "jobtree@localhost"  # the state commits, not the scenario's spec edits
    ]
    assert len(pods) == 3  # passes at +0 (start), +5 (typo), +10 (fixed)
    assert pods[0] == pods[1] == pods[2]


def test_a_frozen_run_is_never_swapped_onto_its_spare() -> None:
    # t/r runs 8 on one node with an 8-GPU spare on another; its file turns invalid at +5 and its
    # active node fails at +7. A swap would start a pod from no spec: instead the run is requeued,
    # and starts again once its file is fixed at +10.
    doc = frozen_doc(
        a_run("t/r", "org:t").gpus(8).groups(8).spares(8).build(),
        at(7, node={"name": "A-n00", "event": "Fail"}), at(8, checkpoint="failed"), fixed(10),
    )  # fmt: skip
    out = play(doc)
    active = open_leases(out["checkpoints"]["valid"], "t/r", "Active")
    assert [x["spec"]["slice"]["nodes"][0] for x in active] == ["A-n00#0"]
    assert [e for e in starts(out, "t/r") if e["reason"] == "Swap"] == []
    failed = out["checkpoints"]["failed"]
    assert open_leases(failed, "t/r") == [] and failed["runs"]["t/r"]["phase"] == "Pending"
    assert out["final"]["runs"]["t/r"]["phase"] == "Running"


RAI_LLM_FILE = "budgets/rai-llm.yaml"
PRETRAIN = "rai-llm/pretrain-64"


def status_of(repo: pygit2.Repository, kind: str, path: str) -> dict[str, Any]:
    data = gitread.read_files(repo, "main", [path])[path]
    return dict(statefiles.load(kind, data))


def gpus_of(funding: dict[str, Any]) -> dict[str, Any]:
    """A run's funding without its GPU-hours (those move with the clock)."""
    return {k: v for k, v in funding.items() if not k.endswith("GPUHours")}


def test_a_typo_in_a_budget_file_keeps_the_funding_of_what_it_pays_for(tmp_path: Path) -> None:
    # rai-llm's only envelope pays pretrain-64's 64 GB200 GPUs. With `concurency` misspelt, the
    # budget is left out of planning; its last valid version keeps funding them, so the run stays
    # funded (nothing for the resolver to reclaim), and the budget's status names the file to fix.
    bare_remote(tmp_path, steady_files())
    path = tmp_path / "work"
    repo = clone(tmp_path / "fleet.git", path)
    assert reconcile_once(path, now=T0).commit is not None
    run_path, budget_path = f"state/status/runs/{PRETRAIN}.yaml", "state/status/budgets/rai-llm.yaml"
    want_funding = gpus_of(status_of(repo, statefiles.RUN, run_path)["status"]["funding"])
    want_envelopes = status_of(repo, statefiles.BUDGET, budget_path)["status"]["envelopes"]
    assert (want_funding["ownedGPUs"], want_funding["unfundedGPUs"]) == (64, 0)
    good = gitread.read_files(repo, "main", [RAI_LLM_FILE])[RAI_LLM_FILE]
    assert b"concurrency: 64" in good
    commit_spec(repo, RAI_LLM_FILE, good.replace(b"concurrency: 64", b"concurency: 64"), "rai-llm: a typo\n")

    reconcile_once(path, now=T0 + 1200)
    assert gpus_of(status_of(repo, statefiles.RUN, run_path)["status"]["funding"]) == want_funding
    budget = status_of(repo, statefiles.BUDGET, budget_path)["status"]
    assert budget["message"] == "spec invalid: fix budgets/rai-llm.yaml; funding kept as last valid"
    assert [e["usage"] for e in budget["envelopes"]] == [e["usage"] for e in want_envelopes]
    assert all(x.open for x in state_at(repo).leases if x.run == PRETRAIN)

    commit_spec(repo, RAI_LLM_FILE, good, "rai-llm: fixed\n")
    reconcile_once(path, now=T0 + 2400)
    assert "message" not in status_of(repo, statefiles.BUDGET, budget_path)["status"]
    assert gpus_of(status_of(repo, statefiles.RUN, run_path)["status"]["funding"]) == want_funding


RAI_SYS = ("rai-sys/moe-spares", "rai-sys/train-cofunded")


def test_a_parent_cycle_typed_into_one_budget_leaves_its_untouched_partner_funding_its_runs(
    tmp_path: Path,
) -> None:
    # budgets/rai.yaml names rai-sys (its own child) as its parent: validation names the cycle on
    # both files, but rai-sys.yaml did not change. rai's last valid version is planned in its place,
    # and with it rai-sys validates, so rai-sys's running runs stay funded (none turns unfunded).
    path, repo = reconciled(tmp_path)
    statuses = {run: f"state/status/runs/{run}.yaml" for run in RAI_SYS}
    want = {
        run: gpus_of(status_of(repo, statefiles.RUN, p)["status"]["funding"]) for run, p in statuses.items()
    }
    assert all(f["unfundedGPUs"] == 0 and f["ownedGPUs"] + f["borrowedGPUs"] > 0 for f in want.values())
    good = gitread.read_files(repo, "main", ["budgets/rai.yaml"])["budgets/rai.yaml"]
    cyclic = good.replace(b'parents: ["org:acme"]', b'parents: ["org:acme:rai:sys"]')
    assert cyclic != good
    commit_spec(repo, "budgets/rai.yaml", cyclic, "rai: a parent cycle\n")

    outcome = reconcile_once(path, now=T0 + 600)
    assert {d.path for d in outcome.diagnostics if d.code == "JT030"} == {
        "budgets/rai.yaml",
        "budgets/rai-sys.yaml",
    }
    got = {
        run: gpus_of(status_of(repo, statefiles.RUN, p)["status"]["funding"]) for run, p in statuses.items()
    }
    assert got == want
    assert not any("unfunded" in line for line in outcome.summary)
