"""State commit messages name each kind of decision a reviewer looks for: starts, swaps, cuts."""

from __future__ import annotations

from pathlib import Path

import pygit2
from click.testing import CliRunner

from reconciler.cli.simulate import command
from reconciler.git import read as gitread
from reconciler.passes.reconcile import reconcile_once
from reconciler.state import codec as statefiles
from tests.support import REPO
from tests.support.git import T0, bare_remote, clone, template_files
from tests.support.git import commit_by_hand as human_commit

EXAMPLES = REPO / "examples"


def test_a_swap_onto_a_hot_spare_is_reported_as_a_swap_not_a_start(tmp_path: Path) -> None:
    # worked example 3: at 09:05 A-n03 fails and j1's group 0 moves onto its spare on A-n16
    out = tmp_path / "history"
    result = CliRunner().invoke(command, [str(EXAMPLES / "03-spares-fill-failure.yaml"), "--git", str(out)])
    assert result.exit_code == 0, result.output
    repo = pygit2.Repository(str(out))
    messages = [c.message for c in repo.walk(repo.head.target, pygit2.enums.SortMode.TOPOLOGICAL)]
    swap = [m for m in messages if "2026-03-02T09:05:00Z" in m.splitlines()[0]]
    assert len(swap) == 1
    assert "swapped alpha/j1 onto hot spares" in swap[0]
    assert "alpha/j1 swapped to spare" in swap[0]
    assert "alpha/j1 +" not in swap[0]  # the swap is not counted as a start of j1


def test_a_pass_names_the_runs_it_reserves_with_their_eta_and_reason_and_no_others(tmp_path: Path) -> None:
    files = template_files()
    whisper = files["runs/media-audio/whisper-finetune.yaml"]
    files["runs/media-audio/whisper-big.yaml"] = whisper.replace(
        b"name: whisper-finetune", b"name: whisper-big"
    ).replace(b"totalGPUs: 8", b"totalGPUs: 96")  # more H100s than the fleet has (64, all reachable)
    path = tmp_path / "work"
    repo = clone(bare_remote(tmp_path, files), path)
    outcome = reconcile_once(path, now=T0)
    message = repo.revparse_single(outcome.commit).message
    res = statefiles.load(
        statefiles.RESERVATION,
        gitread.read_files(repo, "main", ["state/reservations/"])[
            "state/reservations/media-audio/whisper-big.yaml"
        ],
    )
    reason = res["status"]["reason"]
    assert reason == "needs 96 GPUs; its funding reaches 64"
    # no fleet its funding reaches could ever hold it: no earliestStart (DESIGN §4.5)
    assert res["spec"]["earliestStart"] is None
    assert f"- media-audio/whisper-big reserved, ETA unknown: {reason}\n" in message
    assert "reserved media-audio/whisper-big" in message.splitlines()[0]

    # a later pass that reserves nothing new says how many wait, and names nobody as reserved
    vit = "runs/media-vision/vit-elastic.yaml"
    human_commit(
        repo, {vit: files[vit].replace(b"desiredTotalGPUs: 16", b"desiredTotalGPUs: 24")}, "vit wider\n"
    )
    later = reconcile_once(path, now=T0 + 600)
    assert later.commit is not None
    message = repo.revparse_single(later.commit).message
    assert "1 run waiting" in message and "reserved" not in message
    assert message.startswith(
        "jobtree: grew media-vision/vit-elastic (+8 GPUs)"
    )  # the news, not who still waits


def test_a_run_whose_file_is_invalid_from_the_start_gets_a_status_and_a_line_in_the_commit(
    tmp_path: Path,
) -> None:
    # a new run with a typo: it is kept out of planning, but not without a trace: its status names
    # the file to fix, and the state commit says so (DESIGN §2: every decision is a reviewable diff)
    files = template_files()
    whisper = files["runs/media-audio/whisper-finetune.yaml"]
    files["runs/media-audio/whisper-typo.yaml"] = whisper.replace(
        b"name: whisper-finetune", b"name: whisper-typo"
    ).replace(b"totalGPUs: 8", b"totalGPUz: 8")
    path = tmp_path / "work"
    repo = clone(bare_remote(tmp_path, files), path)
    outcome = reconcile_once(path, now=T0)
    message = repo.revparse_single(outcome.commit).message
    assert "- media-audio/whisper-typo invalid: fix runs/media-audio/whisper-typo.yaml\n" in message
    status = gitread.read_files(repo, "main", ["state/status/runs/media-audio/"])
    text = status["state/status/runs/media-audio/whisper-typo.yaml"].decode()
    assert 'message: "spec invalid: fix runs/media-audio/whisper-typo.yaml"' in text
    # fixed, it takes its place in line like any new run, and nothing says it is invalid any more
    human_commit(
        repo,
        {"runs/media-audio/whisper-typo.yaml": whisper.replace(b"whisper-finetune", b"whisper-typo")},
        "fix\n",
    )
    later = reconcile_once(path, now=T0 + 60)
    assert later.commit is not None
    assert "invalid" not in repo.revparse_single(later.commit).message
