"""Admission: the line of waiting runs in submission order — start, reserve, or activate with cuts.

A run starts when fully funded and placeable without touching capacity held for fully funded
reservations ahead of it; otherwise it gets (or keeps) a Reservation. Due reservations that are
funded but short of capacity go to the resolver. Growth and conflict sets come after the line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from planner import accounting, bind, cover, elastic, failover, forecast, pack
from planner.context import Pass
from planner.resolve import REQUEUED, Resolver
from planner.topology import Topology
from planner.world import Lease, Payer, Reservation
from schemas.run import Run


@dataclass(slots=True)
class Line:
    held: dict[str, int] = field(default_factory=dict)
    order: list[tuple[str, dict[str, int], int]] = field(default_factory=list)  # capacity reservations
    waiting: list[str] = field(default_factory=list)  # every run that got or kept a reservation
    scopes: dict[str, forecast.Scope] = field(default_factory=dict)  # capacity reservations' scopes
    funding_holds: list[tuple[str, str, int]] = field(default_factory=list)  # (envelope, class, GPUs)
    holding: set[int] = field(default_factory=set)  # places in `waiting` of reservations that held funding
    held_log: list[str] = field(default_factory=list)  # domains whose hold grew, in order
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
    spec: Run, width: int, srcs: list[pack.Source], held: dict[str, int], fill: bool = False
) -> pack.Request:
    sizes = pack.group_sizes(width, elastic.group_size(spec))
    return pack.Request(
        sizes, width, 0, spec.spec.sparesPerGroup, srcs,
        spec.spec.funding.maxBorrowGPUs if spec.spec.funding.allowBorrow else 0,
        not spec.spec.locality.allowCrossGroupSpread, (), held, fill,
    )  # fmt: skip


def need_gpus(spec: Run, width: int) -> int:
    sizes = pack.group_sizes(width, elastic.group_size(spec))
    return width + spec.spec.sparesPerGroup * (len(sizes) if sizes else 1)


def run_line(ctx: Pass, lookahead_hours: float) -> Line:
    """Funded runs in submission order; then opportunistic ones, on the spares the line left."""
    line = Line()
    waiting = [
        key
        for key in sorted(ctx.specs, key=ctx.rank)
        if (rec := ctx.records.get(key)) is not None
        and rec.phase == "Pending"
        and key not in ctx.cut
        and key not in ctx.world.frozen_runs
    ]
    for key in waiting:
        spec = ctx.specs[key]
        if spec.spec.opportunistic:
            continue
        if _fits_at_all(ctx, spec, line) and _try_start(ctx, key, spec, line.held, lookahead_hours):
            continue
        _reserve(ctx, key, spec, line, lookahead_hours)
    failover.settle_fills(ctx)  # spares the resolver dropped took fill leases with them
    for key in waiting:  # fill never competes for funded capacity, so it goes after the line
        if ctx.specs[key].spec.opportunistic:
            _fill(ctx, key, ctx.specs[key])
    return line


def _start(
    ctx: Pass, key: str, spec: Run, placed: pack.Packing, reason: str = "Start", role: str = "Active"
) -> None:
    bind.bind(ctx, key, spec.spec.owner, placed.groups, reason, role)
    rec = ctx.records[key]
    rec.phase, rec.started = "Running", ctx.now
    ctx.started.add(key)
    ctx.messages[key] = f"bound {ctx.allocated(key)} GPUs"
    res = ctx.reservations.get(key)
    if res is not None and res.state == "Pending":
        res.state, res.ended = "Released", ctx.now


def _fits_at_all(ctx: Pass, spec: Run, line: Line) -> bool:
    """Cheap necessary condition: even its smallest width (with spares) is within the free GPUs
    nobody ahead holds. Most of a long line of a full fleet stops here."""
    need = need_gpus(spec, elastic.min_width(spec))
    return need <= line.unheld_free(ctx.topo, spec.spec.resources.gpuType)


def _try_start(ctx: Pass, key: str, spec: Run, held: dict[str, int], lookahead_hours: float) -> bool:
    srcs = cover.sources(ctx.book, ctx.topo, spec, lookahead_hours)
    for width in elastic.widths(spec):
        if cover.shortfall(ctx.book, spec, need_gpus(spec, width), srcs, lookahead_hours) is not None:
            continue
        placed = pack.place(ctx.topo, _request(spec, width, srcs, held), spec.spec.resources.gpuType)
        if placed.failure is None:
            _start(ctx, key, spec, placed)
            return True
    return False


def _fill(ctx: Pass, key: str, spec: Run) -> None:
    """Opportunistic runs live only on spare-held GPUs, as Borrowed leases nobody is debited for.

    A filler holds no spares of its own: it is the first thing reclaimed, so a spare for it would
    only sit on another run's spare slots."""
    for width in elastic.widths(spec):
        req = _request(spec, width, [], {}, fill=True)
        req.spares_per_group = 0
        placed = pack.place(ctx.topo, req, spec.spec.resources.gpuType)
        if placed.failure is None:
            _start(ctx, key, spec, placed, "Fill", "Borrowed")
            return
    ctx.messages[key] = "waiting for spare capacity to fill"


