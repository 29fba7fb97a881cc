"""One reconcile pass, in the order of §4.1: observe, fund, line up, grow, fill, forecast, report.

`plan(world)` is the whole decision: a pure function of the snapshot. It returns the next state,
the ledger events and statuses; it writes nothing and reads no clock. The pass is a fixed point:
the line and growth run again until a round of them changes nothing (capacity an activation's
cuts freed goes to whoever fits, in line order), then the fill, so planning again at the same
instant from the pass's own output decides nothing new. The pod manifests are the render stage's
(`Plan.manifests`, built on first use): the simulator and `jobtree plan` never need them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planner import (
    accounting,
    admission,
    elastic,
    failover,
    funding,
    invariants,
    lifecycle,
    manifests,
    metering,
    outlook,
    reasons,
    status,
)
from planner.admission import Line
from planner.context import Event, Moved, Pass, kept_cordons_of, snapshot
from planner.reasons import Confidence, Phase, ResState, Role, Wait
from planner.world import FleetState, Lease, World
from schemas.run import Run

if TYPE_CHECKING:  # `Plan.nodes` is an annotation only
    from planner.world import NodeObs


@dataclass(slots=True)
class Plan:
    state: FleetState
    events: list[Event]
    runs: dict[str, dict[str, Any]]
    budgets: dict[str, dict[str, Any]]
    cordon: list[str]
    node_problems: list[tuple[str, str]]
    violations: list[str] = field(default_factory=list)
    open_leases: list[Lease] = field(default_factory=list)
    specs: dict[str, Run] = field(default_factory=dict)
    clusters: dict[str, str] = field(default_factory=dict)
    rendered: dict[str, dict[str, Any]] | None = None
    # runs whose spec is invalid now: their manifests here come from no spec, so whoever writes
    # or applies them keeps the ones last rendered instead (`manifests.keep_frozen`)
    frozen: frozenset[str] = frozenset()
    # groups the last pass left charged to nobody: with `state.unfunded`, who lost or regained funding
    unfunded_before: frozenset[tuple[str, int]] = frozenset()
    # runs the last pass left waiting in a reservation: with `state.reservations`, who was reserved now
    waiting_before: frozenset[str] = frozenset()
    moves: list[Moved] = field(default_factory=list)  # reservations whose ETA moved (§4.5)
    due: list[int] = field(default_factory=list)  # instants after now a pass is due, soonest first
    # (reservation, run) warnings a waiting reservation published before and no longer does
    lifted: list[tuple[str, str]] = field(default_factory=list)
    # runs whose file became invalid at this pass -> the file to fix (they are kept as they were)
    newly_invalid: dict[str, str] = field(default_factory=dict)
    nodes: tuple[NodeObs, ...] = ()  # the nodes the pass observed (what the fleet map draws)
    fill_grace: int = manifests.FILL_GRACE  # fill.gracePeriodSeconds, rendered on filler pods

    @property
    def running_groups(self) -> set[tuple[str, int]]:
        """(run, group) of every group with an open lease after the pass."""
        return {(x.run, x.group) for x in self.open_leases}

    @property
    def manifests(self) -> dict[str, dict[str, Any]]:
        """Path -> pod or headless Service for every open lease (rendered once, on first use)."""
        if self.rendered is None:
            self.rendered = manifests.render(self.open_leases, self.specs, self.clusters, self.fill_grace)
        return self.rendered


def plan(world: World) -> Plan:
    now, settings = world.now, world.settings
    prev = world.state
    ctx = snapshot(world)
    topo, book, specs = ctx.topo, ctx.book, ctx.specs
    kept_cordons = kept_cordons_of(world)
    lookahead_hours = settings.lookahead / 3600
    # 1. observations: the agent's swaps, runs, deletions, workload, failures, voluntary shrink
    lifecycle.fold_journal(ctx)
    lifecycle.admit_new_runs(ctx)
    deleted = lifecycle.fold_deletions(ctx)
    lifecycle.fold_workload(ctx)
    lifecycle.mark_deleted_dependencies(ctx, deleted)
    # meter GPU-hours since the last pass under the funding classes then in force, exactly
    book.unfunded = set(prev.unfunded)
    meters, cutoffs = metering.meter(
        prev.meters, book, ctx.leases, ctx.owner_of, prev.as_of, settings.spare_rate
    )
    for (b, e), m in meters.items():
        if f"{b}/{e}" in book.consumed:
            book.consumed[f"{b}/{e}"] = m.consumed + m.spare
            book.lent_hours[f"{b}/{e}"] = m.lent
    _meter_runs(ctx, prev.as_of, cutoffs)
    funding.everything(ctx)
    failover.handle_failures(ctx)
    lifecycle.resolve_after(ctx)  # after failures too: a run a node failure failed fails its waiters now
    elastic.shrink_to_desired(ctx)
    # 2. funding classes as of now (only envelopes whose leases the failures and shrinks changed)
    funding.after_failures(ctx)
    # 3-5. the line (admissions, reservations, activations), growth, fill: until nothing moves
    line = _admit(ctx, lookahead_hours)
    # 6. ETAs with the conflict sets and their odds, and remedies, for reservations still waiting
    risk = outlook.AtRisk(ctx)
    _forecast(ctx, line, set(), risk)
    _remedies(ctx, line, risk)
    _say_waiting(ctx, line)
    # 7. report
    clusters = {n.name: n.labels.get("cluster", "default") for n in topo.nodes.values()}
    by_run = status.conflicts_by_run(ctx.reservations)
    status.note_specs(ctx)
    runs = {key: status.run_status(ctx, key, by_run.get(key, [])) for key in sorted(ctx.records)}
    budgets = status.budget_status(ctx, meters)
    retained = [
        x for x in ctx.leases if x.open or (x.ended is not None and now - x.ended < settings.retention)
    ]
    reservations = {
        k: v
        for k, v in sorted(ctx.reservations.items())
        if v.state == ResState.PENDING or (v.ended is not None and now - v.ended < settings.retention)
    }
    ctx.keep_messages()
    state = FleetState(
        now,
        sorted(retained, key=lambda x: (x.run, x.start, x.name)),
        reservations,
        ctx.records,
        meters,
        frozenset(kept_cordons | ctx.cordon),
        frozenset(book.unfunded),
    )
    open_leases = [x for x in ctx.leases if x.open]
    violations = invariants.check(open_leases, book, set(ctx.records))
    if line.unsettled:
        violations.append(f"the line did not settle in {MAX_ROUNDS} rounds")
    return Plan(
        state, ctx.events, runs, budgets, sorted(ctx.cordon), list(topo.problems), violations,
        open_leases, specs, clusters, frozen=frozenset(world.frozen_runs), unfunded_before=prev.unfunded,
        waiting_before=frozenset(k for k, r in prev.reservations.items() if r.state == ResState.PENDING),
        moves=_moves(ctx), due=_due(ctx, meters), lifted=_lifted(ctx),
        newly_invalid={k: p for k, p in sorted(world.frozen_runs.items()) if not (prev.runs.get(k) and prev.runs[k].invalid)},
        nodes=world.nodes, fill_grace=world.settings.fill_grace,
    )  # fmt: skip


MAX_ROUNDS = 50  # rounds of the line a pass may take; each round starts, cuts or tries something new


def _admit(ctx: Pass, lookahead_hours: float) -> Line:
    """The line and growth again until a round of them changes nothing, each reservation's
    activation tried once (again only when, with no notice period, its forecast warned someone new
    it may cut at once), then opportunistic fill (so no activation of the pass reclaims
    a fill it just opened), and all again while the fill changes something: capacity freed in the
    pass goes to whoever fits, in line order, and the last round's line (which changed nothing) is
    what a second pass would see."""
    attempted: set[str] = set()
    for _ in range(MAX_ROUNDS):
        mark = (len(ctx.leases), ctx.closures)
        line = admission.run_line(ctx, lookahead_hours, attempted)
        elastic.grow(ctx, line.held, lookahead_hours)
        failover.settle_fills(ctx)
        _settle_phases(ctx)
        funding.after_line(ctx, line.funding_holds)
        due_now = _forecast(ctx, line, attempted)
        if mark != (len(ctx.leases), ctx.closures) or due_now:
            continue
        # the line is at rest (no activation will cut a spare now): opportunistic work last
        admission.fill(ctx)
        elastic.grow(ctx, {}, lookahead_hours, opportunistic=True)
        failover.settle_fills(ctx)
        _settle_phases(ctx)
        if mark == (len(ctx.leases), ctx.closures):
            return line
    line.unsettled = True  # a bug, not a fleet: reported as a §4.9 violation, nothing is written
    return line


def _forecast(ctx: Pass, line: Line, attempted: set[str], risk: outlook.AtRisk | None = None) -> bool:
    """Every waiting reservation's ETA and confidence (§4.5), and with `risk` (the pass's last word)
    its conflict set with each member's odds. True when one is due now that this pass has not tried."""
    now, notice = ctx.now, ctx.world.settings.notice
    entries: list[outlook.Entry] = []
    for key in line.waiting:
        res = ctx.reservations[key]
        if res.state != ResState.PENDING:
            continue
        w = line.states[key]
        window = w.short.window if w.short is not None and w.placeable else None
        if window is not None:
            res.window = window
        if w.placeable and not w.scope.unplaceable and (w.holds or window is not None):
            # a reservation aligned to a window opens 10 s past it, as its ETA promised
            earliest = max(res.since + notice, res.window + 10 if res.window is not None else 0)
            entries.append(outlook.Entry(key, w.scope.short, w.scope.claims, earliest, window))
        else:  # short of funding with no window to fund it, or no fleet it reaches can hold it now
            res.earliest_start, res.confidence = None, Confidence.UNKNOWN
    seen = outlook.outlook(ctx, entries, risk or outlook.AtRisk(ctx), with_odds=risk is not None)
    due = False
    for key, found in seen.items():
        res = ctx.reservations[key]
        res.earliest_start = found.eta
        if found.eta is None:
            res.confidence = Confidence.UNKNOWN
        else:
            res.confidence = (
                Confidence.WINDOW if line.states[key].short is not None else Confidence.CONSERVATIVE
            )
        due = due or (found.eta is not None and found.eta <= now and key not in attempted)
    for key, res in ctx.reservations.items():
        if res.state != ResState.PENDING:
            continue
        if risk is not None:
            res.conflicts = [] if key not in seen else res.conflicts
        if key in ctx.world.frozen_runs and res.earliest_start is not None and res.earliest_start <= now:
            res.earliest_start, res.confidence = None, Confidence.UNKNOWN  # waits on its file
    if risk is not None:
        outlook.publish(ctx, seen)
    elif notice == 0:
        # a member warned now is cuttable at once: a reservation due now that was tried before it was
        # warned is tried again with it, as a second pass at this instant would (§4.5, a fixed point).
        # The sets only grow, so the retries end; a run cut at this instant stays out (`_turn`).
        for key in outlook.warn(ctx, seen):
            eta = ctx.reservations[key].earliest_start
            if key in attempted and eta is not None and eta <= now:
                attempted.discard(key)
                due = True
    return due


