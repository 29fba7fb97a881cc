"""A reservation whose ETA moved says so in `explain` and `watch`; a name two namespaces share needs -n.

The fleet (worked out as in tests/planner/test_contract_edges.py): one domain A of 4 × 8 GPUs. Team
t's only envelope opens at +30m, so t/r (8 GPUs) is reserved for 09:30:10 (window-aligned, 10 s past
the window). At +5m t's budget moves the window to +40m: the forecast itself changed, so the ETA
moves to 09:40:10 and the ledger says so. u/r (8 GPUs, team u's own envelope) runs from the start.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.builders import a_budget, a_run, scenario
from tests.support.fleets import pass_at, played, runs
from tests.support.scenarios import A32, at, stamp


@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def budget(start: str) -> dict:  # type: ignore[type-arg]  # a Budget manifest
        return a_budget("t", "org:t").envelope("h", 16, start=start).build()

    doc = scenario(
        {"t": "org:t", "u": "org:u"}, A32,
        [at(0, apply=[budget(stamp(30)), a_budget("u", "org:u").envelope("h", 16).build(),
                      a_run("t/r", "org:t").gpus(8).build(), a_run("u/r", "org:u").gpus(8).build()]),
         at(5, apply=[budget(stamp(40))])],
        until="+6m",
    )  # fmt: skip
    return played(doc, tmp_path_factory.mktemp("moved"))


def test_explain_and_watch_tell_when_and_why_the_eta_moved(moved: Path) -> None:
    at_move = pass_at(moved, "2026-03-02T09:05:00Z")
    doc = runs("explain", "t/r", "--rev", at_move, "--format", "json", repo=moved).json()
    (entry,) = [e for e in doc["trail"] if e["kind"] == "ReservationMoved"]
    assert entry["at"] == stamp(5)
    assert entry["text"] == (
        f"ETA moved from {stamp(30, 10)} to {stamp(40, 10)}: budget window opens at {stamp(40)}"
    )
    res = doc["waiting"]["reservation"]
    assert (res["confidence"], res["earliestStart"], res["windowOpens"]) == (
        "window-aligned",
        stamp(40, 10),
        stamp(40),
    )
    events = runs("watch", "t/r", "--once", "--rev", at_move, "--format", "json", repo=moved).json()["events"]
    assert events[-1] == {
        "at": stamp(5), "event": "ReservationMoved", "earliestStart": stamp(40, 10), "previous": stamp(30, 10),
        "reason": f"budget window opens at {stamp(40)}",
    }  # fmt: skip


def test_a_name_two_namespaces_share_needs_its_namespace(moved: Path) -> None:
    shown = runs("plan", "r", repo=moved)
    assert shown.code == 2 and "names runs in several namespaces (t/r, u/r)" in shown.err
    assert runs("plan", "r", "-n", "u", "--format", "json", repo=moved).json()["phase"] == "Running"
    assert runs("plan", "t/r", "--format", "json", repo=moved).json()["phase"] == "Pending"
