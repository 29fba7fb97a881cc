"""The pictures every reconcile writes (`state/fleet.svg`, `state/timeline.svg`) and `jobtree map` / `timeline` draw.

Read as parsed XML: what a researcher hovering or reading the legend would notice, and goldens in
canonical XML (C14N), so a change in what is drawn shows as a reviewable diff. They change only
when a decision does: a change that moves no decision makes no commit, pictures or not.

examples/04 at its last pass: domain A (9 nodes × 8) holds a1 (A-n00, A-n01), fill (A-n02),
c2 (A-n03, A-n04) and c1 (A-n07): 48 GPUs; b1 waits for its reservation (ETA 10:10, may cut
a1 0.33, fill 0.17, c1 0.17, c2 0.33). examples/03 at 09:05: A-n03 failed under j1's group 0,
whose spare on A-n16 took over; the node is cordoned.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner

from reconciler.cli.fleetmap import command as map_command
from reconciler.cli.timeline import command as timeline_command
from reconciler.passes.reconcile import reconcile_once
from reconciler.state import svg
from tests.conftest import Golden
from tests.support.fleets import history, pass_at
from tests.support.git import T0, commit_by_hand, reconciled
from tests.support.scenarios import EXAMPLES

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def lottery(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return history(EXAMPLES / "04-reservation-and-lottery.yaml", tmp_path_factory.mktemp("04") / "fleet")


@pytest.fixture(scope="module")
def spares(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return history(EXAMPLES / "03-spares-fill-failure.yaml", tmp_path_factory.mktemp("03") / "fleet")


def at(repo: Path, path: str, rev: str = "main") -> bytes:
    git = pygit2.Repository(str(repo))
    data: bytes = git.revparse_single(rev).peel(pygit2.Commit).tree[path].data
    return data


def canonical(svg: bytes) -> str:
    """The parsed picture written back one element a line (attributes sorted): what goldens keep."""
    ET.register_namespace("", SVG[1:-1])
    root = ET.fromstring(ET.canonicalize(svg.decode(), strip_text=True))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def hover(svg: bytes) -> Counter[str]:
    """Run name -> slots drawn for it (each lease's cells are one `M..z` subpath under a titled group)."""
    found: Counter[str] = Counter()
    for g in ET.fromstring(svg).iter(f"{SVG}g"):
        title = g.find(f"{SVG}title")
        path = g.find(f"{SVG}path")
        if title is not None and path is not None and " · group " in (title.text or ""):
            found[(title.text or "").split(" · ")[0]] += path.get("d", "").count("z")
    return found


def test_the_fleet_map_shows_every_held_slot_under_its_runs_name(lottery: Path, golden: Golden) -> None:
    svg = at(lottery, "state/fleet.svg")
    golden.check("pictures/fleet-lottery.svg", canonical(svg))
    assert hover(svg) == {"team-a/a1": 16, "team-a/fill": 8, "team-c/c1": 8, "team-c/c2": 16}
    root = ET.fromstring(svg)
    assert root.findtext(f"{SVG}title") == "Fleet map: 72 GPUs in 1 domain, 48 held, 4 runs"
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert {
        "team-a/a1",
        "team-a/fill",
        "team-c/c1",
        "team-c/c2",
        "Active",
        "free GPU",
        "cordoned node",
    } <= set(texts)
    frames = {
        (r.findtext(f"{SVG}title") or "").split(":")[0]: r.findtext(f"{SVG}title")
        for r in root.iter(f"{SVG}rect")
        if "frame" in (r.get("class") or "")
    }
    assert frames["A-n05"] == "A-n05: 8 GPUs, 8 free" and frames["A-n03"] == "A-n03: 8 GPUs, 0 free"


def test_runs_have_colours_of_their_own_in_both_pictures(lottery: Path) -> None:
    fleet, timeline = (
        ET.fromstring(at(lottery, "state/fleet.svg")),
        ET.fromstring(at(lottery, "state/timeline.svg")),
    )
    colour = {
        (g.findtext(f"{SVG}title") or "").split(" · ")[0]: g.get("fill")
        for g in fleet.iter(f"{SVG}g")
        if g.get("fill") and g.findtext(f"{SVG}title")
    }
    assert len(set(colour.values())) == len(colour) == 4
    chips = list(timeline.iter(f"{SVG}rect"))
    labels = [
        t.text for t in timeline.iter(f"{SVG}text") if t.get("class") == "chip" and t.text != "may cut:"
    ]
    swatches = [r.get("fill") for r in chips if r.get("width") == "9"]
    assert dict(zip([w.split(" ")[0] for w in labels], swatches, strict=True)) == {
        run: colour[run] for run in ("team-a/a1", "team-a/fill", "team-c/c1", "team-c/c2")
    }


def test_the_timeline_shows_the_waiting_run_its_eta_and_whom_it_may_cut(
    lottery: Path, golden: Golden
) -> None:
    svg = at(lottery, "state/timeline.svg")
    golden.check("pictures/timeline-lottery.svg", canonical(svg))
    root = ET.fromstring(svg)
    (row,) = [g for g in root.iter(f"{SVG}g") if g.find(f"{SVG}title") is not None]
    assert row.findtext(f"{SVG}title") == (
        "team-b/b1: waits, cluster short by 8 GPUs in scope; deficit 8 GPUs; earliestStart "
        "2026-03-02T10:10:00Z (conservative); may cut team-a/a1 0.33, team-a/fill 0.17, team-c/c1 0.17, team-c/c2 0.33"
    )
    assert "03-02 10:10 (conservative)" in [t.text for t in row.iter(f"{SVG}text")]


def test_a_cordoned_node_and_a_swapped_group_are_drawn_as_they_are(spares: Path, golden: Golden) -> None:
    svg = at(spares, "state/fleet.svg", pass_at(spares, "2026-03-02T09:05:00Z"))
    golden.check("pictures/fleet-swap.svg", canonical(svg))
    root = ET.fromstring(svg)
    cordoned = [
        r.findtext(f"{SVG}title")
        for r in root.iter(f"{SVG}rect")
        if r.get("class") == "frame cordoned" and r.findtext(f"{SVG}title")
    ]
    assert cordoned == ["A-n03: 4 GPUs, 4 free, cordoned"]
    titles = [g.findtext(f"{SVG}title") or "" for g in root.iter(f"{SVG}g")]
    assert any(t.startswith("alpha/j1 · group 1 · Spare") for t in titles)  # group 0's spare took over
    assert not any(t.startswith("alpha/j1 · group 0 · Spare") for t in titles)
    assert any(
        t.startswith("beta/j2 · group") and "Borrowed" in t and "debits no envelope" in t for t in titles
    )


def test_an_empty_timeline_says_nothing_waits(spares: Path) -> None:
    root = ET.fromstring(at(spares, "state/timeline.svg", pass_at(spares, "2026-03-02T09:00:00Z")))
    assert root.findtext(f"{SVG}title") == "Reservations: none waiting"


def test_jobtree_map_and_timeline_draw_the_committed_pictures_of_any_commit(
    lottery: Path, tmp_path: Path
) -> None:
    for command, path in ((map_command, "state/fleet.svg"), (timeline_command, "state/timeline.svg")):
        for rev in ("main", pass_at(lottery, "2026-03-02T09:10:00Z")):
            shown = CliRunner().invoke(command, [str(lottery), "--rev", rev], catch_exceptions=False)
            assert shown.exit_code == 0, shown.output
            assert shown.stdout_bytes == at(lottery, path, rev)
    out = tmp_path / "map.svg"
    assert CliRunner().invoke(map_command, [str(lottery), "-o", str(out)]).exit_code == 0
    assert out.read_bytes() == at(lottery, "state/fleet.svg")
    assert CliRunner().invoke(map_command, [str(tmp_path)]).exit_code == 2


def test_pictures_change_with_decisions_and_never_make_a_commit_alone(tmp_path: Path) -> None:
    work, repo = reconciled(tmp_path)
    first = repo.head.peel(pygit2.Commit)
    assert first.tree["state/fleet.svg"].data.startswith(b"<svg ")
    # a node added to the inventory changes the map, but no decision: nothing is committed
    inventory = (work / "inventory" / "nodes.yaml").read_text()
    racked = "nodes:\n  - {name: h100-extra, gpus: 8, labels: {region: us-east, cluster: h100-east, fabric.domain: h100-east-a, gpu.flavor: H100-80GB}}\n"
    edited = inventory.replace("nodes: []\n", racked)
    assert edited != inventory
    commit_by_hand(repo, {"inventory/nodes.yaml": edited.encode()}, "a node racked\n")
    assert reconcile_once(work, now=T0 + 60).commit is None
    # a decision (vit-elastic shrunk to 8) commits, and the map then shows the new node too
    vit = (work / "runs" / "media-vision" / "vit-elastic.yaml").read_text()
    commit_by_hand(
        repo,
        {
            "runs/media-vision/vit-elastic.yaml": vit.replace(
                "desiredTotalGPUs: 16", "desiredTotalGPUs: 8"
            ).encode()
        },
        "shrink\n",
    )
    assert reconcile_once(work, now=T0 + 120).commit is not None
    svg = repo.head.peel(pygit2.Commit).tree["state/fleet.svg"].data
    assert b"h100-extra: 8 GPUs, 8 free" in svg and svg != first.tree["state/fleet.svg"].data
    assert hover(svg)["media-vision/vit-elastic"] == 8


def test_a_long_line_is_drawn_soonest_first_up_to_the_row_limit() -> None:
    from reconciler.state import timeline

    rows = tuple(
        (
            f"t/r{i:03d}",
            1_800_000_000 + 60 * i,
            1_800_000_000 - 900,
            None,
            8,
            "cluster short by 8 GPUs in scope",
            "conservative",
            (),
        )
        for i in range(timeline.ROWS + 50)
    )
    root = ET.fromstring(timeline.draw((rows, tuple(r[0] for r in rows))))
    assert (
        root.findtext(f"{SVG}title")
        == f"Reservations: {timeline.ROWS + 50} waiting (the {timeline.ROWS} soonest drawn)"
    )
    drawn = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "run"]
    assert drawn == [f"t/r{i:03d}" for i in range(timeline.ROWS)]


