"""Each verb module of the planner on a World built directly — no scenario, no simulator, no Git.

One or two cases per module (cover, pack, bind, forecast, resolve, elastic, failover, accounting,
lifecycle), each worked out by hand from DESIGN.md, so the core is tested where it decides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from planner import bind, cover, elastic, failover, forecast, lifecycle, metering, outlook, pack
from planner.accounting import FAMILY, LOAN, OWN
from planner.context import snapshot
from planner.plan import plan
from planner.reasons import Closure, OpenReason, Phase, Remedy, Role, Wait
from planner.resolve import Resolver
from planner.world import (
    ConflictEntry,
    EnvelopeMeter,
    Failover,
    Lease,
    NodeObs,
    Reservation,
    RunRecord,
    WorkloadEvent,
    World,
)
from schemas.common import parse_time
from tests.support.builders import a_budget, a_lease, a_node, a_run, a_world, nodes

T0 = parse_time("2026-03-02T09:00:00Z")


def world(
    *,
    budgets: Sequence[dict[str, Any]] = (),
    runs: Sequence[dict[str, Any]] = (),
    nodes: Sequence[NodeObs] = (),
    leases: Sequence[Lease] = (),
    records: Sequence[RunRecord] = (),
    now: int = T0,
    as_of: int | None = None,
    settings: dict[str, Any] | None = None,
    workload: Sequence[WorkloadEvent] = (),
) -> World:
    """The World of one case, through the fluent builder."""
    build = a_world(now, **(settings or {})).budget(*budgets).run(*runs).node(*nodes).lease(*leases)
    build = build.record(*records).workload(*workload)
    if as_of is not None:
        build = build.as_of(as_of)
    return build.build()


def lease(
    run: str, group: int, node: str, slots: range, *, role: Role = Role.ACTIVE, rank: int | None = None
) -> Lease:
    """An open lease on these slots, paid by the run's namespace's own envelope `h`, since T0."""
    ns = run.split("/")[0]
    return a_lease(
        run, node, len(slots), group=group, role=role, owner=f"org:{ns}", budget=ns, envelope="h", start=T0,
        first_slot=slots[0], rank=rank,
    )  # fmt: skip


# ----------------------------------------------------------------------------------------- cover


def test_cover_lists_own_then_parent_then_sibling_then_sponsor_envelopes() -> None:
    w = world(
        budgets=[
            a_budget("p", "org:p").envelope("h", 8).build(),
            a_budget("x", "org:p:x", "org:p").envelope("h", 8).build(),
            a_budget("s", "org:p:s", "org:p").envelope("h", 8).build(),
            a_budget("sp", "org:sp").envelope("h", 8, lending={"allow": True, "to": ["*"]}).build(),
        ],
        runs=[a_run("x/r", "org:p:x").gpus(8).borrowing("org:sp").build()],
        nodes=nodes("A", 4),
    )
    ctx = snapshot(w)
    srcs = cover.sources(ctx.book, ctx.topo, ctx.specs["x/r"], 1.0)
    want = [("org:p:x", OWN), ("org:p", FAMILY), ("org:p:s", FAMILY), ("org:sp", LOAN)]
    assert [(s.env.owner, s.category) for s in srcs] == want


def test_cover_names_the_binding_shortfall_and_every_remedy_that_applies() -> None:
    # x owns 8; sponsor sp lends 64 but x may borrow 4; x has 16 more from 2027: needing 16 now,
    # the borrow limit binds (8 + 4 < 16 <= 8 + 64) and the window would fund it whole.
    w = world(
        budgets=[
            a_budget("x", "org:x")
            .envelope("h", 8)
            .envelope("later", 16, start="2027-01-01T00:00:00Z")
            .build(),
            a_budget("sp", "org:sp").envelope("h", 64, lending={"allow": True, "to": ["*"]}).build(),
        ],
        runs=[a_run("x/r", "org:x").gpus(16).borrowing("org:sp", cap=4).build()],
        nodes=nodes("A", 4),
    )
    ctx = snapshot(w)
    spec = ctx.specs["x/r"]
    short = cover.shortfall(ctx.book, ctx.topo, spec, 16, cover.sources(ctx.book, ctx.topo, spec, 1.0), 1.0)
    assert short is not None
    assert (short.why, short.deficit) == (Wait.BORROW_LIMIT, 4)
    assert short.remedies == (Remedy.BORROW, Remedy.WINDOW)
    assert short.reason == "borrow limit of 4 GPUs exhausted for requested width"


# ------------------------------------------------------------------------------------------ pack


def test_pack_puts_a_group_where_its_owners_own_funding_reaches_before_a_freer_domain() -> None:
    w = world(
        budgets=[
            a_budget("p", "org:p").envelope("b", 64, selector={"region": "b"}).build(),
            a_budget("x", "org:p:x", "org:p").envelope("a", 16, selector={"region": "a"}).build(),
        ],
        runs=[a_run("x/r", "org:p:x").gpus(8).groups(8).build()],
        nodes=[*nodes("A", 2, region="a"), *nodes("B", 8, region="b")],
    )
    ctx = snapshot(w)
    srcs = cover.sources(ctx.book, ctx.topo, ctx.specs["x/r"], 1.0)
    placed = pack.place(ctx.topo, pack.Request([8], 8, 0, 0, srcs, 0), "H100-80GB")
    assert placed.failure is None
    assert [(g.domain, {p.source.env.key for p in g.pieces if p.source}) for g in placed.groups] == [
        ("a/c1/A", {"x/a"})
    ]


def test_pack_places_every_spare_after_all_active_groups_in_group_order() -> None:
    # A: A-n00 8, A-n01 8, A-n02 4 (20 free); B: two nodes of 8. t pays anywhere. Three groups of 6
    # with 2 spares each (24): g0 -> A (most free) on A-n00; room for its spare is kept, so A has
    # 12 for g1 (6 + 2 spares) -> A-n01 (most free 8); g2 needs 8 but A has 4 left once both
    # spares are kept -> B-n00. Then the spares, after every active group, in group order, each in
    # its group's domain on the most free node then name: g0's on A-n02 (4), g1's on A-n00 (2, 2,
    # 2: by name), g2's on B-n01 (8). (Placing a group's spare before the next group's active GPUs
    # would have put g0's spare on A-n01 and g1 on what was left.)
    w = world(
        budgets=[a_budget("t", "org:t").envelope("h", 64).build()],
        runs=[a_run("t/r", "org:t").gpus(18).groups(6).spares(2).build()],
        nodes=[a_node("A-n00"), a_node("A-n01"), a_node("A-n02", 4), *nodes("B", 2)],
    )
    ctx = snapshot(w)
    srcs = cover.sources(ctx.book, ctx.topo, ctx.specs["t/r"], 1.0)
    placed = pack.place(ctx.topo, pack.Request([6, 6, 6], 18, 0, 2, srcs, 0), "H100-80GB")
    assert placed.failure is None
    got = [
        ([(p.node, p.gpus) for p in g.pieces], [(p.node, p.gpus) for p in g.spares]) for g in placed.groups
    ]
    assert got == [
        ([("A-n00", 6)], [("A-n02", 2)]),
        ([("A-n01", 6)], [("A-n00", 2)]),
        ([("B-n00", 6)], [("B-n01", 2)]),
    ]


# ------------------------------------------------------------------------------------------ bind


def test_bind_gives_a_new_group_the_lowest_rank_block_no_open_group_serves() -> None:
    # group 1 still serves ranks 8..15; a new group of 8 takes 0..7, one lease per node and payer
    w = world(
        budgets=[a_budget("t", "org:t").envelope("h", 32).build()],
        runs=[a_run("t/r", "org:t").gpus(16).groups(8).malleable(8, 16, 8).build()],
        nodes=nodes("A", 2),
        leases=[lease("t/r", 1, "A-n01", range(8), rank=8)],
    )
    ctx = snapshot(w)
    srcs = cover.sources(ctx.book, ctx.topo, ctx.specs["t/r"], 1.0)
    placed = pack.place(ctx.topo, pack.Request([8], 8, 2, 0, srcs, 0), "H100-80GB")
    opened = bind.bind(ctx, "t/r", "org:t", placed.groups, OpenReason.GROW)
    assert [(x.group, x.node, x.slots, x.rank, x.payer.env_key) for x in opened] == [
        (2, "A-n00", tuple(range(8)), 0, "t/h")
    ]


# -------------------------------------------------------------------------------------- forecast


def test_a_scope_kept_in_one_domain_claims_a_domain_that_holds_every_group() -> None:
    w = world(
        budgets=[a_budget("t", "org:t").envelope("h", 48).build()],
        runs=[a_run("t/r", "org:t").gpus(24).groups(8, spread=False).build()],
        nodes=[*nodes("A", 2), *nodes("B", 4)],
    )
    ctx = snapshot(w)
    srcs = cover.sources(ctx.book, ctx.topo, ctx.specs["t/r"], 1.0)
    sc = forecast.scope(ctx.topo, srcs, [s.room for s in srcs], [8, 8, 8], 24, 0, {}, True)
    assert sc.claims == {"west/c1/B": 24} and sc.deficit == 0


def test_an_eta_waits_for_min_runtime_and_notice_of_the_run_to_cut() -> None:
    # x runs 32 on A since 09:00, protected for 2h; a reservation made at 09:05 needs 8 there:
    # warned from 09:05 (cuttable 09:20 by notice), protected until 11:00: ETA 11:00.
    w = world(
        budgets=[a_budget("u", "org:u").envelope("h", 32).build()],
        runs=[a_run("u/x", "org:u").gpus(32).groups(8).build()],
        nodes=nodes("A", 4),
        leases=[lease("u/x", g, f"A-n0{g}", range(8)) for g in range(4)],
        now=T0 + 300,
        settings={"notice": 900, "min_runtime": 7200},
    )
    ctx = snapshot(w)
    ctx.reservations["t/r"] = Reservation("t/r", None, T0 + 300)
    entry = outlook.Entry("t/r", {"west/c1/A": 8}, {"west/c1/A": 8}, T0 + 300 + 900)
    seen = outlook.outlook(ctx, [entry], outlook.AtRisk(ctx))
    assert seen["t/r"].eta == T0 + 7200
    assert seen["t/r"].members == {"u/x": 1.0}


# --------------------------------------------------------------------------------------- resolve


def test_the_resolver_drops_spares_before_the_lottery_and_publishes_a_seed_only_when_it_draws() -> None:
    # s runs 16 with 8 spare GPUs on A (24 of 32 taken), y runs 8. A reservation short by 8 in A,
    # both warned long ago: dropping s's spares clears it, so nobody is drawn and no seed is set.
    w = world(
        budgets=[a_budget(n, f"org:{n}").envelope("h", 32).build() for n in ("s", "y")],
        runs=[
            a_run("s/s", "org:s").gpus(16).groups(16).spares(8).build(),
            a_run("y/y", "org:y").gpus(8).build(),
        ],
        nodes=nodes("A", 4),
        leases=[
            lease("s/s", 0, "A-n00", range(8), rank=0),
            lease("s/s", 0, "A-n01", range(8), rank=8),
            lease("s/s", 0, "A-n02", range(8), role=Role.SPARE),
            lease("y/y", 0, "A-n03", range(8), rank=0),
        ],
        now=T0 + 3600,
    )
    ctx = snapshot(w)
    res = Reservation(
        "t/r", T0 + 3600, T0, conflicts=[ConflictEntry("s/s", 1.0, T0), ConflictEntry("y/y", 0.5, T0)]
    )
    resolver = Resolver(ctx, res, {"west/c1/A": 8}, set())
    assert resolver.feasible() and resolver.run()
    closed = [(x.run, x.role, x.closure) for x in ctx.closed_log]
    assert closed == [("s/s", Role.SPARE, "DropSpare")]
    assert res.seed is None


# --------------------------------------------------------------------------------------- elastic


def test_a_malleable_run_grows_one_step_per_instant_never_twice() -> None:
    w = world(
        budgets=[a_budget("t", "org:t").envelope("h", 32).build()],
        runs=[a_run("t/r", "org:t").gpus(32).groups(8).malleable(8, 32, 8).build()],
        nodes=nodes("A", 4),
        leases=[lease("t/r", 0, "A-n00", range(8), rank=0)],
        records=[RunRecord("t/r", T0, Phase.RUNNING, "bound", T0, next_group=1)],
        now=T0 + 60,
    )
    ctx = snapshot(w)
    assert elastic.widths(ctx.specs["t/r"]) == [32, 24, 16, 8]
    elastic.grow(ctx, {}, 1.0)
    elastic.grow(ctx, {}, 1.0)  # a second round at the same instant adds nothing
    assert ctx.allocated("t/r") == 16
    assert sorted(ctx.groups("t/r")) == [0, 1]


# -------------------------------------------------------------------------------------- failover


def test_a_failed_group_moves_onto_its_spare_keeping_its_ranks_and_every_failed_node_is_cordoned() -> None:
    w = world(
        budgets=[a_budget("t", "org:t").envelope("h", 32).build()],
        runs=[a_run("t/r", "org:t").gpus(8).groups(8).spares(8).build()],
        nodes=[a_node("A-n00", out_of_service=True), a_node("A-n01"), a_node("A-n02", out_of_service=True)],
        leases=[
            lease("t/r", 0, "A-n00", range(8), rank=0),
            lease("t/r", 0, "A-n01", range(8), role=Role.SPARE),
        ],
    )
    ctx = snapshot(w)
    failover.handle_failures(ctx)
    moved = [x for x in ctx.open_leases("t/r")]
    assert [(x.node, x.role, x.rank, x.reason) for x in moved] == [("A-n01", Role.ACTIVE, 0, OpenReason.SWAP)]
    assert {(x.node, x.closure) for x in ctx.closed_log} == {("A-n00", "NodeFailure"), ("A-n01", "Swap")}
    assert ctx.cordon == {"A-n00", "A-n02"}  # A-n02 held nothing, and is cordoned all the same
    assert ctx.messages["t/r"] == "group 0 swapped to spare after node failure"


# ------------------------------------------------------------------------------------ accounting


def test_metering_stops_charging_at_the_instant_a_gpu_hour_cap_is_spent() -> None:
    # 4 GPUs since 09:00 on an envelope capped at 4 GPU-hours: spent at 10:00; metered at 10:30,
    # the envelope is charged exactly 4 and the cut-off instant is reported.
    w = world(
        budgets=[a_budget("t", "org:t").envelope("h", 8, maxGPUHours=4).build()],
        runs=[a_run("t/r", "org:t").gpus(4).build()],
        nodes=nodes("A", 1),
        leases=[lease("t/r", 0, "A-n00", range(4), rank=0)],
        now=T0 + 5400,
        as_of=T0,
    )
    ctx = snapshot(w)
    meters, cutoffs = metering.meter({}, ctx.book, ctx.leases, ctx.owner_of, T0, 0.5)
    assert meters[("t", "h")] == EnvelopeMeter(4.0, 0.0, 0.0)
    assert cutoffs["t/h"].spent == T0 + 3600
    # unmetered, the book says nothing is spent yet: 4 GPUs spend the cap one hour from now...
    assert metering.spent_when(ctx.book, ctx.leases, 0.5) == [T0 + 5400 + 3600]
    ctx.book.consumed["t/h"] = meters[("t", "h")].consumed
    assert metering.spent_when(ctx.book, ctx.leases, 0.5) == []  # ...metered, it is spent: none due


# ------------------------------------------------------------------------------------- lifecycle


def test_a_run_waiting_for_a_run_that_does_not_exist_stays_waiting_and_names_it() -> None:
    w = world(
        budgets=[a_budget("t", "org:t").envelope("h", 8).build()],
        runs=[a_run("t/b", "org:t").gpus(8).after("a").build()],
        nodes=nodes("A", 1),
        records=[RunRecord("t/b", T0, Phase.WAITING)],
        now=T0 + 60,
    )
    ctx = snapshot(w)
    lifecycle.resolve_after(ctx)
    assert ctx.records["t/b"].phase == Phase.WAITING
    assert ctx.messages["t/b"] == "waiting for t/a (no such run)"


def test_a_completed_group_counts_toward_the_minimum_and_is_never_grown_back() -> None:
    # malleable 16..32 (step 8) at 32; group 3 succeeds: 24 still working + 8 done count as 32, so
    # nothing grows back, and the width shown stays its desired 32 with nothing pending.
    w = world(
        budgets=[a_budget("t", "org:t").envelope("h", 32).build()],
        runs=[a_run("t/r", "org:t").gpus(32).groups(8).malleable(16, 32, 8).build()],
        nodes=nodes("A", 4),
        leases=[lease("t/r", g, f"A-n0{g}", range(8), rank=8 * g) for g in range(4)],
        now=T0 + 60,
        workload=[WorkloadEvent("t/r", "Succeed", 3)],
    )
    ctx = snapshot(w)
    lifecycle.fold_workload(ctx)
    assert ctx.records["t/r"].completed == 8 and ctx.counted("t/r") == 32
    assert not elastic.may_grow(ctx, "t/r")
    assert [x.closure for x in ctx.closed_log] == [Closure.COMPLETED.value]


# ------------------------------------------------------------------- failover, as the agent uses it


def _spared_run_on_a_failing_node(now: int, journal: tuple[Failover, ...] = ()) -> World:
    """t/r: group 0 on A-n00 (failed: out of service), its spare on A-n01."""
    build = (
        a_world(now)
        .budget(a_budget("t", "org:t").envelope("h", 32))
        .run(a_run("t/r", "org:t").gpus(8).groups(8).spares(8))
        .node(a_node("A-n00", out_of_service=True), a_node("A-n01"))
        .lease(
            lease("t/r", 0, "A-n00", range(8), rank=0), lease("t/r", 0, "A-n01", range(8), role=Role.SPARE)
        )
    )
    world = build.build()
    return World(
        world.now, world.settings, world.budgets, world.runs, world.nodes, world.state, journal=journal
    )


def test_the_agent_decides_a_swap_with_the_same_failure_function_as_a_pass() -> None:
    done = failover.decide(_spared_run_on_a_failing_node(T0 + 30), "swap-1")
    assert done.entry == "swap-1" and done.at == T0 + 30
    assert sorted(kind for _, kind in done.closed) == [Closure.NODE_FAILURE, Closure.SWAP]
    assert [(x.node, x.role, x.reason, x.rank, x.start) for x in done.opened] == [
        ("A-n01", Role.ACTIVE, OpenReason.SWAP, 0, T0 + 30)
    ]
    assert done.cordon == ("A-n00",)
    assert [(c.run, c.phase, c.message) for c in done.status] == [
        ("t/r", Phase.RUNNING, "group 0 swapped to spare after node failure")
    ]


def test_a_pass_folds_the_agents_swap_in_at_its_instant_once_and_never_swaps_again() -> None:
    # the agent swapped at 09:00:30; the next pass (09:05) folds that in first: the same leases,
    # closed and opened at 09:00:30 and naming the journal entry; folding the same entry again
    # (it was not yet marked Folded) changes nothing.
    done = failover.decide(_spared_run_on_a_failing_node(T0 + 30), "swap-1")
    first = plan(_spared_run_on_a_failing_node(T0 + 300, (done,)))
    assert {(e.event, e.at, e.journal) for e in first.events} == {
        ("End", T0 + 30, "swap-1"),
        ("Start", T0 + 30, "swap-1"),
    }
    assert [x.name for x in first.open_leases] == [x.name for x in done.opened]
    assert first.runs["t/r"]["message"] == "group 0 swapped to spare after node failure"
    again_world = _spared_run_on_a_failing_node(T0 + 600, (done,))
    again = plan(
        World(again_world.now, again_world.settings, again_world.budgets, again_world.runs, again_world.nodes,
              first.state, journal=(done,))
    )  # fmt: skip
    assert again.events == [] and again.state.leases == first.state.leases


def test_an_entry_folded_before_leaves_what_came_since_its_fold_alone() -> None:
    # the fold's commit was pushed but the entry was not yet marked Folded; since then the run's
    # status moved on: folding the entry again does not set it back
    done = failover.decide(_spared_run_on_a_failing_node(T0 + 30), "swap-1")
    first = plan(_spared_run_on_a_failing_node(T0 + 300, (done,)))
    assert "A-n00" in first.state.cordoned
    later = dataclasses.replace(
        first.state,
        runs={
            **first.state.runs,
            "t/r": dataclasses.replace(first.state.runs["t/r"], message="later message"),
        },
        cordoned=frozenset(),
    )
    base = _spared_run_on_a_failing_node(T0 + 600, (done,))
    again = plan(World(base.now, base.settings, base.budgets, base.runs, base.nodes, later, journal=(done,)))
    assert again.events == []
    assert again.runs["t/r"]["message"] == "later message"
