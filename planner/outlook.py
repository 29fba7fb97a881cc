"""Outlook: when each waiting reservation can start and whom its activation may cut (§4.5, §4.6).

One walk over the reservations in line order gives both, so an ETA and its conflict set always
agree: the ETA is the first instant the runs the activation may then cut (warned for the notice
period and past `minRuntime`) cover its deficit; the conflict set is who the resolver could cut
at that instant, structural cuts certain and the lottery's chance from `odds`. Also the remedies
that can act on a capacity deficit, with the GPUs each can free. Cuts nothing itself.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter

from planner import odds
from planner.context import Pass
from planner.reasons import CAPACITY_REMEDIES, Phase, Remedy, Role
from planner.world import ConflictEntry
from schemas.run import Malleable

Group = tuple[str, int]  # (run, group index)


class AtRisk:
    """Running groups per domain, as the pass leaves them, each with the GPUs a cut of it would free
    for new work (none on a cordoned node; read only)."""

    def __init__(self, ctx: Pass) -> None:
        self.ctx = ctx
        self.active: dict[str, dict[Group, int]] = defaultdict(lambda: defaultdict(int))
        self.spares: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.run_domains: dict[str, set[str]] = defaultdict(set)
        self._held: dict[str, dict[str, int]] = {}
        self._structural: dict[str, dict[str, int]] = {}
        for lease in ctx.leases:
            if not lease.open or lease.role == Role.BORROWED:
                continue
            node = ctx.topo.nodes.get(lease.node)
            if node is None:
                continue
            gpus = lease.gpus if node.usable else 0
            if lease.role == Role.ACTIVE:
                self.active[node.domain][(lease.run, lease.group)] += gpus  # still a lottery candidate
            elif gpus:
                self.spares[node.domain][lease.run] += gpus
            self.run_domains[lease.run].add(node.domain)

    def held_in(self, domain: str) -> dict[str, int]:
        """Run -> its Active and Spare GPUs in the domain (worked out once per domain)."""
        hit = self._held.get(domain)
        if hit is None:
            hit = defaultdict(int)
            for (run, _), gpus in self.active.get(domain, {}).items():
                hit[run] += gpus
            for run, gpus in self.spares.get(domain, {}).items():
                hit[run] += gpus
            self._held[domain] = hit
        return hit

    def cuttable_in(self, domain: str) -> dict[str, int]:
        """Run -> GPUs an activation may free in the domain: all it holds there with the lottery;
        without it (`reservations.lottery: false`) only what the structural steps take: its unfunded
        groups (all of a fixed-width run with one), its spares and its room above its minimum."""
        if self.ctx.world.settings.lottery:
            return self.held_in(domain)
        hit = self._structural.get(domain)
        if hit is None:
            held = self.held_in(domain)
            hit = defaultdict(int)
            for (run, group), gpus in self.active.get(domain, {}).items():
                if (run, group) in self.ctx.book.unfunded:
                    hit[run] += held[run] if self._malleable(run) is None else gpus
            for run, gpus in self.spares.get(domain, {}).items():
                hit[run] += gpus
            for run, room in self._shrink_room(domain).items():
                hit[run] += room
            hit = defaultdict(int, {run: min(gpus, held[run]) for run, gpus in hit.items() if gpus})
            self._structural[domain] = hit
        return hit

    def remedies(self, short: dict[str, int]) -> tuple[tuple[Remedy, ...], tuple[int, ...]]:
        """§4.5's capacity remedies that something in the short domains can act on, each with the
        GPUs it can free there; the lottery last, with the deficit the others leave (not offered
        when the fleet turned it off)."""
        freed = dict.fromkeys(CAPACITY_REMEDIES, 0)
        left = 0
        for d, gap in short.items():
            reclaim = sum(v for g, v in self.active.get(d, {}).items() if g in self.ctx.book.unfunded)
            spare = sum(self.spares.get(d, {}).values())
            shrink = self._shrinkable_in(d)
            freed[Remedy.RECLAIM] += reclaim
            freed[Remedy.SPARES] += spare
            freed[Remedy.SHRINK] += shrink
            left += max(0, gap - reclaim - spare - shrink)
        freed[Remedy.LOTTERY] = left
        lottery = self.ctx.world.settings.lottery
        kinds = tuple(r for r in CAPACITY_REMEDIES if (r == Remedy.LOTTERY and lottery) or freed[r] > 0)
        return kinds, tuple(freed[r] for r in kinds)

    def _shrinkable_in(self, domain: str) -> int:
        """GPUs malleable runs can give up in a domain by whole groups, highest index first, staying
        at or above their minimum (funded or not: the resolver shrinks before the lottery)."""
        return sum(self._shrink_room(domain).values())

    def _shrink_room(self, domain: str) -> dict[str, int]:
        """Malleable run -> the GPUs it can give up in the domain (`_shrinkable_in`, run by run)."""
        by_run: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for (run, group), gpus in self.active.get(domain, {}).items():
            by_run[run].append((group, gpus))
        out: dict[str, int] = {}
        for run, groups in by_run.items():
            m = self._malleable(run)
            if m is None:
                continue
            room = self.ctx.counted(run) - m.minTotalGPUs
            out[run] = 0
            for _, gpus in sorted(groups, reverse=True):
                if gpus <= room:
                    out[run] += gpus
                    room -= gpus
        return out

    def _malleable(self, run: str) -> Malleable | None:
        spec = self.ctx.specs.get(run)
        return spec.spec.malleable if spec is not None else None


def cuttable_at(ctx: Pass, warned: dict[str, int], run: str) -> int:
    """When a reservation's activation may first cut a run: once the run has been in its published
    conflict set (`warned`: run -> since) for the notice period, counted from now for a run not yet
    in it, and its `minRuntime` protection is over (§4.6)."""
    settings = ctx.world.settings
    rec = ctx.records.get(run)
    started = rec.started if rec is not None and rec.started is not None else ctx.now
    return max(warned.get(run, ctx.now) + settings.notice, started + settings.min_runtime)


@dataclass(frozen=True, slots=True)
class Entry:
    """A waiting reservation that may cut when it activates: its deficit per domain, the GPUs it will
    claim per domain once running, the earliest its forecast allows (basis + notice, or 10 s past
    the window it was aligned to), and for one funded only once a window opens, that window."""

    run: str
    short: dict[str, int]
    claims: dict[str, int]
    earliest: int
    window: int | None = None


@dataclass(slots=True)
class Outlook:
    eta: int | None
    members: dict[str, float]  # run -> probability the activation cuts it


def outlook(ctx: Pass, entries: Sequence[Entry], risk: AtRisk, with_odds: bool = True) -> dict[str, Outlook]:
    """ETA and conflict set of each reservation, in line order. A reservation ahead takes what it
    will cut first, and its run, once started, can be cut by those behind only after its own notice
    and `minRuntime`. The ETA is None when nothing running can clear the deficit and nothing ahead
    will free it; a window-funded one's ETA is its window's. Without `with_odds` the members are
    found (every lottery candidate has a chance) but their odds are not worked out."""
    walk = _Walk(ctx, risk, with_odds)
    return {entry.run: walk.step(entry) for entry in entries}


class _Walk:
    """What the reservations already walked will have cut, and what their runs free later."""

    def __init__(self, ctx: Pass, risk: AtRisk, with_odds: bool) -> None:
        self.ctx, self.risk, self.with_odds = ctx, risk, with_odds
        settings = ctx.world.settings
        self.delay = max(settings.notice, settings.min_runtime)  # before a new run may be cut
        self.gone: set[str] = set()  # runs cut for certain by a reservation walked
        self.gone_groups: set[Group] = set()
        self.taken: dict[str, int] = defaultdict(int)  # running GPUs the walked take, per domain
        # domain -> (cuttable from, GPUs, the best rank among the runs its activation may cut), by time
        self.later: dict[str, list[tuple[int, int, tuple[int, str] | None]]] = defaultdict(list)
        self.unfunded_in = {d: [g for g in gs if g in ctx.book.unfunded] for d, gs in risk.active.items()}
        self.shrinkable_in = {d: {r for r, _ in gs if _shrinkable(ctx, r)} for d, gs in risk.active.items()}

    def step(self, entry: Entry) -> Outlook:
        warned = {e.run: e.since for e in self.ctx.reservations[entry.run].conflicts}
        at = (
            max(entry.earliest, entry.window + 10) if entry.window is not None else self._cover(entry, warned)
        )
        if at is None:
            return Outlook(None, {})
        members = self._members(entry, warned, at)
        victims = min((self.ctx.rank(run) for run in members), default=None)
        for d, claim in entry.claims.items() if self.ctx.world.settings.lottery else ():
            # only the lottery cuts a funded run
            insort(self.later[d], (at + self.delay, claim, victims), key=itemgetter(0))
        return Outlook(at, members)

    def _cover(self, entry: Entry, warned: dict[str, int]) -> int | None:
        """The first instant what may be cut covers the deficit in every short domain (None: never)."""
        when = entry.earliest
        for d, gap in entry.short.items():
            held = self.risk.cuttable_in(d)
            pool = sorted(
                (cuttable_at(self.ctx, warned, r), gpus) for r, gpus in held.items() if r not in self.gone
            )
            skip = self.taken.get(d, 0)  # the earliest-cuttable GPUs go to reservations ahead
            kept: list[tuple[int, int]] = []
            for t, gpus in pool:
                use = min(skip, gpus)
                skip -= use
                if gpus > use:
                    kept.append((t, gpus - use))
            # a reservation ahead frees its run's GPUs to those behind only once it is cuttable, and
            # only to a run ahead of every run that activation may requeue: a victim keeps its place
            # in line, so it would take them back first (an ETA counted on them would recede)
            mine = self.ctx.rank(entry.run)
            later = (
                (t, gpus) for t, gpus, victims in self.later.get(d, ()) if victims is None or victims > mine
            )
            got = 0  # in time order (kept is sorted, `later` kept sorted by time): the first that covers
            for t, gpus in heapq.merge(kept, later, key=itemgetter(0)):
                got += gpus
                if got >= gap:
                    when = max(when, t)
                    break
            else:
                return None
        return when

    def _members(self, entry: Entry, warned: dict[str, int], at: int) -> dict[str, float]:
        """Who the resolver could cut at `at`, in its fixed order, each with a probability."""
        ctx, risk, short = self.ctx, self.risk, entry.short
        members: dict[str, float] = {}
        deficit = dict(short)

        seen: dict[str, bool] = {}  # nothing `alive` reads moves before this walk step ends

        def alive(run: str) -> bool:
            hit = seen.get(run)
            if hit is None:
                rec = ctx.records.get(run)
                hit = seen[run] = (
                    run not in self.gone
                    and rec is not None
                    and rec.phase == Phase.RUNNING
                    and cuttable_at(ctx, warned, run) <= at
                )
            return hit

        def cut(freed: dict[str, int], run: str) -> None:
            for d, gpus in freed.items():
                if d in deficit:
                    deficit[d] -= gpus
            members[run] = 1.0

        def short_left() -> bool:
            return any(v > 0 for v in deficit.values())

        # (1) unfunded groups, lowest-ranked first; a fixed-width run goes whole
        unfunded = {g for d in short for g in self.unfunded_in.get(d, ()) if alive(g[0])}
        for run, group in sorted(
            unfunded - self.gone_groups, key=lambda g: (ctx.rank(g[0]), g[1]), reverse=True
        ):
            if not short_left():
                break
            if run not in self.gone and (run, group) not in self.gone_groups:
                cut(self._freed(run, group), run)
        # (2) spares, (3) shrink
        for run in sorted({r for d in short for r in risk.spares[d] if alive(r)}, key=ctx.rank, reverse=True):
            if not short_left():
                break
            cut({d: risk.spares[d][run] for d in short if risk.spares[d].get(run)}, run)
        shrinkable = {r for d in short for r in self.shrinkable_in.get(d, ()) if alive(r)}
        for run in sorted(shrinkable, key=ctx.rank, reverse=True):
            if not short_left():
                break
            m = ctx.specs[run].spec.malleable
            assert m is not None
            room = ctx.counted(run) - m.minTotalGPUs
            cut(
                {d: min(room, sum(v for (r, _), v in risk.active[d].items() if r == run)) for d in short}, run
            )
        structural = set(members)  # cut for certain before any draw
        # (4) the lottery, when the fleet has it and what it may draw from covers what is left
        need = {d: v for d, v in deficit.items() if v > 0}
        if need and ctx.world.settings.lottery and all(self._pool(d, alive) >= need[d] for d in need):
            for run, p in self._lottery(entry.run, need, alive).items():
                members[run] = max(members.get(run, 0.0), p)
            for d in need:
                self.taken[d] += need[d]
        # what the lottery takes is counted in `taken`, not by run: a run it is sure to draw is not
        # also left out of what those behind may cut (that would count its GPUs twice)
        self.gone |= structural
        return members

    def _pool(self, domain: str, alive: Callable[[str], bool]) -> int:
        active = self.risk.active[domain].items()
        return (
            sum(v for (r, g), v in active if alive(r) and (r, g) not in self.gone_groups) - self.taken[domain]
        )

    def _freed(self, run: str, group: int) -> dict[str, int]:
        """GPUs per domain a cut of this group frees (of the whole run, for a fixed-width one)."""
        spec = self.ctx.specs.get(run)
        whole = spec is None or spec.spec.malleable is None
        freed: dict[str, int] = defaultdict(int)
        for d in self.risk.run_domains[run]:
            for (r, g), gpus in self.risk.active[d].items():
                if r == run and (whole or g == group):
                    freed[d] += gpus
                    self.gone_groups.add((r, g))
        return freed

    def _lottery(self, key: str, need: dict[str, int], alive: Callable[[str], bool]) -> dict[str, float]:
        """The chance the lottery cuts each running run with Active groups in the short domains."""
        ctx, risk = self.ctx, self.risk
        candidates = tuple(
            odds.Candidate(r, g, d, v)
            for r, g, d, v in sorted(
                {
                    (r, g, d, v)
                    for d in need
                    for (r, g), v in risk.active[d].items()
                    if alive(r) and (r, g) not in self.gone_groups
                }
            )
        )
        runs = {c.run for c in candidates}
        if not self.with_odds:
            return dict.fromkeys(runs, 0.01)
        floors: dict[str, int | None] = {}
        for run in runs:
            spec = ctx.specs.get(run)
            m = spec.spec.malleable if spec is not None else None
            floors[run] = m.minTotalGPUs if m is not None else None
        lottery = odds.Lottery(
            candidates,
            need,
            {run: ctx.owner_of(run) for run in runs},
            {run: ctx.counted(run) for run in runs},
            floors,
        )
        return odds.cut_odds(lottery, key)


def _shrinkable(ctx: Pass, run: str) -> bool:
    spec = ctx.specs.get(run)
    m = spec.spec.malleable if spec is not None else None
    return m is not None and ctx.counted(run) - m.stepGPUs >= m.minTotalGPUs


def warn(ctx: Pass, sets: dict[str, Outlook]) -> list[str]:
    """Add each reservation's newly found members to its conflict set, warned from now, dropping
    nobody: with a notice period of zero, a member is cuttable from the instant it is warned, so a
    reservation due now may cut it later in the same pass (the pass's last word is `publish`).
    Returns the reservations that warned someone new."""
    grown: list[str] = []
    for key, seen in sets.items():
        res = ctx.reservations[key]
        known = {e.run for e in res.conflicts}
        new = [ConflictEntry(run, p, ctx.now) for run, p in sorted(seen.members.items()) if run not in known]
        if new:
            res.conflicts = sorted([*res.conflicts, *new], key=lambda e: e.run)
            grown.append(key)
    return grown


def publish(ctx: Pass, sets: dict[str, Outlook]) -> None:
    """Write each reservation's conflict set, keeping `since` for members already warned."""
    for key, seen in sets.items():
        res = ctx.reservations[key]
        before = {e.run: e.since for e in res.conflicts}
        res.conflicts = [
            ConflictEntry(run, p, before.get(run, ctx.now)) for run, p in sorted(seen.members.items())
        ]
