"""`python -m evaluation` end to end on a one-day, one-domain month: the report a platform team reads, byte-stable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.__main__ import BASELINES, POLICIES, main
from tests.evaluation.tiny import HELIOS

SMALL = ["--days", "1", "--domains", "1", "--no-knobs", "--workers", "1", "--no-figures"]


@pytest.fixture(scope="module")
def twice(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The small month's report written twice, into two folders."""
    out = tmp_path_factory.mktemp("evaluate")
    for name in ("one", "two"):
        assert main([*SMALL, "--out", str(out / name)]) == 0
    return out / "one", out / "two"


def test_the_report_names_every_policy_the_targets_what_each_leaves_out_and_the_sources(
    twice: tuple[Path, Path],
) -> None:
    tmp_path = twice[0]
    text = (tmp_path / "results.md").read_text()
    for policy in POLICIES:
        assert f"| {policy} |" in text
    assert "## The targets (Jobtree on this month)" in text
    assert text.count("| useful utilisation ≥ FIFO gang's + 15 points |") == 1
    assert "| target | wants | Jobtree |  | Jobtree, lottery off |  |" in text
    for baseline in BASELINES:
        assert f"- **{baseline}**: " in text  # what it leaves out
    assert "HeliosArtifact" in text and "philly-traces" in text and "clusterdata" in text
    numbers = json.loads((tmp_path / "results.json").read_text())
    assert sorted(numbers) == sorted(POLICIES)
    assert "events/s" in (tmp_path / "performance.md").read_text()


def test_the_same_month_gives_the_same_report_byte_for_byte(twice: tuple[Path, Path]) -> None:
    one, two = twice
    for name in ("results.md", "results.json"):
        assert (one / name).read_bytes() == (two / name).read_bytes()


def test_a_trace_that_cannot_be_read_stops_with_why_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--trace", str(tmp_path / "missing.csv"), "--out", str(tmp_path)]) == 2
    assert f"error: {tmp_path / 'missing.csv'}: cannot be read" in capsys.readouterr().err


def test_the_scaling_measure_prints_one_row_per_fleet_size(capsys: pytest.CaptureFixture[str]) -> None:
    from evaluation import scaling

    assert scaling.main(["--domains", "1", "2", "--hours", "2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| Jobtree |")]
    assert [row.split("|")[2].strip() for row in rows] == ["64", "128"]


def test_a_helios_trace_file_is_replayed_through_the_same_entry_point(tmp_path: Path) -> None:
    trace = tmp_path / "cluster_log.csv"
    trace.write_text(HELIOS)
    out = tmp_path / "out"
    assert (
        main(
            [
                "--trace",
                str(trace),
                "--days",
                "2",
                "--no-knobs",
                "--workers",
                "1",
                "--no-figures",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = (out / "results.md").read_text()
    assert "cluster_log.csv read as a Helios trace: 2 jobs in the first 2 days from 2020-06-09" in text
    assert "| Jobtree |" in text and "| Kueue-like quotas |" in text


def test_the_numbers_for_scripts_say_what_each_cut_fell_on_in_json() -> None:
    from evaluation.__main__ import _numbers
    from evaluation.metrics import Summary

    cut = Summary("Jobtree", 8, 3600, by_victim={("RandomPreempt", "own", False): (2, 1.5)})
    numbers = json.loads(json.dumps(_numbers([cut])))
    assert numbers["Jobtree"]["by_victim"] == {"RandomPreempt | own | no checkpoint": [2, 1.5]}
