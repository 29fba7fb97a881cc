"""Admission: the line of waiting runs in submission order — start, reserve, or activate with cuts.

A run starts when fully funded and placeable without touching capacity held for fully funded
reservations ahead of it; otherwise it gets (or keeps) a Reservation, whose scope, deficit and
funding reason are drawn here at its turn in line. A due reservation that is funded but short of
capacity activates all or nothing: the resolver chooses every cut first, they are made only when
together they clear its deficit and the run then fits, and it starts at once on what they freed
(a run they put back in line starts at a later pass). ETAs, conflict sets and remedies come after.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from planner import accounting, bind, cover, elastic, failover, forecast, funding, pack, reasons
from planner.context import Pass
from planner.reasons import OpenReason, Phase, ResState, Role, Wait
from planner.resolve import Resolver
from planner.topology import Topology
from planner.world import Lease, Payer, Reservation
from schemas.run import Run


@dataclass(slots=True)
class Waiting:
    """A waiting run at its turn in line: the width it waits for, its funding and its scope."""

    need: int  # GPUs of its minimum width, spares included
    short: cover.Shortfall | None  # None: fully funded now
    scope: forecast.Scope
    sizes: list[int] | None
    funding: list[tuple[pack.Source, int]]  # (source, GPUs) a funded run's need is paid from
    placeable: bool  # it fits on an empty fleet of the domains its funding reaches
    grouping: bool  # some group (or, kept together, the whole run) is larger than every such domain
    reach: int = 0  # GPUs of the domains its funding reaches (failed nodes left out)
    flavor_known: bool = True  # some node of its flavor is in the fleet
    cut_now: bool = False  # a cut put it back in line at this instant

    @property
    def why(self) -> Wait:
        """The binding constraint (§4.5): what no capacity can change, then funding, then capacity."""
        if not self.placeable:
            if not self.flavor_known:
                return Wait.NO_FLAVOR
            return Wait.GROUPING if self.grouping or self.reach >= self.need else Wait.OUT_OF_REACH
        if self.short is not None:  # the funding reason wins when both are short
            return self.short.why
        if self.scope.unpaid_gpus:  # funded, but not where it fits: short of headroom there
            return Wait.HEADROOM
        if self.cut_now and self.scope.deficit == 0:
            return Wait.REQUEUED
        return Wait.CLUSTER_SHORT

    @property
    def holds(self) -> bool:
        """A fully funded reservation that can be placed keeps capacity and funding from runs behind."""
        return self.short is None and self.placeable and not self.scope.unpaid


@dataclass(slots=True)
class Line:
    held: dict[str, int] = field(default_factory=dict)  # domain -> free GPUs held by reservations
    waiting: list[str] = field(default_factory=list)  # every run that got or kept a reservation
    states: dict[str, Waiting] = field(default_factory=dict)  # what each waits for, at its turn
    funding_holds: list[tuple[str, str, int]] = field(default_factory=list)  # (envelope, class, GPUs)
    held_log: list[str] = field(default_factory=list)  # domains whose hold grew, in order
    requeued: list[str] = field(default_factory=list)  # runs an activation just cut whole
    unsettled: bool = False  # the pass's rounds of the line never came to rest (a bug if ever true)
    _unheld: dict[str, _Unheld] = field(default_factory=dict)

    def unheld_free(self, topo: Topology, flavor: str) -> int:
        """Free GPUs of this flavor's domains that no reservation ahead holds: an upper bound on what
        any run can be given now. Kept per domain and updated from the domains that changed since."""
        held, free = self.held, topo.domain_free
        st = self._unheld.get(flavor)
        if st is None:
            doms = topo.flavor_domains(flavor)
            st = _Unheld({d: max(0, free.get(d, 0) - held.get(d, 0)) for d in doms}, 0, len(topo.changed), 0)
            st.total = sum(st.parts.values())
            self._unheld[flavor] = st
        if st.seen_topo == len(topo.changed) and st.seen_held == len(self.held_log):
            return st.total
        for d in {*topo.changed[st.seen_topo :], *self.held_log[st.seen_held :]}:
            if d in st.parts:
                now = max(0, free.get(d, 0) - held.get(d, 0))
                st.total += now - st.parts[d]
                st.parts[d] = now
        st.seen_topo, st.seen_held = len(topo.changed), len(self.held_log)
        return st.total


@dataclass(slots=True)
class _Unheld:
    parts: dict[str, int]  # domain -> free GPUs nobody ahead holds
    total: int
    seen_topo: int  # how much of topo.changed the parts reflect
    seen_held: int  # how much of Line.held_log the parts reflect


def _request(
    spec: Run, width: int, srcs: list[pack.Source], held: dict[str, int], first: int, fill: bool = False
) -> pack.Request:
    sizes = pack.group_sizes(width, elastic.group_size(spec))
    return pack.Request(
        sizes, width, first, spec.spec.sparesPerGroup, srcs, cover.borrow_cap(spec),
        not spec.spec.locality.allowCrossGroupSpread, (), held, fill,
    )  # fmt: skip


def need_gpus(spec: Run, width: int) -> int:
    """The run's GPUs at this width with a set of spares per group (`pack.group_sizes`' count)."""
    group = elastic.group_size(spec)
    groups = 1 if group is None else -(-width // group)
    return width + spec.spec.sparesPerGroup * max(1, groups)


def run_line(ctx: Pass, lookahead_hours: float, attempted: set[str]) -> Line:
    """Funded runs in submission order; reserved runs keep their place. `attempted`: reservations
    whose activation this pass already tried (once, unless a zero-notice warning frees it: `plan`)."""
    line = Line()
    queue = [
        (ctx.rank(key), key)
        for key, rec in ctx.records.items()
        if rec.phase == Phase.PENDING
        and key in ctx.specs
        and key not in ctx.world.frozen_runs
        and not ctx.specs[key].spec.opportunistic
    ]
    heapq.heapify(queue)
    while queue:
        _, key = heapq.heappop(queue)
        if ctx.records[key].phase != Phase.PENDING:  # an activation ahead may have started it again
            continue
        _turn(ctx, key, ctx.specs[key], line, lookahead_hours, attempted)
        # a run an activation cut whole keeps its place in line: its turn comes at that place (at
        # once when that is ahead of here), so runs behind it cannot backfill what it needs and
        # runs ahead of it are not held back by it
        for victim in line.requeued:
            if victim in ctx.specs and victim not in ctx.world.frozen_runs:
                heapq.heappush(queue, (ctx.rank(victim), victim))
        line.requeued.clear()
    failover.settle_fills(ctx)  # spares the resolver dropped took fill leases with them
    return line


def fill(ctx: Pass) -> None:
    """Opportunistic runs, last in the pass, on spare-held GPUs as Borrowed leases nobody is debited
    for. A filler holds no spares of its own: it is the first thing reclaimed, so a spare for it
    would only sit on another run's spare slots."""
    for key in sorted(ctx.specs, key=ctx.rank):
        spec = ctx.specs[key]
        rec = ctx.records.get(key)
        if not spec.spec.opportunistic or rec is None or rec.phase != Phase.PENDING:
            continue
        if key in ctx.world.frozen_runs or rec.resized == ctx.now:  # reclaimed at this instant
            continue
        for width in elastic.widths(spec):
            req = _request(spec, width, [], {}, rec.next_group, fill=True)
            req.spares_per_group = 0
            placed = pack.place(ctx.topo, req, spec.spec.resources.gpuType)
            if placed.failure is None:
                _start(ctx, key, spec, placed, OpenReason.FILL, Role.BORROWED)
                break
        else:
            ctx.set_status(key, reasons.WAITING_TO_FILL)


