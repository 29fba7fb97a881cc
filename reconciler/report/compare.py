"""What merging a change would do: two planner passes from one state, base spec versus head spec.

Pure comparison of two `Plan`s into a versioned report (a plain dict, JSON-ready, sorted), both
ways: runs that start or grow (and their hot spares), reservations with their ETA and remedies
(new, removed, or waiting for another reason), cuts and shrinks made or prevented, conflict-set
warnings given or lifted, running runs left charged to nobody (or funded again), running runs
whose pods are rendered anew (image, command, env changed), new runs waiting with no reservation,
widths a running run waits for, budget usage before and after, and how other runs' ETAs move.
Reads no Git and renders nothing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any, cast

from planner.plan import Plan
from reconciler.report import model
from schemas.common import format_time, parse_time

VERSION = model.VERSION


def _duration(seconds: int) -> str:
    """`2h`, `20m`, `31d 1h 30s`: days, hours, minutes and seconds, the ones that are not zero."""
    seconds = abs(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts) or "0s"


def _starts(plan: Plan, domain_of: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    payers: dict[str, dict[tuple[str | None, str | None, str | None, str | None], int]] = defaultdict(
        lambda: defaultdict(int)
    )
    spares: dict[str, int] = defaultdict(int)
    for ev in plan.events:
        lease = ev.lease
        if ev.event == "Start" and lease.role == "Spare":
            spares[lease.run] += lease.gpus
        if ev.event != "Start" or lease.role not in ("Active", "Borrowed"):
            continue
        entry = out.setdefault(
            lease.run, {"run": lease.run, "gpus": 0, "domains": set(), "reason": ev.reason}
        )
        entry["gpus"] += lease.gpus
        entry["domains"].add(domain_of.get(lease.node, "?"))
        who = (
            (None, None, None, None)
            if lease.role == "Borrowed"
            else (lease.payer.owner, lease.payer.budget, lease.payer.envelope, lease.funding)
        )
        payers[lease.run][who] += lease.gpus
    for run, entry in out.items():
        entry["domains"] = sorted(entry["domains"])
        if spares.get(run):
            entry["spareGPUs"] = spares[run]  # hot spares held beside it, funded like its GPUs
        entry["payers"] = sorted(
            (_payer(who, n) for who, n in payers[run].items()), key=lambda p: str(p["payer"])
        )
    return out


def _payer(who: tuple[str | None, str | None, str | None, str | None], gpus: int) -> dict[str, Any]:
    """Who pays for `gpus` of a start: the words people read, the owner, budget and envelope (None
    for a fill on spare GPUs, which nobody pays for), and how (`own`, `family`, `sponsor`)."""
    owner, budget, envelope, how = who
    kind = f", {how}" if how else ""
    text = "nobody (fill on spare GPUs)" if owner is None else f"{owner} ({budget}/{envelope}{kind})"
    return {
        "payer": text,
        "owner": owner,
        "budget": budget,
        "envelope": envelope,
        "funding": how,
        "gpus": gpus,
    }


def _ends(plan: Plan) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = defaultdict(int)
    for ev in plan.events:
        if ev.event == "End" and ev.lease.role in ("Active", "Spare"):
            out[(ev.lease.run, ev.reason)] += ev.lease.gpus
    return out


def _reserved(plan: Plan) -> dict[str, dict[str, Any]]:
    return {
        run: {
            "run": run,
            "earliestStart": None if r.earliest_start is None else format_time(r.earliest_start),
            "confidence": str(r.confidence),
            "deficitGPUs": r.deficit,
            "reason": r.reason,
            "remedies": [str(x) for x in r.remedies],
            "remedyGPUs": list(r.remedy_gpus),
            "conflicts": len(r.conflicts),
        }
        for run, r in sorted(plan.state.reservations.items())
        if r.state == "Pending"
    }


def _conflicts(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """Per run in a conflict set: the reservations that may cut it and the chance, by reservation."""
    out: dict[str, list[dict[str, Any]]] = {}
    for run, status in plan.runs.items():
        entries = status.get("conflicts") or []
        if entries:
            pairs = sorted((str(c.get("reservation")), c.get("probability")) for c in entries)
            out[run] = [{"reservation": r, "probability": p} for r, p in pairs]
    return out


def _waiting(plan: Plan) -> dict[str, str]:
    """Runs waiting behind `after`, or in line with no reservation (an opportunistic run with no
    spare GPUs to fill): why."""
    reserved = {k for k, r in plan.state.reservations.items() if r.state == "Pending"}
    return {
        run: str(status.get("message") or "")
        for run, status in sorted(plan.runs.items())
        if status.get("phase") in ("Waiting", "Pending") and run not in reserved
    }


def _widths(plan: Plan) -> dict[str, str]:
    """Running runs whose spec asks another width than they run at: what they wait for."""
    out = {}
    for run, status in sorted(plan.runs.items()):
        pending = (status.get("width") or {}).get("pending")
        if pending:
            out[run] = str(pending)
    return out


def _unfunded(plan: Plan) -> dict[str, int]:
    """Running runs with groups charged to nobody after the plan (reclaimed first), groups per run."""
    return dict(sorted(Counter(run for run, _ in plan.state.unfunded & plan.running_groups).items()))


def _pods(plan: Plan) -> dict[str, dict[str, Any]]:
    """Per running run with a valid spec: its pods and what of the spec they are rendered from
    (`manifests`), so a change to a running run's image, command or env shows although no GPU moves."""
    pods: dict[str, set[tuple[int, str, bool]]] = defaultdict(set)
    for lease in plan.open_leases:
        pods[lease.run].add((lease.group, lease.node, lease.role == "Spare"))
    out: dict[str, dict[str, Any]] = {}
    for run, keys in sorted(pods.items()):
        spec = plan.specs.get(run)
        if spec is None or run in plan.frozen:  # frozen: its last rendered pods are kept as they are
            continue
        t, m = spec.spec.template, spec.spec.malleable
        out[run] = {
            "pods": len(keys),
            "template": {  # the fields of its form (short: image, command, args, env; full: metadata, spec, gpuContainer)
                **t.model_dump(mode="json"),
                "worldSize": [m.minTotalGPUs, m.maxTotalGPUs] if m is not None else None,
            },
        }
    return out