def _remedies(ctx: Pass, line: Line, risk: outlook.AtRisk) -> None:
    """Remedies as §4.5 lists them: for a funding shortfall every one that applies, the binding one
    first; for a capacity deficit what can act on it in scope, with the GPUs each can free."""
    for key in line.waiting:
        res = ctx.reservations[key]
        if res.state != ResState.PENDING:
            continue
        w = line.states[key]
        if not w.placeable or w.why == Wait.REQUEUED:  # no advice: the run must change, or it fits
            res.remedies, res.remedy_gpus = (), ()
        elif w.short is not None:
            res.remedies, res.remedy_gpus = w.short.remedies, ()
        elif w.why == Wait.HEADROOM:  # funded, but not where it fits
            res.remedies, res.remedy_gpus = (reasons.FUNDING_REMEDY[Wait.HEADROOM],), ()
        else:
            res.remedies, res.remedy_gpus = risk.remedies(w.scope.short)


def _say_waiting(ctx: Pass, line: Line) -> None:
    """A reserved run's message: why it waits, after what put it back in line when something did."""
    for key in line.waiting:
        res = ctx.reservations[key]
        rec = ctx.records.get(key)
        if res.state != ResState.PENDING or rec is None or rec.phase != Phase.PENDING:
            continue
        w = line.states[key]
        if not w.placeable:
            ctx.set_status(key, reasons.held_back(res.reason, rec.cause))
            continue
        if w.why == Wait.REQUEUED:
            ctx.set_status(key, rec.cause or reasons.reserved(res.reason))
            continue
        capacity = res.deficit if w.why == Wait.CLUSTER_SHORT else None
        ctx.set_status(key, reasons.reserved(res.reason, rec.cause, capacity))


