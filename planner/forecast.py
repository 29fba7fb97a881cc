"""Forecast: where a waiting run would go (its scope), how short it is there, when it can start, and
who is at risk.

Draws intended slices by the pack rules over capacity, the deficit in them, the holds of funded
reservations, the ETA (§4.5: notice, `minRuntime`, windows; `None` when nothing known makes the run
fundable), the remedies with the GPUs each can free, and the conflict sets with their
probabilities. Cuts nothing and starts nothing itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from planner import odds
from planner.accounting import LOAN
from planner.context import Pass
from planner.pack import Source, unheld
from planner.reasons import CAPACITY_REMEDIES, Phase, Remedy, Role
from planner.topology import Members, Topology
from planner.world import ConflictEntry, Payer


@dataclass(slots=True)
class Scope:
    """Where a waiting run's groups would go, and what is missing there now."""

    claims: dict[str, int] = field(default_factory=dict)  # domain -> GPUs the run would claim there
    groups: list[tuple[str, int]] = field(default_factory=list)  # (domain, GPUs) per group, in order
    short: dict[str, int] = field(default_factory=dict)  # domain -> GPUs missing there now
    nodes: list[str] = field(default_factory=list)
    unplaceable: int = 0  # GPUs (groups with spares) no domain its funding reaches can hold
    unpaid: bool = False  # some group goes where capacity is but its held funding does not reach
    view: Members | None = None  # the member nodes the scope was drawn from
    payer: Source | None = None  # the first source paying for the scope

    @property
    def deficit(self) -> int:
        return sum(self.short.values()) + self.unplaceable


def scope(
    topo: Topology,
    sources: Sequence[Source],
    rooms: Sequence[int],
    sizes: list[int] | None,
    total: int,
    spares: int,
    held: dict[str, int],
    single: bool,
    keep: tuple[str, ...] = (),
    borrow: int | None = None,
) -> Scope:
    """The pack rules over all capacity the sources can pay for (§4.5 "scope").

    `rooms`: what each source pays toward this run (the funding a reservation holds, or what a
    window will fund). Each group goes to a domain already claimed, else the domain whose funding
    is nearest in cover order (§4.3), then — to keep an intended slice where it was — the domains the
    reservation named before (`keep`, in the order it claimed them), then most available GPUs (free
    less `held`), most capacity, key. Drawn again from its own domains, a scope is the same. A group its funding cannot pay for anywhere it fits goes where capacity alone allows
    (`unpaid`); one that fits nowhere is `unplaceable`. `sizes` None: chunks formed while claiming.
    """
    view = topo.member_view(tuple(s.nodes for s, r in zip(sources, rooms, strict=True) if r > 0))
    if not view.cap:
        view = topo.member_view(tuple(s.nodes for s in sources))
    cap = view.cap
    avail = unheld(topo.member_free(view), held)
    kept = {d: i for i, d in enumerate(keep)}
    purse = _Purse(topo, sources, rooms, borrow)
    out = Scope(view=view)
    claimed: dict[str, int] = {}

    def order(d: str) -> tuple[int, int, int, str]:
        return (kept.get(d, len(kept)), -avail.get(d, 0), -cap[d], d)

    def room_in(d: str) -> int:
        return cap[d] - claimed.get(d, 0)

    def choose(want: int, chunk: bool) -> str | None:
        """The domain for a group of `want` GPUs (a chunk: at least one), with its spares."""
        need = (1 if chunk else want) + spares

        for d in claimed:
            if room_in(d) >= need and purse.pays(d, need):
                return d
        if single and claimed:
            return None

        def eligible(d: str) -> bool:
            return d in cap and d not in claimed and room_in(d) >= need

        for d in purse.nearest(need, order, eligible):  # a chunk ranks by its first GPU
            return d
        fits = sorted((d for d in cap if d not in claimed and room_in(d) >= need), key=order)
        if fits:
            out.unpaid = True
            return fits[0]
        return None

    left = total
    queue = list(sizes) if sizes is not None else None
    whole = total + spares * (len(sizes) if sizes is not None else 1)
    while left > 0:
        want = min(queue.pop(0), left) if queue else left
        if single and not claimed:  # the one domain must hold every group
            d = choose(whole - spares, False)
        else:
            d = choose(want, sizes is None)
        if d is None:
            out.unplaceable += left + spares * (len(queue) + 1 if queue is not None else 1)
            break
        if sizes is None:  # a chunk: as much as the domain holds and its funding pays
            want = min(want, room_in(d) - spares, max(1, purse.payable(d) - spares))
        claimed[d] = claimed.get(d, 0) + want + spares
        out.groups.append((d, want))
        payer = purse.spend(d, want + spares)
        if out.payer is None:
            out.payer = payer
        left -= want
    out.claims = claimed
    for d, claim in claimed.items():
        short = claim - avail.get(d, 0)
        if short > 0:
            out.short[d] = short
    out.nodes = slice_nodes(topo, view, claimed)
    return out


