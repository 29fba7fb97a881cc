"""§4.5: an ETA is a promise the planner can keep — notice, `minRuntime`, windows that really fund
and null when nothing known makes the run fundable; the reason names the constraint that binds;
remedies say what each can free.

Unless a test says otherwise: one domain A of 4 nodes x 8 H100 (32 GPUs), notice 15 minutes,
start 2026-03-02T09:00:00Z. Expectations are worked out by hand from DESIGN.md before running.
"""

from __future__ import annotations

from typing import Any

from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import A32, at, ends, play, stamp, starts

BORROW_REMEDY = "Increase maxBorrowGPUs or shrink the run"
HEADROOM_REMEDY = "Wait for budget headroom, add sponsors, or shrink the run"
WINDOW_REMEDY = "Wait for the budget window to open"


def _res(state: dict[str, Any], run: str) -> dict[str, Any]:
    res: dict[str, Any] = state["reservations"][run]
    return res


def test_a_window_that_funds_only_part_of_the_run_gives_no_eta() -> None:
    # t's only envelope (16) opens at +60m; t/r wants 64. At the window's opening it would be funded
    # for 16 of 64: no known event makes it fundable, so no earliestStart (confidence unknown) and
    # the reason is headroom, not the window. 20 minutes past the opening it still promises nothing.
    doc = scenario(
        {"t": "org:t"}, [domain("A", 8)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16, start=stamp(60)).build(),
                      a_run("t/r", "org:t").gpus(64).groups(8).build()]),
         at(1, checkpoint="before"), at(80, checkpoint="after")],
        until="+85m",
    )  # fmt: skip
    doc["spec"]["tick"] = "5m"
    out = play(doc)
    for label in ("before", "after"):
        res = _res(out["checkpoints"][label], "t/r")
        assert res["spec"]["earliestStart"] is None, label
        assert res["status"]["forecast"]["confidence"] == "unknown", label
        assert res["status"]["reason"].startswith("budget headroom short by"), label
        assert res["status"]["forecast"]["remedies"] == [HEADROOM_REMEDY], label
    assert out["checkpoints"]["before"]["runs"]["t/r"]["reservation"]["earliestStart"] is None
    assert _res(out["checkpoints"]["after"], "t/r")["status"]["forecast"]["deficitGPUs"] == 64 - 16
    assert starts(out, "t/r") == []


def test_a_window_that_funds_the_whole_run_is_its_eta_and_both_remedies_apply() -> None:
    # the window (64) funds all 64: earliestStart = window + 10 s = 10:00:10, window-aligned; short of
    # headroom now and funded by the coming window, it gets both remedies, the window's first.
    doc = scenario(
        {"t": "org:t"}, [domain("A", 8)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64, start=stamp(60)).build(),
                      a_run("t/r", "org:t").gpus(64).groups(8).build()]),
         at(1, checkpoint="before")],
        until="+65m",
    )  # fmt: skip
    out = play(doc)
    res = _res(out["checkpoints"]["before"], "t/r")
    assert res["spec"]["earliestStart"] == stamp(60, 10)
    assert res["status"]["forecast"]["confidence"] == "window-aligned"
    assert res["status"]["reason"] == f"budget window opens at {stamp(60)}"
    assert res["status"]["forecast"]["remedies"] == [WINDOW_REMEDY, HEADROOM_REMEDY]
    assert {e["at"] for e in starts(out, "t/r")} == {stamp(60)}  # fits once funded: before its ETA


def test_an_eta_waits_for_the_min_runtime_of_the_runs_it_must_cut() -> None:
    # minRuntime 2h. u/x (32, fixed) fills A from 09:00; t/r (8) arrives at 09:05. Cutting x is the
    # only way in; x is protected until 11:00 (and warned from 09:05, cuttable from 09:20 by notice):
    # earliestStart 11:00, not 09:20. At 11:00 the lottery (only x) ends x and r starts.
    doc = scenario(
        {"t": "org:t", "u": "org:u"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 32).build(),
                      a_budget("u", "org:u").envelope("h", 32).build(),
                      a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(5, apply=[a_run("t/r", "org:t").gpus(8).build()]),
         at(6, checkpoint="waiting")],
        until="+130m", fleet={"reservations": {"minRuntime": "2h"}},
    )  # fmt: skip
    out = play(doc)
    waiting = out["checkpoints"]["waiting"]
    assert _res(waiting, "t/r")["spec"]["earliestStart"] == stamp(120)
    assert [c["run"] for c in _res(waiting, "t/r")["status"]["conflictSet"]] == ["u/x"]
    assert {e["at"] for e in starts(out, "t/r")} == {stamp(120)}
    assert {e["at"] for e in ends(out, "u/x")} == {stamp(120)}


