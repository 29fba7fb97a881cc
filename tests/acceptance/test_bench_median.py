"""The benchmark table reports the median of its repeated measurements, and their range."""

from __future__ import annotations

import importlib
import sys
from typing import Any

from tests.support import REPO

ROOT = REPO
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
run = importlib.import_module("bench.run")


def test_the_median_of_three_is_the_middle_one_and_the_range_spans_all() -> None:
    picked, spread = run.middle([10.44, 9.00, 9.08], lambda s: s)
    assert picked == 9.08 and spread == " (9.00–10.44)"


def test_an_even_count_takes_the_lower_middle_and_one_sample_has_no_range() -> None:
    assert run.middle([4.0, 1.0, 3.0, 2.0], lambda s: s) == (2.0, " (1.00–4.00)")
    assert run.middle([5.1], lambda s: s) == (5.1, "")


def test_a_git_row_is_judged_on_its_median_round_and_reports_a_failed_round() -> None:
    def m(wall: float, rc: int = 0) -> Any:  # a bench.run.Measured
        return run.Measured(rc, wall, 100.0, "boom" if rc else "", "/dev/null")

    rounds = [{"cold": (m(10.44), "a")}, {"cold": (m(9.00), "b")}, {"cold": (m(9.08), "c")}]
    got, text, spread = run._median_round(rounds, "cold")
    assert (got.wall, text, spread) == (9.08, "c", " (9.00–10.44)")
    rounds[1]["cold"] = (m(3.0, rc=1), "b")
    got, text, spread = run._median_round(rounds, "cold")
    assert got.rc == 1 and text == "b" and spread == ""
    assert run._median_round(rounds, "warm") == (None, "", "")
