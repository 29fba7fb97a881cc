"""One reconcile pass, in the order of §4.1: observe, fund, line up, grow, forecast, report.

`plan(world)` is the whole decision: a pure function of the snapshot. It returns the next state,
the ledger events and statuses; it writes nothing and reads no clock. The pod manifests are the
render stage's (`Plan.manifests`, built on first use): the simulator and `jobtree plan` never need them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planner import (
    accounting,
    admission,
    elastic,
    failover,
    forecast,
    invariants,
    lifecycle,
    manifests,
    status,
)
from planner.context import Event, Pass
from planner.topology import Topology, is_fenced
from planner.world import FleetState, Lease, World, run_key
from schemas.run import Run


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

    @property
    def running_groups(self) -> set[tuple[str, int]]:
        """(run, group) of every group with an open lease after the pass."""
        return {(x.run, x.group) for x in self.open_leases}

    @property
    def manifests(self) -> dict[str, dict[str, Any]]:
        """Path -> pod or headless Service for every open lease (rendered once, on first use)."""
        if self.rendered is None:
            self.rendered = manifests.render(self.open_leases, self.specs, self.clusters)
        return self.rendered


def plan(world: World) -> Plan:
    now, settings = world.now, world.settings
    prev = world.state
    leases = [x.copy() for x in prev.leases]
    # jobtree's own cordons hold while the node is down; once it is observed healthy again the
    # cluster's cordon flag decides (an operator uncordons a repaired node)
    down = {n.name for n in world.nodes if is_fenced(n, now, settings.not_ready_grace)}
    present = {n.name for n in world.nodes}
    kept_cordons = frozenset(n for n in prev.cordoned if n in down or n not in present)
    topo = Topology(world.nodes, now, settings.not_ready_grace, kept_cordons)
    for lease in leases:
        if lease.open:
            topo.occupy(lease)
    topo.recount()
    envs = accounting.envelopes(world.budgets)
    book = accounting.Book(envs, accounting.family_order(world.budgets), now)
    book.frozen = {k for k, e in envs.items() if e.budget in world.frozen_budgets}
    specs = {run_key(r): r for r in world.runs}
    ctx = Pass(
        world, topo, book, specs,
        {k: v.copy() for k, v in prev.runs.items()},
        {k: v.copy() for k, v in prev.reservations.items()},
        leases,
    )  # fmt: skip
    ctx.index()
    lookahead_hours = settings.lookahead / 3600
    # 1. observations: runs, deletions, workload, failures, voluntary shrink
    lifecycle.admit_new_runs(ctx)
    deleted = lifecycle.fold_deletions(ctx)
    lifecycle.fold_workload(ctx)
    lifecycle.mark_deleted_dependencies(ctx, deleted)
    lifecycle.resolve_after(ctx)
    # meter GPU-hours since the last pass under the funding classes then in force
    book.unfunded = set(prev.unfunded)
    meters = accounting.meter(prev.meters, book, ctx.leases, ctx.owner_of, prev.as_of, settings.spare_rate)
    for (b, e), m in meters.items():
        if f"{b}/{e}" in book.consumed:
            book.consumed[f"{b}/{e}"] = m.consumed + m.spare
            book.lent_hours[f"{b}/{e}"] = m.lent
    _meter_runs(ctx, prev.as_of)
    admission.accounting_refresh(ctx)
    failover.handle_failures(ctx)
    elastic.shrink_to_desired(ctx)
    # 2. funding classes as of now (only envelopes whose leases the failures and shrinks changed)
    admission.refresh_after_failures(ctx)
    # 3. the line: admissions, reservations, activations
    line = admission.run_line(ctx, lookahead_hours)
    # 4. growth, never into capacity held for funded reservations
    elastic.grow(ctx, line.held, lookahead_hours)
    admission.refresh_after_line(ctx, line)
    admission.settle_funding(ctx, line, lookahead_hours)
    # 5. conflict sets for reservations still waiting
    order = sorted(
        (o for o in line.order if ctx.reservations[o[0]].state == "Pending"),
        key=lambda o: (o[2], ctx.rank(o[0])),
    )
    risk = forecast.AtRisk(ctx)
    leases_then = (len(ctx.leases), ctx.closures)
    forecast.publish(ctx, forecast.conflict_sets(ctx, order, risk))
    ordered = {o[0] for o in order}
    for key, res in ctx.reservations.items():
        if res.state == "Pending" and key not in ordered:
            res.conflicts = []
    failover.settle_fills(ctx)
    _settle_phases(ctx)
    # 6. report
    clusters = {n.name: n.labels.get("cluster", "default") for n in topo.nodes.values()}
    by_run = status.conflicts_by_run(ctx.reservations)
    if (len(ctx.leases), ctx.closures) != leases_then:  # fills or phases moved leases since
        risk = forecast.AtRisk(ctx)
    shorts = {k: short for k, short, _ in line.order}
    for key, res in ctx.reservations.items():
        if res.state == "Pending" and not res.reason.startswith(("budget", "borrow")):
            res.remedies = tuple(risk.remedies(shorts.get(key, {})))
    status.note_specs(ctx)
    runs = {key: status.run_status(ctx, key, by_run.get(key, [])) for key in sorted(ctx.records)}
    budgets = status.budget_status(ctx, meters)
    retained = [
        x for x in ctx.leases if x.open or (x.ended is not None and now - x.ended < settings.retention)
    ]
    reservations = {
        k: v
        for k, v in sorted(ctx.reservations.items())
        if v.state == "Pending" or (v.ended is not None and now - v.ended < settings.retention)
    }
    for key, rec in ctx.records.items():
        if key in ctx.messages:
            rec.message = ctx.messages[key]
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
    return Plan(
        state, ctx.events, runs, budgets, sorted(ctx.cordon), list(topo.problems), violations,
        open_leases, specs, clusters, frozen=frozenset(world.frozen_runs), unfunded_before=prev.unfunded,
        waiting_before=frozenset(k for k, r in prev.reservations.items() if r.state == "Pending"),
    )  # fmt: skip


def _meter_runs(ctx: Pass, since: int | None) -> None:
    if since is None:
        return
    for lease in ctx.leases:
        if lease.role != "Active" or lease.payer.key is None:
            continue
        start = max(lease.start, since)
        end = lease.ended if lease.ended is not None else ctx.now
        if end <= start or (lease.run, lease.group) in ctx.book.unfunded:
            continue
        rec = ctx.records.get(lease.run)
        if rec is None:
            continue
        hours = lease.gpus * (end - start) / 3600
        if lease.payer.owner == ctx.owner_of(lease.run):
            rec.owned_hours += hours
        else:
            rec.borrowed_hours += hours


def _settle_phases(ctx: Pass) -> None:
    """A running run with no active GPUs left (and no spare swap pending) is back in line."""
    for key, rec in ctx.records.items():
        if rec.phase == "Running" and ctx.allocated(key) == 0 and key not in ctx.world.frozen_runs:
            ctx.close_run(key, "RunFailed")
            rec.phase, rec.started = "Pending", None
