"""Contract scenarios for §4.2 funding re-derivation and the Run/Budget status it reports.

Each envelope funds, up to its concurrency: sponsor loans already made, then its owner's claims,
then family claims, each in ranking order (submission time, namespace/name, group index).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import a_budget, a_run, scenario
from tests.support.scenarios import A32, at, ends, envelope, play

LEND = {"allow": True, "to": ["*"]}


def test_a_lender_never_loses_a_loan_to_its_own_new_run() -> None:
    # s (16, lends to all) lends 8 to t/r at +0. At +1m s submits its own 16-GPU run: the loan is
    # contractual and funded first, so only 8 are left for the owner → short of budget by 8 (16
    # GPUs are physically free, so funding is the only shortfall). The loan stays funded.
    doc = scenario(
        {"t": "org:t", "s": "org:s"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_budget("s", "org:s").envelope("h", 16, lending=LEND).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).borrowing("org:s").build()]),
         at(1, apply=[a_run("s/own", "org:s").gpus(16).groups(8).build()])],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["s/own"]["phase"] == "Pending"
    assert out["final"]["reservations"]["s/own"]["status"]["reason"] == "budget headroom short by 8 GPUs"
    loan = out["final"]["runs"]["t/r"]["funding"]
    assert loan["sponsors"] == [{"owner": "org:s", "gpus": 8}] and loan["unfundedGPUs"] == 0


def test_a_cut_lender_funds_its_loan_before_its_own_claims() -> None:
    # s (24) lends 8 to t/r at +0 and runs its own 16 at +1m. At +5m s is cut to 16: the loan (8)
    # first, then the owner's groups in order: s/own group 0 funded, group 1 unfunded. Nothing ends.
    doc = scenario(
        {"t": "org:t", "s": "org:s"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_budget("s", "org:s").envelope("h", 24, lending=LEND).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).borrowing("org:s").build()]),
         at(1, apply=[a_run("s/own", "org:s").gpus(16).groups(8).build()]),
         at(5, apply=[a_budget("s", "org:s").envelope("h", 16, lending=LEND).build()]),
         at(6, checkpoint="cut")],
        until="+7m",
    )  # fmt: skip
    out = play(doc)
    st = out["checkpoints"]["cut"]["runs"]
    assert st["t/r"]["funding"]["sponsors"] == [{"owner": "org:s", "gpus": 8}]
    assert st["t/r"]["funding"]["unfundedGPUs"] == 0
    assert (st["s/own"]["funding"]["ownedGPUs"], st["s/own"]["funding"]["unfundedGPUs"]) == (8, 8)
    assert ends(out) == []


def _two_children(cut_to: int) -> dict[str, Any]:
    # parent p (16) pays both children, who own nothing. c2/r is submitted first (+0), c1/r later
    # (+1m): ranking is by submission time before names.
    return scenario(
        {"c1": "org:p:c1", "c2": "org:p:c2"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 16).build(),
                      a_budget("c1", "org:p:c1", "org:p").envelope("h", 0).build(),
                      a_budget("c2", "org:p:c2", "org:p").envelope("h", 0).build(),
                      a_run("c2/r", "org:p:c2").gpus(8).build()]),
         at(1, apply=[a_run("c1/r", "org:p:c1").gpus(8).build()]),
         at(5, apply=[a_budget("p", "org:p").envelope("h", cut_to).build()]),
         at(6, checkpoint="cut")],
        until="+7m",
    )  # fmt: skip


def test_family_claims_past_a_cut_turn_unfunded_latest_submitted_first() -> None:
    out = play(_two_children(8))
    st = out["checkpoints"]["cut"]["runs"]
    assert st["c2/r"]["funding"]["unfundedGPUs"] == 0 and st["c2/r"]["funding"]["borrowedGPUs"] == 8
    assert st["c1/r"]["funding"]["unfundedGPUs"] == 8 and st["c1/r"]["phase"] == "Running"
    assert ends(out) == []


def _owner_returns() -> dict[str, Any]:
    # c owns nothing and runs 16 on its parent p's 16 at +0. At +5m p runs its own 8: p funds its
    # owner first, then the family claim group by group → c/r group 0 funded, group 1 unfunded.
    # At +10m p is raised to 32: headroom returns and c/r is fully funded again.
    return scenario(
        {"c": "org:p:c", "p": "org:p"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 16).build(),
                      a_budget("c", "org:p:c", "org:p").envelope("h", 0).build(),
                      a_run("c/r", "org:p:c").gpus(16).groups(8).build()]),
         at(5, apply=[a_run("p/own", "org:p").gpus(8).build()]),
         at(6, checkpoint="returned"),
         at(10, apply=[a_budget("p", "org:p").envelope("h", 32).build()]),
         at(11, checkpoint="raised")],
        until="+12m",
    )  # fmt: skip


def test_an_owner_gets_its_envelope_back_and_the_family_keeps_its_low_groups_funded() -> None:
    out = play(_owner_returns())
    st = out["checkpoints"]["returned"]
    assert st["runs"]["p/own"]["phase"] == "Running" and st["runs"]["p/own"]["funding"]["ownedGPUs"] == 8
    child = st["runs"]["c/r"]
    assert child["phase"] == "Running"
    assert (child["funding"]["borrowedGPUs"], child["funding"]["unfundedGPUs"]) == (8, 8)
    assert child["funding"]["family"] == [{"owner": "org:p", "gpus": 8}]
    usage = envelope(st, "p", "h")["usage"]
    assert usage["unfundedGPUs"] == 8 and usage["borrowedOutGPUs"] == 8
    assert envelope(st, "p", "h")["headroom"] == 0
    assert ends(out) == []


def test_unfunded_claims_are_funded_again_when_headroom_returns() -> None:
    out = play(_owner_returns())
    child = out["checkpoints"]["raised"]["runs"]["c/r"]
    assert (child["funding"]["borrowedGPUs"], child["funding"]["unfundedGPUs"]) == (16, 0)
    assert envelope(out["checkpoints"]["raised"], "p", "h")["headroom"] == 32 - 8 - 16


def test_a_new_family_claim_uses_only_headroom_nobody_holds() -> None:
    # p (16) runs its own 8; child c (owns nothing) wants 16: only 8 are free in p's envelope, and a
    # family claim cannot take the owner's share → short of budget by 8
    doc = scenario(
        {"c": "org:p:c", "p": "org:p"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 16).build(),
                      a_budget("c", "org:p:c", "org:p").envelope("h", 0).build(),
                      a_run("p/own", "org:p").gpus(8).build()]),
         at(1, apply=[a_run("c/r", "org:p:c").gpus(16).groups(8).build()])],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["c/r"]["phase"] == "Pending"
    assert out["final"]["reservations"]["c/r"]["status"]["reason"] == "budget headroom short by 8 GPUs"
    assert out["final"]["runs"]["p/own"]["funding"]["unfundedGPUs"] == 0


def test_a_budget_cut_demotes_the_latest_submitted_run_before_an_earlier_one_of_the_same_owner() -> None:
    # t (32) runs t/zz at +0 and t/aa at +1m (16 each). Cut to 16 at +5m: ranking is submission time
    # first, so t/aa (later, although its name sorts first) is the one left unfunded.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 32).build(),
                      a_run("t/zz", "org:t").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("t/aa", "org:t").gpus(16).groups(8).build()]),
         at(5, apply=[a_budget("t", "org:t").envelope("h", 16).build()]),
         at(6, checkpoint="cut")],
        until="+7m",
    )  # fmt: skip
    st = play(doc)["checkpoints"]["cut"]["runs"]
    assert st["t/zz"]["funding"]["unfundedGPUs"] == 0
    assert st["t/aa"]["funding"]["unfundedGPUs"] == 16 and st["t/aa"]["phase"] == "Running"


# ------------------------------------------------------------------------------ status reports


def test_run_funding_reports_owned_and_borrowed_gpu_hours_as_time_passes() -> None:
    # c owns 8, parent p pays the other 8, from 09:00; a pass at +30m (tick): 4 GPU-hours each
    doc = scenario(
        {"c": "org:p:c"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 8).build(),
                      a_budget("c", "org:p:c", "org:p").envelope("h", 8).build(),
                      a_run("c/r", "org:p:c").gpus(16).groups(8).build()]),
         at(30, checkpoint="half-hour")],
        until="+31m",
    )  # fmt: skip
    doc["spec"]["tick"] = "30m"
    funding = play(doc)["checkpoints"]["half-hour"]["runs"]["c/r"]["funding"]
    assert funding["ownedGPUHours"] == pytest.approx(4.0)
    assert funding["borrowedGPUHours"] == pytest.approx(4.0)


@pytest.mark.parametrize(("rate", "want_spare_hours"), [(None, 0.5), (0.25, 0.25)])
def test_budget_status_reports_usage_by_class_headroom_and_spare_hours_at_the_spare_rate(
    rate: float | None, want_spare_hours: float
) -> None:
    # 16 active GPUs in 2 groups + 1 spare GPU per group, envelope 32: usage {16 active, 2 spare},
    # headroom 32 - 18 = 14. After 30 minutes: 2 spare GPUs × 0.5 h × spare rate.
    fleet = {"accounting": {"spareRate": rate}} if rate is not None else None
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 32).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).spares(1).build()]),
         at(30, checkpoint="half-hour")],
        until="+31m", fleet=fleet,
    )  # fmt: skip
    doc["spec"]["tick"] = "30m"
    env = envelope(play(doc)["checkpoints"]["half-hour"], "t", "h")
    assert env["usage"] == {"activeGPUs": 16, "spareGPUs": 2, "borrowedOutGPUs": 0, "unfundedGPUs": 0}
    assert env["headroom"] == 14
    assert env["spareGPUHours"] == pytest.approx(want_spare_hours)
    # consumed: 16 GPUs × 0.5 h, plus the spare charge if the implementation folds it in
    assert env["consumedGPUHours"] in (pytest.approx(8.0), pytest.approx(8.0 + want_spare_hours))


def test_a_lending_envelope_reports_what_it_lends_out_and_the_headroom_left() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_budget("s", "org:s").envelope("h", 24, lending=LEND).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).borrowing("org:s").build()])],
    )  # fmt: skip
    st = play(doc)["final"]
    lender = envelope(st, "s", "h")
    assert lender["usage"]["borrowedOutGPUs"] == 8
    assert lender["headroom"] == 16
    assert envelope(st, "t", "h")["usage"]["activeGPUs"] == 8 and envelope(st, "t", "h")["headroom"] == 0


def test_a_sibling_gets_its_envelope_back_from_the_family() -> None:
    # c1 owns 8 and borrows 8 from its sibling c2 (parent p owns nothing). c2 submits its own 8 at
    # +5m: c2's envelope funds its owner first; c1's borrowed group turns unfunded, still running.
    doc = scenario(
        {"c1": "org:p:c1", "c2": "org:p:c2"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 0).build(),
                      a_budget("c1", "org:p:c1", "org:p").envelope("h", 8).build(),
                      a_budget("c2", "org:p:c2", "org:p").envelope("h", 8).build(),
                      a_run("c1/r", "org:p:c1").gpus(16).groups(8).build()]),
         at(1, checkpoint="borrowing"),
         at(5, apply=[a_run("c2/own", "org:p:c2").gpus(8).build()])],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert out["checkpoints"]["borrowing"]["runs"]["c1/r"]["funding"]["family"] == [
        {"owner": "org:p:c2", "gpus": 8}
    ]
    runs = out["final"]["runs"]
    assert runs["c2/own"]["phase"] == "Running" and runs["c2/own"]["funding"]["ownedGPUs"] == 8
    assert (runs["c1/r"]["funding"]["ownedGPUs"], runs["c1/r"]["funding"]["unfundedGPUs"]) == (8, 8)
    assert ends(out) == []


def test_a_cut_envelope_keeps_its_sponsor_loan_before_its_family_claims() -> None:
    # p (16) lends 8 to sponsor-borrower t/r and pays 8 for its child c. Cut to 8 at +5m: the loan
    # (contractual) stays funded, the child's family claim turns unfunded.
    doc = scenario(
        {"t": "org:t", "c": "org:p:c"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 16, lending=LEND).build(),
                      a_budget("c", "org:p:c", "org:p").envelope("h", 0).build(),
                      a_budget("t", "org:t").envelope("h", 8).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).borrowing("org:p").build()]),
         at(1, apply=[a_run("c/r", "org:p:c").gpus(8).build()]),
         at(5, apply=[a_budget("p", "org:p").envelope("h", 8, lending=LEND).build()])],
        until="+6m",
    )  # fmt: skip
    runs = play(doc)["final"]["runs"]
    assert runs["t/r"]["funding"]["sponsors"] == [{"owner": "org:p", "gpus": 8}]
    assert runs["t/r"]["funding"]["unfundedGPUs"] == 0
    assert runs["c/r"]["funding"]["unfundedGPUs"] == 8


def test_run_funding_counts_exclude_spares() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 32).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).spares(2).build()])],
    )  # fmt: skip
    funding = play(doc)["final"]["runs"]["t/r"]["funding"]
    assert (funding["ownedGPUs"], funding["borrowedGPUs"], funding["unfundedGPUs"]) == (16, 0, 0)


def test_a_loan_is_charged_to_the_lender_and_reported_as_borrowed_hours() -> None:
    # t owns 8 and borrows 8 from s for 30 minutes: 4 GPU-hours on each envelope
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_budget("s", "org:s").envelope("h", 16, lending=LEND).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).borrowing("org:s").build()]),
         at(30, checkpoint="half-hour")],
        until="+31m",
    )  # fmt: skip
    doc["spec"]["tick"] = "30m"
    st = play(doc)["checkpoints"]["half-hour"]
    assert envelope(st, "s", "h")["consumedGPUHours"] == pytest.approx(4.0)
    assert envelope(st, "t", "h")["consumedGPUHours"] == pytest.approx(4.0)
    funding = st["runs"]["t/r"]["funding"]
    assert (funding["ownedGPUHours"], funding["borrowedGPUHours"]) == (pytest.approx(4.0), pytest.approx(4.0))


def test_headroom_an_unfunded_claim_ranked_ahead_still_holds_is_no_room_for_a_new_run() -> None:
    # p (16) funds c2/r (8, first) and c1/r (8). At +5m p is cut to 12: c2/r stays funded, c1/r's
    # 8 no longer fit the 4 left and turn unfunded. At +7m c3/r asks 4 from p's family headroom.
    # Those 4 are the unfunded c1/r's, ranked ahead of c3/r: a new claim would be settled after it
    # and left unfunded too, so c3/r waits for headroom instead of starting unfunded.
    doc = _two_children(12)
    doc["spec"]["fleet"]["tenants"].append({"namespace": "c3", "owner": "org:p:c3"})
    doc["spec"]["steps"] += [
        at(7, apply=[a_budget("c3", "org:p:c3", "org:p").envelope("h", 0).build(),
                     a_run("c3/r", "org:p:c3").gpus(4).build()]),
        at(8, checkpoint="asked"),
    ]  # fmt: skip
    doc["spec"]["until"] = "+9m"
    out = play(doc)
    cut = out["checkpoints"]["cut"]
    assert cut["runs"]["c1/r"]["funding"]["unfundedGPUs"] == 8
    assert envelope(cut, "p", "h")["headroom"] == 0  # 12 - (8 funded + 8 unfunded), not 12 - 8
    asked = out["checkpoints"]["asked"]["runs"]["c3/r"]
    assert asked["phase"] == "Pending" and asked["message"] == "reserved: budget headroom short by 4 GPUs"
    assert ends(out) == []


def test_spares_spend_a_gpu_hour_cap_at_the_spare_rate_and_a_pass_is_due_when_it_is_spent() -> None:
    # Envelope 16 GPUs, maxGPUHours 24; t/r runs 8 active GPUs with an 8-GPU spare (spare rate
    # 0.5): the cap burns 8 + 8 x 0.5 = 12 GPU-hours an hour, so it is spent at exactly +2h (not +3h,
    # as 8 active GPUs alone would spend it). A pass is due then with no step: from +2h t/r's
    # group is unfunded (still running), and the envelope holds 16 consumed + 8 spare GPU-hours.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16, maxGPUHours=24).build(),
                      a_run("t/r", "org:t").gpus(8).groups(8).spares(8).build()]),
         at(119, checkpoint="before"), at(120, checkpoint="spent")],
        until="+121m",
    )  # fmt: skip
    out = play(doc)
    assert out["checkpoints"]["before"]["runs"]["t/r"]["funding"]["unfundedGPUs"] == 0
    spent = out["checkpoints"]["spent"]
    assert spent["runs"]["t/r"]["phase"] == "Running"
    assert spent["runs"]["t/r"]["funding"]["unfundedGPUs"] == 8
    env = envelope(spent, "t", "h")
    assert env["consumedGPUHours"] == pytest.approx(16.0)
    assert env["spareGPUHours"] == pytest.approx(8.0)
