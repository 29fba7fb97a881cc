"""The fleet-repo template a platform team copies is valid, and every example run starts as its comment says."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from reconciler import demo, simulate

TEMPLATE_DIR = demo.TEMPLATE
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    return demo.read_tree(TEMPLATE_DIR)


@pytest.fixture(scope="module")
def played(files: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> dict:
    path = tmp_path_factory.mktemp("template") / "template.scenario.yaml"
    path.write_text(yaml.safe_dump(demo.scenario(files, START), sort_keys=False))
    loaded, raw, errors = simulate.load_scenario(str(path))
    assert errors == [] and loaded is not None
    return simulate.Simulation(loaded, raw).play()


def test_every_template_file_is_valid_with_no_diagnostics(files: dict[str, bytes]) -> None:
    assert [str(d) for d in demo.diagnostics(files)] == []


def test_every_yaml_file_in_the_template_parses(files: dict[str, bytes]) -> None:
    for path, text in files.items():
        if path.endswith((".yaml", ".yml")):
            assert list(yaml.safe_load_all(text)) is not None, path


def test_every_run_and_budget_file_says_what_it_demonstrates(files: dict[str, bytes]) -> None:
    for path, text in files.items():
        if path.startswith(("runs/", "budgets/")):
            assert text.startswith(b"# "), f"{path} should open with a comment saying what it shows"


def test_all_five_example_runs_start_and_leave_free_capacity(played: dict) -> None:
    runs = played["checkpoints"]["admitted"]["runs"]
    want_runs = {
        "media-audio/whisper-finetune",
        "media-vision/vit-elastic",
        "rai-llm/pretrain-64",
        "rai-sys/moe-spares",
        "rai-sys/train-cofunded",
    }
    assert set(runs) == want_runs
    assert {k: v["phase"] for k, v in runs.items()} == dict.fromkeys(want_runs, "Running")
    assert played["checkpoints"]["admitted"]["reservations"] == {}
    slots = [slot for lease in played["final"]["leases"] for slot in lease["spec"]["slice"]["nodes"]]
    want_held_gb200, want_held_h100 = 64 + 40 + 32, 8 + 32  # of 144 and 64: room for new work
    assert sum(not s.startswith("h100") for s in slots) == want_held_gb200
    assert sum(s.startswith("h100") for s in slots) == want_held_h100


def test_malleable_run_grows_to_its_desired_width(played: dict) -> None:
    status = played["final"]["runs"]["media-vision/vit-elastic"]
    assert status["width"]["allocated"] == 32
    assert status["message"] == "grew to 32 GPUs"


def test_cofunded_run_borrows_from_family_and_its_sponsor(played: dict) -> None:
    funding = played["checkpoints"]["admitted"]["runs"]["rai-sys/train-cofunded"]["funding"]
    assert (funding["ownedGPUs"], funding["borrowedGPUs"]) == (8, 24)
    assert funding["sponsors"] == [
        {"owner": "org:acme:media:vision", "gpus": 16},
        {"owner": "org:acme:rai", "gpus": 8},
    ]


def test_demo_exits_zero_on_the_template(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main() == 0
    assert "template is valid" in capsys.readouterr().out


def test_demo_exits_three_when_a_run_spends_another_teams_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "fleet"
    bad.mkdir()
    for path, text in demo.read_tree(TEMPLATE_DIR).items():
        (bad / path).parent.mkdir(parents=True, exist_ok=True)
        (bad / path).write_bytes(text)
    run = bad / "runs/rai-sys/moe-spares.yaml"
    run.write_text(run.read_text().replace('owner: "org:acme:rai:sys"', 'owner: "org:acme:rai:llm"'))
    monkeypatch.setattr(demo, "TEMPLATE", bad)
    assert demo.main() == 3
    assert "runs/rai-sys/moe-spares.yaml:" in capsys.readouterr().out
