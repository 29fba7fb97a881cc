"""The reservation timeline (`state/timeline.svg`, `jobtree timeline`): each waiting run's ETA, window edges and conflict set.

One row per Pending reservation, soonest ETA first (the first `ROWS`; a heading counts them all): a bar from when its forecast counts (its
creation, or its last re-forecast) to its `earliestStart` (a diamond; an arrow to the edge when
the ETA is unknown), the edge of the budget window it waits for (a dashed line), and below it the
runs its activation may cut, each in its fleet-map colour with its probability. The time axis is
drawn from the reservations alone (there is no "now" line: the picture changes only when a
decision does). `key` is the data shown, `draw` the SVG.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from planner.reasons import ResState
from planner.world import Reservation
from reconciler.state import svg
from schemas.common import format_time

WIDTH, LABEL_W, RIGHT, TOP = 1000, 330, 150, 70
ROW, CHIPS = 40, 18
STEPS = (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800, 2592000)
TICKS = 8  # at most this many labelled instants on the axis
ROWS = 200  # reservations drawn, soonest first; the rest are counted (`kubectl runs get -A` lists them)
CHAR = 6  # px per character of 11 px text, to lay chips out one after another

# run, ETA (None: unknown), forecast start, window, deficit, reason, confidence, conflict set
Row = tuple[str, int | None, int, int | None, int, str, str, tuple[tuple[str, float], ...]]

STYLE = (
    ".h{font-size:15px;font-weight:700}.run{font-size:12px;font-weight:600}.why{font-size:10px;fill:#555}"
    ".tick{font-size:10px;fill:#607d8b}.grid{stroke:#eceff1;stroke-width:1}.wait{fill-opacity:.35}"
    ".window{stroke:#6a1b9a;stroke-width:2;stroke-dasharray:5 3}.wl{font-size:9px;fill:#6a1b9a}"
    ".eta{font-size:10px}.chip{font-size:10px}.unknown{stroke-dasharray:4 3;stroke-width:2;fill:none}"
)


Key = tuple[tuple[Row, ...], tuple[str, ...]]


def key(reservations: Mapping[str, Reservation], runs: Iterable[str]) -> Key:
    """Each Pending reservation: run, ETA (None: unknown), forecast start, window, deficit, reason,
    confidence, and its conflict set (run, probability), soonest ETA first; and every run of the
    fleet (whose colours `svg.colours` picks, as the fleet map's)."""
    rows = [
        (
            r.run,
            r.earliest_start,
            r.since,
            r.window,
            r.deficit,
            r.reason,
            r.confidence.value,
            tuple((c.run, c.probability) for c in r.conflicts),
        )  # fmt: skip
        for r in reservations.values()
        if r.state == ResState.PENDING
    ]
    rows.sort(key=lambda r: (r[1] is None, r[1] or 0, str(r[0])))
    return tuple(rows), tuple(sorted(runs))


def _step(span: int) -> int:
    return next((s for s in STEPS if span / s <= TICKS), STEPS[-1])


def _stamp(t: int, step: int, first: bool) -> str:
    text = format_time(t)  # 2026-03-02T09:55:00Z
    day, clock = text[5:10], text[11:19] if t % 60 else text[11:16]
    return f"{day} {clock}" if first or step >= 86400 or clock == "00:00" else clock


def draw(k: Key) -> str:
    waiting, everyone = k
    colour_of = svg.colours(everyone)
    n = len(waiting)
    rows = waiting[:ROWS]
    heading = f"Reservations: {n} waiting" if n else "Reservations: none waiting"
    if n > ROWS:
        heading += f" (the {ROWS} soonest drawn)"
    if not n:
        return svg.document(
            WIDTH,
            60,
            heading,
            STYLE,
            [svg.text(16, 24, heading, "h"), svg.text(16, 46, "No run waits for a reservation.", "why")],
        )
    instants = [t for r in rows for t in (r[1], r[2], r[3]) if t is not None]
    t0, t1 = min(instants), max(instants)
    t1 = max(t1, t0 + 3600)
    span = t1 - t0
    t0, t1 = t0 - span // 25, t1 + span // 12
    plot = WIDTH - LABEL_W - RIGHT

    def x_of(t: int) -> int:
        return LABEL_W + round((t - t0) * plot / (t1 - t0))

    height = TOP + sum(ROW + (CHIPS if r[7] else 0) for r in rows) + 16
    body = [
        svg.text(16, 24, heading, "h"),
        svg.text(16, 44, "soonest first; bars run from the forecast to the earliest start (UTC)", "why"),
    ]
    step = _step(t1 - t0)
    first = True
    for t in range(-(-t0 // step) * step, t1 + 1, step):
        x = x_of(t)
        body.append(f'<line class="grid" x1="{x}" y1="{TOP - 8}" x2="{x}" y2="{height - 10}"/>')
        body.append(svg.text(x, TOP - 12, _stamp(t, step, first), "tick", "middle"))
        first = False
    y = TOP
    for run, eta, since, window, deficit, reason, confidence, conflicts in rows:
        colour = colour_of.get(run, svg.PALETTE[0])
        x_from = x_of(since)
        bar_y = y + 14
        when = format_time(eta) if eta is not None else "unknown"
        members = ", ".join(f"{c[0]} {c[1]}" for c in conflicts)
        title = f"{run}: waits, {reason}; deficit {deficit} GPUs; earliestStart {when} ({confidence})"
        title += f"; may cut {members}" if members else ""
        parts = [
            f"<title>{svg.escape(title)}</title>",
            svg.text(16, y + 16, run, "run"),
            svg.text(16, y + 30, reason, "why"),
        ]
        if eta is None:
            end = LABEL_W + plot
            parts.append(
                f'<path class="unknown" stroke="{colour}" d="M{x_from} {bar_y + 5}H{end - 6}m-6 -5l6 5l-6 5"/>'
            )
            parts.append(svg.text(end + 6, bar_y + 9, "ETA unknown", "eta"))
        else:
            x_eta = x_of(eta)
            parts.append(svg.rect(x_from, bar_y, max(2, x_eta - x_from), 10, "wait", fill=colour))
            parts.append(f'<path fill="{colour}" d="M{x_eta} {bar_y - 2}l7 7l-7 7l-7 -7z"/>')
            parts.append(svg.text(x_eta + 10, bar_y + 9, f"{_stamp(eta, step, True)} ({confidence})", "eta"))
        if window is not None:
            xw = x_of(window)
            parts.append(f'<line class="window" x1="{xw}" y1="{y + 4}" x2="{xw}" y2="{y + ROW - 4}"/>')
            parts.append(svg.text(xw + 3, y + 9, "window opens", "wl"))
        y += ROW
        if conflicts:
            x = LABEL_W
            parts.append(svg.text(x - 8, y + 9, "may cut:", "chip", "end"))
            for member, probability in conflicts:
                parts.append(svg.rect(x, y + 1, 9, 9, fill=colour_of.get(member, svg.PALETTE[0])))
                words = f"{member} {probability}"
                parts.append(svg.text(x + 13, y + 9, words, "chip"))
                x += 13 + CHAR * len(words) + 12
            y += CHIPS
        body.append("<g>" + "".join(parts) + "</g>")
    return svg.document(WIDTH, height, heading, STYLE, body)