def _moves(ctx: Pass) -> list[Moved]:
    """A waiting reservation whose ETA is not what the last pass published: the ledger says so."""
    out = []
    for key, res in sorted(ctx.reservations.items()):
        was = ctx.world.state.reservations.get(key)
        if (
            was is not None
            and was.state == ResState.PENDING
            and res.state == ResState.PENDING
            and was.earliest_start != res.earliest_start
        ):
            out.append(Moved(ctx.now, key, res.earliest_start, was.earliest_start, res.reason))
    return out


def _lifted(ctx: Pass) -> list[tuple[str, str]]:
    """Conflict-set warnings the last pass published that this one does not (the commit says so)."""
    out = []
    for key, was in sorted(ctx.world.state.reservations.items()):
        if was.state != ResState.PENDING or not was.conflicts:
            continue
        res = ctx.reservations.get(key)
        now = {e.run for e in res.conflicts} if res is not None and res.state == ResState.PENDING else set()
        out += [(key, e.run) for e in was.conflicts if e.run not in now]
    return out


def _due(ctx: Pass, meters: dict[tuple[str, str], Any]) -> list[int]:
    """Instants after now at which a pass is due without any change (§4.1): an ETA, an envelope
    window opening or closing, a running claim spending an envelope's GPU-hour cap."""
    now = ctx.now
    times = {r.earliest_start for r in ctx.reservations.values() if r.state == ResState.PENDING}
    for env in ctx.book.envs.values():
        times |= {env.start, env.end}
    times |= set(metering.spent_when(ctx.book, ctx.leases, ctx.world.settings.spare_rate))
    return sorted(t for t in times if t is not None and t > now)


