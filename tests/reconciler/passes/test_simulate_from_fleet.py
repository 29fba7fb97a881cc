"""`jobtree simulate --fleet REPO`: a what-if that starts from the fleet repository as it is, not
from a scenario file: its spec, its inventory and the state jobtree last committed there.

Numbers from the template fleet (tests/support/git.py): the 8×8 H100 domain holds whisper-finetune
(8) and vit-elastic (16) after the first pass, and media-audio's envelope (24 GPUs) pays 8 of them,
so a new 8-GPU H100 run of media-audio fits at once (its envelope: 8 + 8 ≤ 24; the domain: 24 + 8
≤ 64).
"""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import yaml
from click.testing import CliRunner

from reconciler.cli.simulate import command
from reconciler.git import read as gitread
from reconciler.passes.reconcile import reconcile_once
from schemas.common import format_time
from tests.support.git import T0, reconciled

NEW_RUN = """apiVersion: rq.davidlangworthy.io/v1
kind: Run
metadata: {{name: {name}, namespace: media-audio}}
spec:
  owner: "org:acme:media:audio"
  resources: {{gpuType: H100-80GB, totalGPUs: {gpus}}}
"""


def simulate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(command, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def person_adds(repo: pygit2.Repository, work: Path, name: str, gpus: int) -> None:
    path = work / "runs" / "media-audio" / f"{name}.yaml"
    path.write_text(NEW_RUN.format(name=name, gpus=gpus))
    repo.index.add(f"runs/media-audio/{name}.yaml")
    repo.index.write()
    who = pygit2.Signature("Ada", "ada@example.com", T0 + 60, 0)
    repo.create_commit("HEAD", who, who, f"runs: add {name}\n", repo.index.write_tree(), [repo.head.target])


def test_a_what_if_from_the_repository_decides_what_the_next_reconcile_commits(tmp_path: Path) -> None:
    work, repo = reconciled(tmp_path)
    person_adds(repo, work, "whisper-two", 8)
    later = format_time(T0 + 300)
    code, out = simulate("--fleet", str(work), "--now", later, "--format", "json")
    assert code == 0, out
    final = json.loads(out)["final"]
    assert final["at"] == later
    assert final["runs"]["media-audio/whisper-two"]["phase"] == "Running"
    assert final["runs"]["media-audio/whisper-two"]["width"]["allocated"] == 8
    # the pass reconcile then makes from the same commit, at the same instant, decides the same
    assert reconcile_once(work, now=T0 + 300).commit is not None
    assert len(final["runs"]) == 6
    for run in final["runs"]:
        committed = yaml.safe_load(gitread.read_file(repo, "HEAD", f"state/status/runs/{run}.yaml") or b"")
        simulated = final["runs"][run]
        assert {k: simulated[k] for k in ("phase", "message", "width")} == {
            k: committed["status"][k] for k in ("phase", "message", "width")
        }, run


def test_the_clock_starts_at_the_last_pass_and_nothing_new_is_decided_there(tmp_path: Path) -> None:
    work, _ = reconciled(tmp_path)
    code, out = simulate("--fleet", str(work), "--format", "json")
    assert code == 0, out
    result = json.loads(out)
    assert result["final"]["at"] == format_time(T0)
    assert result["ledger"] == []  # the state already holds this instant's decisions


def test_a_fleet_never_reconciled_needs_a_start_time(tmp_path: Path) -> None:
    work, _ = reconciled(tmp_path)
    code, out = simulate("--fleet", str(work), "--rev", "HEAD~1")  # the template, before the first pass
    assert code == 3
    assert "has no state yet (never reconciled)" in out and "give --now" in out
    code, out = simulate(
        "--fleet", str(work), "--rev", "HEAD~1", "--now", format_time(T0), "--format", "json"
    )
    assert code == 0, out
    assert json.loads(out)["final"]["runs"]["rai-llm/pretrain-64"]["phase"] == "Running"


def test_a_scenario_file_and_a_fleet_repository_exclude_each_other(tmp_path: Path) -> None:
    work, _ = reconciled(tmp_path)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("kind: Scenario\n")
    assert simulate(str(scenario), "--fleet", str(work))[0] == 2
    assert simulate()[0] == 2
    assert simulate(str(scenario), "--now", format_time(T0))[0] == 2
