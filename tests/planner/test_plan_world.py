"""The planner called as a pure function: a `World` built here, `planner.plan.plan`, no shell at all.

Expectations worked out from DESIGN §4 before running: one domain A of one 8-GPU H100 node, one
team `t` whose budget funds 8 GPUs, the pass at 09:00.
"""

from __future__ import annotations

from planner.plan import plan
from planner.world import World
from schemas.common import parse_time
from tests.support.builders import a_budget, a_lease, a_node, a_run, a_world

T0 = parse_time("2026-03-02T09:00:00Z")
ONE_NODE = a_node("A-n00", gpus=8)
FUNDED = a_budget("t", "org:t").envelope("west", 8, selector={"region": "west"})


def test_a_run_that_fits_its_budget_starts_on_the_free_node_paid_by_its_owner() -> None:
    world = a_world(T0).node(ONE_NODE).budget(FUNDED).run(a_run("t/r1", "org:t").gpus(8)).build()
    result = plan(world)
    (start,) = [e for e in result.events if e.event == "Start"]
    want_lease = ("t/r1", "A-n00", 8, "Active", "org:t")
    lease = start.lease
    assert (lease.run, lease.node, lease.gpus, lease.role, lease.payer.owner) == want_lease
    assert result.runs["t/r1"]["phase"] == "Running"
    assert result.violations == []


def test_a_running_run_whose_spec_is_gone_is_closed_as_deleted_and_frees_its_gpus() -> None:
    running = a_lease("t/r1", "A-n00", 8, owner="org:t", budget="t", envelope="west", start=T0 - 600)
    world = a_world(T0).node(ONE_NODE).budget(FUNDED).lease(running).build()
    result = plan(world)
    (end,) = [e for e in result.events if e.event == "End"]
    assert (end.lease.run, end.reason) == ("t/r1", "RunDeleted")
    assert result.open_leases == []


def test_the_same_world_planned_twice_gives_the_same_decisions() -> None:
    def world() -> World:
        return (
            a_world(T0)
            .node(ONE_NODE, a_node("A-n01", gpus=8))
            .budget(FUNDED)
            .run(a_run("t/r1", "org:t").gpus(8), a_run("t/r2", "org:t").gpus(8))
            .build()
        )

    first, second = plan(world()), plan(world())
    assert [e.as_json(str) for e in first.events] == [e.as_json(str) for e in second.events]
    assert first.runs == second.runs
