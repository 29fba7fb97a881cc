"""The few SVG words both pictures speak (`fleetmap`, `timeline`): escaping, a run's colour, the document frame.

Plain text out, the same bytes for the same input: no clock, no randomness, no floating-point
noise (coordinates are whole pixels), attributes in a fixed order. No third-party library.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

FONT = "font-family:ui-sans-serif,system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif"


def escape(text: object) -> str:
    """Text for an SVG text node or attribute (names and reasons come from people's files)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


# Sixteen saturated colours, told apart on white and from the pale grey of a free GPU (Tableau 10
# without its grey, and six more of matplotlib's).
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
    "#17becf", "#bcbd22", "#8c564b", "#e377c2", "#1f77b4", "#2ca02c", "#9467bd",
)  # fmt: skip


def colours(runs: Iterable[str]) -> dict[str, str]:
    """Each run's colour: the `PALETTE` entry the SHA-256 of its name picks, or, when a run earlier
    in name order took it, the next free one (sixteen runs have sixteen colours; past that they
    repeat). Both pictures colour from the fleet's whole list of runs, so a run has one colour in
    both, and it changes only when a run that took its colour first comes or goes."""
    out: dict[str, str] = {}
    taken: set[int] = set()
    for run in sorted(set(runs)):
        if len(taken) == len(PALETTE):
            taken = set()
        first = int.from_bytes(hashlib.sha256(run.encode()).digest()[:4], "big") % len(PALETTE)
        pick = next(
            i % len(PALETTE) for i in range(first, first + len(PALETTE)) if i % len(PALETTE) not in taken
        )
        taken.add(pick)
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
