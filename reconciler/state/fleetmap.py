"""The fleet map (`state/fleet.svg`, `jobtree map`): domains × nodes × GPU slots, coloured by run, role and funding.

Each domain is a block of nodes, each node a box of its GPU slots (8 to a row, slot numbers as the
leases give them); a slot held by a lease takes its run's colour (`svg.colours`), solid when
Active, pale and outlined as a hot Spare, dashed as opportunistic Fill; an outline says who pays
when it is not the run's owner (family or a sponsor: dark) or nobody (unfunded: red, dashed). A
node jobtree cordoned is framed in red. Hovering a slot names its run, group, role and payer; a
legend says the rest. `key` is everything the picture shows, as plain data taken from decisions
only (no clock), so the bytes change only when a decision does; `draw` turns a key into SVG.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from planner.reasons import Role
from planner.world import Lease, NodeObs
from reconciler.state import svg

PITCH, CELL = 12, 10  # a slot every 12 px, drawn 10 px wide
PER_ROW = 8  # slots in a row of a node's box
NODES_PER_ROW = 8
NODE_GAP, LEFT, TOP = 10, 16, 44
LABELLED_NODES = 400  # up to this many nodes, each node's name is written above it (always on hover)
RUNS_LISTED = 40  # runs named in the legend (every run is named on hover)

# (run, group, role, funding, payer, node, slots) of an open lease
LeaseRow = tuple[str, int, str, str, str, str, tuple[int, ...]]
Key = tuple[tuple[tuple[str, tuple[tuple[str, int, bool], ...]], ...], tuple[LeaseRow, ...], tuple[str, ...]]

STYLE = (
    ".frame{fill:none;stroke:#b0bec5;stroke-width:1}.cordoned{stroke:#d32f2f;stroke-width:2;stroke-dasharray:4 2}"
    ".free{fill:#eceff1}.s path{fill-opacity:.28;stroke-width:1.5}.f path{fill-opacity:.55;stroke-width:1.2;"
    "stroke-dasharray:2 1.5}.lent path{stroke:#212121;stroke-width:1.6}.unfunded path{stroke:#d32f2f;"
    "stroke-width:1.6;stroke-dasharray:3 1.5}.dom{font-size:13px;font-weight:600}.sum{font-size:11px;fill:#555}"
    ".nl{font-size:8px;fill:#607d8b}.lg{font-size:11px}.h{font-size:15px;font-weight:700}"
)


def domain_of(node: NodeObs) -> str:
    labels = node.labels
    return f"{labels.get('region', '?')}/{labels.get('cluster', '?')}/{labels.get('fabric.domain', '?')}"


def funding(
    lease: Lease, owners: Mapping[str, str], unfunded: frozenset[tuple[str, int]] | set[tuple[str, int]]
) -> str:
    """own, lent (another owner pays: family or a sponsor), unfunded, or fill (a Borrowed lease)."""
    if lease.role == Role.BORROWED:
        return "fill"
    if (lease.run, lease.group) in unfunded:
        return "unfunded"
    owner = owners.get(lease.run)
    return "own" if owner is None or lease.payer.owner == owner else "lent"


def key(
    nodes: Iterable[NodeObs],
    leases: Iterable[Lease],
    unfunded: frozenset[tuple[str, int]] | set[tuple[str, int]],
    cordoned: Iterable[str],
    owners: Mapping[str, str],
    runs: Iterable[str],
) -> Key:
    """What the map shows: each domain's nodes (name, GPUs, cordoned), each open lease's slots, and
    every run of the fleet (whose colours `svg.colours` picks)."""
    down = set(cordoned)
    by_domain: dict[str, list[tuple[str, int, bool]]] = defaultdict(list)
    for n in nodes:
        out = n.name in down or n.cordoned or n.out_of_service or n.deleted
        by_domain[domain_of(n)].append((n.name, n.gpus, out))
    domains = tuple((d, tuple(sorted(ns))) for d, ns in sorted(by_domain.items()))
    rows = sorted(
        (x.run, x.group, x.role.value, funding(x, owners, unfunded), _payer(x), x.node, tuple(x.slots))
        for x in leases
        if x.open
    )
    return domains, tuple(rows), tuple(sorted(runs))


def _payer(x: Lease) -> str:
    p = x.payer
    return f"{p.owner} ({p.budget}/{p.envelope})" if p.budget and p.envelope else p.owner


def _cell(x: int, y: int) -> str:
    return f"M{x} {y}h{CELL}v{CELL}h-{CELL}z"


_BOX = f"h{CELL}v{CELL}h-{CELL}z"
_NEXT = f"{_BOX}m{PITCH} 0"


def _cells(x0: int, y0: int, slots: Iterable[int]) -> str:
    """Path data of a node's slots (one closed square each): a run of neighbours in a row is one
    move and the same square repeated, which keeps a 100,000-GPU map quick to write."""
    out: list[str] = []
    run: list[int] = []
    for s in sorted(slots):
        if run and (s != run[-1] + 1 or s % PER_ROW == 0):
            out.append(_row(x0, y0, run))
            run = []
        run.append(s)
    if run:
        out.append(_row(x0, y0, run))
    return "".join(out)


def _row(x0: int, y0: int, run: list[int]) -> str:
    first = run[0]
    return (
        f"M{x0 + (first % PER_ROW) * PITCH} {y0 + (first // PER_ROW) * PITCH}{_NEXT * (len(run) - 1)}{_BOX}"
    )


ROLE_CLASS = {Role.ACTIVE.value: "a", Role.SPARE.value: "s", Role.BORROWED.value: "f"}
WORDS = {
    "own": "paid by its owner",
    "lent": "paid by another owner (family or sponsor)",
    "unfunded": "charged to nobody (unfunded)",
    "fill": "fill on a spare, debits no envelope",
}


def draw(k: Key) -> str:
    domains, rows, everyone = k
    colour_of = svg.colours(everyone)
    total_nodes = sum(len(ns) for _, ns in domains)
    labelled = total_nodes <= LABELLED_NODES
    node_w = PER_ROW * PITCH
    widest = max((min(len(ns), NODES_PER_ROW) for _, ns in domains), default=1)
    width = max(LEFT * 2 + widest * (node_w + NODE_GAP), 760)
    held: dict[str, set[int]] = defaultdict(set)
    for row in rows:
        held[row[5]].update(row[6])
    body: list[str] = []
    where: dict[str, tuple[int, int, int]] = {}  # node -> (x, y, gpus)
    y = TOP
    busy_total = 0
    for domain, nodes in domains:
        gpus = sum(g for _, g, _ in nodes)
        busy = sum(len(held.get(n, ())) for n, _, _ in nodes)
        busy_total += busy
        summary = f"{len(nodes)} nodes, {gpus} GPUs: {busy} held, {gpus - busy} free"
        body.append(
            f'<text x="{LEFT}" y="{y + 12}"><tspan class="dom">{svg.escape(domain)}</tspan>'
            f'<tspan class="sum" dx="10">{summary}</tspan></text>'
        )
        y += 22
        for i in range(0, len(nodes), NODES_PER_ROW):
            line = nodes[i : i + NODES_PER_ROW]
            tallest = max((-(-g // PER_ROW) for _, g, _ in line), default=1)
            label = 10 if labelled else 0
            for j, (name, g, down) in enumerate(line):
                x0, y0 = LEFT + j * (node_w + NODE_GAP), y + label
                where[name] = (x0, y0, g)
                if labelled:
                    body.append(svg.text(x0, y0 - 2, name, "nl"))
                taken = held.get(name, ())
                free = [s for s in range(g) if s not in taken]
                boxes = _cells(x0, y0, free)
                h = -(-g // PER_ROW) * PITCH - (PITCH - CELL)
                w = min(g, PER_ROW) * PITCH - (PITCH - CELL)
                state = f"{name}: {g} GPUs, {len(free)} free" + (", cordoned" if down else "")
                frame = svg.rect(
                    x0 - 2, y0 - 2, w + 4, h + 4, "frame cordoned" if down else "frame", title=state
                )
                body.append(
                    f'<g class="node">{frame}'
                    + (f'<path class="free" d="{boxes}"/>' if boxes else "")
                    + "</g>"
                )
            y += label + tallest * PITCH + NODE_GAP
        y += 8
    groups: dict[tuple[str, int, str, str, str], list[str]] = defaultdict(list)
    for run, group, role, paid, payer, node, slots in rows:
        if node not in where:
            continue
        x0, y0, g = where[node]
        groups[(run, group, role, paid, payer)].append(_cells(x0, y0, [s for s in slots if s < g]))
    for (run, group, role, paid, payer), cells in sorted(
        groups.items(), key=lambda kv: tuple(map(str, kv[0]))
    ):
        colour = colour_of.get(run, svg.PALETTE[0])
        title = f"{run} · group {group} · {role} · {payer} · {WORDS[paid]}"
        cls = f"{ROLE_CLASS.get(role, 'a')} {paid}"
        body.append(
            f'<g class="{cls}" fill="{colour}" stroke="{colour}"><title>{svg.escape(title)}</title><path d="{"".join(cells)}"/></g>'
        )
    all_gpus = sum(g for _, ns in domains for _, g, _ in ns)
    heading = (
        f"Fleet map: {all_gpus} GPUs in {len(domains)} domain{'s' * (len(domains) != 1)}, {busy_total} held"
    )
    head = [svg.text(LEFT, 24, heading, "h")]
    legend, height = _legend(rows, y, width, colour_of)
    title = f"{heading}, {len({r[0] for r in rows})} runs"
    return svg.document(width, height, title, STYLE, [*head, *body, *legend])


def _legend(
    rows: tuple[LeaseRow, ...], y: int, width: int, colour_of: Mapping[str, str]
) -> tuple[list[str], int]:
    """Samples of each role, funding and node state, then the runs with their colours."""
    grey = "#607d8b"
    out = [svg.text(LEFT, y + 12, "Legend", "dom")]
    y += 22
    samples = [
        ("a own", "Active"),
        ("s own", "Spare (hot standby)"),
        ("f fill", "Fill (opportunistic, on spares)"),
        ("a lent", "paid by family or a sponsor"),
        ("a unfunded", "unfunded (charged to nobody)"),
    ]
    for i, (cls, words) in enumerate(samples):
        x = LEFT + (i % 3) * 250
        yy = y + (i // 3) * 18
        out.append(f'<g class="{cls}" fill="{grey}" stroke="{grey}"><path d="{_cell(x, yy)}"/></g>')
        out.append(svg.text(x + 16, yy + 9, words, "lg"))
    out.append(f'<path class="free" d="{_cell(LEFT + 2 * 250, y + 18)}"/>')
    out.append(svg.text(LEFT + 2 * 250 + 16, y + 27, "free GPU", "lg"))
    out.append(svg.rect(LEFT + 2 * 250 + 90, y + 16, 14, 14, "frame cordoned"))
    out.append(svg.text(LEFT + 2 * 250 + 110, y + 27, "cordoned node", "lg"))
    y += 44
    runs = sorted({r[0] for r in rows})
    if runs:
        out.append(svg.text(LEFT, y + 10, "Runs (hover a slot for its group, role and payer):", "lg"))
        y += 18
        per_line = max(1, (width - 2 * LEFT) // 200)
        for i, run in enumerate(runs[:RUNS_LISTED]):
            x, yy = LEFT + (i % per_line) * 200, y + (i // per_line) * 16
            out.append(svg.rect(x, yy, CELL, CELL, fill=colour_of.get(run, svg.PALETTE[0])))
            out.append(svg.text(x + 16, yy + 9, run, "lg"))
        y += -(-min(len(runs), RUNS_LISTED) // per_line) * 16
        if len(runs) > RUNS_LISTED:
            out.append(svg.text(LEFT, y + 10, f"and {len(runs) - RUNS_LISTED} more runs", "lg"))
            y += 16
    return out, y + 12
