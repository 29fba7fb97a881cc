"""The pictures as a browser shows them: headless Chromium opens each SVG, reads it without an error and
draws every run in its colour. Run by `make pictures` (which installs Chromium when it is missing and
names it in `JOBTREE_CHROMIUM`); `make test` leaves `tests/browser/` out, so it never needs one.

Each picture and its screenshot are kept in `build/pictures/` to look at: the worked examples'
fleet maps and timelines (a lottery, a swap onto a spare with a cordoned node, a window-aligned
reservation, an unknown ETA) and the template fleet's map.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pygit2
import pytest

from reconciler.state import svg as pictures
from tests.support import REPO
from tests.support.fleets import history, pass_at
from tests.support.git import reconciled
from tests.support.png import pixels
from tests.support.scenarios import EXAMPLES

CHROMIUM = os.environ.get("JOBTREE_CHROMIUM", "")
OUT = REPO / "build" / "pictures"
pytestmark = pytest.mark.skipif(not CHROMIUM, reason="set JOBTREE_CHROMIUM (make pictures does)")


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium refuses root without it
    return subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--hide-scrollbars", "--force-device-scale-factor=1", *sandbox, *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def shown(name: str, svg: bytes) -> set[tuple[int, int, int]]:
    """Open the SVG in Chromium: no parse error in the page it builds, and the colours of its screenshot."""
    OUT.mkdir(parents=True, exist_ok=True)
    source, shot = OUT / f"{name}.svg", OUT / f"{name}.png"
    source.write_bytes(svg)
    dom = chromium("--dump-dom", source.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<svg" in dom.stdout and "parsererror" not in dom.stdout and "following errors" not in dom.stdout
    found = re.search(rb'width="(\d+)" height="(\d+)"', svg)
    assert found is not None
    width, height = int(found[1]), int(found[2])
    taken = chromium(f"--screenshot={shot}", f"--window-size={width},{height}", source.as_uri())
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    w, h, colours = pixels(shot.read_bytes())
    assert (w, h) == (width, height)
    return colours


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def tree_at(fleet: Path, instant: str) -> pygit2.Tree:
    """The files of the fleet as the pass at `instant` left them."""
    return pygit2.Repository(str(fleet)).revparse_single(pass_at(fleet, instant)).peel(pygit2.Commit).tree


def colours_of(svg: bytes) -> dict[str, str]:
    """Each run's colour as the legend gives it (swatch, then the run's name)."""
    found = re.findall(
        rb'<rect x="\d+" y="\d+" width="10" height="10" fill="(#[0-9a-f]{6})"/>\n<text x="\d+" y="\d+" class="lg">([^<]+)</text>',
        svg,
    )
    return {name.decode(): colour.decode() for colour, name in found}


def test_the_lottery_examples_pictures_draw_every_run_in_its_colour(tmp_path: Path) -> None:
    fleet = history(EXAMPLES / "04-reservation-and-lottery.yaml", tmp_path / "04")
    repo = pygit2.Repository(str(fleet))
    tree = repo.revparse_single("main").peel(pygit2.Commit).tree
    svg = tree["state/fleet.svg"].data
    runs = colours_of(svg)
    assert sorted(runs) == ["team-a/a1", "team-a/fill", "team-c/c1", "team-c/c2"]
    drawn = shown("lottery-fleet", svg)
    assert {rgb(c) for c in runs.values()} <= drawn
    assert rgb("#eceff1") in drawn  # free GPUs
    timeline = shown("lottery-timeline", tree["state/timeline.svg"].data)
    assert {rgb(c) for c in runs.values()} <= timeline  # the conflict set's chips
    unknown = tree_at(fleet, "2026-03-02T09:25:00Z")
    shown("unknown-eta-timeline", unknown["state/timeline.svg"].data)


def test_a_swap_and_a_cordoned_node_are_drawn(tmp_path: Path) -> None:
    fleet = history(EXAMPLES / "03-spares-fill-failure.yaml", tmp_path / "03")
    tree = tree_at(fleet, "2026-03-02T09:05:00Z")
    svg = tree["state/fleet.svg"].data
    drawn = shown("swap-fleet", svg)
    assert {rgb(c) for c in colours_of(svg).values()} <= drawn
    assert rgb("#d32f2f") in drawn  # the cordoned node's frame


def test_a_window_aligned_reservation_is_drawn_with_its_window(tmp_path: Path) -> None:
    fleet = history(EXAMPLES / "05-future-window.yaml", tmp_path / "05")
    tree = tree_at(fleet, "2026-03-02T15:00:00Z")
    drawn = shown("window-timeline", tree["state/timeline.svg"].data)
    assert rgb("#6a1b9a") in drawn  # the window's edge and its label


def test_the_template_fleets_map(tmp_path: Path) -> None:
    _, repo = reconciled(tmp_path)
    svg = repo.head.peel(pygit2.Commit).tree["state/fleet.svg"].data
    runs = colours_of(svg)
    assert len(runs) == 5 and len(set(runs.values())) == 5
    assert {rgb(c) for c in runs.values()} <= shown("template-fleet", svg)
    assert all(c in pictures.PALETTE for c in runs.values())