def _reserve(ctx: Pass, key: str, spec: Run, line: Line, lookahead_hours: float) -> None:
    """Create or refresh the run's Reservation; activate it with cuts when due and funded."""
    now, settings = ctx.now, ctx.world.settings
    width = elastic.min_width(spec)
    need = need_gpus(spec, width)
    srcs = cover.sources(ctx.book, ctx.topo, spec, lookahead_hours)
    short = cover.shortfall(ctx.book, spec, need, srcs, lookahead_hours)
    res = ctx.reservations.get(key)
    if res is None or res.state != "Pending":
        res = Reservation(key, now + settings.notice, now)
        ctx.reservations[key] = res
    keep = res.domains
    res.paying = _paying(srcs) or res.paying
    line.waiting.append(key)
    sizes = pack.group_sizes(width, elastic.group_size(spec)) or [width]
    single = not spec.spec.locality.allowCrossGroupSpread
    if _note_funding(ctx, res, short):  # a funding shortfall holds nothing and cuts nobody now
        if short is not None and short.window is not None:
            # ...but once its window opens it is funded: warn who its activation may cut now, so
            # they have had their notice by the window-aligned ETA
            later = [*srcs, *cover.window_sources(ctx.book, ctx.topo, spec, short.window)]
            sc = forecast.scope(ctx.topo, later, sizes, spec.spec.sparesPerGroup, line.held, single, keep)
            res.domains, res.nodes = tuple(sorted(sc.claims)), tuple(sorted(sc.nodes))
            line.scopes[key] = sc
            line.order.append((key, sc.short, res.earliest_start))
        return
    # the scope is drawn over the envelopes whose funding the reservation holds: runs behind it can
    # spend other envelopes' room, never this, so the next pass draws the same scope
    funding = _funding_of(srcs, need, spec)
    sc = forecast.scope(
        ctx.topo,
        [src for src, _ in funding],
        sizes,
        spec.spec.sparesPerGroup,
        line.held,
        single,
        keep,
        funding,
    )
    res.domains, res.nodes = tuple(sorted(sc.claims)), tuple(sorted(sc.nodes))
    line.scopes[key] = sc
    if sc.unplaceable and not spec.spec.locality.allowCrossGroupSpread:
        res.reason = pack.REASON_GROUPING
    else:
        res.reason = f"cluster short by {sc.deficit} GPUs in scope"
    res.deficit = sc.deficit
    if (
        now >= res.earliest_start
        and not sc.unplaceable
        and _activate(ctx, key, spec, res, sc, srcs, line, width)
    ):
        return
    forecast.hold(line.held, sc)
    line.held_log.extend(sc.claims)
    _hold_funding(ctx, line, srcs, need, spec)
    line.order.append((key, sc.short, res.earliest_start))
    _say_reserved(ctx, key, res.reason)


def _hold_funding(ctx: Pass, line: Line, srcs: list[pack.Source], need: int, spec: Run) -> None:
    """A funded reservation keeps its funding from runs behind it, as it keeps their capacity.

    Held claims go into the book like claims (in cover order) until the next classify; the line
    re-applies them after each activation's refresh, and the final refresh drops them.
    """
    line.holding.add(len(line.waiting) - 1)
    for env_key, category, gpus in _funding_to_hold(srcs, need, spec):
        line.funding_holds.append((env_key, category, gpus))
        ctx.book.hold(env_key, category, gpus)