class _Purse:
    """What each source still pays toward the scope, spent in cover order per domain it reaches."""

    def __init__(
        self, topo: Topology, sources: Sequence[Source], rooms: Sequence[int], borrow: int | None
    ) -> None:
        self.topo = topo
        self.sources = sources
        self.left = [max(0, r) for r in rooms]
        self.borrow = borrow  # GPUs left to borrow from sponsors (None: no limit)
        self._reach: dict[str, list[int]] = {}

    def reach(self, domain: str) -> list[int]:
        hit = self._reach.get(domain)
        if hit is None:
            hit = self._reach[domain] = [
                i for i, s in enumerate(self.sources) if domain in (s.reach or self.topo.coverage(s.nodes))
            ]
        return hit

    def _share(self, i: int, loans: int) -> int:
        n = self.left[i]
        if self.sources[i].category == LOAN and self.borrow is not None:
            n = min(n, max(0, self.borrow - loans))
        return n

    def pays(self, domain: str, gpus: int) -> bool:
        paid = loans = 0
        for i in self.reach(domain):
            n = self._share(i, loans)
            if self.sources[i].category == LOAN:
                loans += n
            paid += n
            if paid >= gpus:
                return True
        return False

    def payable(self, domain: str) -> int:
        paid = loans = 0
        for i in self.reach(domain):
            n = self._share(i, loans)
            if self.sources[i].category == LOAN:
                loans += n
            paid += n
        return paid

    def spend(self, domain: str, gpus: int) -> Source | None:
        first = None
        for i in self.reach(domain):
            if gpus <= 0:
                break
            n = min(self._share(i, 0), gpus)
            if n <= 0:
                continue
            self.left[i] -= n
            gpus -= n
            if self.sources[i].category == LOAN and self.borrow is not None:
                self.borrow -= n
            if first is None:
                first = self.sources[i]
        return first

    def nearest(
        self, target: int, order: Callable[[str], tuple[int, int, int, str]], eligible: Callable[[str], bool]
    ) -> Iterator[str]:
        """Eligible domains by the source at which what the sources pay there first covers `target`
        GPUs, then by `order` (lazily: the best of a rank first, the rest sorted only if asked for)."""
        own: dict[str, int] = defaultdict(int)
        loans: dict[str, int] = defaultdict(int)
        done: set[str] = set()
        reach_of = self.topo.coverage
        for i, src in enumerate(self.sources):
            room = self.left[i]
            if room <= 0:
                continue
            loan = src.category == LOAN
            batch = []
            for d in src.reach or reach_of(src.nodes):
                if d in done:
                    continue
                if loan:
                    loans[d] += room
                    paid = own[d] + (loans[d] if self.borrow is None else min(loans[d], self.borrow))
                else:
                    own[d] += room
                    paid = own[d] + (loans[d] if self.borrow is None else min(loans[d], self.borrow))
                if paid >= target:
                    done.add(d)
                    if eligible(d):
                        batch.append(d)
            if batch:
                best = min(batch, key=order)
                yield best
                yield from sorted((d for d in batch if d != best), key=order)


