"""Forecast: where a waiting run would go (its scope), how short it is there, and who is at risk.

Computes intended slices, deficits and holds for reservations in line, then the conflict sets:
running runs that activation could cut, with an estimated probability. Cuts nothing itself.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from planner import odds
from planner.context import Pass
from planner.pack import Source, domain_sources, funded_nodes, unheld
from planner.topology import Members, Topology
from planner.world import ConflictEntry

REMEDY_RECLAIM = "Reclaim unfunded capacity in scope"
REMEDY_SPARES = "Drop spares in scope"
REMEDY_SHRINK = "Shrink elastic runs by step size"
REMEDY_LOTTERY = "Run fair lottery if deficit remains"


@dataclass(slots=True)
class Scope:
    claims: dict[str, int] = field(default_factory=dict)  # domain -> GPUs the run would claim there
    short: dict[str, int] = field(default_factory=dict)  # domain -> GPUs missing there now
    nodes: list[str] = field(default_factory=list)
    unplaceable: int = 0
    view: Members | None = None  # the member nodes the scope was drawn from

    @property
    def deficit(self) -> int:
        return sum(self.short.values()) + self.unplaceable


def scope(
    topo: Topology,
    srcs: list[Source],
    sizes: list[int],
    spares: int,
    held: dict[str, int],
    single: bool,
    keep: tuple[str, ...] = (),
    funding: list[tuple[Source, int]] | None = None,
) -> Scope:
    """Pack over all capacity the run's funding can pay for, preferring domains with free GPUs.

    Domains are tried by most available (free minus held), then most capacity, then name; the
    capacity-ordered list is cached per set of envelopes, so a long line of reservations stays cheap.
    `keep`: the domains the reservation named last pass, tried first while the funding still reaches
    them and they can hold a group: an intended slice does not wander because runs behind it in
    line filled other domains, so its holds, and the conflict set's notice, stay where they were.
    `funding`: (source, GPUs) the reservation holds; a group then goes only where those GPUs reach
    (unless no domain can pay for it, when capacity alone decides as without `funding`).
    """
    view = topo.member_view(funded_nodes(srcs))
    cap0 = view.cap
    free = topo.member_free(view)
    avail = unheld(free, held)
    order = _ByAvail(avail, cap0)  # then the rest by capacity
    claimed: dict[str, int] = {}
    out = Scope()
    used: list[str] = []
    # kept domains are tried in the order a new scope would try them
    kept = sorted(
        (d for d in keep if d in cap0),
        key=lambda d: (0, -avail[d], -cap0[d], d) if d in avail else (1, 0, -cap0[d], d),
    )
    purse = _Purse(topo, funding) if funding is not None else None

    def choose(want: int, pays: Callable[[str, int], bool]) -> str | None:
        choice = next((d for d in used if cap0[d] - claimed.get(d, 0) >= want and pays(d, want)), None)
        if choice is not None or (single and used):
            return choice
        choice = next((d for d in kept if d not in claimed and cap0[d] >= want and pays(d, want)), None)
        if choice is not None:
            return choice
        # domains already used cannot take it (checked above), so the static order is still right
        choice = next((d for d in order if d not in claimed and cap0[d] >= want and pays(d, want)), None)
        if choice is None:
            choice = next(
                (
                    d
                    for d in view.by_cap
                    if d not in avail and d not in claimed and cap0[d] >= want and pays(d, want)
                ),
                None,
            )
        return choice

    for size in sizes:
        want = size + spares
        choice = choose(want, purse.pays) if purse is not None else None
        if choice is None:
            choice = choose(want, _anywhere)
        elif purse is not None:
            purse.spend(choice, want)
        if choice is None:
            out.unplaceable += want
            continue
        if choice not in used:
            used.append(choice)
        claimed[choice] = claimed.get(choice, 0) + want
    out.claims = claimed
    out.view = view
    for d, claim in claimed.items():
        short = claim - avail.get(d, 0)
        if short > 0:
            out.short[d] = short
    out.nodes = slice_nodes(topo, view, claimed)
    return out


class _ByAvail:
    """Domains by most available, then most capacity, then name: drawn from a heap only as far as
    a scan goes (a scope mostly stops at the first few), and remembered for the next scan."""

    def __init__(self, avail: dict[str, int], cap: dict[str, int]) -> None:
        self._heap = [(-a, -cap[d], d) for d, a in avail.items()]
        heapq.heapify(self._heap)
        self._sorted: list[str] = []

    def __iter__(self) -> Iterator[str]:
        done, heap = self._sorted, self._heap
        i = 0
        while True:
            if i < len(done):
                yield done[i]
            elif heap:
                d = heapq.heappop(heap)[2]
                done.append(d)
                yield d
            else:
                return
            i += 1


def _anywhere(domain: str, gpus: int) -> bool:
    return True


class _Purse:
    """The GPUs a reservation's held funding still pays for as its scope claims groups, per source."""

    def __init__(self, topo: Topology, funding: list[tuple[Source, int]]) -> None:
        self.topo = topo
        self.sources = [src for src, _ in funding]
        self.left = [gpus for _, gpus in funding]
        self._reach: dict[str, list[int]] = {}

    def reach(self, domain: str) -> list[int]:
        hit = self._reach.get(domain)
        if hit is None:
            hit = self._reach[domain] = [i for i, _ in domain_sources(self.topo, self.sources, domain)]
        return hit

    def pays(self, domain: str, gpus: int) -> bool:
        return sum(self.left[i] for i in self.reach(domain)) >= gpus

    def spend(self, domain: str, gpus: int) -> None:
        for i in self.reach(domain):
            n = min(self.left[i], gpus)
            self.left[i] -= n
            gpus -= n