def _start(
    ctx: Pass,
    key: str,
    spec: Run,
    placed: pack.Packing,
    reason: OpenReason = OpenReason.START,
    role: Role = Role.ACTIVE,
) -> None:
    bind.bind(ctx, key, spec.spec.owner, placed.groups, reason, role)
    ctx.started.add(key)
    ctx.resized(key)
    ctx.set_status(key, reasons.bound(ctx.allocated(key)), Phase.RUNNING)
    res = ctx.reservations.get(key)
    if res is not None and res.state == ResState.PENDING:
        res.state, res.ended = ResState.RELEASED, ctx.now


def _fits_at_all(ctx: Pass, spec: Run, line: Line) -> bool:
    """Cheap necessary condition: even its smallest width (with spares) is within the free GPUs
    nobody ahead holds. Most of a long line of a full fleet stops here."""
    need = need_gpus(spec, elastic.min_width(spec))
    return need <= line.unheld_free(ctx.topo, spec.spec.resources.gpuType)


def _try_start(
    ctx: Pass, key: str, spec: Run, srcs: list[pack.Source], held: dict[str, int], lookahead_hours: float
) -> bool:
    first = ctx.records[key].next_group
    for width in elastic.widths(spec):
        if cover.fundable(srcs, cover.borrow_cap(spec)) < need_gpus(spec, width):
            continue
        placed = pack.place(ctx.topo, _request(spec, width, srcs, held, first), spec.spec.resources.gpuType)
        if placed.failure is None:
            _start(ctx, key, spec, placed)
            return True
    return False


