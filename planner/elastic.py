"""Elasticity: widths a malleable run may take, voluntary shrink to `desiredTotalGPUs`, and growth.

Growth adds one step of groups per pass when funded and placeable without touching capacity held
by reservations; shrink closes the highest-index groups. Admission and cuts live elsewhere.
"""

from __future__ import annotations

from planner import bind, cover, pack
from planner.context import Pass
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
    """Lowering `desiredTotalGPUs` closes the highest-index groups (`Shrink`)."""
    for key in sorted(ctx.specs):
        spec = ctx.specs[key]
        rec = ctx.records.get(key)
        if spec.spec.malleable is None or rec is None or rec.phase != "Running":
            continue
        target = desired(spec)
        if ctx.allocated(key) <= target:
            continue
        for group in sorted(ctx.groups(key), reverse=True):
            if ctx.allocated(key) <= target:
                break
            for lease in sorted(
                (x for x in ctx.open_leases(key) if x.group == group), key=lambda x: (x.role, x.node, x.name)
            ):
                ctx.close_lease(lease, "Shrink")
        ctx.messages[key] = f"shrunk to {ctx.allocated(key)} GPUs"


def grow(ctx: Pass, held: dict[str, int], lookahead_hours: float) -> None:
    """One step toward `desiredTotalGPUs` for each running malleable run, in ranking order."""
    for key in sorted(ctx.specs, key=ctx.rank):
        spec = ctx.specs[key]
        rec = ctx.records.get(key)
        m = spec.spec.malleable
        if m is None or rec is None or rec.phase != "Running" or key in ctx.cut or key in ctx.started:
            continue
        have = ctx.allocated(key)
        if have >= desired(spec):
            continue
        step = min(m.stepGPUs, desired(spec) - have)
        indices = set(ctx.groups(key)) | set(ctx.groups(key, "Borrowed"))
        first = 0
        while first in indices:
            first += 1
        size = group_size(spec)
        sizes = pack.group_sizes(step, size)
        used = tuple(
            sorted({ctx.topo.nodes[x.node].domain for x in ctx.open_leases(key) if x.node in ctx.topo.nodes})
        )
        if spec.spec.opportunistic:
            srcs: list[pack.Source] = []
        else:
            srcs = cover.sources(ctx.book, ctx.topo, spec, lookahead_hours)
            if cover.shortfall(
                ctx.book, spec, step + spec.spec.sparesPerGroup * len(sizes or [step]), srcs, lookahead_hours
            ):
                continue
        req = pack.Request(
            sizes, step, first, 0 if spec.spec.opportunistic else spec.spec.sparesPerGroup, srcs,
            spec.spec.funding.maxBorrowGPUs if spec.spec.funding.allowBorrow else 0,
            not spec.spec.locality.allowCrossGroupSpread, used, held, fill=spec.spec.opportunistic,
        )  # fmt: skip
        placed = pack.place(ctx.topo, req, spec.spec.resources.gpuType)
        if placed.failure is not None or len(placed.groups) != len(sizes or [step]):
            continue
        if sizes is None and len(placed.groups) > 1:
            continue
        role, reason = ("Borrowed", "Fill") if spec.spec.opportunistic else ("Active", "Grow")
        bind.bind(ctx, key, spec.spec.owner, placed.groups, reason, role)
        ctx.messages[key] = f"grew to {ctx.allocated(key)} GPUs"