def fits_empty(largest: list[int], sizes: list[int] | None, total: int, spares: int, single: bool) -> bool:
    """Whether the run's groups (with spares) fit on domains of these capacities (largest first)
    empty, largest group first (§4.5: a run that could not be placed even on an empty fleet of the
    domains its funding reaches)."""
    if not largest:
        return False
    n = len(sizes) if sizes is not None else 1
    if total + spares * n <= largest[0]:
        return True  # everything fits in the largest domain alone
    if single:
        return False
    if sizes is None:  # chunks: any split, one spare set per chunk
        left = total
        for r in largest:
            if left <= 0:
                break
            left -= max(0, r - spares)
        return left <= 0
    room = list(largest)
    for size in sorted(sizes, reverse=True):
        i = next((j for j, r in enumerate(room) if r >= size + spares), None)
        if i is None:
            return False
        room[i] -= size + spares
    return True


def grouping_blocks(
    largest: list[int], sizes: list[int] | None, total: int, spares: int, single: bool
) -> bool:
    """Some group (or, kept in one domain, the whole run) is larger than every domain, even empty."""
    biggest = largest[0] if largest else 0
    if single:
        n = len(sizes) if sizes is not None else 1
        return total + spares * n > biggest
    return sizes is not None and max(sizes, default=0) + spares > biggest


def slice_nodes(topo: Topology, view: Members, claims: dict[str, int]) -> list[str]:
    """The nodes a scope would take: per claimed domain, usable members by most free, then name."""
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


def paying(sc: Scope) -> Payer | None:
    src = sc.payer
    return Payer(src.env.owner, src.env.budget, src.env.name) if src is not None else None


class AtRisk:
    """Running groups per domain, for ETAs, remedies and conflict sets (read only)."""

    def __init__(self, ctx: Pass) -> None:
        self.ctx = ctx
        self.active: dict[str, dict[tuple[str, int], int]] = defaultdict(lambda: defaultdict(int))
        self.spares: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.run_domains: dict[str, set[str]] = defaultdict(set)
        self._held: dict[str, dict[str, int]] = {}
        for lease in ctx.leases:
            if not lease.open or lease.role == Role.BORROWED:
                continue
            node = ctx.topo.nodes.get(lease.node)
            if node is None:
                continue
            if lease.role == Role.ACTIVE:
                self.active[node.domain][(lease.run, lease.group)] += lease.gpus
            else:
                self.spares[node.domain][lease.run] += lease.gpus
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

    def remedies(self, short: dict[str, int]) -> tuple[tuple[Remedy, ...], tuple[int, ...]]:
        """§4.5's capacity remedies that something in the short domains can act on, each with the
        GPUs it can free there; the lottery last, with the deficit the others leave."""
        ctx = self.ctx
        freed = dict.fromkeys(CAPACITY_REMEDIES, 0)
        after = dict(short)  # per domain, what is left once the structural remedies are used
        for d, gap in short.items():
            reclaim = sum(v for g, v in self.active.get(d, {}).items() if g in ctx.book.unfunded)
            spare = sum(self.spares.get(d, {}).values())
            shrink = self._shrinkable_in(d)
            freed[Remedy.RECLAIM] += reclaim
            freed[Remedy.SPARES] += spare
            freed[Remedy.SHRINK] += shrink
            after[d] = max(0, gap - reclaim - spare - shrink)
        freed[Remedy.LOTTERY] = sum(after.values())
        kinds = tuple(r for r in CAPACITY_REMEDIES if r is Remedy.LOTTERY or freed[r] > 0)
        return kinds, tuple(freed[r] for r in kinds)

    def _shrinkable_in(self, domain: str) -> int:
        """GPUs malleable runs can give up in a domain by whole groups, highest index first, staying
        at or above their minimum (funded or not: the resolver shrinks before the lottery)."""
        ctx = self.ctx
        by_run: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for (run, group), gpus in self.active.get(domain, {}).items():
            by_run[run].append((group, gpus))
        total = 0
        for run, groups in by_run.items():
            spec = ctx.specs.get(run)
            m = spec.spec.malleable if spec is not None else None
            if m is None:
                continue
            room = ctx.counted(run) - m.minTotalGPUs
            for _, gpus in sorted(groups, reverse=True):
                if gpus <= room:
                    total += gpus
                    room -= gpus
        return total