def slice_nodes(topo: Topology, view: Members, claims: dict[str, int]) -> list[str]:
    """The nodes a scope would take: per claimed domain, usable members by most free, then name.

    Called again when the pass ends, so the intended slice reflects what runs started behind the
    reservation left free (and planning again finds the same slice).
    """
    nodes: list[str] = []
    for d, claim in claims.items():
        left = claim
        if d in view.full:
            members = topo.by_free(d)
        else:
            members = sorted((n for n in view.by_domain[d] if n.usable), key=lambda n: (-n.free, n.name))
        for node in members:
            if left <= 0:
                break
            nodes.append(node.name)
            left -= node.gpus
    return nodes


def hold(held: dict[str, int], sc: Scope) -> None:
    """A fully funded reservation keeps the free GPUs of its scope from runs behind it in line."""
    for d, claim in sc.claims.items():
        held[d] = held.get(d, 0) + claim - sc.short.get(d, 0)


@dataclass(slots=True)
class _Grp:
    run: str
    index: int
    domain: str
    gpus: int


class AtRisk:
    """Running groups per domain, for remedies and conflict sets (read only: `plan` reuses it for both)."""

    def __init__(self, ctx: Pass) -> None:
        self.ctx = ctx
        self.active: dict[str, dict[tuple[str, int], int]] = defaultdict(lambda: defaultdict(int))
        self.spares: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.run_domains: dict[str, set[str]] = defaultdict(set)
        for lease in ctx.leases:
            if not lease.open or lease.role == "Borrowed":
                continue
            node = ctx.topo.nodes.get(lease.node)
            if node is None:
                continue
            if lease.role == "Active":
                self.active[node.domain][(lease.run, lease.group)] += lease.gpus
            else:
                self.spares[node.domain][lease.run] += lease.gpus
            self.run_domains[lease.run].add(node.domain)

    def remedies(self, short: dict[str, int]) -> list[str]:
        out: list[str] = []
        book, specs = self.ctx.book, self.ctx.specs
        groups = [g for d in short for g in self.active[d]]
        if any(g in book.unfunded for g in groups):
            out.append(REMEDY_RECLAIM)
        if any(self.spares[d] for d in short):
            out.append(REMEDY_SPARES)
        if any(_shrinkable(self.ctx, run) for run, _ in groups if specs.get(run) is not None):
            out.append(REMEDY_SHRINK)
        out.append(REMEDY_LOTTERY)
        return out


def _shrinkable(ctx: Pass, run: str) -> bool:
    spec = ctx.specs.get(run)
    m = spec.spec.malleable if spec is not None else None
    return m is not None and ctx.allocated(run) - m.stepGPUs >= m.minTotalGPUs


