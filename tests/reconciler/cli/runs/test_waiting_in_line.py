"""Waiting in line: a run's owner sees how many runs are ahead, why the ETA is when it is, and that (and why) it moved.

Two small fleets, played with `jobtree simulate --git` and worked out by hand from DESIGN §4.5:

- `protected`: domain A (2 nodes × 8 = 16 GPUs), `minRuntime: 2h`. a/r (16 GPUs, team a's own 16)
  starts at 09:00; b/w (16, team b's own 16) arrives at 09:05 and is reserved. Its ETA is the later
  of 09:05 + the 15m notice (09:20) and the instant a/r may first be cut: its warning at 09:05 +
  15m, and 09:00 + 2h of `minRuntime` protection, so 11:00. Why: a/r's minRuntime.
- `windows`: domain A again; teams b and c each have only an envelope opening at 12:00. b/w (16)
  is submitted at 09:00, c/v (16) at 09:01: both wait, window-aligned for 12:00:10, in that order
  (submission time), so c/v is 2nd in line, b/w ahead of it in the same domain. At 09:10 team b's
  window moves to 13:00: b/w's ETA moves 12:00:10 -> 13:00:10, a `ReservationMoved` event whose
  reason is the window's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.fleets import played, runs
from tests.support.scenarios import at

A16 = [domain("A", 2)]


def _second_in_a_full_domain(where: Path, min_runtime: str) -> Path:
    """a/r fills A at 09:00, b/w (16) arrives at 09:05: the fleet's history, played."""
    doc = scenario(
        {"a": "org:a", "b": "org:b"}, A16,
        [at(0, apply=[a_budget("a", "org:a").envelope("h", 16).build(),
                      a_budget("b", "org:b").envelope("h", 16).build(),
                      a_run("a/r", "org:a").gpus(16).groups(8).build()]),
         at(5, apply=[a_run("b/w", "org:b").gpus(16).groups(8).build()])],
        until="+6m", fleet={"reservations": {"minRuntime": min_runtime}},
    )  # fmt: skip
    return played(doc, where)


@pytest.fixture(scope="module")
def protected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _second_in_a_full_domain(tmp_path_factory.mktemp("protected"), "2h")


@pytest.fixture(scope="module")
def windows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def later(name: str, owner: str, start: str) -> dict[str, object]:
        return a_budget(name, owner).envelope("later", 16, start=start).build()

    doc = scenario(
        {"b": "org:b", "c": "org:c"}, A16,
        [at(0, apply=[later("b", "org:b", "2026-03-02T12:00:00Z"), later("c", "org:c", "2026-03-02T12:00:00Z"),
                      a_run("b/w", "org:b").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("c/v", "org:c").gpus(16).groups(8).build()]),
         at(10, apply=[later("b", "org:b", "2026-03-02T13:00:00Z")])],
        until="+11m",
    )  # fmt: skip
    return played(doc, tmp_path_factory.mktemp("windows"))


def test_an_eta_set_by_minruntime_says_whose_protection_it_waits_for(protected: Path) -> None:
    res = runs("plan", "b/w", "--now", "2026-03-02T09:06:00Z", "-o", "json", repo=protected).json()[
        "reservation"
    ]
    assert res["earliestStart"] == "2026-03-02T11:00:00Z"
    assert res["etaReason"] == (
        "when the minRuntime protection (2h after they started) ends for a/r: activation may cut a run only then"
    )
    text = runs("explain", "b/w", "--now", "2026-03-02T09:06:00Z", repo=protected).out
    assert "  earliestStart 2026-03-02T11:00:00Z (in 1h 54m), confidence conservative\n" in text
    assert "  why then: when the minRuntime protection (2h after they started) ends for a/r" in text
    # what a person can do is said apart from what activation will do: the lottery is no advice
    waiting = text.split("Why it waits:")[1]
    (change,) = [line for line in waiting.splitlines() if "what would change that" in line]
    assert "lottery" not in change.lower()
    assert (
        "at activation the resolver will, in this order: the fair lottery for what is still short (16 GPUs)"
        in text
    )