def _lab(colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* of `#rrggbb`, worked out here from the sRGB and CIE formulas (not the drawing code's)."""
    rgb = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883
    f = [v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


@pytest.mark.parametrize(("runs", "least"), [(3, 40), (5, 40), (8, 40), (10, 30)])
def test_a_few_runs_never_get_two_shades_of_one_colour(runs: int, least: float) -> None:
    # the old palette gave a fleet of 5 runs two blues 10 CIE76 units apart: eyes need about 20 or
    # more to tell two filled cells apart at a glance. Up to 8 runs keep 40 apart; past that the
    # palette of 16 allows less, and each run takes the free colour farthest from those taken
    chosen = list(svg.colours([f"team-{i}/run-{i}" for i in range(runs)]).values())
    closest = min(math.dist(_lab(a), _lab(b)) for i, a in enumerate(chosen) for b in chosen[i + 1 :])
    assert len(set(chosen)) == runs and closest >= least


def test_the_template_fleets_runs_are_told_apart_on_its_map() -> None:
    template = ["media-audio/whisper-finetune", "media-vision/vit-elastic", "rai-llm/pretrain-64",
                "rai-sys/moe-spares", "rai-sys/train-cofunded", "rai-sys/resnet-small", "media-audio/asr-elastic",
                "rai-sys/trainer", "rai-sys/sweep"]  # fmt: skip
    chosen = list(svg.colours(template).values())
    assert min(math.dist(_lab(a), _lab(b)) for i, a in enumerate(chosen) for b in chosen[i + 1 :]) >= 30
