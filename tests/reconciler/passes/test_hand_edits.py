"""`reconcile` on a branch where someone changed `state/` or `rendered/` by hand (a direct push that
skipped the plan check): it plans from jobtree's own last state commit and writes those files back.

The template fleet (see test_reconcile.py) runs all five runs after its first pass; pretrain-64 holds
64 GB200 GPUs in two groups of 32, so its lease file and its rendered file (16 pods and a Service)
are what a careless edit would remove.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner

from reconciler.cli.reconcile import command
from reconciler.git import ownership
from reconciler.git import read as gitread
from reconciler.git import remote as gitremote
from reconciler.passes.reconcile import reconcile_once
from tests.support.git import HUMAN, T0, bare_remote, clone, state_at, steady_files, write_tree
from tests.support.git import reconciled as reconciled_template

LEASE = "state/leases/rai-llm/pretrain-64.yaml"
RENDERED = "rendered/gb-west/rai-llm/pretrain-64.yaml"


def person_commits(repo: pygit2.Repository, change: dict[str, bytes | None], message: str) -> str:
    """A person's commit on main (checked out): files set, or removed where the value is None."""
    parent = repo.references["refs/heads/main"].peel(pygit2.Commit)
    files = gitread.read_files(repo, "main")
    for path, data in change.items():
        if data is None:
            files.pop(path)
        else:
            files[path] = data
    oid = repo.create_commit("refs/heads/main", HUMAN, HUMAN, message, write_tree(repo, files), [parent.id])
    repo.checkout_head(strategy=pygit2.GIT_CHECKOUT_FORCE)
    return str(oid)


def reconciled(tmp_path: Path) -> tuple[Path, pygit2.Repository, dict[str, bytes]]:
    """A template clone after its first pass, and the owned files jobtree committed."""
    path, repo = reconciled_template(tmp_path)
    return path, repo, gitread.read_files(repo, "main", ["state/", "rendered/"])


def test_a_lease_file_deleted_by_hand_is_written_back_and_its_run_keeps_running(tmp_path: Path) -> None:
    path, repo, ours = reconciled(tmp_path)
    edit = person_commits(repo, {LEASE: None, RENDERED: None}, "tidy up\n")
    outcome = reconcile_once(path, now=T0 + 600)
    assert outcome.commit is not None
    head = repo.references["refs/heads/main"].peel(pygit2.Commit)
    assert gitread.read_file(repo, "main", LEASE) == ours[LEASE]  # byte for byte what jobtree wrote
    assert gitread.read_file(repo, "main", RENDERED) == ours[RENDERED]  # its 16 pods are not removed
    assert sum(x.gpus for x in state_at(repo).leases if x.open and x.run == "rai-llm/pretrain-64") == 64
    assert f"changed by hand in {edit[:12]}" in head.message
    assert f"- {LEASE} written back" in head.message and f"- {RENDERED} written back" in head.message
    ledger = gitread.read_files(repo, "main", ["state/ledger/"])
    events = [json.loads(line) for data in ledger.values() for line in data.splitlines()]
    assert not [e for e in events if e.get("run") == "rai-llm/pretrain-64" and e.get("event") == "End"]
    # written back once: the next pass has nothing to do
    assert reconcile_once(path, now=T0 + 600).commit is None
    assert (path / LEASE).read_bytes() == ours[LEASE]  # the checkout shows it again