def test_a_notice_bound_eta_names_the_notice_period(tmp_path: Path) -> None:
    fleet = _second_in_a_full_domain(tmp_path, "0s")
    res = runs("plan", "b/w", "--now", "2026-03-02T09:06:00Z", "-o", "json", repo=fleet).json()["reservation"]
    # no minRuntime: a/r may be cut once warned for the notice period, 09:05 + 15m
    assert res["earliestStart"] == "2026-03-02T09:20:00Z"
    assert res["etaReason"] == "the notice period: runs it may cut (a/r) are warned 15m before any cut"


def test_a_run_sees_its_place_in_line_and_who_ahead_of_it_needs_the_same_domains(windows: Path) -> None:
    now = "2026-03-02T09:11:00Z"
    first = runs("plan", "b/w", "--now", now, "-o", "json", repo=windows).json()["reservation"]["inLine"]
    second = runs("plan", "c/v", "--now", now, "-o", "json", repo=windows).json()["reservation"]["inLine"]
    assert first == {"position": 1, "of": 2, "ahead": 0, "aheadInScope": []}
    assert second == {"position": 2, "of": 2, "ahead": 1, "aheadInScope": ["b/w"]}
    shown = runs("watch", "c/v", "--once", "--now", now, repo=windows).out
    assert "  2nd in line of 2: 1 ahead, 1 of them in its scope (b/w)\n" in shown
    rows = runs("get", "--now", now, "-o", "wide", repo=windows).out.splitlines()
    assert [line.split()[1] for line in rows if " 2 of 2 " in line] == ["v"]


def test_a_moved_eta_is_shown_with_when_from_what_to_what_and_why(windows: Path) -> None:
    now = "2026-03-02T09:11:00Z"
    res = runs("plan", "b/w", "--now", now, "-o", "json", repo=windows).json()["reservation"]
    assert res["earliestStart"] == "2026-03-02T13:00:10Z"
    assert res["lastMove"] == {
        "at": "2026-03-02T09:10:00Z",
        "previous": "2026-03-02T12:00:10Z",
        "earliestStart": "2026-03-02T13:00:10Z",
        "reason": "budget window opens at 2026-03-02T13:00:00Z",
    }
    line = (
        "ETA moved at 2026-03-02T09:10:00Z: 2026-03-02T12:00:10Z -> 2026-03-02T13:00:10Z "
        "(budget window opens at 2026-03-02T13:00:00Z)"
    )
    assert line in runs("plan", "b/w", "--now", now, repo=windows).out
    assert f"  {line}\n" in runs("watch", "b/w", "--once", "--now", now, repo=windows).out
    assert (
        runs("plan", "c/v", "--now", now, "-o", "json", repo=windows).json()["reservation"]["lastMove"]
        is None
    )
    why = runs("plan", "b/w", "--now", now, "-o", "json", repo=windows).json()["reservation"]["etaReason"]
    assert why == "10 s after the budget window that funds it opens (2026-03-02T13:00:00Z)"


def test_an_overdue_eta_in_a_stale_clone_says_how_old_the_last_pass_is(windows: Path) -> None:
    late = "2026-03-02T14:00:00Z"  # after both ETAs; the last pass read is 09:11's
    shown = runs("get", "--now", late, repo=windows).out
    assert "2026-03-02T13:00:10Z (overdue by 59m 50s)" in shown and "due now" not in shown
    assert (
        "the last pass in it was at 2026-03-02T09:10:00Z (4h 50m ago). `git pull` for newer decisions"
        in shown
    )
    assert "(4h 50m ago)" in runs("plan", "b/w", "--now", late, repo=windows).out
    # a fresh clone says nothing of the kind
    assert "last pass" not in runs("get", "--now", "2026-03-02T09:11:00Z", repo=windows).out
