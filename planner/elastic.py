"""Elasticity: widths a malleable run may take, voluntary shrink to `desiredTotalGPUs`, and growth.

Growth adds one step of groups per pass when funded and placeable without touching capacity held
by reservations; shrink closes the groups funded furthest in cover order first. Admission and cuts
live elsewhere.
"""

from __future__ import annotations

from planner import bind, cover, pack, reasons
from planner.context import Pass
from planner.reasons import Closure, OpenReason, Phase, Role
from schemas.run import Run


def desired(run: Run) -> int:
    m = run.spec.malleable
    if m is None:
        return run.spec.resources.totalGPUs
    return m.desiredTotalGPUs if m.desiredTotalGPUs is not None else m.maxTotalGPUs


def group_size(run: Run) -> int | None:
    m = run.spec.malleable
    if run.spec.locality.groupGPUs is not None:
        return run.spec.locality.groupGPUs
    return m.stepGPUs if m is not None else None


def widths(run: Run) -> list[int]:
    """Admission widths to try, largest first: totalGPUs, then step by step down to the minimum."""
    m = run.spec.malleable
    top = min(run.spec.resources.totalGPUs, desired(run))
    if m is None:
        return [top]
    out = []
    w = top
    while w >= m.minTotalGPUs and w > 0:
        out.append(w)
        w -= m.stepGPUs
    return out or [top]


def min_width(run: Run) -> int:
    return widths(run)[-1]


def shrink_to_desired(ctx: Pass) -> None:
    """Lowering `desiredTotalGPUs` closes groups (`Shrink`) until the run is no wider than desired:
    first the groups funded furthest in cover order (sponsor, then family, then own envelopes), the
    highest index among equals (§4.7). Never below its minimum, and never its last open group: what
    completed counts toward the width, so a run lowered to the width it has open keeps it."""
    for key in sorted(ctx.specs):
        spec = ctx.specs[key]
        rec = ctx.records.get(key)
        m = spec.spec.malleable
        if m is None or rec is None or rec.phase != Phase.RUNNING:
            continue
        target = desired(spec)
        if ctx.counted(key) <= target:
            continue
        groups = ctx.groups(key)
        order = _cover_positions(ctx, spec)
        far = {
            g: max(order.get(x.payer.env_key or "", len(order)) for x in leases)
            for g, leases in groups.items()
        }
        shrunk = False
        for group in sorted(groups, key=lambda g: (far[g], g), reverse=True):
            counted, allocated = ctx.counted(key), ctx.allocated(key)
            if counted <= target:
                break
            gpus = sum(x.gpus for x in groups[group])
            if counted - gpus < m.minTotalGPUs or allocated - gpus <= 0:
                continue
            for lease in sorted(
                (x for x in ctx.open_leases(key) if x.group == group), key=lambda x: (x.role, x.node, x.name)
            ):
                ctx.close_lease(lease, Closure.SHRINK)
            shrunk = True
        if shrunk:
            ctx.resized(key)
            ctx.set_status(key, reasons.shrunk(ctx.allocated(key)))


def _cover_positions(ctx: Pass, spec: Run) -> dict[str, int]:
    """Envelope -> its place in the run's cover order (own, then family nearest first, then sponsors)."""
    return {env.key: i for i, (env, _) in enumerate(cover.candidates(ctx.book, spec))}


def may_grow(ctx: Pass, key: str) -> bool:
    """A running malleable run below its desired width whose width no decision changed at this
    instant (one growth step per run per instant; a run just started, grown or cut waits for a later
    pass). Completed groups count toward the width: they are never grown back."""
    spec = ctx.specs[key]
    rec = ctx.records.get(key)
    return (
        spec.spec.malleable is not None
        and rec is not None
        and rec.phase == Phase.RUNNING
        and rec.resized != ctx.now
        and rec.started != ctx.now
        and ctx.counted(key) < desired(spec)
    )


def grow(ctx: Pass, held: dict[str, int], lookahead_hours: float, opportunistic: bool = False) -> None:
    """One step toward `desiredTotalGPUs` for each running malleable run, in ranking order (funded
    runs after the line; opportunistic ones, on spare-held GPUs, with the fill at the pass's end)."""
    for key in sorted(ctx.specs, key=ctx.rank):
        spec = ctx.specs[key]
        if spec.spec.opportunistic != opportunistic or not may_grow(ctx, key):
            continue
        m = spec.spec.malleable
        assert m is not None
        step = min(m.stepGPUs, desired(spec) - ctx.counted(key))
        first = ctx.records[key].next_group
        size = group_size(spec)
        sizes = pack.group_sizes(step, size)
        used = tuple(
            sorted({ctx.topo.nodes[x.node].domain for x in ctx.open_leases(key) if x.node in ctx.topo.nodes})
        )
        if spec.spec.opportunistic:
            srcs: list[pack.Source] = []
        else:
            srcs = cover.sources(ctx.book, ctx.topo, spec, lookahead_hours)
            need = step + spec.spec.sparesPerGroup * len(sizes or [step])
            if cover.fundable(srcs, cover.borrow_cap(spec)) < need:
                continue
        req = pack.Request(
            sizes, step, first, 0 if spec.spec.opportunistic else spec.spec.sparesPerGroup, srcs,
            cover.borrow_cap(spec), not spec.spec.locality.allowCrossGroupSpread, used, held,
            fill=spec.spec.opportunistic,
        )  # fmt: skip
        placed = pack.place(ctx.topo, req, spec.spec.resources.gpuType)
        if placed.failure is not None or len(placed.groups) != len(sizes or [step]):
            continue
        if sizes is None and len(placed.groups) > 1:
            continue
        role, reason = (
            (Role.BORROWED, OpenReason.FILL) if spec.spec.opportunistic else (Role.ACTIVE, OpenReason.GROW)
        )
        bind.bind(ctx, key, spec.spec.owner, placed.groups, reason, role)
        ctx.resized(key)
        ctx.set_status(key, reasons.grew(ctx.allocated(key)))
