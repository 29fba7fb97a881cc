"""A waiting run's place in line, why its ETA is when it is, and the last time that ETA moved.

Place in line: runs holding a pending reservation, in the order the planner considers them
(§4.5: submission time, then namespace/name; a requeued victim keeps its place). Why the ETA: the
term of §4.5 that sets `earliestStart`, worked out again from what the reservation and the fleet
record (a window opening, the notice its conflict set gets, the `minRuntime` protection of the runs
it would cut, the runs ahead of it). The last move: its newest `ReservationMoved` ledger event.
Explains what the planner wrote; decides nothing.
"""

from __future__ import annotations

from typing import Any

from planner import records
from planner.reasons import Ledger, ResState
from planner.world import Reservation
from reconciler.views.fleet import Fleet
from schemas.common import format_duration, format_time, parse_time

WINDOW_MARGIN = 10  # seconds past a window's start a window-aligned ETA is set at (§4.5)


def in_line(fleet: Fleet, scoped: str | None = None) -> dict[str, dict[str, Any]]:
    """Every run waiting in line for admission (holding a pending reservation): its `position`
    (from 1), `of` (how many wait), `ahead` (how many come first). For the run `scoped`, also
    `aheadInScope`: the runs ahead of it whose reservations claim a domain of its scope (they take
    the GPUs it needs first)."""
    waiting = {k: r for k, r in fleet.reservations().items() if r.state == ResState.PENDING}
    order = sorted(waiting, key=lambda k: ((fleet.status(k) or {}).get("submittedAt") or "", k))
    out: dict[str, dict[str, Any]] = {
        k: {"position": i + 1, "of": len(order), "ahead": i} for i, k in enumerate(order)
    }
    if scoped in out:
        scope = set(waiting[scoped].domains)
        first = order[: out[scoped]["ahead"]]
        out[scoped]["aheadInScope"] = [k for k in first if scope & set(waiting[k].domains)]
    return out


def eta_reason(fleet: Fleet, res: Reservation) -> str | None:
    """Why `earliestStart` is when it is, in words (None when there is none)."""
    eta = res.earliest_start
    if eta is None:
        return None
    if res.window is not None and eta == res.window + WINDOW_MARGIN:
        return f"{WINDOW_MARGIN} s after the budget window that funds it opens ({format_time(res.window)})"
    settings = records.settings_of(fleet.spec.fleet)
    notice, protect = settings.notice, settings.min_runtime
    protected = []
    for c in res.conflicts:
        started = (fleet.status(c.run) or {}).get("startedAt")
        if started and protect and parse_time(started) + protect == eta:
            protected.append(c.run)
    if protected:
        return (
            f"when the minRuntime protection ({format_duration(protect)} after they started) ends for "
            f"{', '.join(protected)}: activation may cut a run only then"
        )
    warned = [c.run for c in res.conflicts if c.since + notice == eta]
    basis = res.basis if res.basis is not None else res.created
    if warned or basis + notice == eta:
        who = f" ({', '.join(warned)})" if warned else ""
        return f"the notice period: runs it may cut{who} are warned {format_duration(notice)} before any cut"
    return "when runs ahead of it in line have started and their own notice and minRuntime have passed"


def last_move(fleet: Fleet, res: Reservation) -> dict[str, Any] | None:
    """The reservation's newest `ReservationMoved` event since it was made: `at`, `previous`,
    `earliestStart`, `reason` (None: its ETA has not moved)."""
    moves = [
        e
        for e in fleet.events(res.run, since=format_time(res.created)[:10])
        if e.get("event") == Ledger.MOVED.value and parse_time(e["at"]) >= res.created
    ]
    if not moves:
        return None
    e = moves[-1]
    return {k: e.get(k) for k in ("at", "previous", "earliestStart", "reason")}