def _funding_to_hold(srcs: list[pack.Source], need: int, spec: Run) -> list[tuple[str, str, int]]:
    """(envelope, class, GPUs) that fund `need` from these sources, in cover order."""
    return [(src.env.key, src.category, gpus) for src, gpus in _funding_of(srcs, need, spec) if gpus > 0]


def _funding_of(srcs: list[pack.Source], need: int, spec: Run) -> list[tuple[pack.Source, int]]:
    """(source, GPUs) that fund `need`, in cover order: each source's room, borrowing within the
    run's limit, until `need` is met."""
    out = []
    left = need
    borrow_left = spec.spec.funding.maxBorrowGPUs if spec.spec.funding.allowBorrow else 0
    for src in srcs:
        if left <= 0:
            break
        n = min(left, src.room)
        if src.category == accounting.LOAN and borrow_left is not None:
            n = min(n, borrow_left)
            borrow_left -= n
        if n > 0:
            out.append((src, n))
            left -= n
    return out


def _refresh_after_cuts(ctx: Pass, line: Line) -> None:
    """Funding classes again after an activation's cuts; the funding held for reservations in line
    is put back on the envelopes re-derived."""
    touched = refresh_changed(ctx)
    for env_key, category, gpus in line.funding_holds:
        if env_key in touched:
            ctx.book.hold(env_key, category, gpus)


def _note_funding(ctx: Pass, res: Reservation, short: cover.Shortfall | None) -> bool:
    """Record the funding side of a reservation: ETA basis, confidence, and the shortfall if any."""
    window = short.window if short is not None else None
    if window is not None and res.window_basis != window:
        res.earliest_start = max(ctx.now + ctx.world.settings.notice, window + 10)
    res.window_basis = window
    res.confidence = "window-aligned" if window is not None else "conservative"
    if short is None:
        return False
    res.reason, res.deficit, res.remedies = short.reason, short.deficit, (short.remedy,)
    if window is None:  # a window-aligned one keeps warning who its activation may cut
        res.conflicts = []
    _say_reserved(ctx, res.run, short.reason)
    return True


def _say_reserved(ctx: Pass, key: str, reason: str) -> None:
    """The waiting run's message: why it waits, except that a run requeued by a cut keeps saying so
    while the reservation it got then waits for the same reason (the next pass changes nothing)."""
    rec, was = ctx.records.get(key), ctx.world.state.reservations.get(key)
    if (
        rec is not None
        and rec.message.startswith(REQUEUED)
        and was is not None
        and was.state == "Pending"
        and was.reason == reason
    ):
        return
    ctx.messages[key] = f"reserved: {reason}"


def settle_funding(ctx: Pass, line: Line, lookahead_hours: float) -> None:
    """After the line and growth: a waiting run's funding as this pass leaves it.

    Runs behind it in line (and growth) may have spent budget it was short of; its reason and
    deficit report what is left at the end of the pass, so planning again changes nothing. As in
    the line, a funded reservation that held funding keeps holding it from the runs behind it:
    worked out again from the end-of-pass funding once its run has been looked at, then dropped.
    """
    held: set[str] = set()
    for place, key in enumerate(line.waiting):
        res = ctx.reservations.get(key)
        spec = ctx.specs.get(key)
        if res is None or spec is None or res.state != "Pending":
            continue
        need = need_gpus(spec, elastic.min_width(spec))
        srcs = cover.sources(ctx.book, ctx.topo, spec, lookahead_hours)
        short = cover.shortfall(ctx.book, spec, need, srcs, lookahead_hours)
        _note_funding(ctx, res, short)
        sc = line.scopes.get(key)
        if sc is not None and sc.view is not None:
            res.nodes = tuple(sorted(forecast.slice_nodes(ctx.topo, sc.view, sc.claims)))
        if short is None and place in line.holding:
            for env_key, category, gpus in _funding_to_hold(srcs, need, spec):
                ctx.book.hold(env_key, category, gpus)
                held.add(env_key)
    refresh_changed(ctx, held)  # holds end with the pass


