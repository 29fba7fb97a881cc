"""Public trace files as traces: Helios's cluster_log.csv and Philly's trace in the same columns, hand-written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaluation import readers
from evaluation.generate import MONDAY
from schemas.common import parse_time
from tests.evaluation.tiny import HELIOS, PHILLY


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_helios_log_becomes_jobs_teams_and_a_fleet_sized_to_its_work(tmp_path: Path) -> None:
    path = write(tmp_path, "cluster_log.csv", HELIOS)
    trace = readers.read(path, days=2)
    # kept: job 1 (8 GPUs, 36,848 s) and job 4 (16 GPUs, 7,200 s); job 2 runs under 10 minutes, job 3
    # is a CPU job, job 5's gpu_num is not a number. The month starts at midnight of the first day.
    assert trace.start == parse_time("2020-06-09T00:00:00Z")
    assert [(j.team, j.submit, j.gpus, j.duration, j.group) for j in trace.jobs] == [
        ("vc-vcjkd", 18 * 3600 + 41 * 60 + 1, 8, 36848, None),
        ("vc-vchbv", 33 * 3600, 16, 7200, 16),
    ]
    # the fleet: work 8 x 36,848 + 16 x 7,200 = 409,984 GPU-s over 2 days at Helios's 0.80 is 2.97
    # GPUs: one domain of 64
    assert trace.gpus == 64
    # budgets in proportion to each team's work: 294,784 and 115,200 of 409,984 of 64 GPUs is 46.0
    # and 17.98, rounded down (46, 17) with the one left to the larger
    assert {t.name: t.gpus for t in trace.teams if t.parent} == {"vc-vcjkd": 47, "vc-vchbv": 17}
    assert any(f"{path}:6: gpu_num 'two' is not a number" in n for n in trace.notes)
    assert any("Helios" in n for n in trace.notes)


def test_a_philly_csv_reads_run_times_from_start_and_end(tmp_path: Path) -> None:
    path = write(tmp_path, "philly_trace.csv", PHILLY)
    trace = readers.read(path, days=5, gpus=100)
    # job a: 01:13:30 to 06:53:12 two days later = 2 x 86,400 + 5:39:42 (20,382) = 193,182 s; job b:
    # 2 h; job c ends before it starts
    assert [(j.team, j.gpus, j.duration) for j in trace.jobs] == [
        ("vc-ee9e8c", 1, 193182),
        ("vc-925e2b", 8, 7200),
    ]
    assert trace.gpus == 128  # 100 rounded up to whole domains of 64
    assert any("Philly" in n for n in trace.notes)
    assert any(f"{path}:4: end_time is before start_time" in n for n in trace.notes)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a,b,c\n1,2,3\n", "no column gpu_num, submit_time, duration (or start_time and end_time)"),
        ("gpu_num,submit_time,duration\n", "no GPU job could be read"),
        ("gpu_num,submit_time,duration\nx,2020-01-01 00:00:00,100\n", "first problem"),
    ],
    ids=["not a trace's columns", "no rows", "only bad rows"],
)
def test_a_file_that_is_no_trace_is_refused_with_why(tmp_path: Path, text: str, want: str) -> None:
    with pytest.raises(readers.TraceError, match=re.escape(want)):
        readers.read(write(tmp_path, "t.csv", text))


def test_a_missing_file_says_which_and_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(readers.TraceError, match="cannot be read"):
        readers.read(tmp_path / "nope.csv")


def test_a_generated_month_starts_on_a_monday_like_a_read_one_starts_at_midnight() -> None:
    assert (MONDAY // 86400 + 3) % 7 == 0  # 1970-01-01 was a Thursday: day 4 of a Monday week