def _shrinkable(ctx: Pass, run: str) -> bool:
    spec = ctx.specs.get(run)
    m = spec.spec.malleable if spec is not None else None
    return m is not None and ctx.counted(run) - m.stepGPUs >= m.minTotalGPUs


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
    claim per domain once running, the earliest its forecast allows (basis + notice), and for one
    funded only once a window opens, that window."""

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
    """ETA and conflict set of each reservation, in line order (§4.5, §4.6).

    One walk gives both, so they agree: a reservation's ETA is the first instant the runs it may cut
    then (warned for the notice period, from now for one not yet warned, and past `minRuntime`)
    cover its deficit in every short domain; its conflict set is who the resolver could cut at that
    instant, with structural cuts certain and the lottery's chance from `odds` (only counted when
    `with_odds`; membership needs no odds: every lottery candidate has a chance). A reservation
    ahead takes what it will cut first, and its run, once started, can be cut by those behind only
    after its own notice and `minRuntime`. The ETA is None when nothing running can clear the
    deficit and nothing ahead will free it. A window-funded one's ETA is its window's.
    """
    settings = ctx.world.settings
    delay = max(settings.notice, settings.min_runtime)
    gone: set[str] = set()
    gone_groups: set[tuple[str, int]] = set()
    taken: dict[str, int] = defaultdict(int)  # GPUs of running runs earlier reservations take per domain
    later: dict[str, list[tuple[int, int]]] = defaultdict(list)  # domain -> (cuttable from, GPUs) ahead
    unfunded_in = {d: [g for g in gs if g in ctx.book.unfunded] for d, gs in risk.active.items()}
    shrinkable_in = {d: {r for r, _ in gs if _shrinkable(ctx, r)} for d, gs in risk.active.items()}
    out: dict[str, Outlook] = {}
    for entry in entries:
        warned = {e.run: e.since for e in ctx.reservations[entry.run].conflicts}
        if entry.window is not None:
            at: int | None = max(entry.earliest, entry.window + 10)
        else:
            at = _cover_time(ctx, warned, entry, risk, gone, taken, later)
        members: dict[str, float] = {}
        if at is not None:
            members = _members(
                ctx, warned, entry, risk, at, gone, gone_groups, taken, unfunded_in, shrinkable_in, with_odds
            )
            for d, claim in entry.claims.items():
                later[d].append((at + delay, claim))
        out[entry.run] = Outlook(at, members)
    return out


def _cover_time(
    ctx: Pass,
    warned: dict[str, int],
    entry: Entry,
    risk: AtRisk,
    gone: set[str],
    taken: dict[str, int],
    later: dict[str, list[tuple[int, int]]],
) -> int | None:
    """The first instant what may be cut covers the deficit in every short domain (None: never)."""
    when = entry.earliest
    for d, gap in entry.short.items():
        pool = sorted(
            (cuttable_at(ctx, warned, run), gpus) for run, gpus in risk.held_in(d).items() if run not in gone
        )
        skip = taken.get(d, 0)  # the earliest-cuttable GPUs go to reservations ahead
        kept: list[tuple[int, int]] = []
        for t, gpus in pool:
            use = min(skip, gpus)
            skip -= use
            if gpus > use:
                kept.append((t, gpus - use))
        got = 0
        for t, gpus in sorted([*kept, *later.get(d, ())]):
            got += gpus
            if got >= gap:
                when = max(when, t)
                break
        else:
            return None
    return when


def _members(
    ctx: Pass,
    warned: dict[str, int],
    entry: Entry,
    risk: AtRisk,
    at: int,
    gone: set[str],
    gone_groups: set[tuple[str, int]],
    taken: dict[str, int],
    unfunded_in: dict[str, list[tuple[str, int]]],
    shrinkable_in: dict[str, set[str]],
    with_odds: bool,
) -> dict[str, float]:
    """Who the resolver could cut at `at`, in its fixed order, each with a probability."""
    members: dict[str, float] = {}
    deficit = dict(entry.short)
    short = entry.short

    def alive(run: str) -> bool:
        rec = ctx.records.get(run)
        return (
            run not in gone
            and rec is not None
            and rec.phase == Phase.RUNNING
            and cuttable_at(ctx, warned, run) <= at
        )

    def cut(freed: dict[str, int], run: str) -> None:
        for d, gpus in freed.items():
            if d in deficit:
                deficit[d] -= gpus
        members[run] = 1.0

    def short_left() -> bool:
        return any(v > 0 for v in deficit.values())

    # (1) unfunded groups, lowest-ranked first; a fixed-width run goes whole
    unfunded = sorted(
        {g for d in short for g in unfunded_in.get(d, ()) if alive(g[0]) and g not in gone_groups},
        key=lambda g: (ctx.rank(g[0]), g[1]),
        reverse=True,
    )
    for run, group in unfunded:
        if not short_left():
            break
        if run in gone or (run, group) in gone_groups:
            continue
        cut(_freed(risk, ctx, run, group, gone_groups), run)
    # (2) spares, (3) shrink
    for run in sorted({r for d in short for r in risk.spares[d] if alive(r)}, key=ctx.rank, reverse=True):
        if not short_left():
            break
        cut({d: risk.spares[d][run] for d in short if risk.spares[d].get(run)}, run)
    for run in sorted(
        {r for d in short for r in shrinkable_in.get(d, ()) if alive(r)}, key=ctx.rank, reverse=True
    ):
        if not short_left():
            break
        spec = ctx.specs[run]
        m = spec.spec.malleable
        assert m is not None
        room = ctx.counted(run) - m.minTotalGPUs
        cut({d: min(room, sum(v for (r, _), v in risk.active[d].items() if r == run)) for d in short}, run)
    # (4) lottery
    need = {d: v for d, v in deficit.items() if v > 0}
    if need:
        pool = {
            d: sum(v for (r, g), v in risk.active[d].items() if alive(r) and (r, g) not in gone_groups)
            - taken[d]
            for d in need
        }
        if all(pool[d] >= need[d] for d in need):
            odds_of = (
                _lottery_odds(ctx, risk, entry.run, need, alive, gone_groups)
                if with_odds
                else dict.fromkeys(_lottery_runs(risk, need, alive, gone_groups), 0.01)
            )
            for run, p in odds_of.items():
                members[run] = max(members.get(run, 0.0), p)
            for d in need:
                taken[d] += need[d]
    for run, p in members.items():
        if p >= 1.0:
            gone.add(run)
    return members


def _lottery_runs(
    risk: AtRisk, need: dict[str, int], alive: Callable[[str], bool], gone_groups: set[tuple[str, int]]
) -> set[str]:
    return {r for d in need for (r, g) in risk.active[d] if alive(r) and (r, g) not in gone_groups}


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
        {run: ctx.counted(run) for run in runs},
        floors,
    )
    return odds.cut_odds(lottery, key)


def publish(ctx: Pass, sets: dict[str, Outlook]) -> None:
    """Write each reservation's conflict set, keeping `since` for members already warned."""
    for key, seen in sets.items():
        res = ctx.reservations[key]
        members = seen.members
        before = {e.run: e.since for e in res.conflicts}
        res.conflicts = [
            ConflictEntry(run, p, before.get(run, ctx.now)) for run, p in sorted(members.items())
        ]
