"""The measures on a hand-made result: utilisation, censored waits, lost work, team shares, Jain, ETAs."""

from __future__ import annotations

import math

from evaluation.metrics import percentile, summarise
from evaluation.outcome import Holding, Outcome, Promise, Result
from tests.evaluation.tiny import a_job, two_teams

HOUR = 3600


def a_result() -> Result:
    """16 GPUs for 4 hours. a1 (8 GPUs, 1h) runs 0-1h; b1 (8 GPUs, 1h, submitted at 0) waits 30 min,
    runs 0:30-1:30, and lost 1 GPU-hour to a cut on the way; a2 (8 GPUs) comes at 2h and never starts."""
    jobs = [a_job("a1", "a", 0, 8, HOUR), a_job("b1", "b", 0, 8, HOUR), a_job("a2", "a", 2 * HOUR, 8, HOUR)]
    trace = two_teams(jobs, days=4 / 24)
    a1, b1, a2 = (Outcome(j) for j in jobs)
    a1.starts, a1.finished, a1.done = [0], HOUR, 8 * HOUR
    b1.starts, b1.finished, b1.done = [1800], 5400, 8 * HOUR
    b1.losses = [(3000, "RandomPreempt", HOUR)]
    holdings = [Holding("a/a1", "a", 0, HOUR, 8), Holding("b/b1", "b", 1800, 5400, 8)]
    promises = [Promise("b/b1", 10, 1500, 1800), Promise("a/a2", 7300, 9000, None)]
    return Result("test", False, trace, {"a/a1": a1, "b/b1": b1, "a/a2": a2}, holdings, promises)


def test_utilisation_is_gpu_hours_held_and_done_over_the_fleets() -> None:
    s = summarise(a_result())
    # held: 8 x 1h + 8 x 1h = 16 GPU-h of 16 GPUs x 4h = 64: 25%; done: the same 16 GPU-h
    assert (s.allocated, s.useful) == (0.25, 0.25)
    # hour by hour: a1's 8 GPU-h and b1's 4 (0:30-1:00) of 16 in the first, b1's other 4 in the second
    assert s.hourly == [0.75, 0.25, 0.0, 0.0]


def test_a_job_never_started_waits_until_the_month_ends() -> None:
    s = summarise(a_result())
    # waits 0, 1800 and a2's 4h - 2h = 7200 (censored); nearest-rank percentiles
    assert sorted(s.waits) == [0, 1800, 7200]
    assert (percentile(s.waits, 0.5), percentile(s.waits, 0.9), s.never_started) == (1800, 7200, 1)
    assert s.by_size["2-8 GPUs"] == s.waits


def test_lost_work_is_counted_by_what_ended_it_and_as_a_share_of_the_gpu_hours_held() -> None:
    s = summarise(a_result())
    assert (s.cuts, s.lost_cuts, s.failures) == (1, 1.0, 0)
    assert s.by_kind == {"RandomPreempt": (1, 1.0)}
    assert s.cut_share() == 1 / 16


def test_team_shares_count_the_claim_while_the_team_asked_and_jain_compares_them() -> None:
    s = summarise(a_result())
    # a: claims 8 during 0-1h (a1) and 2h-4h (a2): 24 GPU-h, receives 8 GPU-h: 1/3.
    # b: claims 8 during 0-1:30, receives 8 during 0:30-1:30: 8 of 12 GPU-h: 2/3.
    # Jain: (1/3 + 2/3)^2 / (2 x (1/9 + 4/9)) = 1 / (10/9) = 0.9
    assert math.isclose(s.teams["a"], 1 / 3) and math.isclose(s.teams["b"], 2 / 3)
    assert math.isclose(s.jain, 0.9)
    assert s.lowest_team() == ("a", s.teams["a"])


def test_eta_accuracy_compares_announced_starts_that_happened() -> None:
    s = summarise(a_result())
    assert (s.eta_errors, s.eta_unstarted, s.eta_within(), s.eta_kept()) == ([300], 1, 1.0, 1.0)
