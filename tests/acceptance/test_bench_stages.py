"""The benchmark splits a reconcile's time and memory by stage from its progress lines."""

from __future__ import annotations

import importlib
import sys

from tests.support import REPO

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
run = importlib.import_module("bench.run")

# (arrival s, largest RSS in kB since the line before, text): a warm pass as the wrapper records it
LINES = [
    (0.60, 90_000, "[  0.10s] checked out files of main are as committed (0.09 s)"),
    (0.62, 91_000, "[  0.12s] fetched origin/main: ahead"),
    (1.00, 120_000, "[  0.50s] read 5203 spec files at abc (1 parsed, 5202 cached): 200 budgets"),
    (1.20, 150_000, "[  0.70s] read state (cached): 14248 open leases, 3030 reservations"),
    (3.20, 210_000, "[  2.70s] planned: 0 lease events"),
    (3.70, 215_000, "[  3.20s] rendered 12146 files, 1752 written anew, 2 with changed decisions"),
    (
        3.90,
        200_000,
        "[  3.40s] committed 39fd6dc9ba5b in 0.20 s (1752 files changed, work tree updating meanwhile)",
    ),
    (4.40, 212_000, "[  3.90s] push to origin: pushed in 0.50 s"),
    (4.60, 205_000, "[  4.10s] work tree and pass cache written (0.20 s waited)"),
]


def test_each_stage_has_its_time_from_the_stamps_and_its_largest_resident_set() -> None:
    m = run.Measured(0, 5.0, 220.0, "", "/dev/null", 4.5, LINES)
    got = [(s.name, round(s.seconds, 2), round(s.rss_mb)) for s in run.stages(m)]
    # read spec: stamp 0.50, from the pass's start; its RSS: the largest of the first three lines
    assert got == [
        ("read spec", 0.5, round(120_000 / 1024)),
        ("state", 0.2, round(150_000 / 1024)),
        ("plan", 2.0, round(210_000 / 1024)),
        ("render", 0.5, round(215_000 / 1024)),
        ("commit", 0.2, round(200_000 / 1024)),
        ("push", 0.5, round(212_000 / 1024)),
        ("work tree", 0.2, round(205_000 / 1024)),
    ]
    assert run._started(m) == 0.5  # arrival 0.60 of a line stamped 0.10: start-up and imports


def test_the_stage_table_has_a_column_per_measured_pass() -> None:
    m = run.Measured(0, 5.0, 220.0, "", "/dev/null", 4.5, LINES)
    table = run.stage_table([("100k GPUs", "warm", m), ("1M GPUs", "warm", m)])
    lines = table.splitlines()
    assert lines[0] == "| Stage | 100k GPUs, warm | 1M GPUs, warm |"
    assert "| plan | 2.0 s (205 MB) | 2.0 s (205 MB) |" in lines
    assert lines[-1] == "| whole command (peak RSS) | 5.0 s (220 MB) | 5.0 s (220 MB) |"