def test_a_budget_edit_that_leaves_a_run_unfundable_moves_its_eta_to_none_and_the_ledger_says_so() -> None:
    # u/x (32, fixed) fills A; t/r (8) at +1m: ETA +16m (notice). At +14m t's envelope drops to 0:
    # the forecast changes (headroom short, nothing known funds it), so the ETA moves from +16m to
    # none at that pass, with a ReservationMoved event; at +16m nothing is cut (a budget shortfall
    # never cuts anyone) and the run stays Pending.
    doc = scenario(
        {"t": "org:t", "u": "org:u"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 32).build(),
                      a_budget("u", "org:u").envelope("h", 32).build(),
                      a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()]),
         at(14, apply=[a_budget("t", "org:t").envelope("h", 0).build()]),
         at(20, checkpoint="after")],
        until="+25m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    res = _res(out["checkpoints"]["after"], "t/r")
    assert out["checkpoints"]["after"]["runs"]["t/r"]["phase"] == "Pending"
    assert res["spec"]["earliestStart"] is None  # nothing known funds it now
    assert res["status"]["reason"] == "budget headroom short by 8 GPUs"
    moved = [e for e in out["ledger"] if e["event"] == "ReservationMoved" and e["run"] == "t/r"]
    assert [(e["at"], e["previous"], e["earliestStart"]) for e in moved] == [(stamp(14), stamp(16), None)]
    assert ends(out, "u/x") == []  # a budget shortfall never cuts anyone


def test_the_borrow_limit_is_the_reason_when_it_binds_and_a_far_window_is_the_second_remedy() -> None:
    # t/r wants 16: t owns 8, sponsor s lends up to 64 but maxBorrowGPUs is 4 (8 + 4 = 12: short 4).
    # t also has 16 opening 2027-01-01: then 8 + 16 + 4 covers it. The binding constraint now is the
    # borrow limit (with maxBorrowGPUs 8 it would start at once), so that is the reason; the window
    # is the second remedy and, funding it whole, the ETA (window-aligned).
    window = "2027-01-01T00:00:00Z"
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).envelope("later", 16, start=window).build(),
                      a_budget("s", "org:s").envelope("h", 64, lending={"allow": True, "to": ["*"]}).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).borrowing("org:s", cap=4).build()]),
         at(1, checkpoint="limited"),
         at(2, patch={"kind": "Run", "namespace": "t", "name": "r",
                      "merge": {"spec": {"funding": {"maxBorrowGPUs": 8}}}})],
        until="+3m",
    )  # fmt: skip
    out = play(doc)
    res = _res(out["checkpoints"]["limited"], "t/r")
    assert res["status"]["reason"] == "borrow limit of 4 GPUs exhausted for requested width"
    assert res["status"]["forecast"]["deficitGPUs"] == 4
    assert res["status"]["forecast"]["remedies"] == [BORROW_REMEDY, WINDOW_REMEDY]
    assert res["spec"]["earliestStart"] == "2027-01-01T00:00:10Z"
    assert res["status"]["forecast"]["confidence"] == "window-aligned"
    assert {e["at"] for e in starts(out, "t/r")} == {stamp(2)}  # with 8 to borrow it starts at once


