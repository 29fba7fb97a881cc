"""Lifecycle: fold what was observed into the pass — new and deleted runs, workload outcomes, `after`.

Runs first; nothing here funds, places or cuts. Run deleted → `RunDeleted`; workload succeeded →
`Completed` and Succeeded; workload failed → `WorkloadFailed` (the rest `RunFailed`) and Failed.
"""

from __future__ import annotations

from planner.context import Pass
from planner.world import RunRecord


def admit_new_runs(ctx: Pass) -> None:
    """Every run seen for the first time is submitted now: Waiting behind `after`, else Pending."""
    for key, run in sorted(ctx.specs.items()):
        if key not in ctx.records:
            ctx.records[key] = RunRecord(key, ctx.now, "Waiting" if run.spec.after else "Pending")


def fold_deletions(ctx: Pass) -> set[str]:
    """Runs whose file is gone: every lease ends `RunDeleted`, a pending reservation fails."""
    deleted: set[str] = set()
    for key in sorted(ctx.records):
        if key in ctx.specs or key in ctx.world.frozen_runs:
            continue
        ctx.close_run(key, "RunDeleted")
        res = ctx.reservations.get(key)
        if res is not None and res.state == "Pending":
            res.state, res.reason, res.ended = "Failed", "run deleted", ctx.now
        del ctx.records[key]
        deleted.add(key)
    return deleted


def fold_workload(ctx: Pass) -> None:
    """Workload outcomes: a whole run, or one group at a time until every group has succeeded."""
    for ev in ctx.world.workload:
        rec = ctx.records.get(ev.run)
        if rec is None or rec.phase != "Running":
            continue
        active = ctx.groups(ev.run)
        if ev.event == "Succeed":
            targets = [g for g in active if ev.group is None or g == ev.group]
            for g in targets:
                for lease in _group_leases(ctx, ev.run, g):
                    ctx.close_lease(lease, "Completed")
            if not ctx.groups(ev.run):
                ctx.close_run(ev.run, "Completed")
                _finish(ctx, rec, "Succeeded", "all groups completed")
        else:
            failed = next(
                (x for x in ctx.open_leases(ev.run) if ev.group is None or x.group == ev.group), None
            )
            for lease in sorted(ctx.open_leases(ev.run), key=lambda x: (x.group, x.node, x.name)):
                same_group = ev.group is None or lease.group == ev.group
                ctx.close_lease(lease, "WorkloadFailed" if same_group else "RunFailed")
            ctx.by_run[ev.run] = []
            where = "workload failed" if ev.group is None else f"workload of group {ev.group} failed"
            _finish(ctx, rec, "Failed", where if failed is not None else "workload failed")


def _group_leases(ctx: Pass, run: str, group: int) -> list:  # type: ignore[type-arg]
    return sorted(
        (x for x in ctx.open_leases(run) if x.group == group), key=lambda x: (x.role, x.node, x.name)
    )


def _finish(ctx: Pass, rec: RunRecord, phase: str, message: str) -> None:
    rec.phase, rec.message, rec.finished = phase, message, ctx.now
    res = ctx.reservations.get(rec.run)
    if res is not None and res.state == "Pending":
        res.state, res.ended = "Failed", ctx.now


def resolve_after(ctx: Pass) -> None:
    """A Waiting run joins the line once every run it waits for Succeeded; it fails if one failed or vanished."""
    for key in sorted(ctx.records):
        rec = ctx.records[key]
        spec = ctx.specs.get(key)
        if rec.phase != "Waiting" or spec is None:
            continue
        ns = key.split("/", 1)[0]
        waiting: list[str] = []
        for dep in spec.spec.after:
            dep_key = f"{ns}/{dep}"
            dep_rec = ctx.records.get(dep_key)
            if dep_rec is None:
                waiting.append(f"{dep_key} (not submitted)")
            elif dep_rec.phase == "Failed":
                _finish(ctx, rec, "Failed", f"dependency {dep_key} failed")
                break
            elif dep_rec.phase != "Succeeded":
                waiting.append(dep_key)
        else:
            if waiting:
                rec.message = "waiting for " + ", ".join(waiting)
            else:
                rec.phase, rec.message = "Pending", "dependencies succeeded"


def mark_deleted_dependencies(ctx: Pass, deleted: set[str]) -> None:
    """A Waiting run fails when a run it waits for is deleted before it succeeded."""
    for key, rec in sorted(ctx.records.items()):
        spec = ctx.specs.get(key)
        if rec.phase != "Waiting" or spec is None:
            continue
        ns = key.split("/", 1)[0]
        gone = [f"{ns}/{d}" for d in spec.spec.after if f"{ns}/{d}" in deleted]
        if gone:
            _finish(ctx, rec, "Failed", f"dependency {gone[0]} was deleted")