def conflict_sets(
    ctx: Pass, order: list[tuple[str, dict[str, int], int]], risk: AtRisk
) -> dict[str, dict[str, float]]:
    """Per reservation (in activation order): runs its activation could cut, with a probability.

    Structural cuts (unfunded, spares, shrink) are certain; the lottery's chance comes from `odds`
    (exact when the draws can be enumerated, sampled otherwise). Later reservations see the
    earlier ones' cuts. `risk`: the running groups as the pass left them (`AtRisk`).
    """
    gone: set[str] = set()
    gone_groups: set[tuple[str, int]] = set()
    taken: dict[str, int] = defaultdict(int)  # at-risk GPUs earlier reservations will take per domain
    out: dict[str, dict[str, float]] = {}
    protect = ctx.world.settings.min_runtime
    # per domain, the groups left unfunded and the runs that could shrink: fixed while this runs
    unfunded_in = {d: [g for g in gs if g in ctx.book.unfunded] for d, gs in risk.active.items()}
    shrinkable_in = {d: {r for r, _ in gs if _shrinkable(ctx, r)} for d, gs in risk.active.items()}
    for key, short, eta in order:
        members: dict[str, float] = {}
        deficit = dict(short)
        at = max(eta, ctx.now)  # a reservation past its ETA activates at a later pass: now

        def alive(run: str, at: int = at) -> bool:
            rec = ctx.records.get(run)
            return (
                run not in gone
                and rec is not None
                and rec.phase == "Running"
                and (rec.started or 0) + protect <= at
            )

        def cut(
            run: str,
            group: int | None,
            freed_domains: dict[str, int],
            deficit: dict[str, int] = deficit,
            members: dict[str, float] = members,
        ) -> None:
            for d, gpus in freed_domains.items():
                if d in deficit:
                    deficit[d] -= gpus
            members[run] = 1.0

        # (1) unfunded groups, lowest-ranked first; a fixed-width run goes whole
        unfunded = sorted(
            {g for d in short for g in unfunded_in.get(d, ()) if alive(g[0]) and g not in gone_groups},
            key=lambda g: (ctx.rank(g[0]), g[1]),
            reverse=True,
        )
        for run, group in unfunded:
            if not any(v > 0 for v in deficit.values()):
                break
            if run in gone or (run, group) in gone_groups:
                continue
            cut(run, group, _freed(risk, ctx, run, group, gone_groups))
        # (2) spares, (3) shrink
        for run in sorted({r for d in short for r in risk.spares[d] if alive(r)}, key=ctx.rank, reverse=True):
            if not any(v > 0 for v in deficit.values()):
                break
            cut(run, None, {d: risk.spares[d][run] for d in short if risk.spares[d].get(run)})
        for run in sorted(
            {r for d in short for r in shrinkable_in.get(d, ()) if alive(r)}, key=ctx.rank, reverse=True
        ):
            if not any(v > 0 for v in deficit.values()):
                break
            if _shrinkable(ctx, run):
                spec = ctx.specs[run]
                m = spec.spec.malleable
                assert m is not None
                room = ctx.allocated(run) - m.minTotalGPUs
                freed = {
                    d: min(room, sum(v for (r, _), v in risk.active[d].items() if r == run)) for d in short
                }
                cut(run, None, freed)
        # (4) lottery
        need = {d: v for d, v in deficit.items() if v > 0}
        if need:
            pool = {
                d: sum(v for (r, g), v in risk.active[d].items() if alive(r) and (r, g) not in gone_groups)
                - taken[d]
                for d in need
            }
            if all(pool[d] >= need[d] for d in need):
                for run, p in _lottery_odds(ctx, risk, key, need, alive, gone_groups).items():
                    members[run] = max(members.get(run, 0.0), p)
                for d in need:
                    taken[d] += need[d]
        for run, p in members.items():
            if p >= 1.0:
                gone.add(run)
        out[key] = members
    return out


def _freed(
    risk: AtRisk, ctx: Pass, run: str, group: int, gone_groups: set[tuple[str, int]]
) -> dict[str, int]:
    spec = ctx.specs.get(run)
    whole = spec is None or spec.spec.malleable is None
    freed: dict[str, int] = defaultdict(int)
    for d in risk.run_domains[run]:
        for (r, g), gpus in risk.active[d].items():
            if r == run and (whole or g == group):
                freed[d] += gpus
                gone_groups.add((r, g))
    return freed


def _lottery_odds(
    ctx: Pass,
    risk: AtRisk,
    key: str,
    need: dict[str, int],
    alive: Callable[[str], bool],
    gone_groups: set[tuple[str, int]],
) -> dict[str, float]:
    """The chance the lottery cuts each running run with Active groups in the short domains."""
    candidates = tuple(
        odds.Candidate(r, g, d, v)
        for r, g, d, v in sorted(
            {
                (r, g, d, v)
                for d in need
                for (r, g), v in risk.active[d].items()
                if alive(r) and (r, g) not in gone_groups
            }
        )
    )
    runs = {c.run for c in candidates}
    floors: dict[str, int | None] = {}
    for run in runs:
        spec = ctx.specs.get(run)
        m = spec.spec.malleable if spec is not None else None
        floors[run] = m.minTotalGPUs if m is not None else None
    lottery = odds.Lottery(
        candidates,
        need,
        {run: ctx.owner_of(run) for run in runs},
        {run: ctx.allocated(run) for run in runs},
        floors,
    )
    return odds.cut_odds(lottery, key)


def publish(ctx: Pass, sets: dict[str, dict[str, float]]) -> None:
    """Write each reservation's conflict set, keeping `since` for members already warned."""
    for key, members in sets.items():
        res = ctx.reservations[key]
        before = {e.run: e.since for e in res.conflicts}
        res.conflicts = [
            ConflictEntry(run, p, before.get(run, ctx.now)) for run, p in sorted(members.items())
        ]