def _meter_runs(ctx: Pass, since: int | None, cutoffs: dict[str, metering.Cutoff]) -> None:
    if since is None:
        return
    for lease in ctx.leases:
        if lease.role != Role.ACTIVE or lease.payer.key is None:
            continue
        start = max(lease.start, since)
        end: float = lease.ended if lease.ended is not None else ctx.now
        if (lease.run, lease.group) in ctx.book.unfunded:
            continue
        rec = ctx.records.get(lease.run)
        if rec is None:
            continue
        own = lease.payer.owner == ctx.owner_of(lease.run)
        cut = cutoffs.get(lease.payer.env_key or "")
        if cut is not None:
            env = ctx.book.envs.get(lease.payer.env_key or "")
            loan = env is not None and ctx.book.category(ctx.owner_of(lease.run), env) == accounting.LOAN
            end = cut.end(end, loan)
        if end <= start:
            continue
        hours = lease.gpus * (end - start) / 3600
        if own:
            rec.owned_hours += hours
        else:
            rec.borrowed_hours += hours


def _settle_phases(ctx: Pass) -> None:
    """A running run with no active GPUs left (and no spare swap pending) is back in line."""
    for key, rec in ctx.records.items():
        if rec.phase == Phase.RUNNING and ctx.allocated(key) == 0 and key not in ctx.world.frozen_runs:
            ctx.close_run(key, reasons.Closure.RUN_FAILED)
            ctx.set_status(key, rec.message, Phase.PENDING)