def _paying(srcs: list[pack.Source]) -> Payer | None:
    if not srcs:
        return None
    env = srcs[0].env
    return Payer(env.owner, env.budget, env.name)


def _activate(
    ctx: Pass,
    key: str,
    spec: Run,
    res: Reservation,
    sc: forecast.Scope,
    srcs: list[pack.Source],
    line: Line,
    width: int,
) -> bool:
    """Due, funded, short of capacity: clear the deficit with the resolver, then start."""
    resolver = Resolver(ctx, res, sc.short, set())
    if not resolver.feasible():
        ctx.messages[key] = f"reserved: {res.reason}; waiting for warned runs to clear it"
        return False
    # only now worth knowing which groups this run's own claims would leave unfunded
    resolver.unfunded = _unfunded_with(ctx, spec, srcs, need_gpus(spec, width))
    resolver.run()
    lookahead_hours = ctx.world.settings.lookahead / 3600
    _refresh_after_cuts(ctx, line)
    srcs = cover.sources(ctx.book, ctx.topo, spec, lookahead_hours)
    placed = pack.place(ctx.topo, _request(spec, width, srcs, line.held), spec.spec.resources.gpuType)
    if placed.failure is not None:
        return False
    _start(ctx, key, spec, placed)
    # a run cut whole keeps its place in line: it is reserved at once, so runs behind it in line
    # cannot backfill what it needs (it restarts at a later pass, §4.6)
    for victim in sorted(set(resolver.requeued), key=ctx.rank):
        victim_spec = ctx.specs.get(victim)
        if victim_spec is not None and ctx.records[victim].phase == "Pending":
            why = ctx.records[victim].message  # REQUEUED + "<reason> for reservation <key>"
            _reserve(ctx, victim, victim_spec, line, lookahead_hours)
            ctx.messages[victim] = why
    return True


def _unfunded_with(ctx: Pass, spec: Run, srcs: list[pack.Source], need: int) -> set[tuple[str, int]]:
    """Groups that become unfunded once this run's claims are counted (family claims it recalls)."""
    extra: list[Lease] = []
    left = need
    key = f"{spec.metadata.namespace}/{spec.metadata.name}"
    for src in srcs:
        if left <= 0:
            break
        n = min(left, src.room)
        extra.append(
            Lease(
                "probe",
                key,
                0,
                "Active",
                "",
                tuple(range(n)),
                Payer(src.env.owner, src.env.budget, src.env.name),
                ctx.now,
                "Start",
            )
        )
        left -= n
    return accounting.unfunded_with(
        ctx.book, ctx.leases, extra, ctx.owner_of, ctx.rank, ctx.closures == ctx.book.closures_at
    )


def refresh_changed(ctx: Pass, also: Iterable[str] = ()) -> set[str]:
    """Funding classes as `accounting_refresh` derives them, settling again only the envelopes whose
    leases opened or closed since the last refresh (and `also`); every other envelope's claims are
    as that refresh left them. Returns the envelopes settled again."""
    book = ctx.book
    changed = [*ctx.closed_log[book.closed_seen :], *ctx.leases[book.seen :]]
    touched = {k for x in changed if (k := x.payer.env_key) is not None} | set(also)
    accounting.reclassify(book, ctx.leases, ctx.owner_of, ctx.rank, touched)
    book.closures_at, book.closed_seen = ctx.closures, len(ctx.closed_log)
    return touched


def refresh_after_failures(ctx: Pass) -> None:
    """Funding classes once failures and voluntary shrinks closed leases (nothing is held yet)."""
    refresh_changed(ctx)


def refresh_after_line(ctx: Pass, line: Line) -> None:
    """Funding classes once the line and growth are done, the line's funding holds dropped."""
    refresh_changed(ctx, {env_key for env_key, _, _ in line.funding_holds})
    line.funding_holds.clear()


def accounting_refresh(ctx: Pass) -> None:
    ctx.book.unfunded = set()
    accounting.classify(ctx.book, ctx.leases, ctx.owner_of, ctx.rank)
    ctx.book.closures_at, ctx.book.closed_seen = ctx.closures, len(ctx.closed_log)