def _changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The template fields that differ (all of both forms' when a run changed form)."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _desired(plan: Plan) -> dict[str, int]:
    """The width each run's spec asks for (`desiredTotalGPUs`, else its maximum, else its total)."""
    out = {}
    for run, spec in plan.specs.items():
        m = spec.spec.malleable
        if m is not None:
            out[run] = m.desiredTotalGPUs if m.desiredTotalGPUs is not None else m.maxTotalGPUs
        else:
            out[run] = spec.spec.resources.totalGPUs
    return out


def _usage(plan: Plan) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for budget, status in plan.budgets.items():
        for env in status.get("envelopes", []):
            u = env["usage"]
            out[f"{budget}/{env['name']}"] = {
                "active": u["activeGPUs"],
                "spare": u["spareGPUs"],
                "lentOrShared": u["borrowedOutGPUs"],
                "unfunded": u["unfundedGPUs"],
                "headroom": env["headroom"],
            }
    return out


NOTHING_PLANNED: dict[str, Any] = {
    "starts": {}, "ends": {}, "reserved": {}, "conflicts": {}, "usage": {}, "unfunded": {}, "pods": {},
    "runs": [], "waiting": {}, "widths": {}, "desired": {},
}  # fmt: skip
"""The outline of a side reconcile plans nothing on (its jobtree.yaml or inventory is invalid)."""


def outline(plan: Plan, domain_of: Mapping[str, str]) -> dict[str, Any]:
    """What `compare` reads of one plan, as plain data (so a forked worker can hand it over)."""
    return {
        "starts": _starts(plan, domain_of),
        "ends": dict(_ends(plan)),
        "reserved": _reserved(plan),
        "conflicts": _conflicts(plan),
        "usage": _usage(plan),
        "unfunded": _unfunded(plan),
        "pods": _pods(plan),
        "runs": sorted(plan.specs),
        "waiting": _waiting(plan),
        "widths": _widths(plan),
        "desired": _desired(plan),
    }


# what a reservation says about itself beyond its ETA, deficit and conflict set (reported apart)
_REASONING = ("reason", "confidence", "remedies")


def _reasoning_moved(was: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether a reservation both plans hold waits otherwise: its confidence or remedies changed, or
    its reason did while its ETA stayed (a reason naming a moved window is the ETA line's news)."""
    if was["confidence"] != now["confidence"] or was["remedies"] != now["remedies"]:
        return True
    return bool(was["reason"] != now["reason"] and was["earliestStart"] == now["earliestStart"])


def compare(
    before: dict[str, Any],
    after: dict[str, Any],
    *,
    base: str,
    head: str,
    now: int,
    merged: str | None = None,
    stalled: list[str] | None = None,
    diagnostics: list[str] | None = None,
    diagnostics_on_base: list[str] | None = None,
) -> model.Report:
    """The report: only what differs between the base plan's `outline` and the head plan's, both
    ways (a cut, a reservation or a conflict set the change removes is a change too)."""
    s_before, s_after = before["starts"], after["starts"]
    in_head = set(after["runs"])
    starts = [v for k, v in sorted(s_after.items()) if s_before.get(k) != v]
    no_longer = sorted(k for k in s_before if k not in s_after)
    e_before, e_after = before["ends"], after["ends"]
    lowered = {
        run
        for run, width in after.get("desired", {}).items()
        if width < before.get("desired", {}).get(run, width)
    }  # runs whose desired width the change lowers: their Shrink is asked for, not a cut
    cuts = [
        {"run": run, "reason": reason, "gpus": e_after.get((run, reason), 0), "gpusBefore": e_before.get((run, reason), 0)}
        | ({"voluntary": True} if reason == "Shrink" and run in lowered else {})
        for run, reason in sorted(e_before.keys() | e_after.keys())
        if e_before.get((run, reason)) != e_after.get((run, reason))
    ]  # fmt: skip
    r_before, r_after = before["reserved"], after["reserved"]
    reserved = []
    for run, res in r_after.items():
        was = r_before.get(run)
        if was is None:
            reserved.append(res)
        elif _reasoning_moved(was, res):
            reserved.append({**res, "was": {k: was[k] for k in _REASONING}})
    eta: list[dict[str, Any]] = []
    for run in sorted(set(r_before) & set(r_after)):
        was, now_eta = r_before[run]["earliestStart"], r_after[run]["earliestStart"]
        if was != now_eta and (was is None or now_eta is None):
            text = (
                f"{run} no longer has a known ETA (was {was})"
                if now_eta is None
                else f"{run} now has an ETA: {now_eta}"
            )
            eta.append({"run": run, "from": was, "to": now_eta, "seconds": None, "text": text})
        elif was != now_eta:
            delta = parse_time(now_eta) - parse_time(was)
            verb = "delays" if delta > 0 else "advances"
            eta.append({"run": run, "from": was, "to": now_eta, "seconds": delta,
                        "text": f"{verb} {run} by {_duration(delta)}"})  # fmt: skip
        elif r_before[run]["deficitGPUs"] != r_after[run]["deficitGPUs"]:
            eta.append({"run": run, "from": was, "to": now_eta, "seconds": 0,
                        "text": f"{run}: deficit {r_before[run]['deficitGPUs']} -> {r_after[run]['deficitGPUs']} GPUs"})  # fmt: skip
    for run in no_longer:
        if run in r_after:
            eta.append({"run": run, "from": format_time(now), "to": r_after[run]["earliestStart"],
                        "seconds": None, "text": f"{run} no longer starts now; reserved for {r_after[run]['earliestStart'] or 'an unknown time'}"})  # fmt: skip
        else:
            gone = "" if run in in_head else " (removed from the fleet)"
            eta.append({"run": run, "from": format_time(now), "to": None, "seconds": None,
                        "text": f"{run} no longer starts now{gone}"})  # fmt: skip
    for run in sorted(set(r_before) - set(r_after)):
        was = r_before[run]["earliestStart"]
        if run in s_after:
            text = f"{run} now starts at once instead of {was}"
        elif run in in_head:
            text = f"{run} no longer waits in a reservation (was due {was})"
        else:
            text = f"{run} no longer waits in a reservation (was due {was}): removed from the fleet"
        to = format_time(now) if run in s_after else None
        eta.append({"run": run, "from": was, "to": to, "seconds": None, "text": text})
    c_before, c_after = before["conflicts"], after["conflicts"]
    conflicts = [
        {"run": run, "reservations": c_after.get(run, []), "before": c_before.get(run, [])}
        for run in sorted(c_before.keys() | c_after.keys())
        if c_before.get(run) != c_after.get(run)
    ]
    f_before, f_after = before["unfunded"], after["unfunded"]
    unfunded = [
        {"run": run, "groupsBefore": f_before.get(run, 0), "groupsAfter": f_after.get(run, 0)}
        for run in sorted(set(f_before) | set(f_after))
        if f_before.get(run, 0) != f_after.get(run, 0)
    ]
    p_before, p_after = before["pods"], after["pods"]
    updated = [
        {
            "run": run,
            "pods": p_after[run]["pods"],
            "changed": _changed(p_before[run]["template"], p_after[run]["template"]),
        }
        for run in sorted(set(p_before) & set(p_after))
        if p_before[run]["template"] != p_after[run]["template"]
    ]
    w_before, w_after = before["waiting"], after["waiting"]
    waiting = [{"run": run, "why": why} for run, why in w_after.items() if run not in w_before]
    d_before, d_after = before["widths"], after["widths"]
    widths = [
        {"run": run, "pending": d_after.get(run), "before": d_before.get(run)}
        for run in sorted(d_before.keys() | d_after.keys())
        if d_before.get(run) != d_after.get(run) and run in in_head
    ]
    u_before, u_after = before["usage"], after["usage"]
    budgets = [
        {"envelope": key, "before": u_before.get(key), "after": u_after.get(key)}
        for key in sorted(set(u_before) | set(u_after))
        if u_before.get(key) != u_after.get(key)
    ]
    sections: dict[str, list[Any]] = {
        "starts": starts, "reserved": reserved, "cuts": cuts, "conflicts": conflicts, "eta": eta,
        "unfunded": unfunded, "updated": updated, "waiting": waiting, "widths": widths, "budgets": budgets,
    }  # fmt: skip
    assert tuple(sections) == model.SECTIONS
    report = {
        "version": VERSION, "base": base, "head": head, "now": format_time(now), "merged": merged,
        "stalled": stalled or [], "diagnostics": diagnostics or [],
        "diagnosticsOnBase": diagnostics_on_base or [], **sections,
        "changes": any(sections[k] for k in model.SECTIONS),
    }  # fmt: skip
    return cast(model.Report, report)  # built from plain rows above; the model names their keys
