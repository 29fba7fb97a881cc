"""The agent bench's arithmetic: which swap is its p99, and how its rows judge the targets."""

from __future__ import annotations

from bench import agent


def test_p99_is_the_nearest_rank_of_the_swaps_and_p50_their_median() -> None:
    # 200 swaps of 1..200 ms: the 198th smallest is the p99 (two swaps above it), the median 100.5 ms
    figures = agent.percentiles([ms / 1000 for ms in range(200, 0, -1)])
    assert figures == {"p50": 100.5, "p99": 198.0, "max": 200.0}
    assert agent.percentiles([0.004])["p99"] == 4.0  # one swap is every percentile


def test_the_rows_meet_the_target_only_when_both_p50_and_p99_do() -> None:
    result = {"gpus": 10_000, "runs": 150, "pods": 1_200, "failures": 200, "agentRssMB": 93.0,
              "swapsCounted": 200.0, "p50": 30.0, "p99": 45.0, "max": 50.0, "roundTrip": 31.0,
              "roundTripRange": [30.5, 31.2], "folded": 200, "foldSeconds": 1.5}  # fmt: skip
    assert agent.rows(result)[0]["verdict"] == "meets target"
    assert agent.rows({**result, "p50": 101.0})[0]["verdict"] == "MISSES target"
    assert agent.rows({**result, "p99": 501.0})[0]["verdict"] == "MISSES target"
    assert agent.rows(result)[1]["wall"] == "31.00 s (30.50–31.20)"
