"""`budgets usage` and `sponsors`: each envelope's use, and who may lend to whom, from the spec and `state/`.

Usage per envelope: its concurrency, what it funds for its owner's own runs, what it shares with
family and what it lends to sponsored runs (apart), what its owner's runs borrow in where it
reaches, what it leaves charged to nobody, its spares, GPU-hours used against the cap, headroom
and window. Then what the owner's runs hold on others' envelopes (`borrowing`), family and sponsors
apart, also where the owner has no envelope at all. The envelope numbers are Budget.status as the
planner wrote it; what is borrowed is counted here from the open leases of the owner's runs.
Decides nothing.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from planner import accounting
from planner.reasons import Role
from planner.world import Lease
from reconciler.views import funding, runs
from reconciler.views.fleet import Fleet
from schemas.budget import Envelope
from schemas.common import format_time


def _reaches(fleet: Fleet, env: Envelope) -> set[str]:
    """Nodes of the envelope's flavor its selector matches (`*` matches any value)."""
    return {
        n.name
        for n in fleet.nodes.values()
        if n.labels.get("gpu.flavor") == env.flavor
        and all(v == "*" or n.labels.get(k) == v for k, v in env.selector.items())
    }


def _held_of_others(fleet: Fleet, owner: str) -> list[tuple[str, Lease, str]]:
    """(run, lease, family or sponsor) of every funded open Active lease of `owner`'s runs that
    another owner's envelope pays."""
    out = []
    for run in fleet.run_keys:
        if fleet.owner_of(run) != owner:
            continue
        for x in fleet.leases(run):
            if (
                x.open
                and x.role == Role.ACTIVE
                and x.payer.owner != owner
                and (run, x.group) not in fleet.unfunded
            ):
                out.append((run, x, x.funding or funding.source(fleet, owner, x.payer.as_dict())))
    return out


