"""Jobtree replaying a trace: the Scenario it builds, and what the replay records from the real passes.

One node of 8 GPUs; teams a and b each budget 4 under one root (family sharing), minRuntime 0 and
the default 15-minute notice. Every instant is worked out by hand from DESIGN §4.
"""

from __future__ import annotations

from evaluation import jobtree
from evaluation.metrics import summarise
from schemas.scenario import Scenario
from tests.evaluation.tiny import a_job, two_teams

HOUR = 3600


def test_the_scenario_holds_every_team_job_duration_and_setting() -> None:
    trace = two_teams(
        [a_job("a1", "a", 0, 8, HOUR, checkpoint=1800), a_job("b1", "b", 60, 16, HOUR, group=8)]
    )
    doc = jobtree.scenario(trace, jobtree.Settings(notice=300, min_runtime=0, lottery=False))
    assert Scenario.model_validate(doc).spec.fleet.reservations.lottery is False
    spec = doc["spec"]
    assert spec["fleet"]["reservations"] == {"noticePeriod": 300, "minRuntime": 0, "lottery": False}
    assert spec["workloads"] == [{"run": "a/a1", "duration": HOUR}, {"run": "b/b1", "duration": HOUR}]
    runs = {o["metadata"]["name"]: o["spec"] for s in spec["steps"] for o in s["apply"] if o["kind"] == "Run"}
    assert runs["a1"]["runtime"] == {"checkpoint": 1800} and runs["b1"]["locality"] == {"groupGPUs": 8}
    budgets = {o["metadata"]["name"]: o["spec"] for o in spec["steps"][0]["apply"]}
    assert budgets["a"]["parents"] == ["org:root"] and budgets["root"]["envelopes"] == []


def test_a_borrowed_run_is_reclaimed_for_the_owner_at_its_announced_start() -> None:
    # a1 (8 GPUs, 1h) at 0: a's 4 and its sibling b's 4 (family). b1 (4 GPUs, 1h) at 60: b wants its
    # envelope back, so a1's claim on it is unfunded and b1 reserves with earliestStart 60 + 15m = 960.
    # At 960 activation reclaims a1 (ReclaimUnfunded: 960 s x 8 GPUs lost, no checkpoint) and b1
    # starts. a1 cannot be funded again until b1 ends at 960 + 1h = 4560; it then redoes its hour: 8160.
    trace = two_teams(
        [a_job("a1", "a", 0, 8, HOUR), a_job("b1", "b", 60, 4, HOUR)], nodes=1, a=4, b=4, days=4 / 24
    )
    result = jobtree.play(trace, jobtree.Settings(min_runtime=0))
    a1, b1 = result.outcomes["a/a1"], result.outcomes["b/b1"]
    assert (b1.starts, b1.finished) == ([960], 4560)
    assert (a1.starts, a1.finished) == ([0, 4560], 8160)
    assert a1.losses == [(960, "ReclaimUnfunded", 960 * 8)]
    assert a1.paid == {960: "borrowed"}  # half of a1's GPUs were b's, lent in the family
    victims = summarise(result).by_victim
    assert victims == {("ReclaimUnfunded", "borrowed", False): (1, 960 * 8 / HOUR)}
    assert [(p.job, p.published, p.predicted, p.started) for p in result.promises] == [("b/b1", 60, 960, 960)]
    # held (a lease per payer: a1's 8 GPUs are two leases of 4): a1 8 from 0 to 960 and from 4560 to
    # 8160, b1 4 from 960 to 4560; done: each job's work once
    held: dict[tuple[str, int, int], int] = {}
    for h in result.holdings:
        held[(h.job, h.start, h.end)] = held.get((h.job, h.start, h.end), 0) + h.gpus
    assert held == {("a/a1", 0, 960): 8, ("a/a1", 4560, 8160): 8, ("b/b1", 960, 4560): 4}
    assert (a1.done, b1.done) == (8 * HOUR, 4 * HOUR)
    assert len(result.decisions) >= 5  # passes at 0, 60, 960, 4560 and 8160 at least
