"""Promises each guarded by a test that fails when the rule is broken: the resolver's notice before
any cut and its `minRuntime` protection (§4.6), reached directly — a due reservation whose member
has not had its notice, or is still protected — and the §4.9 invariant checker fed each kind of
violation (a checker that found nothing would pass every other test).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from planner import accounting, invariants, manifests
from planner.plan import plan
from planner.reasons import Role
from planner.world import ConflictEntry, Lease, Payer, Reservation, World
from schemas.budget import Budget
from schemas.common import parse_time
from schemas.run import Run
from tests.support.builders import a_budget, a_lease, a_run, a_world, nodes

T0 = parse_time("2026-03-02T09:00:00Z")
NOW = T0 + 7200


def _due(since: int, started: int, **settings: Any) -> World:
    """A (2 x 8) full with u/x (16, groups of 8) since `started`. t/r (8) is reserved, due now, and
    has warned x since `since`."""
    w = (
        a_world(NOW, **settings)
        .node(*nodes("A", 2))
        .budget(a_budget("t", "org:t").envelope("h", 8), a_budget("u", "org:u").envelope("h", 16))
        .run(a_run("t/r", "org:t").gpus(8), submitted=T0)
        .run(a_run("u/x", "org:u").gpus(16).groups(8))
        .lease(
            a_lease("u/x", "A-n00", 8, group=0, budget="u", envelope="h", start=started),
            a_lease("u/x", "A-n01", 8, group=1, budget="u", envelope="h", start=started, rank=8),
        )
        .build()
    )
    w.state.reservations["t/r"] = Reservation("t/r", NOW, T0, conflicts=[ConflictEntry("u/x", 1.0, since)])
    return w


@pytest.mark.parametrize(("warned", "want_cut"), [(5, False), (14, False), (15, True)])
def test_the_resolver_cuts_only_a_run_warned_for_the_whole_notice_period(warned: int, want_cut: bool) -> None:
    # notice 15m: x was warned `warned` minutes ago. Under 15, r stays Pending, nobody is cut, and
    # it forecasts again from this pass: its ETA is now + 15m. At 15, x is cut and r starts.
    p = plan(_due(NOW - warned * 60, T0))
    cut = [e for e in p.events if e.event == "End"]
    assert bool(cut) is want_cut
    assert (p.runs["t/r"]["phase"] == "Running") is want_cut
    if not want_cut:
        res = p.state.reservations["t/r"]
        assert (res.state, res.earliest_start) == ("Pending", NOW + 900)


@pytest.mark.parametrize(("ran", "want_cut"), [(10, False), (29, False), (30, True)])
def test_the_resolver_never_cuts_a_run_inside_its_min_runtime(ran: int, want_cut: bool) -> None:
    # minRuntime 30m; x was warned an hour ago but started `ran` minutes ago. Under 30 it is
    # protected: nobody is cut, and r's ETA is when x's protection ends (later than now + 15m
    # only when it ran under 15 minutes).
    p = plan(_due(NOW - 3600, NOW - ran * 60, min_runtime=1800))
    cut = [e for e in p.events if e.event == "End"]
    assert bool(cut) is want_cut
    if not want_cut:
        assert p.state.reservations["t/r"].earliest_start == max(NOW + 900, NOW - ran * 60 + 1800)


# -- the invariant checker --------------------------------------------------------------------------


def _book(*budgets: dict[str, Any]) -> accounting.Book:
    models = [Budget.model_validate(b) for b in budgets]
    return accounting.Book(accounting.envelopes(models), accounting.family_order(models), NOW)


def _lease(
    name: str, run: str, node: str, slots: range, role: Role = Role.ACTIVE, owner: str = "org:t"
) -> Lease:
    return Lease(name, run, 0, role, node, tuple(slots), Payer(owner, "t", "h"), T0, "Start")  # type: ignore[arg-type]


def test_the_checker_finds_nothing_in_a_sound_plan() -> None:
    book = _book(a_budget("t", "org:t").envelope("h", 16).build())
    book.funded["t/h"]["own"] = 8
    leases = [_lease("a", "t/r", "A-n00", range(4)), _lease("b", "t/r", "A-n00", range(4, 8), Role.SPARE),
              _lease("c", "t/f", "A-n00", range(4, 6), Role.BORROWED)]  # fmt: skip
    assert invariants.check(leases, book, {"t/r", "t/f"}) == []


def test_the_checker_finds_a_slot_held_by_two_leases() -> None:
    leases = [_lease("a", "t/r", "A-n00", range(4)), _lease("b", "t/s", "A-n00", range(3, 5), Role.SPARE)]
    assert invariants.check(leases, _book(), {"t/r", "t/s"}) == ["slot A-n00#3 held by 2 leases: a, b"]


def test_the_checker_finds_fill_leases_that_overlay_no_spare_or_share_one() -> None:
    leases = [_lease("s", "t/r", "A-n00", range(2), Role.SPARE), _lease("a", "t/f", "A-n00", range(1, 3), Role.BORROWED),
              _lease("b", "t/g", "A-n00", range(1, 2), Role.BORROWED)]  # fmt: skip
    assert invariants.check(leases, _book(), {"t/r", "t/f", "t/g"}) == [
        "fill lease on A-n00#1 does not overlay exactly one spare",  # two fills on a spare slot
        "fill lease on A-n00#2 does not overlay exactly one spare",  # a fill on no spare
    ]


def test_the_checker_finds_a_lease_without_a_run_or_a_payer() -> None:
    leases = [_lease("a", "t/gone", "A-n00", range(2)), _lease("b", "t/r", "A-n01", range(2), owner="")]
    assert invariants.check(leases, _book(), {"t/r"}) == [
        "open lease a has no run t/gone",
        "open lease b has no payer",
    ]


def test_the_checker_ignores_closed_leases() -> None:
    closed = _lease("a", "t/gone", "A-n00", range(2))
    closed.ended = T0
    assert invariants.check([closed, _lease("b", "t/r", "A-n00", range(2))], _book(), {"t/r"}) == []


def test_the_checker_finds_an_envelope_over_its_concurrency_and_a_loan_over_its_lending_cap() -> None:
    book = _book(
        a_budget("t", "org:t").envelope("h", 8).build(),
        a_budget("s", "org:s")
        .envelope("h", 16, lending={"allow": True, "to": ["*"], "maxConcurrency": 4})
        .build(),
    )
    book.funded["t/h"]["own"] = 6
    book.funded["t/h"]["family"] = 4
    book.funded["s/h"]["loan"] = 6
    assert invariants.check([], book, set()) == [
        "envelope s/h lends 6 GPUs over its lending cap 4",
        "envelope t/h funds 10 GPUs over its concurrency 8",
    ]


def _pods() -> tuple[list[Lease], dict[str, dict[str, Any]]]:
    spec = Run.model_validate(a_run("t/r", "org:t").gpus(8).build())
    leases = [_lease("a", "t/r", "A-n00", range(8))]
    return leases, manifests.render(leases, {"t/r": spec}, {"A-n00": "c1"})


def test_the_pod_checker_finds_nothing_when_every_lease_has_its_pod() -> None:
    leases, pods = _pods()
    assert invariants.check_pods(leases, pods) == []


def test_the_pod_checker_finds_a_pod_asking_for_other_gpus_than_its_leases_hold() -> None:
    leases, pods = _pods()
    path = next(p for p, m in pods.items() if m["kind"] == "Pod")
    pods[path]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 4
    assert invariants.check_pods(leases, pods) == [f"pod {path} requests 4 GPUs but its leases hold 8"]


@pytest.mark.parametrize("copies", [0, 2])
def test_the_pod_checker_finds_a_lease_served_by_no_pod_or_two(copies: int) -> None:
    leases, pods = _pods()
    path, pod = next((p, m) for p, m in pods.items() if m["kind"] == "Pod")
    del pods[path]
    for i in range(copies):
        pods[f"{path}.{i}"] = copy.deepcopy(pod)
    assert invariants.check_pods(leases, pods) == [
        f"leases of t/r group 0 on A-n00 are covered by {copies} pods"
    ]
