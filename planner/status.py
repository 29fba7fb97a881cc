"""Status: Run.status and Budget.status as users read them, derived from the pass's final state.

Derives numbers only (widths, funding split, usage, headroom, GPU-hours) and notes what each run's
spec asks for, or which file to fix while it is invalid; decides nothing.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from planner import elastic, reasons
from planner.accounting import FAMILY, LOAN
from planner.context import Pass
from planner.reasons import Phase, ResState, Role
from planner.world import EnvelopeMeter, Reservation
from schemas.common import format_time
from schemas.run import Run

MAX_CONFLICTS_SHOWN = 20


def bounds(spec: Run) -> tuple[int, int, int]:
    """(min, max, desired) width a spec asks for."""
    m = spec.spec.malleable
    total = spec.spec.resources.totalGPUs
    return (m.minTotalGPUs if m else total, m.maxTotalGPUs if m else total, elastic.desired(spec))


def note_specs(ctx: Pass) -> None:
    """Record each run's width from its spec; a frozen run (spec invalid now) keeps the last valid
    width and its message names the file to fix, until that file is valid again."""
    for key, rec in ctx.records.items():
        spec = ctx.specs.get(key)
        path = ctx.world.frozen_runs.get(key)
        if spec is not None:
            rec.width = bounds(spec)
        if path is not None:
            ctx.set_status(key, reasons.spec_invalid(path))
        elif rec.invalid and key not in ctx.messages:
            ctx.set_status(key, reasons.SPEC_VALID_AGAIN)
        rec.invalid = path is not None


def run_status(ctx: Pass, key: str, conflicts: list[dict[str, Any]]) -> dict[str, Any]:
    rec = ctx.records[key]
    spec = ctx.specs.get(key)
    leases = ctx.open_leases(key)
    owner = ctx.owner_of(key)
    owned = unfunded = fill = 0
    paid: dict[str, dict[str, int]] = {FAMILY: defaultdict(int), LOAN: defaultdict(int)}  # by other owners
    for lease in leases:
        if lease.role == Role.BORROWED:
            fill += lease.gpus
            continue
        if lease.role != Role.ACTIVE:
            continue
        env = ctx.book.envs.get(lease.payer.env_key or "")
        if (lease.run, lease.group) in ctx.book.unfunded:
            unfunded += lease.gpus
        elif lease.payer.owner == owner:
            owned += lease.gpus
        else:  # family shares, a sponsor lends (§4.2): kept apart, as maxBorrowGPUs counts only loans
            kind = FAMILY if env is not None and ctx.book.category(owner, env) == FAMILY else LOAN
            paid[kind][lease.payer.owner] += lease.gpus
    allocated = ctx.allocated(key)
    width: dict[str, Any] = {"allocated": allocated}
    if rec.width is not None:  # from the last valid spec: a frozen run keeps showing it
        low, high, want = rec.width
        width = {"min": low, "max": high, "desired": want, "allocated": allocated}
        malleable = spec.spec.malleable if spec is not None else None
        if malleable is not None and rec.phase == Phase.RUNNING and ctx.counted(key) < want:
            width["pending"] = f"Grow to {want}"
        elif malleable is None and spec is not None and rec.phase == Phase.RUNNING and allocated != want:
            # a fixed-width run keeps the width it started with; say so rather than ignore the edit
            width["pending"] = f"{want} GPUs once the run is re-created (a running run keeps its width)"
    out: dict[str, Any] = {
        "phase": rec.phase.value,
        "message": ctx.messages.get(key, rec.message),
        "submittedAt": format_time(rec.submitted),
        "width": width,
        "funding": {
            "ownedGPUs": owned,
            "familyGPUs": sum(paid[FAMILY].values()),
            "sponsoredGPUs": sum(paid[LOAN].values()),
            "borrowedGPUs": sum(paid[FAMILY].values()) + sum(paid[LOAN].values()),
            "unfundedGPUs": unfunded,
            "fillGPUs": fill,
            "family": [{"owner": o, "gpus": n} for o, n in sorted(paid[FAMILY].items())],
            "sponsors": [{"owner": o, "gpus": n} for o, n in sorted(paid[LOAN].items())],
            "ownedGPUHours": round(rec.owned_hours, 3),
            "borrowedGPUHours": round(rec.borrowed_hours, 3),
        },
    }
    if rec.started is not None and rec.phase == Phase.RUNNING:
        out["startedAt"] = format_time(rec.started)
    res = ctx.reservations.get(key)
    if res is not None and res.state == ResState.PENDING:
        eta = None if res.earliest_start is None else format_time(res.earliest_start)
        out["reservation"] = {"name": key.split("/", 1)[1], "earliestStart": eta}
    if conflicts:
        out["conflicts"] = conflicts[:MAX_CONFLICTS_SHOWN]
        if len(conflicts) > MAX_CONFLICTS_SHOWN:
            out["conflictsTotal"] = len(conflicts)
    return out


def conflicts_by_run(reservations: dict[str, Reservation]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    pending = [
        k for k, r in reservations.items() if r.state == ResState.PENDING and r.earliest_start is not None
    ]
    for key in sorted(pending, key=lambda k: (reservations[k].earliest_start or 0, k)):
        res = reservations[key]
        assert res.earliest_start is not None
        for entry in res.conflicts:
            out[entry.run].append(
                {
                    "reservation": key,
                    "probability": entry.probability,
                    "earliestStart": format_time(res.earliest_start),
                }
            )
    return out


def budget_status(ctx: Pass, meters: dict[tuple[str, str], EnvelopeMeter]) -> dict[str, dict[str, Any]]:
    usage: dict[str, dict[str, int]] = defaultdict(
        lambda: {"active": 0, "spare": 0, "out": 0, "lent": 0, "unfunded": 0}
    )
    for lease in ctx.leases:
        env_key = lease.payer.env_key  # "budget/envelope", None when it names no envelope
        if not lease.open or lease.role == Role.BORROWED or env_key is None:
            continue
        env = ctx.book.envs.get(env_key)
        if env is None:
            continue
        u = usage[env_key]
        if (lease.run, lease.group) in ctx.book.unfunded:
            u["unfunded"] += lease.gpus
            continue
        u["spare" if lease.role == Role.SPARE else "active"] += lease.gpus
        cat = ctx.book.category(ctx.owner_of(lease.run), env)
        if cat in (FAMILY, LOAN):
            u["out"] += lease.gpus
        if cat == LOAN:
            u["lent"] += lease.gpus
    out: dict[str, dict[str, Any]] = {}
    for env in sorted(ctx.book.envs.values(), key=lambda e: e.key):
        u = usage[env.key]
        m = meters.get((env.budget, env.name), EnvelopeMeter())
        entry = {
            "name": env.name,
            "usage": {
                "activeGPUs": u["active"],
                "spareGPUs": u["spare"],
                "borrowedOutGPUs": u["out"],
                "unfundedGPUs": u["unfunded"],
            },
            "lentGPUs": u["lent"],
            "headroom": max(0, ctx.book.capacity(env) - ctx.book.used(env.key)),  # as admission counts
            "consumedGPUHours": round(m.consumed, 3),
            "spareGPUHours": round(m.spare, 3),
        }
        out.setdefault(env.budget, {"envelopes": []})["envelopes"].append(entry)
    for name, path in ctx.world.frozen_budgets.items():
        if name in out:  # planned from its last valid version
            out[name]["message"] = f"{reasons.spec_invalid(path)}; funding kept as last valid"
    return out
