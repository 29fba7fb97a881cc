"""§4.3 pack-to-empty ranks domains by how near in cover order their funding is, before free GPUs:
a run never leaves its owner's own envelopes idle to spend family or sponsor funding elsewhere.

Expectations are worked out by hand from DESIGN.md §4.2 (cover order) and §4.3 (domain ranking).
"""

from __future__ import annotations

from typing import Any

from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import at, open_leases, play

# region a: domain A, 2 nodes x 8 = 16 GPUs; region b: domain B, 8 nodes x 8 = 64 GPUs (more free)
A_AND_B = [domain("A", 2, region="a"), domain("B", 8, region="b")]


def _domains(state: dict[str, Any], run: str) -> dict[str, int]:
    """Domain letter -> GPUs of the run's open Active leases there."""
    out: dict[str, int] = {}
    for lease in open_leases(state, run, "Active"):
        for slot in lease["spec"]["slice"]["nodes"]:
            d = slot.split("-")[0]
            out[d] = out.get(d, 0) + 1
    return out


def _payers(state: dict[str, Any], run: str) -> set[str]:
    return {
        f"{x['spec']['payer']['budget']}/{x['spec']['payer']['envelope']}" for x in open_leases(state, run)
    }


def test_a_run_starts_on_its_owners_envelope_though_family_funding_reaches_a_freer_domain() -> None:
    # x owns 16 GPUs in region a (A: 16 free); its parent p and sibling s share 64 each in region b
    # (B: 64 free). Cover order for x: x/a (own), then p/b (parent), then s/b (sibling). A is
    # covered at position 0 by x's own envelope, B only at position 1: the 8-GPU run goes to A,
    # paid by x — not to B (most free) paid by the parent, as it did before the fix.
    doc = scenario(
        {"x": "org:p:x"}, A_AND_B,
        [at(0, apply=[a_budget("p", "org:p").envelope("b", 64, selector={"region": "b"}).build(),
                      a_budget("s", "org:p:s", "org:p").envelope("b", 64, selector={"region": "b"}).build(),
                      a_budget("x", "org:p:x", "org:p").envelope("a", 16, selector={"region": "a"}).build(),
                      a_run("x/r", "org:p:x").gpus(8).build()])],
    )  # fmt: skip
    st = play(doc)["final"]
    assert _domains(st, "x/r") == {"A": 8}
    assert _payers(st, "x/r") == {"x/a"}
    funding = st["runs"]["x/r"]["funding"]
    assert (funding["ownedGPUs"], funding["borrowedGPUs"], funding["sponsors"]) == (8, 0, [])


def test_groups_stay_on_own_funding_while_it_lasts_then_go_where_the_parent_pays() -> None:
    # x owns only 8 GPUs in region a. 16 GPUs in groups of 8: group 0 goes to A (own, position 0);
    # group 1 prefers A (the run already uses it) but nothing there pays for it any more, so it
    # goes where the next source, the parent's envelope in region b, covers it: B.
    doc = scenario(
        {"x": "org:p:x"}, A_AND_B,
        [at(0, apply=[a_budget("p", "org:p").envelope("b", 64, selector={"region": "b"}).build(),
                      a_budget("x", "org:p:x", "org:p").envelope("a", 8, selector={"region": "a"}).build(),
                      a_run("x/r", "org:p:x").gpus(16).groups(8).build()])],
    )  # fmt: skip
    st = play(doc)["final"]
    assert _domains(st, "x/r") == {"A": 8, "B": 8}
    funding = st["runs"]["x/r"]["funding"]
    assert (funding["ownedGPUs"], funding["borrowedGPUs"]) == (8, 8)
    assert funding["family"] == [{"owner": "org:p", "gpus": 8}]


def test_a_new_team_is_not_sent_to_a_cousin_divisions_domain() -> None:
    # org:acme has divisions d1 and d2; team t (under d1) owns 8 GPUs in region a; cousin c (under
    # d2) shares 64 in region b. For t the cousin is a far relative (after parent, siblings, the
    # grandparent and the uncle), its own envelope first: t's run starts in A, paid by t.
    doc = scenario(
        {"t": "org:acme:d1:t", "c": "org:acme:d2:c"}, A_AND_B,
        [at(0, apply=[a_budget("acme", "org:acme").build(),
                      a_budget("d1", "org:acme:d1", "org:acme").build(),
                      a_budget("d2", "org:acme:d2", "org:acme").build(),
                      a_budget("c", "org:acme:d2:c", "org:acme:d2").envelope("b", 64, selector={"region": "b"}).build(),
                      a_budget("t", "org:acme:d1:t", "org:acme:d1").envelope("a", 8, selector={"region": "a"}).build(),
                      a_run("t/new", "org:acme:d1:t").gpus(8).build()])],
    )  # fmt: skip
    st = play(doc)["final"]
    assert _domains(st, "t/new") == {"A": 8}
    assert _payers(st, "t/new") == {"t/a"}


def test_between_domains_the_same_funding_covers_the_one_with_most_free_gpus_wins() -> None:
    # one envelope reaches both A (16 free) and B (64 free): both at position 0, so most free
    # decides (the seeds' "sorted by free GPUs, descending"): B.
    doc = scenario(
        {"x": "org:x"}, A_AND_B,
        [at(0, apply=[a_budget("x", "org:x").envelope("all", 80).build(),
                      a_run("x/r", "org:x").gpus(8).build()])],
    )  # fmt: skip
    st = play(doc)["final"]
    assert _domains(st, "x/r") == {"B": 8}


def test_a_reservation_names_a_paying_envelope_whose_selector_covers_its_slice() -> None:
    # x owns 16 in region a, but A is full (y runs 16 there); x's parent shares 8 in region b, not
    # enough. x/r (16 in groups of 8) is funded by x's own envelope alone (16), which only reaches
    # A: its scope is A (short by 16), and the paying envelope is x/a, whose selector covers A.
    doc = scenario(
        {"x": "org:p:x", "y": "org:y"}, A_AND_B,
        [at(0, apply=[a_budget("p", "org:p").envelope("b", 8, selector={"region": "b"}).build(),
                      a_budget("x", "org:p:x", "org:p").envelope("a", 16, selector={"region": "a"}).build(),
                      a_budget("y", "org:y").envelope("a", 16, selector={"region": "a"}).build(),
                      a_run("y/fill", "org:y").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("x/r", "org:p:x").gpus(16).groups(8).build()])],
        until="+2m",
    )  # fmt: skip
    res = play(doc)["final"]["reservations"]["x/r"]
    assert res["spec"]["payingEnvelope"] == {"owner": "org:p:x", "budget": "x", "envelope": "a"}
    assert res["spec"]["intendedSlice"]["domains"] == ["a/c1/A"]  # region/cluster/fabric.domain
    assert res["status"]["reason"] == "cluster short by 16 GPUs in scope"
