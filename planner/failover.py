"""Failover: a failed node's groups move onto their hot spares, or the run shrinks, requeues or fails.

The one failure-handling function, shared by the reconcile pass and the in-cluster agent. Funded
work is never evicted to make a swap: only the spare's own slots (and fill leases on them) are used.
"""

from __future__ import annotations

from collections import defaultdict

from planner.context import Pass
from planner.world import Lease


def failed_nodes(ctx: Pass) -> list[str]:
    """Fenced nodes, plus nodes that vanished (deleted), that have open leases on them."""
    known_bad = {name for name, _ in ctx.topo.problems}
    names: set[str] = set()
    for lease in ctx.leases:
        if not lease.open:
            continue
        node = ctx.topo.nodes.get(lease.node)
        if (node is not None and node.fenced) or (node is None and lease.node not in known_bad):
            names.add(lease.node)
    return sorted(names)


def handle_failures(ctx: Pass) -> None:
    down = failed_nodes(ctx)
    by_node: dict[str, list[Lease]] = defaultdict(list)
    for lease in ctx.leases:
        if lease.open and lease.node in down:
            by_node[lease.node].append(lease)
    # spares and fill on any failed node are lost with it before any group looks for a spare
    for node in down:
        for lease in sorted(by_node[node], key=lambda x: (ctx.rank(x.run), x.group, x.name)):
            if lease.role in ("Spare", "Borrowed") and lease.open:
                ctx.close_lease(lease, "NodeFailure")
    for node in down:
        on_node = sorted(by_node[node], key=lambda x: (ctx.rank(x.run), x.group, x.name))
        failed: dict[tuple[str, int], list[Lease]] = defaultdict(list)
        for lease in on_node:
            if lease.open and lease.role == "Active":
                failed[(lease.run, lease.group)].append(lease)
        for (run, group), leases in failed.items():
            if not all(x.open for x in leases):
                continue
            if not _swap(ctx, run, group, leases):
                _lose_group(ctx, run, group, leases)
        if node in ctx.topo.nodes:
            ctx.cordon.add(node)
    settle_fills(ctx)


def _swap(ctx: Pass, run: str, group: int, failed: list[Lease]) -> bool:
    if run in ctx.world.frozen_runs:
        return False  # its spec is invalid now: a pod moved onto the spare would have none to run
    need = sum(x.gpus for x in failed)
    spares = sorted(
        (x for x in ctx.open_leases(run) if x.role == "Spare" and x.group == group and _healthy(ctx, x.node)),
        key=lambda x: (-x.gpus, x.node, x.name),
    )
    if sum(x.gpus for x in spares) < need:
        return False
    left = need
    ranks = [x.rank for x in failed if x.rank is not None]
    rank = min(ranks) if len(ranks) == len(failed) else None  # the moved pod keeps its ranks
    for spare in spares:
        if left == 0:
            break
        take = spare.slots[: min(left, spare.gpus)]
        keep = spare.slots[len(take) :]
        for fill in [
            x
            for x in ctx.leases
            if x.open and x.role == "Borrowed" and x.node == spare.node and set(x.slots) & set(take)
        ]:
            ctx.close_lease(fill, "ReclaimedBySpare")
        ctx.close_lease(spare, "Swap")
        if keep:
            ctx.open_lease(run, group, "Spare", spare.node, keep, spare.payer, "Swap")
        ctx.open_lease(run, group, "Active", spare.node, take, spare.payer, "Swap", rank)
        rank = rank + len(take) if rank is not None else None
        left -= len(take)
    for lease in failed:
        ctx.close_lease(lease, "NodeFailure")
    ctx.messages[run] = f"group {group} swapped to spare after node failure"
    return True


def _healthy(ctx: Pass, node: str) -> bool:
    n = ctx.topo.nodes.get(node)
    return n is not None and not n.fenced


def _lose_group(ctx: Pass, run: str, group: int, failed: list[Lease]) -> None:
    """No usable spare: a malleable run above its floor drops the group; otherwise fail or requeue."""
    spec = ctx.specs.get(run)
    rec = ctx.records.get(run)
    lost = sum(x.gpus for x in ctx.open_leases(run) if x.group == group and x.role == "Active")
    remaining = ctx.allocated(run) - lost
    malleable = spec.spec.malleable if spec is not None else None
    if malleable is not None and remaining >= malleable.minTotalGPUs:
        for lease in sorted(
            (x for x in ctx.open_leases(run) if x.group == group), key=lambda x: (x.node, x.name)
        ):
            ctx.close_lease(lease, "NodeFailure")
        ctx.messages[run] = f"group {group} lost after node failure; continuing at {remaining} GPUs"
        return
    first = failed[0]
    for lease in failed:
        ctx.close_lease(lease, "NodeFailure")
    ctx.close_run(run, "RunFailed", first=first, first_closure="NodeFailure")
    if rec is None:
        return
    if run in ctx.world.frozen_runs:  # whether it checkpoints is unknown: never failed for a typo
        rec.phase, rec.message, rec.started = (
            "Pending",
            f"group {group} lost after node failure; requeued",
            None,
        )
    elif spec is not None and spec.spec.runtime.checkpoint is not None:
        rec.phase, rec.message, rec.started = (
            "Pending",
            f"group {group} lost after node failure; requeued to restart from checkpoint",
            None,
        )
    else:
        rec.phase, rec.message, rec.finished = (
            "Failed",
            f"group {group} lost after node failure with no usable spare",
            ctx.now,
        )


def settle_fills(ctx: Pass) -> None:
    """Opportunistic runs that lost fill leases since the last call keep going only while whole."""
    lost, ctx.fill_lost = ctx.fill_lost, set()
    for run in sorted(lost):
        settle_fill_run(ctx, run)


def settle_fill_run(ctx: Pass, run: str) -> None:
    """An opportunistic run that lost fill leases keeps going only while it stays whole."""
    rec = ctx.records.get(run)
    spec = ctx.specs.get(run)
    if rec is None or rec.phase != "Running":
        return
    left = ctx.allocated(run)
    malleable = spec.spec.malleable if spec is not None else None
    if left > 0 and malleable is not None and left >= malleable.minTotalGPUs:
        ctx.messages[run] = f"fill leases reclaimed by spares; running with {left} GPUs"
        return
    ctx.close_run(run, "ReclaimedBySpare")
    rec.phase, rec.message, rec.started = (
        "Pending",
        "fill leases reclaimed by spares; waiting for spare capacity",
        None,
    )
