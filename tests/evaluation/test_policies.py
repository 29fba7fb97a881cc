"""The baselines on small hand-worked cases: who starts when, who is preempted, what it costs.

Fleet: one domain of 2 nodes x 8 GPUs (16 GPUs) unless a case says otherwise; teams a and b have
budgets of 8 GPUs each. Expected instants are worked out by hand from each policy's rule.
"""

from __future__ import annotations

from evaluation import engine
from evaluation.outcome import PREEMPTED, Result
from evaluation.policies import Easy, Fifo, Kueue, Slurm
from tests.evaluation.tiny import a_job, two_teams

HOUR = 3600


def starts(result: Result) -> dict[str, list[int]]:
    return {key.split("/")[1]: out.starts for key, out in result.outcomes.items()}


# A: 8 GPUs for 1h from 0. B: 16 GPUs for 1h at 10 (must wait for A). C: 8 GPUs for 30m at 20.
HEAD_OF_LINE = [
    a_job("a1", "a", 0, 8, HOUR),
    a_job("b1", "b", 10, 16, HOUR),
    a_job("a2", "a", 20, 8, HOUR // 2),
]


def test_fifo_gang_lets_nobody_pass_the_job_that_waits() -> None:
    # B waits for A (ends 3600) and runs to 7200; C is behind B though 8 GPUs were free all along
    result = engine.play(two_teams(HEAD_OF_LINE), Fifo())
    assert starts(result) == {"a1": [0], "b1": [HOUR], "a2": [2 * HOUR]}
    assert result.promises == []


def test_easy_backfills_a_job_that_ends_before_the_head_can_start() -> None:
    # B's shadow time is 3600 (A ends). C (30m from 20) ends at 1820 <= 3600: it starts at once,
    # and B still starts at 3600 as announced
    result = engine.play(two_teams(HEAD_OF_LINE), Easy())
    assert starts(result) == {"a1": [0], "b1": [HOUR], "a2": [20]}
    assert [(p.job, p.published, p.predicted, p.started) for p in result.promises] == [
        ("b/b1", 10, HOUR, HOUR)
    ]


def test_easy_does_not_backfill_a_job_that_would_delay_the_head() -> None:
    # C now runs 2h: from 20 it would end at 7220, after the shadow time, on GPUs B needs then
    jobs = [*HEAD_OF_LINE[:2], a_job("a2", "a", 20, 8, 2 * HOUR)]
    assert starts(engine.play(two_teams(jobs), Easy()))["a2"] == [2 * HOUR]


def test_slurm_orders_the_queue_by_fair_share_before_age() -> None:
    # one node (8 GPUs). a0 runs 0-3600, so team a has used GPU-hours and b none. a1 (at 10) and
    # b1 (at 20) wait; at 3600 b1 goes first (fair-share factor 1 against a's 2^-(1/0.5) = 0.25,
    # ages are negligible), a1 after it at 7200
    jobs = [a_job("a0", "a", 0, 8, HOUR), a_job("a1", "a", 10, 8, HOUR), a_job("b1", "b", 20, 8, HOUR)]
    trace = two_teams(jobs, nodes=1, a=4, b=4)
    result = engine.play(trace, Slurm(trace, exempt=10 * HOUR))
    assert starts(result) == {"a0": [0], "a1": [2 * HOUR], "b1": [HOUR]}


def test_slurm_requeues_an_over_share_job_once_its_preempt_exempt_time_is_over() -> None:
    # a1 (8 GPUs, 3h) at 0 is within a's share; a2 (8 GPUs, 3h) at 1 makes a use 16 of its 8: it runs
    # preemptible. b1 (8 GPUs, 1h) at 100 is within b's share but finds no room; a2 is protected
    # until 1 + 2h = 7201, when it is requeued (losing 2h x 8 GPUs, no checkpoint) and b1 starts.
    # a1 ends at 10800 and a2 starts again then.
    jobs = [
        a_job("a1", "a", 0, 8, 3 * HOUR),
        a_job("a2", "a", 1, 8, 3 * HOUR),
        a_job("b1", "b", 100, 8, HOUR),
    ]
    trace = two_teams(jobs)
    result = engine.play(trace, Slurm(trace, exempt=2 * HOUR))
    assert starts(result) == {"a1": [0], "a2": [1, 3 * HOUR], "b1": [2 * HOUR + 1]}
    assert result.outcomes["a/a2"].losses == [(2 * HOUR + 1, PREEMPTED, 2 * HOUR * 8)]


def test_kueue_reclaims_borrowed_quota_at_once_newest_borrower_first() -> None:
    # a1 at 0 within a's quota, a2 at 1 borrows b's idle quota. b1 at 100 is within b's quota: the
    # borrower a2 is preempted at 100 (99 s x 8 GPUs lost) and b1 starts; a2 waits for a1 (ends 3600)
    jobs = [a_job("a1", "a", 0, 8, HOUR), a_job("a2", "a", 1, 8, HOUR), a_job("b1", "b", 100, 8, HOUR)]
    trace = two_teams(jobs)
    result = engine.play(trace, Kueue(trace))
    assert starts(result) == {"a1": [0], "a2": [1, HOUR], "b1": [100]}
    assert result.outcomes["a/a2"].losses == [(100, PREEMPTED, 99 * 8)]


def test_kueue_lets_a_later_job_pass_one_that_does_not_fit() -> None:
    # BestEffortFIFO: a1 holds 8 of 16 GPUs; a2 (16 GPUs) cannot be admitted, a3 (8 GPUs) behind it
    # in the same queue is admitted at once (borrowing b's idle quota)
    jobs = [a_job("a1", "a", 0, 8, HOUR), a_job("a2", "a", 5, 16, HOUR), a_job("a3", "a", 10, 8, HOUR)]
    trace = two_teams(jobs)
    assert starts(engine.play(trace, Kueue(trace)))["a3"] == [10]


def test_a_failed_node_requeues_its_job_back_to_its_checkpoint() -> None:
    # one node: a1 (8 GPUs, 2h, checkpoint 30m) from 0; the node fails at 4000 (checkpoint at 3600
    # kept 1h) and is back at 5000; a1 restarts then and needs 1h more: it finishes at 8600
    from dataclasses import replace

    from evaluation.trace import Outage

    trace = replace(
        two_teams([a_job("a1", "a", 0, 8, 2 * HOUR, checkpoint=1800)], nodes=1),
        outages=(Outage("d00-n00", 4000, 5000),),
    )
    result = engine.play(trace, Fifo())
    out = result.outcomes["a/a1"]
    assert (out.starts, out.finished) == ([0, 5000], 8600)
    assert out.losses == [(4000, "NodeFailure", 400 * 8)]