def _turn(ctx: Pass, key: str, spec: Run, line: Line, lookahead_hours: float, attempted: set[str]) -> None:
    """One waiting run's turn: start it, activate its due reservation, or (re)draw its reservation.

    A run a cut put back in line at this instant keeps its place and gets its reservation, but no
    lease opens for it in the pass that cut it (§4.6)."""
    srcs = cover.sources(ctx.book, ctx.topo, spec, lookahead_hours)
    cut_now = ctx.records[key].resized == ctx.now
    if cut_now:
        attempted.add(key)
    elif _fits_at_all(ctx, spec, line) and _try_start(ctx, key, spec, srcs, line.held, lookahead_hours):
        return
    w = waiting(ctx, key, spec, srcs, line.held, lookahead_hours)
    w.cut_now = cut_now
    if (
        not cut_now
        and w.holds
        and w.scope.deficit == 0
        and _start_in_scope(ctx, key, spec, w, line, lookahead_hours)
    ):
        return  # what pack-to-empty by free GPUs missed, the scope's own domains hold
    res = ctx.reservations.get(key)
    if res is None or res.state != ResState.PENDING:
        res = ctx.reservations[key] = Reservation(key, None, ctx.now)
    due = res.earliest_start is not None and res.earliest_start <= ctx.now and key not in attempted
    if due:
        attempted.add(key)
        if w.holds and _activate(ctx, key, spec, res, w, line, lookahead_hours):
            return
        res.basis = ctx.now  # a pass at or after the ETA that could not activate: forecast again
    _record(ctx, res, w, line)


def waiting(
    ctx: Pass, key: str, spec: Run, srcs: cover.SourceList, held: dict[str, int], lookahead_hours: float
) -> Waiting:
    """What a waiting run waits for, at its turn: funding, whether any fleet its funding reaches
    can hold it, and its scope (where its groups would go, and the deficit there)."""
    width = elastic.min_width(spec)
    need = need_gpus(spec, width)
    sizes = pack.group_sizes(width, elastic.group_size(spec))
    spares = spec.spec.sparesPerGroup
    single = not spec.spec.locality.allowCrossGroupSpread
    short = cover.shortfall(ctx.book, ctx.topo, spec, need, srcs, lookahead_hours)
    largest = cover.reach_caps(ctx.book, ctx.topo, spec).largest
    placeable = forecast.fits_empty(largest, sizes, width, spares, single)
    grouping = not placeable and forecast.grouping_blocks(largest, sizes, width, spares, single)
    flavor_known = placeable or bool(ctx.topo.flavor_domains(spec.spec.resources.gpuType))
    res = ctx.reservations.get(key)
    keep = res.domains if res is not None and res.state == ResState.PENDING else ()
    funding: list[tuple[pack.Source, int]] = []
    if not placeable:
        sc = forecast.Scope()
    elif short is None:  # drawn over the funding it holds: runs behind it never spend that
        funding = _funding_of(srcs, need, spec)
        sc = forecast.scope(
            ctx.topo, [s for s, _ in funding], [n for _, n in funding], sizes, width, spares, held, single,
            keep, cover.borrow_cap(spec),
        )  # fmt: skip
        if sc.unplaceable:  # that funding cannot pay where the run fits: what pays where it does
            sc = forecast.scope(
                ctx.topo, srcs, pack.rooms(srcs), sizes, width, spares, held, single, keep,
                cover.borrow_cap(spec),
            )  # fmt: skip
            funding = [(src, n) for src, n in zip(srcs, sc.paid, strict=True) if n > 0]
    elif short.window is not None:  # what will pay once the window it waits for is open
        later = cover.with_windows(ctx.book, ctx.topo, spec, srcs, short.window)
        sc = forecast.scope(
            ctx.topo, later, pack.rooms(later), sizes, width, spares, held, single, keep,
            cover.borrow_cap(spec),
        )  # fmt: skip
    else:  # where it would go if funded: every envelope that could pay for it, nearest first
        everything = [need] * len(srcs)
        sc = forecast.scope(ctx.topo, srcs, everything, sizes, width, spares, held, single, keep, None)
    return Waiting(need, short, sc, sizes, funding, placeable, grouping, sum(largest), flavor_known)


def _record(ctx: Pass, res: Reservation, w: Waiting, line: Line) -> None:
    """Write what the run waits for into its reservation; a funded one holds capacity and funding."""
    key = res.run
    sc = w.scope
    res.why = w.why
    if not w.placeable:  # what no capacity can change: its whole need, whatever its funding
        res.deficit = w.need
        flavor = ctx.specs[key].spec.resources.gpuType
        res.reason = reasons.wait_text(res.why, res.deficit, flavor=flavor, reach=w.reach)
    elif w.short is not None:  # the funding reason wins when both are short
        res.deficit, res.reason = w.short.deficit, w.short.reason
    else:
        res.deficit = sc.unpaid_gpus if res.why == Wait.HEADROOM else sc.deficit
        res.reason = reasons.wait_text(res.why, res.deficit)
    res.domains, res.nodes = tuple(sc.claims), tuple(sorted(sc.nodes))  # domains in the order claimed
    res.paying = forecast.paying(sc)
    line.waiting.append(key)
    line.states[key] = w
    if not w.placeable:
        return  # holds nothing: backfill passes it
    if w.holds:
        forecast.hold(line.held, sc)
        line.held_log.extend(sc.claims)
        for env_key, category, gpus in _funding_to_hold(w.funding):
            line.funding_holds.append((env_key, category, gpus))
            ctx.book.hold(env_key, category, gpus)


