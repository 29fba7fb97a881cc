"""Failover: a failed node's groups, and pods disrupted where they cannot come back, move onto their hot spares, or the run shrinks, requeues or fails.

The one failure-handling function, shared by the reconcile pass and the in-cluster agent. Funded
work is never evicted to make a swap: only the spare's own slots (and fill leases on them) are used.
"""

from __future__ import annotations

from collections import defaultdict

from planner import reasons
from planner.context import Pass, snapshot
from planner.reasons import Closure, Ledger, OpenReason, Phase, Role
from planner.world import DISRUPT, Failover, Lease, StatusChange, WorkloadEvent, World


def decide(world: World, entry: str) -> Failover:
    """The failure handling of §4.8 on this world alone, as facts the in-cluster agent carries out
    and journals under `entry` — the very function a reconcile pass runs, never a second one.
    Nothing else of a pass runs: no admission, no growth, no cuts."""
    ctx = snapshot(world)
    handle_failures(ctx)
    before = world.state.runs
    changed = tuple(
        StatusChange(run, rec.phase, ctx.messages.get(run, rec.message), rec.cause)
        for run, rec in sorted(ctx.records.items())
        if run in ctx.messages and (before.get(run) is None or (before[run].phase, before[run].message)
                                    != (rec.phase, ctx.messages[run]))
    )  # fmt: skip
    return Failover(
        entry,
        world.now,
        tuple((ev.lease.name, ev.closure) for ev in ctx.events if ev.closure is not None),
        tuple(ev.lease.copy() for ev in ctx.events if ev.event == Ledger.START),
        tuple(sorted(ctx.cordon)),
        changed,
    )


def failed_nodes(ctx: Pass) -> list[str]:
    """Fenced nodes, plus nodes that vanished (deleted) that have open leases on them."""
    known_bad = {name for name, _ in ctx.topo.problems}
    names = {name for name, node in ctx.topo.nodes.items() if node.fenced}
    for lease in ctx.leases:
        if lease.open and lease.node not in ctx.topo.nodes and lease.node not in known_bad:
            names.add(lease.node)
    return sorted(names)


def handle_failures(ctx: Pass) -> None:
    """Every failed node's leases move or end (§4.8); every failed node still in the cluster is
    cordoned by jobtree, whether or not it held leases."""
    down = failed_nodes(ctx)
    failing = set(down)
    by_node: dict[str, list[Lease]] = defaultdict(list)
    for lease in ctx.leases:
        if lease.open and lease.node in failing:
            by_node[lease.node].append(lease)
    # spares and fill on any failed node are lost with it before any group looks for a spare
    for node in down:
        for lease in sorted(by_node[node], key=lambda x: (ctx.rank(x.run), x.group, x.name)):
            if lease.role != Role.ACTIVE and lease.open:
                ctx.close_lease(lease, Closure.NODE_FAILURE)
    for node in down:
        on_node = sorted(by_node[node], key=lambda x: (ctx.rank(x.run), x.group, x.name))
        failed: dict[tuple[str, int], list[Lease]] = defaultdict(list)
        for lease in on_node:
            if lease.open and lease.role == Role.ACTIVE:
                failed[(lease.run, lease.group)].append(lease)
        for (run, group), leases in failed.items():
            if not all(x.open for x in leases):
                continue
            if not _swap(ctx, run, group, leases):
                _lose_group(ctx, run, group, node, leases)
        if node in ctx.topo.nodes and node not in ctx.world.state.cordoned:
            ctx.cordon.add(node)
    handle_disruptions(ctx, failing)
    settle_fills(ctx)


def handle_disruptions(ctx: Pass, failing: set[str]) -> None:
    """A pod disrupted (§7.6: evicted, refused by its kubelet, drained) is never a failure of its
    run. On a node that is healthy and schedulable it is re-created in place (apply does: its leases
    stay); on one that is not (cordoned, NotReady) its leases there are handled as that node's
    failure for its group alone: the spare, else shrink, else the run requeued (never failed). The
    node itself is not failed: its other pods keep running, and jobtree cordons nothing for it."""
    for ev in sorted((e for e in ctx.world.workload if e.event == DISRUPT and e.node), key=_event_order):
        node = ctx.topo.nodes.get(str(ev.node))
        if ev.group is None or ev.node in failing or (node is not None and node.usable):
            continue
        here = [x for x in ctx.open_leases(ev.run) if x.group == ev.group and x.node == ev.node]
        for lease in sorted(here, key=lambda x: x.name):
            if lease.role == Role.BORROWED:
                ctx.close_lease(lease, Closure.NODE_FAILURE)
        active = sorted((x for x in here if x.role == Role.ACTIVE), key=lambda x: x.name)
        if active and not _swap(ctx, ev.run, ev.group, active):
            _lose_group(ctx, ev.run, ev.group, str(ev.node), active, requeue=True)


