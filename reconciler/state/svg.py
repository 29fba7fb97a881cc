"""The few SVG words both pictures speak (`fleetmap`, `timeline`): escaping, a run's colour, the document frame.

Plain text out, the same bytes for the same input: no clock, no randomness, no floating-point
noise (coordinates are whole pixels), attributes in a fixed order. No third-party library.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable

FONT = "font-family:ui-sans-serif,system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif"


def escape(text: object) -> str:
    """Text for an SVG text node or attribute (names and reasons come from people's files)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


# Sixteen colours of middle lightness, each at least 28 CIE76 units from every other and from the
# pale grey of a free GPU (chosen greedily for the largest least distance from Tableau 10 and the
# like; two blues of the old palette were 10 apart, which eyes do not tell apart).
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#ff00ff", "#e377c2", "#4363d8", "#00c000", "#bcbd22",
    "#9c755f", "#911eb4", "#42d4f4", "#005f5f", "#ff9da7", "#cab2d6", "#b15928",
)  # fmt: skip
APART = 40.0  # CIE76 distance two runs' colours keep when the palette still allows it


def _lab(colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB `#rrggbb`: where distances match what eyes tell apart."""
    rgb = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb)
    xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)  # fmt: skip
    fx, fy, fz = (v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


_LAB = tuple(_lab(c) for c in PALETTE)
_DIST = tuple(tuple(math.dist(a, b) for b in _LAB) for a in _LAB)  # entry -> entry -> CIE76 distance
# entry -> the entries at least `APART` from it (a bit per entry)
_FAR = tuple(sum(1 << j for j, d in enumerate(row) if d >= APART) for row in _DIST)


def _apart(i: int, taken: int) -> float:
    """How far palette entry `i` is from the nearest entry taken (a bit per entry; infinite when none is)."""
    row = _DIST[i]
    return min((row[j] for j in range(len(PALETTE)) if taken >> j & 1), default=math.inf)


@functools.lru_cache(maxsize=1 << 16)
def _pick(first: int, taken: int) -> int:
    """The entry a run whose name picks on `first` gets when `taken` (a bit per entry) are taken:
    the first free one from `first` on at least `APART` from every one taken, else the free one
    farthest from them (the first of equals). At most 16 × 2^16 answers; about 4,000 for 6,000 runs."""
    n = len(PALETTE)
    free = [i % n for i in range(first, first + n) if not taken >> (i % n) & 1]
    pick = next((i for i in free if not taken & ~_FAR[i]), None)  # every one taken is APART from it
    if pick is None:
        pick = max(free, key=lambda i: _apart(i, taken))  # the first of equals: max keeps it
    return pick


def colours(runs: Iterable[str]) -> dict[str, str]:
    """Each run's colour: from the `PALETTE` entry the SHA-256 of its name picks on, the first one
    no run earlier in name order took that is at least `APART` from every colour taken (else the
    free one farthest from them), so a few runs never share a shade (sixteen runs have sixteen
    colours; past that they repeat). Both pictures colour from the fleet's whole list of runs, so a
    run has one colour in both, and it changes only when a run before it in name order comes or goes."""
    out: dict[str, str] = {}
    taken = 0
    n = len(PALETTE)
    every = (1 << n) - 1
    for run in sorted(set(runs)):
        if taken == every:
            taken = 0
        pick = _pick(int.from_bytes(hashlib.sha256(run.encode()).digest()[:4], "big") % n, taken)
        taken |= 1 << pick
        out[run] = PALETTE[pick]
    return out


def document(width: int, height: int, title: str, style: str, body: Iterable[str]) -> str:
    """A whole SVG document: its title (what a screen reader and a browser tab say), style, body."""
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">\n'
        f"<title>{escape(title)}</title>\n"
        f"<style>text{{{FONT};fill:#222}}{style}</style>\n"
        f'<rect class="page" x="0" y="0" width="{width}" height="{height}" fill="#fff"/>\n'
    )
    return head + "".join(f"{line}\n" for line in body) + "</svg>\n"


def text(x: int, y: int, words: object, cls: str = "", anchor: str = "") -> str:
    attrs = f' class="{cls}"' if cls else ""
    attrs += f' text-anchor="{anchor}"' if anchor else ""
    return f'<text x="{x}" y="{y}"{attrs}>{escape(words)}</text>'


def rect(x: int, y: int, w: int, h: int, cls: str = "", fill: str = "", title: str = "") -> str:
    attrs = f' class="{cls}"' if cls else ""
    attrs += f' fill="{fill}"' if fill else ""
    body = f"<title>{escape(title)}</title>" if title else ""
    return (
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}"{attrs}>{body}</rect>'
        if body
        else f'<rect x="{x}" y="{y}" width="{w}" height="{h}"{attrs}/>'
    )