def _borrowed_in(held: list[tuple[str, Lease, str]]) -> dict[str, dict[tuple[str, str], int]]:
    """`{node: {(lender owner, family or sponsor): GPUs}}` of what `_held_of_others` found."""
    out: dict[str, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    for _, x, how in held:
        out[x.node][(x.payer.owner, how)] += x.gpus
    return out


def borrowing(fleet: Fleet, owners: list[str]) -> list[dict[str, Any]]:
    """What each owner's runs hold on other owners' envelopes, per paying envelope: family and
    sponsors apart, whether or not the borrower has an envelope there itself."""
    rows = []
    for owner in owners:
        paid: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        for run, x, how in _held_of_others(fleet, owner):
            key = (how, x.payer.owner, str(x.payer.budget), str(x.payer.envelope))
            entry = paid.setdefault(key, {"gpus": 0, "runs": set()})
            entry["gpus"] += x.gpus
            entry["runs"].add(run)
        for (how, lender, budget, envelope), entry in sorted(
            paid.items(), key=lambda kv: (funding.RANK[kv[0][0]], kv[0][1:])
        ):
            rows.append(
                {
                    "borrower": owner,
                    "lender": lender,
                    "budget": budget,
                    "envelope": envelope,
                    "funding": how,
                    "gpus": entry["gpus"],
                    "runs": sorted(entry["runs"]),
                }
            )
    return rows


def owners(fleet: Fleet) -> list[str]:
    """Everyone who may own runs or budgets: budget owners and tenant owners."""
    return sorted({b.spec.owner for b in fleet.budgets.values()} | set(fleet.tenants.values()))


def usage(fleet: Fleet, now: int, owner: str | None = None) -> dict[str, Any]:
    rows = []
    for name, budget in sorted(fleet.budgets.items()):
        if owner is not None and budget.spec.owner != owner:
            continue
        status = {e["name"]: e for e in fleet.budget_status(name).get("envelopes") or []}
        borrowed = _borrowed_in(_held_of_others(fleet, budget.spec.owner))
        claimed: set[str] = set()  # nodes an earlier envelope of this budget already counted
        for env in budget.spec.envelopes:
            st = status.get(env.name) or {}
            u = st.get("usage") or {}
            active, spare, out = u.get("activeGPUs", 0), u.get("spareGPUs", 0), u.get("borrowedOutGPUs", 0)
            reach = _reaches(fleet, env) - claimed
            claimed |= reach
            lenders: dict[tuple[str, str], int] = defaultdict(int)
            for node in sorted(reach):
                for who, gpus in borrowed.get(node, {}).items():
                    lenders[who] += gpus
            rows.append(
                {
                    "budget": name,
                    "envelope": env.name,
                    "owner": budget.spec.owner,
                    "flavor": env.flavor,
                    "selector": dict(env.selector),
                    "concurrency": env.concurrency,
                    "ownedGPUs": active + spare - out,
                    "lentOutGPUs": out,
                    "sharedWithFamilyGPUs": out - st.get("lentGPUs", 0),
                    "lentToSponsoredGPUs": st.get("lentGPUs", 0),
                    "borrowedInGPUs": sum(lenders.values()),
                    "borrowedFrom": [
                        {"owner": o, "funding": how, "gpus": g} for (o, how), g in sorted(lenders.items())
                    ],
                    "unfundedGPUs": u.get("unfundedGPUs", 0),
                    "spareGPUs": spare,
                    "gpuHours": st.get("consumedGPUHours", 0.0),
                    "maxGPUHours": env.maxGPUHours,
                    "headroom": st.get("headroom"),
                    "window": {
                        "start": format_time(env.start) if env.start is not None else None,
                        "end": format_time(env.end) if env.end is not None else None,
                    },
                    "open": (env.start is None or env.start <= now) and (env.end is None or now < env.end),
                }
            )
    borrowers = [owner] if owner is not None else owners(fleet)
    return runs.header("BudgetUsage", fleet, now) | {
        "owner": owner,
        "envelopes": rows,
        "borrowing": borrowing(fleet, borrowers),
    }


def sponsors(fleet: Fleet, now: int, owner: str | None = None) -> dict[str, Any]:
    """Every lending envelope (of `owner`, or admitting `owner` as a borrower): to whom, caps, what is left."""
    rows = []
    for name, budget in sorted(fleet.budgets.items()):
        status = {e["name"]: e for e in fleet.budget_status(name).get("envelopes") or []}
        meters = fleet.budget_meters(name)
        for env in budget.spec.envelopes:
            lend = env.lending
            if lend is None or not lend.allow:
                continue
            lends_to = owner is not None and any(accounting.admits(p, owner) for p in lend.to)
            if owner is not None and budget.spec.owner != owner and not lends_to:
                continue
            lent = (status.get(env.name) or {}).get("lentGPUs", 0)
            hours = float((meters.get(env.name) or {}).get("lent", 0.0))
            cap = lend.maxConcurrency
            rows.append(
                {
                    "lender": budget.spec.owner,
                    "budget": name,
                    "envelope": env.name,
                    "flavor": env.flavor,
                    "to": list(lend.to),
                    "maxConcurrency": cap,
                    "maxGPUHours": lend.maxGPUHours,
                    "lentGPUs": lent,
                    "lentGPUHours": round(hours, 3),
                    "leftGPUs": None if cap is None else max(0, cap - lent),
                    "leftGPUHours": None
                    if lend.maxGPUHours is None
                    else round(max(0.0, lend.maxGPUHours - hours), 3),
                    "headroom": (status.get(env.name) or {}).get("headroom"),
                    "admitsOwner": lends_to if owner is not None else None,
                    "borrowers": _borrowers(fleet, budget.spec.owner, lend.to),
                }
            )
    return runs.header("Sponsors", fleet, now) | {"owner": owner, "lenders": rows}


def _borrowers(fleet: Fleet, lender: str, patterns: list[str]) -> list[dict[str, Any]]:
    """Runs that name `lender` as a sponsor, allow borrowing, and whose owner its ACL admits."""
    out = []
    for key, run in sorted(fleet.specs.items()):
        f = run.spec.funding
        if (
            f.allowBorrow
            and lender in f.sponsors
            and any(accounting.admits(p, run.spec.owner) for p in patterns)
        ):
            out.append({"run": key, "owner": run.spec.owner, "maxBorrowGPUs": f.maxBorrowGPUs})
    return out
