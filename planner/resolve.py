"""Resolver: clear a due reservation's deficit in the fixed order, then the fair, replayable lottery.

Order: reclaim unfunded groups (lowest-ranked first), drop spares, shrink malleable runs by whole
groups, then draw k = 0, 1, … by hash of `seed|k|owner` and `seed|k|group`. Only runs warned in the
reservation's published conflict set for the notice period, and past `minRuntime`, may be cut;
with `reservations.lottery: false` only the structural steps run.
All-or-nothing (§4.6): `choose` works out every cut first on a copy of what runs, and `apply`
makes them only when together they clear the deficit. It never places the run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from planner import reasons
from planner.context import Pass
from planner.lottery import draw, replay, seed_for
from planner.reasons import Closure, Phase, Role
from planner.world import Lease, Reservation


@dataclass(frozen=True, slots=True)
class Cut:
    """One cut the activation makes: the leases it ends, why, and whether the run goes whole."""

    run: str
    leases: tuple[Lease, ...]
    kind: Closure
    seed: str | None = None
    whole: bool = False  # the run is requeued (keeping its place in line)


class Resolver:
    """One activation: whom it may cut, and the cuts in order until the deficit is gone."""

    def __init__(
        self, ctx: Pass, res: Reservation, short: dict[str, int], unfunded: set[tuple[str, int]]
    ) -> None:
        self.ctx = ctx
        self.res = res
        self.short_by = {d: v for d, v in short.items() if v > 0}
        self.unfunded = unfunded
        self.requeued: list[str] = []  # runs cut whole: back in line at their old place
        self.eligible = eligible(ctx, res)
        # what `choose` works on: a copy of what the eligible runs hold, cut by cut
        self.left: dict[str, int] = {}
        self._open: dict[str, list[Lease]] = {}
        self._counted: dict[str, int] = {}
        self._alive: set[str] = set()
        self._feasible: bool | None = None  # `feasible`'s answer, worked out once

    def _domain(self, node: str) -> str | None:
        n = self.ctx.topo.nodes.get(node)
        return n.domain if n is not None else None

    def _usable(self, node: str) -> bool:
        n = self.ctx.topo.nodes.get(node)
        return n is not None and n.usable

    def _in_scope(self, run: str, freeing: bool = False) -> list[int]:
        """The run's groups with Active GPUs in a short domain, among what it still holds (`freeing`:
        only those with some on a node that can take new work, so cutting them frees something)."""
        return sorted(
            {
                x.group
                for x in self._open[run]
                if x.role == Role.ACTIVE
                and self._domain(x.node) in self.left
                and (not freeing or self._usable(x.node))
            }
        )

    def short(self) -> bool:
        return any(v > 0 for v in self.left.values())

    def feasible(self) -> bool:
        """Whether everything the runs it may cut hold in the short domains covers the deficit (cheap:
        worth asking before what `choose` needs is worked out). Worked out once: it also sets up the
        copy `choose` cuts from, so ask it before `choose`, not after."""
        if self._feasible is not None:
            return self._feasible
        ctx = self.ctx
        self.left = dict(self.short_by)
        self._open = {run: ctx.open_leases(run) for run in self.eligible}
        self._counted = {run: ctx.counted(run) for run in self.eligible}
        self._alive = set(self.eligible)
        can: dict[str, int] = defaultdict(int)
        for run in self.eligible:
            for lease in self._open[run]:
                d = self._domain(lease.node)
                if d in self.left and lease.role != Role.BORROWED and self._usable(lease.node):
                    can[d] += lease.gpus  # a GPU on a cordoned node, freed, takes no new work
        self._feasible = all(can[d] >= v for d, v in self.left.items())
        return self._feasible

    def choose(self) -> list[Cut] | None:
        """Every cut the fixed order makes, worked out before any is made; None when the runs it may
        cut cannot clear the deficit together (then nobody is cut, §4.6). Once per Resolver: it cuts
        the copy `feasible` set up."""
        ctx = self.ctx
        if not self.feasible():
            return None
        cuts: list[Cut] = []
        eligible = sorted(self.eligible, key=ctx.rank, reverse=True)  # lowest-ranked first
        # (1) reclaim unfunded groups
        for run in eligible:
            for group in reversed(self._in_scope(run, freeing=True)):
                if self.short() and (run, group) in self.unfunded and run in self._alive:
                    cuts.append(self._cut_group(run, group, Closure.RECLAIM_UNFUNDED))
        # (2) drop spares
        for run in eligible:
            for lease in sorted(self._open[run], key=lambda x: (-x.group, x.node)):
                in_scope = self._domain(lease.node) in self.left and self._usable(lease.node)
                if self.short() and lease.role == Role.SPARE and in_scope:
                    cuts.append(self._end(run, (lease,), Closure.DROP_SPARE))
        # (3) shrink malleable runs by whole groups, highest index first, never below the floor
        for run in eligible:
            spec = ctx.specs.get(run)
            m = spec.spec.malleable if spec is not None else None
            if m is None:
                continue
            for group in reversed(self._in_scope(run, freeing=True)):
                mine = [x for x in self._open[run] if x.group == group]
                gpus = sum(x.gpus for x in mine if x.role == Role.ACTIVE)
                if not self.short() or self._counted[run] - gpus < m.minTotalGPUs:
                    continue
                cuts.append(
                    self._end(run, tuple(sorted(mine, key=lambda x: (x.role, x.node))), Closure.SHRINK)
                )
        # (4) the lottery, unless the fleet turned it off (`reservations.lottery: false`)
        k = 0
        seed = seed_for(self.res.run, ctx.now)
        while ctx.world.settings.lottery and self.short():
            cands = [
                (ctx.owner_of(run), run, group)
                for run in sorted(self.eligible)
                if run in self._alive
                for group in self._in_scope(run)
            ]
            if not cands:
                break
            run, group = draw(seed, k, cands)
            cuts.append(self._cut_group(run, group, Closure.RANDOM_PREEMPT, seed))
            k += 1
        return None if self.short() else cuts

    def _cut_group(self, run: str, group: int, kind: Closure, seed: str | None = None) -> Cut:
        """A group's end; a fixed-width run (or a malleable one pushed under its floor) goes whole."""
        spec = self.ctx.specs.get(run)
        m = spec.spec.malleable if spec is not None else None
        leases = self._open[run]
        group_gpus = sum(x.gpus for x in leases if x.group == group and x.role == Role.ACTIVE)
        whole = m is None or self._counted[run] - group_gpus < m.minTotalGPUs
        ending = sorted(
            (x for x in leases if whole or x.group == group), key=lambda x: (x.group, x.role, x.node, x.name)
        )
        return self._end(run, tuple(ending), kind, seed, whole)

    def _end(
        self, run: str, leases: tuple[Lease, ...], kind: Closure, seed: str | None = None, whole: bool = False
    ) -> Cut:
        """Take the leases out of the copy the cuts are chosen on, counting what they free."""
        for lease in leases:
            d = self._domain(lease.node)
            if lease.role != Role.BORROWED:
                if d in self.left and self._usable(lease.node):
                    self.left[d] -= lease.gpus
                if lease.role != Role.SPARE:
                    self._counted[run] -= lease.gpus
        gone = {id(x) for x in leases}
        self._open[run] = [x for x in self._open[run] if id(x) not in gone]
        if whole:
            self._alive.discard(run)
        return Cut(run, leases, kind, seed, whole)

    def apply(self, cuts: Iterable[Cut]) -> None:
        """Make the chosen cuts: end their leases, requeue the runs cut whole, say why on each run."""
        ctx = self.ctx
        for cut in cuts:
            if cut.seed is not None:
                self.res.seed = cut.seed  # published with the leases it ends (§4.6)
            for lease in cut.leases:
                ctx.close_lease(lease, cut.kind, cut.seed)
            ctx.resized(cut.run)
            if cut.whole:
                ctx.by_run[cut.run] = []
                self.requeued.append(cut.run)
                cause = reasons.requeued(reasons.closure_text(cut.kind, cut.seed), self.res.run)
                ctx.set_status(cut.run, cause, Phase.PENDING, cause=cause)
            elif cut.kind == Closure.SHRINK:
                ctx.set_status(cut.run, reasons.shrunk(ctx.allocated(cut.run)))
            elif cut.kind != Closure.DROP_SPARE:
                ctx.set_status(cut.run, reasons.shrunk(ctx.allocated(cut.run), self.res.run))

    def run(self) -> bool:
        """Choose the cuts and make them when they clear the deficit; True when they did."""
        cuts = self.choose()
        if cuts is None:
            return False
        self.apply(cuts)
        return True


def eligible(ctx: Pass, res: Reservation) -> set[str]:
    """Runs this reservation may cut now (§4.6): in its published conflict set for the notice period,
    Running, not started at this instant, and past their `minRuntime` protection."""
    warned_before = ctx.now - ctx.world.settings.notice
    protect = ctx.world.settings.min_runtime
    out: set[str] = set()
    for entry in res.conflicts:
        rec = ctx.records.get(entry.run)
        if (
            entry.since <= warned_before
            and rec is not None
            and rec.phase == Phase.RUNNING
            and entry.run not in ctx.started
            and (rec.started or 0) < ctx.now  # not started at this instant (by an earlier pass at it)
            and (rec.started or 0) + protect <= ctx.now
        ):
            out.add(entry.run)
    return out


__all__ = ["Cut", "Resolver", "draw", "eligible", "replay", "seed_for"]
