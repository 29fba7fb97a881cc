"""Contract scenarios for §4.2 cover (who pays): family order, sharing, sponsors, ACLs, caps, windows.

Each expectation is worked out by hand from DESIGN.md before running; see tests/contract_support.py
for the default fleet (one domain A, 4 nodes × 8 GPUs, notice 15m, start 09:00Z).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import A32, at, ends, envelope, node_gpus, open_leases, play, stamp, starts

# ------------------------------------------------------------------------------ family order


def _family(total: int) -> dict[str, Any]:
    # DAG: g ─┬─ p ─┬─ c (the run's owner)
    #         │     └─ s (c's sibling)
    #         └─ u (c's uncle)
    # Every envelope holds 8 GPUs. Nearest first: own c, parent p, sibling s, grandparent g
    # (two hops up), uncle u (two up, one down) last.
    return scenario(
        {"c": "org:g:p:c"}, A32,
        [at(0, apply=[a_budget("g", "org:g").envelope("h", 8).build(),
                      a_budget("p", "org:g:p", "org:g").envelope("h", 8).build(),
                      a_budget("u", "org:g:u", "org:g").envelope("h", 8).build(),
                      a_budget("c", "org:g:p:c", "org:g:p").envelope("h", 8).build(),
                      a_budget("s", "org:g:p:s", "org:g:p").envelope("h", 8).build(),
                      a_run("c/r", "org:g:p:c").gpus(total).groups(8).build()])],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("total", "want_family"),
    [
        (16, [{"owner": "org:g:p", "gpus": 8}]),
        (24, [{"owner": "org:g:p", "gpus": 8}, {"owner": "org:g:p:s", "gpus": 8}]),
        (
            32,
            [
                {"owner": "org:g", "gpus": 8},
                {"owner": "org:g:p", "gpus": 8},
                {"owner": "org:g:p:s", "gpus": 8},
            ],
        ),
    ],
    ids=["parent after own", "sibling after parent", "grandparent before uncle"],
)
def test_family_cover_goes_parent_then_sibling_then_further_relatives_nearest_first(
    total: int, want_family: list[dict[str, Any]]
) -> None:
    run = play(_family(total))["final"]["runs"]["c/r"]
    assert run["phase"] == "Running"
    assert run["funding"]["ownedGPUs"] == 8
    # relatives share: family, kept apart from sponsors (nobody lends here)
    assert (run["funding"]["familyGPUs"], run["funding"]["sponsoredGPUs"]) == (total - 8, 0)
    assert run["funding"]["borrowedGPUs"] == total - 8  # every GPU another owner pays for
    assert run["funding"]["family"] == want_family
    assert run["funding"]["sponsors"] == []


def test_an_envelope_shared_with_none_still_pays_its_own_owner() -> None:
    # `sharing: none` only opts an envelope out of family cover; the owner's own run is paid by it
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16, sharing="none").build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).build()])],
    )  # fmt: skip
    run = play(doc)["final"]["runs"]["t/r"]
    assert run["phase"] == "Running" and run["funding"]["ownedGPUs"] == 16


def test_a_sibling_that_shares_with_none_is_skipped_for_the_next_relative() -> None:
    # c owns 8; parent p has an empty envelope; sibling s opts out (sharing none); grandparent g
    # pays the second group.
    doc = scenario(
        {"c": "org:g:p:c"}, A32,
        [at(0, apply=[a_budget("g", "org:g").envelope("h", 8).build(),
                      a_budget("p", "org:g:p", "org:g").envelope("h", 0).build(),
                      a_budget("c", "org:g:p:c", "org:g:p").envelope("h", 8).build(),
                      a_budget("s", "org:g:p:s", "org:g:p").envelope("h", 8, sharing="none").build(),
                      a_run("c/r", "org:g:p:c").gpus(16).groups(8).build()])],
    )  # fmt: skip
    run = play(doc)["final"]["runs"]["c/r"]
    assert run["phase"] == "Running"
    assert run["funding"]["family"] == [{"owner": "org:g", "gpus": 8}]


# ------------------------------------------------------------------------------------- sponsors


def _lenders(
    run_gpus: int, sponsors: list[str], lending: dict[str, Any] | None = None, parent: int = 0
) -> dict[str, Any]:
    # t owns 8 (and may have a parent p with `parent` GPUs); s1 and s2 each lend 16 to everybody
    lend = lending or {"allow": True, "to": ["*"]}
    run = a_run("t/r", "org:p:t").gpus(run_gpus).groups(8).borrowing(*sponsors)
    return scenario(
        {"t": "org:p:t"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", parent).build(),
                      a_budget("t", "org:p:t", "org:p").envelope("h", 8).build(),
                      a_budget("s1", "org:s1").envelope("h", 16, lending=lend).build(),
                      a_budget("s2", "org:s2").envelope("h", 16, lending=lend).build(),
                      run.build()])],
    )  # fmt: skip


def test_sponsors_are_asked_in_the_order_the_run_lists_them() -> None:
    run = play(_lenders(16, ["org:s2", "org:s1"]))["final"]["runs"]["t/r"]
    assert run["phase"] == "Running"
    assert run["funding"]["sponsors"] == [{"owner": "org:s2", "gpus": 8}]


def test_the_second_sponsor_pays_only_what_the_first_cannot() -> None:
    # own 8 + s1 16 (its whole envelope) + s2 8 = 32; sponsors sorted by owner
    run = play(_lenders(32, ["org:s1", "org:s2"]))["final"]["runs"]["t/r"]
    assert run["phase"] == "Running"
    assert run["funding"]["sponsors"] == [{"owner": "org:s1", "gpus": 16}, {"owner": "org:s2", "gpus": 8}]


def test_family_is_exhausted_before_any_sponsor_is_asked() -> None:
    # own 8, parent 8, then sponsor s1 for the rest: 24 = 8 own + 8 parent + 8 s1
    run = play(_lenders(24, ["org:s1"], parent=8))["final"]["runs"]["t/r"]
    assert run["funding"]["family"] == [{"owner": "org:p", "gpus": 8}]
    assert run["funding"]["sponsors"] == [{"owner": "org:s1", "gpus": 8}]
    assert (run["funding"]["familyGPUs"], run["funding"]["sponsoredGPUs"]) == (8, 8)


@pytest.mark.parametrize(
    ("to", "owner", "want_lent"),
    [
        (["org:t"], "org:t", True),
        (["org:t"], "org:tx", False),
        (["org:t*"], "org:tx", True),
        (["org:t:*"], "org:t", False),
        (["org:q", "*"], "org:t", True),
        ([], "org:t", False),
    ],
    ids=["exact", "exact is not a prefix", "prefix star", "prefix longer than owner", "star", "empty list"],
)
def test_lending_to_admits_exact_owners_prefix_patterns_and_star(
    to: list[str], owner: str, want_lent: bool
) -> None:
    doc = scenario(
        {"t": owner}, A32,
        [at(0, apply=[a_budget("t", owner).envelope("h", 8).build(),
                      a_budget("s", "org:s").envelope("h", 16, lending={"allow": True, "to": to}).build(),
                      a_run("t/r", owner).gpus(16).groups(8).borrowing("org:s").build()])],
    )  # fmt: skip
    out = play(doc)
    run = out["final"]["runs"]["t/r"]
    if want_lent:
        assert run["phase"] == "Running" and run["funding"]["sponsors"] == [{"owner": "org:s", "gpus": 8}]
    else:
        assert run["phase"] == "Pending" and open_leases(out["final"], "t/r") == []
        status = out["final"]["reservations"]["t/r"]["status"]
        assert status["reason"] == "budget headroom short by 8 GPUs"
        # §4.5: every remedy that applies, the binding one (the refusal) first
        assert status["forecast"]["remedies"] == [
            "Update the lending policy and re-submit",
            "Wait for budget headroom, add sponsors, or shrink the run",
        ]


def test_a_sponsor_without_lending_allow_refuses_even_with_a_star_acl() -> None:
    out = play(_lenders(16, ["org:s1"], lending={"allow": False, "to": ["*"]}))
    assert out["final"]["runs"]["t/r"]["phase"] == "Pending"
    status = out["final"]["reservations"]["t/r"]["status"]
    assert status["reason"] == "budget headroom short by 8 GPUs"
    # §4.5: every remedy that applies, the binding one (the refusal) first
    assert status["forecast"]["remedies"] == [
        "Update the lending policy and re-submit",
        "Wait for budget headroom, add sponsors, or shrink the run",
    ]


@pytest.mark.parametrize(("hours", "want_phase"), [(0, "Pending"), (1000, "Running")])
def test_a_lending_gpu_hour_cap_bounds_what_a_sponsor_lends(hours: int, want_phase: str) -> None:
    out = play(_lenders(16, ["org:s1"], lending={"allow": True, "to": ["*"], "maxGPUHours": hours}))
    assert out["final"]["runs"]["t/r"]["phase"] == want_phase


def test_max_borrow_gpus_caps_sponsors_with_the_exact_reason_and_its_deficit() -> None:
    # own 8 + s1 could lend 16, but at most 8 borrowed per admission: 24 needs 16 borrowed → short
    # by 8 in the borrow dimension
    doc = _lenders(24, ["org:s1"])
    doc["spec"]["steps"][0]["apply"][-1]["spec"]["funding"]["maxBorrowGPUs"] = 8
    out = play(doc)
    assert out["final"]["runs"]["t/r"]["phase"] == "Pending"
    status = out["final"]["reservations"]["t/r"]["status"]
    assert status["reason"] == "borrow limit of 8 GPUs exhausted for requested width"
    assert status["forecast"]["deficitGPUs"] == 8
    assert status["forecast"]["remedies"] == ["Increase maxBorrowGPUs or shrink the run"]


def test_max_borrow_gpus_does_not_cap_family_cover() -> None:
    # maxBorrowGPUs "caps the GPUs borrowed from sponsors": own 8 + parent 16 = 24 with a cap of 0
    doc = _lenders(24, [], parent=16)
    doc["spec"]["steps"][0]["apply"][-1]["spec"]["funding"]["maxBorrowGPUs"] = 0
    run = play(doc)["final"]["runs"]["t/r"]
    assert run["phase"] == "Running"
    assert run["funding"]["family"] == [{"owner": "org:p", "gpus": 16}]
    assert run["funding"]["sponsoredGPUs"] == 0  # within a cap of 0: family is not borrowing


def test_max_borrow_gpus_applies_per_step_so_a_malleable_run_grows_a_borrowed_step_per_pass() -> None:
    # own 8, s1 lends up to 32, cap 8 per step. Admission at the largest step-aligned width within
    # the cap: 32 needs 24 borrowed, 24 needs 16, 16 needs 8 → admitted at 16 (no reservation).
    # Each later pass grows one step of 8, each step borrowing 8 ≤ cap: 24 at +1m, 32 at +2m.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_budget("s1", "org:s1").envelope("h", 32, lending={"allow": True, "to": ["*"]}).build(),
                      a_run("t/r", "org:t").gpus(32).groups(8).malleable(8, 32, 8)
                      .borrowing("org:s1", cap=8).build()]),
         at(0, checkpoint="admitted"), at(1, checkpoint="grew"), at(2, checkpoint="full")],
        until="+3m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    first = out["checkpoints"]["admitted"]
    assert (
        first["runs"]["t/r"]["width"]["allocated"] == 16
        and first["runs"]["t/r"]["message"] == "bound 16 GPUs"
    )
    assert "t/r" not in first["reservations"]
    assert out["checkpoints"]["grew"]["runs"]["t/r"]["message"] == "grew to 24 GPUs"
    full = out["checkpoints"]["full"]["runs"]["t/r"]
    assert full["width"]["allocated"] == 32
    assert full["funding"]["sponsors"] == [{"owner": "org:s1", "gpus": 24}]


# ------------------------------------------------------------------------------------ selectors


def test_a_star_selector_value_matches_any_value_but_the_other_keys_still_constrain() -> None:
    # W (west/c1) has 32 free, E (east/c2) 16. The envelope selects {region: *, cluster: c2}: E only.
    doc = scenario(
        {"t": "org:t"}, [domain("W", 4, region="west"), domain("E", 2, region="east", cluster="c2")],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64, selector={"region": "*", "cluster": "c2"}).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).build()])],
    )  # fmt: skip
    out = play(doc)
    assert node_gpus(open_leases(out["final"], "t/r")) == {"E-n00": 8, "E-n01": 8}


def test_a_fabric_domain_selector_overrides_pack_to_empty_preferences() -> None:
    # A has 32 free (most), B 16; the only envelope selects fabric.domain B → the run goes to B
    doc = scenario(
        {"t": "org:t"}, [domain("A", 4), domain("B", 2)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64, selector={"fabric.domain": "B"}).build(),
                      a_run("t/r", "org:t").gpus(8).build()])],
    )  # fmt: skip
    out = play(doc)
    assert node_gpus(open_leases(out["final"], "t/r")) == {"B-n00": 8}


def test_a_selector_on_a_label_no_node_carries_funds_nothing() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64, selector={"rack": "r1"}).build(),
                      a_run("t/r", "org:t").gpus(8).build()])],
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/r"]["phase"] == "Pending" and open_leases(out["final"], "t/r") == []


# -------------------------------------------------------------------------------------- windows


def test_a_window_is_closed_at_its_end_instant() -> None:
    # [start, end): a run submitted exactly at the end (+20m) is not funded
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16, end=stamp(20)).build()]),
         at(20, apply=[a_run("t/r", "org:t").gpus(8).build()])],
        until="+21m",
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/r"]["phase"] == "Pending"
    assert starts(out, "t/r") == []


def test_a_window_is_open_at_its_start_instant() -> None:
    # submitted exactly at the window start (+10m, after the notice-free instant): funded, starts now
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16, start=stamp(10)).build()]),
         at(10, apply=[a_run("t/r", "org:t").gpus(8).build()])],
        until="+11m",
    )  # fmt: skip
    out = play(doc)
    assert [e["at"] for e in starts(out, "t/r")] == [stamp(10)]


def test_a_pass_runs_at_a_window_end_and_demotes_running_work_there() -> None:
    # no tick and no step at +20m: the window end itself is a pass instant
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16, end=stamp(20)).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(19, checkpoint="before"), at(20, checkpoint="edge")],
        until="+25m",
    )  # fmt: skip
    out = play(doc)
    assert out["checkpoints"]["before"]["runs"]["t/r"]["funding"]["unfundedGPUs"] == 0
    edge = out["checkpoints"]["edge"]["runs"]["t/r"]
    assert edge["phase"] == "Running" and edge["funding"]["unfundedGPUs"] == 16
    assert ends(out, "t/r") == []


# ------------------------------------------------------------------------------- GPU-hour caps


@pytest.mark.parametrize(("lookahead", "want_phase"), [(None, "Pending"), ("30m", "Running")])
def test_a_gpu_hour_cap_admits_only_within_the_admission_look_ahead(
    lookahead: str | None, want_phase: str
) -> None:
    # cap 12 GPU-hours, nothing consumed: 16 GPUs × 1 h (default look-ahead) = 16 > 12 → not funded;
    # with a 30m look-ahead 16 × 0.5 = 8 ≤ 12 → funded
    fleet = {"accounting": {"admissionLookahead": lookahead}} if lookahead else None
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64, maxGPUHours=12).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).build()])],
        fleet=fleet,
    )  # fmt: skip
    assert play(doc)["final"]["runs"]["t/r"]["phase"] == want_phase


def test_a_gpu_hour_cap_spent_under_running_leases_demotes_to_unfunded_and_never_ends() -> None:
    # cap 10 GPU-hours, 8 GPUs from 09:00: 1.33 h consumed at +10m (funded either way); the cap is
    # spent at +75m, so at +80m the run is unfunded but still running, and from then on nothing
    # more is charged to the envelope ("charged to nobody").
    # Ambiguous, not asserted: whether the pass at exactly +75m (consumed == cap) already demotes.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64, maxGPUHours=10).build(),
                      a_run("t/r", "org:t").gpus(8).build()]),
         at(10, checkpoint="early"), at(80, checkpoint="spent"), at(90, checkpoint="later")],
        until="+95m",
    )  # fmt: skip
    doc["spec"]["tick"] = "5m"
    out = play(doc)
    assert out["checkpoints"]["early"]["runs"]["t/r"]["funding"]["unfundedGPUs"] == 0
    spent = out["checkpoints"]["spent"]
    assert spent["runs"]["t/r"]["phase"] == "Running"
    assert spent["runs"]["t/r"]["funding"]["unfundedGPUs"] == 8
    later = envelope(out["checkpoints"]["later"], "t", "h")
    assert later["consumedGPUHours"] == envelope(spent, "t", "h")["consumedGPUHours"]
    assert later["usage"]["unfundedGPUs"] == 8 and later["usage"]["activeGPUs"] == 0
    assert ends(out, "t/r") == []


# ------------------------------------------------------------------------------- aggregate caps


def test_an_aggregate_cap_bounds_the_sum_of_its_envelopes() -> None:
    # envelopes a (domain A) and b (domain B) of 16 each, aggregate cap 16: one 16-GPU run fits,
    # the second is short of budget although its own envelope and domain are free
    doc = scenario(
        {"t": "org:t"}, [domain("A", 2), domain("B", 2)],
        [at(0, apply=[
            {**a_budget("t", "org:t")
             .envelope("a", 16, selector={"fabric.domain": "A"})
             .envelope("b", 16, selector={"fabric.domain": "B"}).build()},
            a_run("t/r1", "org:t").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("t/r2", "org:t").gpus(16).groups(8).build()])],
        until="+2m",
    )  # fmt: skip
    doc["spec"]["steps"][0]["apply"][0]["spec"]["aggregateCaps"] = [
        {"name": "both", "envelopes": ["a", "b"], "maxConcurrency": 16}
    ]
    out = play(doc)
    assert out["final"]["runs"]["t/r1"]["phase"] == "Running"
    assert out["final"]["runs"]["t/r2"]["phase"] == "Pending"
    assert out["final"]["reservations"]["t/r2"]["status"]["reason"] == "budget headroom short by 16 GPUs"


def test_a_lender_that_is_not_listed_as_a_sponsor_is_never_asked() -> None:
    # s lends to everybody, t's run allows borrowing but lists no sponsor: only listed sponsors pay
    doc = _lenders(16, [])
    run = play(doc)["final"]["runs"]["t/r"]
    assert run["phase"] == "Pending"


def test_a_lending_cap_is_shared_by_all_borrowers() -> None:
    # s1 lends at most 8 in total: t/r borrows them; u/r (another borrower) is refused
    lend = {"allow": True, "to": ["*"], "maxConcurrency": 8}
    doc = scenario(
        {"t": "org:t", "u": "org:u"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_budget("u", "org:u").envelope("h", 8).build(),
                      a_budget("s1", "org:s1").envelope("h", 32, lending=lend).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).borrowing("org:s1").build()]),
         at(1, apply=[a_run("u/r", "org:u").gpus(16).groups(8).borrowing("org:s1").build()])],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/r"]["funding"]["sponsors"] == [{"owner": "org:s1", "gpus": 8}]
    assert out["final"]["runs"]["u/r"]["phase"] == "Pending"
    assert out["final"]["reservations"]["u/r"]["status"]["reason"] == "budget headroom short by 8 GPUs"


def test_a_new_sponsor_loan_uses_only_headroom_no_family_claim_holds() -> None:
    # s (16, lends to all) already pays 8 for its child c. t/r wants 16 borrowed: only 8 are free
    # in s's envelope (a loan may not take what a family claim holds) → short of budget by 8
    doc = scenario(
        {"t": "org:t", "c": "org:s:c"}, A32,
        [at(0, apply=[a_budget("s", "org:s").envelope("h", 16, lending={"allow": True, "to": ["*"]}).build(),
                      a_budget("c", "org:s:c", "org:s").envelope("h", 0).build(),
                      a_budget("t", "org:t").envelope("h", 0).build(),
                      a_run("c/r", "org:s:c").gpus(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(16).groups(8).borrowing("org:s").build()])],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/r"]["phase"] == "Pending"
    assert out["final"]["reservations"]["t/r"]["status"]["reason"] == "budget headroom short by 8 GPUs"
    assert out["final"]["runs"]["c/r"]["funding"]["unfundedGPUs"] == 0


def test_spares_need_budget_headroom_like_active_gpus() -> None:
    # 16 active + 1 spare = 17 GPUs to fund from an envelope of 16
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16).build(),
                      a_run("t/r", "org:t").gpus(16).groups(16).spares(1).build()])],
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/r"]["phase"] == "Pending"
    assert out["final"]["reservations"]["t/r"]["status"]["reason"] == "budget headroom short by 1 GPUs"


def test_a_sponsors_refusal_binds_before_the_borrow_limit() -> None:
    # t owns 8 and wants 16, borrowing at most 2. Sponsor s1 lends t nothing (no lending); s2 lends
    # up to 4. Fundable now: 8 + min(4, 2) = 10, short by 6; even without the limit, 8 + 4 = 12 is
    # short: the refusal binds first (§4.5: a sponsor's refusal, then the borrow limit, then
    # headroom), then every other remedy that applies, in that order.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_budget("s1", "org:s1").envelope("h", 64).build(),
                      a_budget("s2", "org:s2").envelope("h", 64, lending={"allow": True, "to": ["*"],
                                                                          "maxConcurrency": 4}).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).borrowing("org:s1", "org:s2", cap=2).build()])],
    )  # fmt: skip
    status = play(doc)["final"]["reservations"]["t/r"]["status"]
    assert status["reason"] == "budget headroom short by 6 GPUs"
    assert status["forecast"]["remedies"] == [
        "Update the lending policy and re-submit",
        "Increase maxBorrowGPUs or shrink the run",
        "Wait for budget headroom, add sponsors, or shrink the run",
    ]
