"""Resolver: clear a due reservation's deficit in the fixed order, then the fair, replayable lottery.

Order: reclaim unfunded groups (lowest-ranked first), drop spares, shrink malleable runs by whole
groups, then draw k = 0, 1, … by hash of `seed|k|owner` and `seed|k|group`. Only runs warned in the
reservation's published conflict set for the notice period may be cut. It never places the run.
"""

from __future__ import annotations

from collections import defaultdict

from planner import reasons
from planner.context import Pass
from planner.lottery import draw, replay, seed_for
from planner.reasons import Closure, Phase, Role
from planner.world import Lease, Reservation


class Resolver:
    """One activation: what it may cut, and the cuts in order until the deficit is gone."""

    def __init__(
        self, ctx: Pass, res: Reservation, short: dict[str, int], unfunded: set[tuple[str, int]]
    ) -> None:
        self.ctx = ctx
        self.res = res
        self.left = {d: v for d, v in short.items() if v > 0}
        self.unfunded = unfunded
        self.requeued: list[str] = []  # runs cut whole: back in line at their old place
        warned_before = ctx.now - ctx.world.settings.notice
        protect = ctx.world.settings.min_runtime
        self.eligible: set[str] = set()
        for entry in res.conflicts:
            rec = ctx.records.get(entry.run)
            if (
                entry.since <= warned_before
                and rec is not None
                and rec.phase == Phase.RUNNING
                and entry.run not in ctx.started
                and (rec.started or 0) + protect <= ctx.now
            ):
                self.eligible.add(entry.run)

    def _domain(self, node: str) -> str | None:
        n = self.ctx.topo.nodes.get(node)
        return n.domain if n is not None else None

    def _in_scope(self, run: str, role: Role = Role.ACTIVE) -> dict[int, dict[str, int]]:
        """Group -> domain -> GPUs, for this run's leases of a role in short domains."""
        out: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for lease in self.ctx.open_leases(run):
            d = self._domain(lease.node)
            if lease.role == role and d in self.left:
                out[lease.group][d] += lease.gpus
        return out

    def feasible(self) -> bool:
        can: dict[str, int] = defaultdict(int)
        for run in self.eligible:
            for lease in self.ctx.open_leases(run):
                d = self._domain(lease.node)
                if d in self.left and lease.role != Role.BORROWED:
                    can[d] += lease.gpus
        return all(can[d] >= v for d, v in self.left.items())

    def short(self) -> bool:
        return any(v > 0 for v in self.left.values())

    def _cut_group(self, run: str, group: int, kind: Closure, seed: str | None = None) -> None:
        """End a group; a fixed-width run (or a malleable one pushed under its floor) goes whole."""
        ctx = self.ctx
        spec = ctx.specs.get(run)
        m = spec.spec.malleable if spec is not None else None
        group_gpus = sum(x.gpus for x in ctx.open_leases(run) if x.group == group and x.role == Role.ACTIVE)
        whole = m is None or ctx.counted(run) - group_gpus < m.minTotalGPUs
        for lease in sorted(ctx.open_leases(run), key=lambda x: (x.group, x.role, x.node, x.name)):
            if whole or lease.group == group:
                self._free(lease)
                ctx.close_lease(lease, kind, seed)
        ctx.resized(run)
        if whole:
            ctx.by_run[run] = []
            self.requeued.append(run)
            cause = reasons.requeued(reasons.closure_text(kind, seed), self.res.run)
            ctx.set_status(run, cause, Phase.PENDING, cause=cause)
        else:
            ctx.set_status(run, reasons.shrunk(ctx.allocated(run), self.res.run))

    def _free(self, lease: Lease) -> None:
        d = self._domain(lease.node)
        if d in self.left and lease.role != Role.BORROWED:
            self.left[d] -= lease.gpus

    def run(self) -> bool:
        """Make the cuts; True when the deficit in scope is gone."""
        ctx = self.ctx
        eligible = sorted(self.eligible, key=ctx.rank, reverse=True)  # lowest-ranked first
        # (1) reclaim unfunded groups
        for run in eligible:
            for group in sorted(self._in_scope(run), reverse=True):
                if self.short() and (run, group) in self.unfunded and ctx.open_leases(run):
                    self._cut_group(run, group, Closure.RECLAIM_UNFUNDED)
        # (2) drop spares
        for run in eligible:
            for lease in sorted(ctx.open_leases(run), key=lambda x: (-x.group, x.node)):
                if self.short() and lease.role == Role.SPARE and self._domain(lease.node) in self.left:
                    self._free(lease)  # its fill leases end with it (ReclaimedBySpare)
                    ctx.close_lease(lease, Closure.DROP_SPARE)
                    ctx.resized(run)
        # (3) shrink malleable runs by whole groups, highest index first, never below the floor
        for run in eligible:
            spec = ctx.specs.get(run)
            m = spec.spec.malleable if spec is not None else None
            if m is None:
                continue
            for group in sorted(self._in_scope(run), reverse=True):
                gpus = sum(x.gpus for x in ctx.open_leases(run) if x.group == group and x.role == Role.ACTIVE)
                if not self.short() or ctx.counted(run) - gpus < m.minTotalGPUs:
                    continue
                for lease in sorted(
                    (x for x in ctx.open_leases(run) if x.group == group), key=lambda x: (x.role, x.node)
                ):
                    self._free(lease)
                    ctx.close_lease(lease, Closure.SHRINK)
                ctx.resized(run)
                ctx.set_status(run, reasons.shrunk(ctx.allocated(run)))
        # (4) the lottery: its seed is published only when it draws
        k = 0
        while self.short():
            cands = [
                (ctx.owner_of(run), run, group)
                for run in sorted(self.eligible)
                if ctx.records[run].phase == Phase.RUNNING
                for group in self._in_scope(run)
            ]
            if not cands:
                break
            seed = self.res.seed = seed_for(self.res.run, ctx.now)
            run, group = draw(seed, k, cands)
            self._cut_group(run, group, Closure.RANDOM_PREEMPT, seed)
            k += 1
        return not self.short()


__all__ = ["Resolver", "draw", "replay", "seed_for"]