def test_capacity_remedies_say_how_many_gpus_each_can_free() -> None:
    # A (64) is full: u/s runs 32 in groups of 16 with 8 spares per group (48 GPUs), v/m (malleable
    # 8..16, step 8) runs 16. t/r (32, groups of 16) is short by 32 in A. Spares free 16, shrinking
    # v/m to its floor frees 8, and the lottery's entry is what is left: 32 - 16 - 8 = 8.
    doc = scenario(
        {"t": "org:t", "u": "org:u", "v": "org:v"}, [domain("A", 8)],
        [at(0, apply=[*(a_budget(n, f"org:{n}").envelope("h", 64).build() for n in ("t", "u", "v")),
                      a_run("u/s", "org:u").gpus(32).groups(16).spares(8).build(),
                      a_run("v/m", "org:v").gpus(16).groups(8).malleable(8, 16, 8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(32).groups(16).build()])],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    forecast = _res(out["final"], "t/r")["status"]["forecast"]
    assert forecast["deficitGPUs"] == 32
    assert forecast["remedies"] == [
        "Drop spares in scope",
        "Shrink elastic runs by step size",
        "Run fair lottery if deficit remains",
    ]
    assert forecast["remedyGPUs"] == [16, 8, 8]


def test_a_run_no_domain_its_funding_reaches_can_hold_says_so_and_holds_nothing() -> None:
    # one group of 40 while every domain (A, B: 32 each) holds 32. Even empty, no domain holds it:
    # the grouping reason, its whole need as deficit, no earliestStart, an empty scope; an 8-GPU run
    # behind it starts (backfill passes it).
    doc = scenario(
        {"t": "org:t"}, [domain("A", 4), domain("B", 4)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/big", "org:t").gpus(40).groups(40).build(),
                      a_run("t/small", "org:t").gpus(8).build()])],
    )  # fmt: skip
    st = play(doc)["final"]
    res = _res(st, "t/big")
    assert res["status"]["reason"] == "no single domain satisfies run grouping"
    assert res["status"]["forecast"]["deficitGPUs"] == 40
    assert res["spec"]["earliestStart"] is None and res["status"]["forecast"]["confidence"] == "unknown"
    assert res["spec"]["intendedSlice"] == {"domains": [], "nodes": []}
    assert st["runs"]["t/small"]["phase"] == "Running"


def test_a_run_kept_in_one_domain_is_scoped_to_a_domain_that_can_hold_it_all() -> None:
    # A (16) is empty, B (32) is full with u/x. t/r (24 in groups of 8, allowCrossGroupSpread false)
    # fits only in B: its scope is B, short by 24 there, and x is warned (in its conflict set).
    doc = scenario(
        {"t": "org:t", "u": "org:u"}, [domain("A", 2), domain("B", 4)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 24).build(),
                      a_budget("u", "org:u").envelope("h", 32).build(),
                      a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(24).groups(8, spread=False).build()])],
        until="+2m",
    )  # fmt: skip
    st = play(doc)["final"]
    res = _res(st, "t/r")
    assert res["spec"]["intendedSlice"]["domains"] == ["west/c1/B"]
    assert res["status"]["reason"] == "cluster short by 24 GPUs in scope"
    assert [c["run"] for c in res["status"]["conflictSet"]] == ["u/x"]
    assert [c["reservation"] for c in st["runs"]["u/x"]["conflicts"]] == ["t/r"]


def test_no_waiting_reservation_ever_shows_an_eta_in_the_past() -> None:
    # a busy minute-by-minute timeline: three fixed runs contend for A; whatever happens, at every
    # checkpoint each Pending reservation's earliestStart is null or not before the checkpoint.
    steps = [
        at(
            0,
            apply=[
                *(a_budget(n, f"org:{n}").envelope("h", 32).build() for n in ("a", "b", "c")),
                a_run("a/x", "org:a").gpus(16).groups(8).build(),
                a_run("b/y", "org:b").gpus(16).groups(8).build(),
            ],
        ),
        at(3, apply=[a_run("c/z", "org:c").gpus(16).groups(8).build()]),
    ]
    steps += [at(m, checkpoint=f"m{m}") for m in range(0, 90, 1)]
    doc = scenario({"a": "org:a", "b": "org:b", "c": "org:c"}, A32, steps, until="+90m")
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    for label, state in out["checkpoints"].items():
        for key, res in state["reservations"].items():
            if res["status"]["state"] == "Pending" and res["spec"]["earliestStart"] is not None:
                assert res["spec"]["earliestStart"] >= state["at"], (label, key)
