"""Lifecycle: fold what was observed into the pass — new and deleted runs, workload outcomes, `after`.

Runs first; nothing here funds, places or cuts. Run deleted → `RunDeleted`; a group whose pods all
succeeded → `Completed` (never re-grown, still counted toward the run's minimum), every group →
Succeeded; workload failed → `WorkloadFailed` (the rest `RunFailed`) and Failed; a pod disrupted
(§7.6) is never a failure of its run (`failover` handles it).
"""

from __future__ import annotations

from planner import reasons
from planner.context import Pass
from planner.reasons import Closure, Phase, ResState
from planner.world import DISRUPT, Lease, RunRecord


def fold_journal(ctx: Pass) -> None:
    """Swaps the in-cluster agent carried out since the last pass (§7.5), folded in as observed
    facts at the instants they happened, before anything else: leases closed and opened, nodes
    cordoned, run status changed. An entry folded before changes nothing (its leases are in the
    state already, so neither are its cordons and statuses applied again over what came since), so
    a swap is committed exactly once and never planned twice."""
    by_name = {x.name: x for x in ctx.leases if x.open}
    for entry in sorted(ctx.world.journal, key=lambda f: (f.at, f.entry)):
        changed = not entry.closed and not entry.opened  # an entry of cordons alone: nothing tells
        for name, kind in entry.closed:
            lease = by_name.pop(name, None)
            if lease is not None and lease.open:  # an earlier entry's close may have taken it with it
                ctx.close_lease(lease, kind, at=entry.at, journal=entry.entry)
                changed = True
        for lease in entry.opened:
            adopted = lease.copy()
            if ctx.adopt_lease(adopted, entry.entry):
                by_name[adopted.name] = adopted
                changed = True
        if not changed:
            continue  # folded by an earlier pass: what came since (a later status, an uncordon) stands
        ctx.cordon.update(n for n in entry.cordon if n not in ctx.world.state.cordoned)
        for change in entry.status:
            rec = ctx.records.get(change.run)
            if rec is not None and (rec.phase, ctx.messages.get(change.run, rec.message)) != (
                change.phase,
                change.message,
            ):
                ctx.set_status(change.run, change.message, change.phase, cause=change.cause or None)


def admit_new_runs(ctx: Pass) -> None:
    """Every run seen for the first time is submitted now: Waiting behind `after`, else Pending.

    A run whose file is invalid from the start is recorded too (its status names the file to fix),
    but is not in line until the file is valid."""
    for key, run in sorted(ctx.specs.items()):
        if key not in ctx.records:
            ctx.records[key] = RunRecord(key, ctx.now, Phase.WAITING if run.spec.after else Phase.PENDING)
    for key in sorted(ctx.world.frozen_runs):
        if key not in ctx.records and key not in ctx.specs:
            ctx.records[key] = RunRecord(key, ctx.now, Phase.PENDING)


def fold_deletions(ctx: Pass) -> set[str]:
    """Runs whose file is gone: every lease ends `RunDeleted`, a pending reservation fails."""
    deleted: set[str] = set()
    for key in sorted(ctx.records):
        if key in ctx.specs or key in ctx.world.frozen_runs:
            continue
        ctx.close_run(key, Closure.RUN_DELETED)
        res = ctx.reservations.get(key)
        if res is not None and res.state == ResState.PENDING:
            res.state, res.reason, res.ended = ResState.FAILED, "run deleted", ctx.now
        del ctx.records[key]
        deleted.add(key)
    return deleted


def fold_workload(ctx: Pass) -> None:
    """Workload outcomes: a whole run, or one group at a time until every group has succeeded. A
    disruption is no outcome of the workload: the failover's (`failover.handle_disruptions`)."""
    for ev in ctx.world.workload:
        rec = ctx.records.get(ev.run)
        if rec is None or rec.phase != Phase.RUNNING or ev.event == DISRUPT:
            continue
        active = ctx.groups(ev.run)
        if ev.event == "Succeed":
            for g in (g for g in active if ev.group is None or g == ev.group):
                rec.completed += sum(x.gpus for x in active[g])
                for lease in _group_leases(ctx, ev.run, g):
                    ctx.close_lease(lease, Closure.COMPLETED)
            if not ctx.groups(ev.run):
                ctx.close_run(ev.run, Closure.COMPLETED)
                _finish(ctx, rec, Phase.SUCCEEDED, reasons.ALL_COMPLETED)
        else:
            for lease in sorted(ctx.open_leases(ev.run), key=lambda x: (x.group, x.node, x.name)):
                same_group = ev.group is None or lease.group == ev.group
                ctx.close_lease(lease, Closure.WORKLOAD_FAILED if same_group else Closure.RUN_FAILED)
            ctx.by_run[ev.run] = []
            known = ev.group is None or ev.group in active
            _finish(ctx, rec, Phase.FAILED, reasons.workload_failed(ev.group if known else None))


def _group_leases(ctx: Pass, run: str, group: int) -> list[Lease]:
    return sorted(
        (x for x in ctx.open_leases(run) if x.group == group), key=lambda x: (x.role, x.node, x.name)
    )


def _finish(ctx: Pass, rec: RunRecord, phase: Phase, message: str) -> None:
    ctx.set_status(rec.run, message, phase)
    res = ctx.reservations.get(rec.run)
    if res is not None and res.state == ResState.PENDING:
        res.state, res.ended = ResState.FAILED, ctx.now


def resolve_after(ctx: Pass) -> None:
    """A Waiting run joins the line once every run it waits for Succeeded; it fails if one failed.

    A name that does not exist (never submitted, or deleted before this run waited for it) keeps
    it Waiting, with a message naming it. A chain settles in one pass: a run that fails here fails
    the runs waiting for it at once."""
    failed = True
    while failed:
        failed = False
        for key in sorted(ctx.records):
            failed = _resolve_one(ctx, key) or failed


def _resolve_one(ctx: Pass, key: str) -> bool:
    """One Waiting run's dependencies; True when one failed, so it failed too."""
    rec = ctx.records[key]
    spec = ctx.specs.get(key)
    if rec.phase != Phase.WAITING or spec is None:
        return False
    ns = key.split("/", 1)[0]
    waiting: list[str] = []
    for dep in spec.spec.after:
        dep_key = f"{ns}/{dep}"
        dep_rec = ctx.records.get(dep_key)
        if dep_rec is None:
            waiting.append(f"{dep_key} (no such run)")
        elif dep_rec.phase == Phase.FAILED:
            _finish(ctx, rec, Phase.FAILED, reasons.dependency_failed(dep_key))
            return True
        elif dep_rec.phase != Phase.SUCCEEDED:
            waiting.append(dep_key)
    if waiting:
        ctx.set_status(key, reasons.waiting_for(waiting))
    else:
        ctx.set_status(key, reasons.DEPENDENCIES_SUCCEEDED, Phase.PENDING)
    return False


def mark_deleted_dependencies(ctx: Pass, deleted: set[str]) -> None:
    """A Waiting run fails when a run it waits for is deleted while it waits (not one submitted with
    it at this instant: that one never waited for a run that existed)."""
    for key, rec in sorted(ctx.records.items()):
        spec = ctx.specs.get(key)
        if rec.phase != Phase.WAITING or spec is None or rec.submitted == ctx.now:
            continue
        ns = key.split("/", 1)[0]
        gone = [f"{ns}/{d}" for d in spec.spec.after if f"{ns}/{d}" in deleted]
        if gone:
            _finish(ctx, rec, Phase.FAILED, reasons.dependency_deleted(gone[0]))