def _event_order(ev: WorkloadEvent) -> tuple[str, int, str]:
    return (ev.run, ev.group if ev.group is not None else -1, ev.node or "")


def _swap(ctx: Pass, run: str, group: int, failed: list[Lease]) -> bool:
    if run in ctx.world.frozen_runs:
        return False  # its spec is invalid now: a pod moved onto the spare would have none to run
    need = sum(x.gpus for x in failed)
    spares = sorted(
        (
            x
            for x in ctx.open_leases(run)
            if x.role == Role.SPARE and x.group == group and _healthy(ctx, x.node)
        ),
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
        for fill in ctx.fills_on(spare.node, take):
            ctx.close_lease(fill, Closure.RECLAIMED_BY_SPARE)
        ctx.close_lease(spare, Closure.SWAP)
        if keep:
            ctx.open_lease(
                run, group, Role.SPARE, spare.node, keep, spare.payer, OpenReason.SWAP, funding=spare.funding
            )
        ctx.open_lease(
            run, group, Role.ACTIVE, spare.node, take, spare.payer, OpenReason.SWAP, rank, spare.funding
        )
        rank = rank + len(take) if rank is not None else None
        left -= len(take)
    for lease in failed:
        ctx.close_lease(lease, Closure.NODE_FAILURE)
    ctx.set_status(run, reasons.swapped(group))
    return True


def _healthy(ctx: Pass, node: str) -> bool:
    """A spare's node may take the group: healthy and schedulable (never a cordoned one, §7.6)."""
    n = ctx.topo.nodes.get(node)
    return n is not None and n.usable


def _lose_group(
    ctx: Pass, run: str, group: int, node: str, failed: list[Lease], requeue: bool = False
) -> None:
    """No usable spare: a malleable run still at its floor drops the group; otherwise fail or requeue
    (always requeue with `requeue`: a disruption never fails a run).

    Completed groups count toward the floor (they are done, not lost)."""
    spec = ctx.specs.get(run)
    rec = ctx.records.get(run)
    lost = sum(x.gpus for x in ctx.open_leases(run) if x.group == group and x.role == Role.ACTIVE)
    remaining = ctx.counted(run) - lost
    malleable = spec.spec.malleable if spec is not None else None
    if malleable is not None and remaining >= malleable.minTotalGPUs:
        for lease in sorted(
            (x for x in ctx.open_leases(run) if x.group == group), key=lambda x: (x.node, x.name)
        ):
            ctx.close_lease(lease, Closure.NODE_FAILURE)
        ctx.set_status(run, reasons.continuing(group, node, ctx.allocated(run)))
        return
    for lease in failed:
        ctx.close_lease(lease, Closure.NODE_FAILURE)
    ctx.close_run(run, Closure.RUN_FAILED)
    if rec is None:
        return
    cause = reasons.lost_group(group, node)
    # requeued when it restarts from a checkpoint, or when whether it checkpoints is unknown (a run
    # whose spec is invalid now is never failed for a typo)
    if (
        requeue
        or run in ctx.world.frozen_runs
        or (spec is not None and spec.spec.runtime.checkpoint is not None)
    ):
        ctx.set_status(run, cause, Phase.PENDING, cause=cause)
    else:
        ctx.set_status(run, reasons.failed_no_spare(group, node), Phase.FAILED)


def settle_fills(ctx: Pass) -> None:
    """Opportunistic runs that lost fill leases since the last call keep going only while whole."""
    lost, ctx.fill_lost = ctx.fill_lost, set()
    for run in sorted(lost):
        settle_fill_run(ctx, run)


def settle_fill_run(ctx: Pass, run: str) -> None:
    """An opportunistic run that lost fill leases keeps going only while it stays whole."""
    rec = ctx.records.get(run)
    spec = ctx.specs.get(run)
    if rec is None or rec.phase != Phase.RUNNING:
        return
    left = ctx.allocated(run)
    malleable = spec.spec.malleable if spec is not None else None
    if left > 0 and malleable is not None and left >= malleable.minTotalGPUs:
        ctx.set_status(run, reasons.running_with(left))
        return
    ctx.close_run(run, Closure.RECLAIMED_BY_SPARE)
    ctx.resized(run)  # no fill lease opens for it again at this instant
    ctx.set_status(run, reasons.FILL_RECLAIMED, Phase.PENDING, cause=reasons.FILL_RECLAIMED)