def _funding_to_hold(funding: list[tuple[pack.Source, int]]) -> list[tuple[str, str, int]]:
    """(envelope, class, GPUs) of a funded reservation's funding, in cover order."""
    return [(src.env.key, src.category, gpus) for src, gpus in funding if gpus > 0]


def _funding_of(srcs: cover.SourceList, need: int, spec: Run) -> list[tuple[pack.Source, int]]:
    """(source, GPUs) that fund `need`, in cover order: each source's room, borrowing within the
    run's limit, until `need` is met. A source with no room pays nothing and moves no borrowing."""
    out = []
    left = need
    borrow_left = cover.borrow_cap(spec)
    for i in srcs.nonzero:
        if left <= 0:
            break
        src = srcs[i]
        n = min(left, src.room)
        if src.category == accounting.LOAN and borrow_left is not None:
            n = min(n, borrow_left)
            borrow_left -= n
        if n > 0:
            out.append((src, n))
            left -= n
    return out


def _start_in_scope(ctx: Pass, key: str, spec: Run, w: Waiting, line: Line, lookahead_hours: float) -> bool:
    """Place each group in the domain the scope drew for it (the scope found room where pack did not)."""
    placed = _in_scope(ctx, key, spec, w, line, lookahead_hours)
    if placed is None:
        return False
    _start(ctx, key, spec, placed)
    return True


def _in_scope(
    ctx: Pass, key: str, spec: Run, w: Waiting, line: Line, lookahead_hours: float
) -> pack.Packing | None:
    """The run's whole width, each group in the domain its scope drew for it; None when it does not
    fit there (or the scope does not hold the whole width)."""
    sc = w.scope
    width = elastic.min_width(spec)
    if sc.unplaceable or sum(n for _, n in sc.groups) != width:
        return None
    srcs = cover.sources(ctx.book, ctx.topo, spec, lookahead_hours)
    req = _request(spec, width, srcs, line.held, ctx.records[key].next_group)
    req.sizes = [n for _, n in sc.groups]
    req.assign = tuple(d for d, _ in sc.groups)
    placed = pack.place(ctx.topo, req, spec.spec.resources.gpuType)
    return placed if placed.failure is None else None


def _activate(
    ctx: Pass, key: str, spec: Run, res: Reservation, w: Waiting, line: Line, lookahead_hours: float
) -> bool:
    """Due, funded, short of capacity: all or nothing (§4.6). Every cut is chosen first (the
    resolver's fixed order) and made only when together they clear the deficit and the run then
    fits in its scope; it starts at once on what they freed, before anyone else in line. Otherwise
    nobody is cut."""
    sc = w.scope
    resolver = Resolver(ctx, res, sc.short, set())
    if not resolver.feasible():
        return False
    # only now worth knowing which groups this run's own claims would leave unfunded
    resolver.unfunded = _unfunded_with(ctx, spec, w.funding)
    cuts = resolver.choose()
    if cuts is None:
        return False
    freed = [x for cut in cuts for x in cut.leases if x.role != Role.BORROWED]
    for lease in freed:  # placed as if the cuts were made: nobody is cut unless the run then fits
        ctx.topo.release(lease)
    try:
        placed = _in_scope(ctx, key, spec, w, line, lookahead_hours)
    finally:
        for lease in freed:
            ctx.topo.occupy(lease)
    if placed is None:
        return False
    resolver.apply(cuts)
    funding.after_cuts(ctx, line.funding_holds)
    _start(ctx, key, spec, placed)
    line.requeued += resolver.requeued  # back in line at their places (`run_line`)
    return True


def _unfunded_with(ctx: Pass, spec: Run, funding: list[tuple[pack.Source, int]]) -> set[tuple[str, int]]:
    """Groups that become unfunded once this run's claims are counted (family claims it recalls)."""
    key = f"{spec.metadata.namespace}/{spec.metadata.name}"
    extra = [
        Lease(
            "probe",
            key,
            0,
            Role.ACTIVE,
            "",
            tuple(range(n)),
            Payer(src.env.owner, src.env.budget, src.env.name),
            ctx.now,
            OpenReason.START,
        )  # fmt: skip
        for src, n in funding
    ]
    return accounting.unfunded_with(
        ctx.book, ctx.leases, extra, ctx.owner_of, ctx.rank, ctx.closures == ctx.book.closures_at
    )