def test_a_lease_moved_by_hand_onto_a_held_slot_is_undone_not_a_failed_pass(tmp_path: Path) -> None:
    path, repo, ours = reconciled(tmp_path)
    moved = ours[LEASE].replace(b"nvl72-a-", b"nvl72-b-")  # onto the other domain, where others run
    assert moved != ours[LEASE]
    person_commits(repo, {LEASE: moved}, "move pretrain\n")
    result = CliRunner().invoke(command, [str(path), "--once", "--now", "2026-03-02T09:10:00Z", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "wrote back 1 file changed by hand" in result.output
    assert gitread.read_file(repo, "main", LEASE) == ours[LEASE]
    taken = [
        f"{x.node}#{s}" for x in state_at(repo).leases if x.open and x.role != "Borrowed" for s in x.slots
    ]
    assert len(taken) == len(set(taken))


def test_an_edit_reverted_by_hand_leaves_nothing_to_write_back(tmp_path: Path) -> None:
    path, repo, ours = reconciled(tmp_path)
    person_commits(repo, {LEASE: ours[LEASE] + b"# mine\n"}, "edit\n")
    person_commits(repo, {LEASE: ours[LEASE]}, "revert edit\n")
    assert reconcile_once(path, now=T0 + 600).commit is None


def test_a_spec_change_after_a_hand_edit_is_planned_and_the_edit_written_back(tmp_path: Path) -> None:
    path, repo, ours = reconciled(tmp_path)
    person_commits(repo, {LEASE: None}, "drop a lease\n")
    run = gitread.read_file(repo, "main", "runs/media-audio/whisper-finetune.yaml")
    assert run is not None
    person_commits(
        repo, {"runs/media-audio/whisper-two.yaml": run.replace(b"whisper-finetune", b"whisper-two")}, "run\n"
    )
    assert reconcile_once(path, now=T0 + 600).commit is not None
    assert gitread.read_file(repo, "main", LEASE) == ours[LEASE]
    assert {"rai-llm/pretrain-64", "media-audio/whisper-two"} <= {
        x.run for x in state_at(repo).leases if x.open
    }


def git(work: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=Ada", "-c", "user.email=ada@example.com", *args],
        cwd=work, check=True, capture_output=True,
    )  # fmt: skip


def test_a_pull_merge_over_jobtrees_newer_state_commit_is_not_a_hand_edit(tmp_path: Path) -> None:
    # Ada commits on an old state commit, then `git pull` merges jobtree's newer one in as the
    # merge's second parent. The merge's state/ is that commit's as it is: nothing to write back,
    # and what the newer commit recorded (a run started at 09:10, its ledger line) stays.
    remote = bare_remote(tmp_path, steady_files())
    mine, theirs = clone(remote, tmp_path / "mine"), clone(remote, tmp_path / "theirs")
    assert reconcile_once(tmp_path / "theirs", now=T0, push=True).pushed
    git(tmp_path / "mine", "pull", "-q", "--no-rebase", "--no-edit")
    run = gitread.read_file(theirs, "main", "runs/media-audio/whisper-finetune.yaml")
    assert run is not None
    person_commits(
        theirs, {"runs/media-audio/whisper-two.yaml": run.replace(b"whisper-finetune", b"whisper-two")}, "r\n"
    )
    assert gitremote.push(theirs, "origin", "main", str(theirs.head.peel(pygit2.Commit).parent_ids[0])).ok
    newer = reconcile_once(tmp_path / "theirs", now=T0 + 600, push=True)
    assert newer.pushed and newer.commit is not None
    person_commits(mine, {"README.md": b"# notes\n"}, "docs\n")  # Ada's local commit on the old state
    git(tmp_path / "mine", "pull", "-q", "--no-rebase", "--no-edit")
    merge = mine.head.peel(pygit2.Commit)
    assert len(merge.parents) == 2 and str(merge.parents[1].id) == newer.commit
    ledger_before = gitread.read_files(mine, "main", ["state/ledger/"])
    outcome = reconcile_once(tmp_path / "mine", now=T0 + 700)
    assert outcome.commit is None, outcome.summary  # nothing written back, nothing newly decided
    lease = [x for x in state_at(mine).leases if x.run == "media-audio/whisper-two"]
    assert lease and all(x.start == T0 + 600 for x in lease)
    assert gitread.read_files(mine, "main", ["state/ledger/"]) == ledger_before


def test_a_persons_commit_with_a_copied_trailer_is_still_a_hand_edit(tmp_path: Path) -> None:
    path, repo, ours = reconciled(tmp_path)
    trailer = ownership.spec_commit_of(repo.head.peel(pygit2.Commit).message)
    assert trailer is not None
    person_commits(repo, {LEASE: None}, f"jobtree: tidy\n\nSpec-Commit: {trailer}\n")  # Ada's, not jobtree's
    assert reconcile_once(path, now=T0 + 600).commit is not None
    assert gitread.read_file(repo, "main", LEASE) == ours[LEASE]


def test_a_pass_asked_for_before_the_last_one_plans_as_of_the_last_one_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, repo, _ = reconciled(tmp_path)  # the first pass ran at T0
    person_commits(repo, {"runs/media-audio/whisper-finetune.yaml": None}, "drop whisper\n")
    done = reconcile_once(path, now=T0 - 3600)  # e.g. a reconciler that lost a race to a clock ahead
    assert any(  # a warning the command line prints even with --quiet
        "--now 2026-03-02T08:00:00Z is before the last pass (asOf 2026-03-02T09:00:00Z" in w
        for w in done.warnings
    )
    assert done.commit is not None and "media-audio/whisper-finetune RunDeleted" in done.summary
    leases = state_at(repo).leases
    (ended,) = [x for x in leases if x.run == "media-audio/whisper-finetune"]
    assert ended.ended == T0 and all(x.ended is None or x.ended >= x.start for x in leases)
    # a clock a little behind the last writer's (another runner's) does the same, and says so
    person_commits(repo, {"runs/rai-llm/pretrain-64.yaml": None}, "drop pretrain\n")
    monkeypatch.setattr(time, "time", lambda: float(T0 - 120))
    done = reconcile_once(path)
    assert any("the clock (2026-03-02T08:58:00Z) is before the last pass" in w for w in done.warnings)
    assert done.commit is not None and "rai-llm/pretrain-64 RunDeleted" in done.summary
    assert repo[done.commit].peel(pygit2.Commit).commit_time == T0  # the commit's time is the pass's
    assert 'asOf: "2026-03-02T09:00:00Z"' in (path / "state" / "fleet.yaml").read_text()
    assert all(x.ended is None or x.ended >= x.start for x in state_at(repo).leases)
    # a clock hours behind (or a pass pushed with a future --now): the same, said as more than drift
    person_commits(repo, {"runs/rai-sys/moe-spares.yaml": None}, "drop moe\n")
    monkeypatch.setattr(time, "time", lambda: float(T0 - 7200))
    done = reconcile_once(path)
    assert any("more than a clock's drift: a pass pushed with a future --now" in w for w in done.warnings)
    assert done.commit is not None and "rai-sys/moe-spares RunDeleted" in done.summary
    assert all(x.ended is None or x.ended >= x.start for x in state_at(repo).leases)


def test_a_rendered_file_written_back_is_not_called_rendered_anew(tmp_path: Path) -> None:
    path, repo, ours = reconciled(tmp_path)
    pods = "rendered/h100-east/media-audio/whisper-finetune.yaml"
    person_commits(
        repo, {pods: ours[pods].replace(b"restartPolicy: Never", b"restartPolicy: Always")}, "tweak\n"
    )
    done = reconcile_once(path, now=T0 + 600)
    message = repo[done.commit].peel(pygit2.Commit).message
    assert "wrote back 1 file changed by hand" in message and pods in message
    assert "rendered pods anew" not in message  # the run's spec did not change
    assert gitread.read_file(repo, "main", pods) == ours[pods]
