"""What `get`, `plan`, `watch` and `leases` show of runs: JSON-ready documents built from a `Fleet`.

Each document is versioned (`version`, `kind`) with stable keys; the command line prints it as
JSON or turns it into text. Countdowns are computed here, at display time, from the stored
`earliestStart` and the `now` given (never stored). Presents what the planner wrote; decides
nothing, and reads no message text to decide anything.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import yaml

from planner import records
from planner.reasons import Phase, ResState, Role
from planner.world import Lease, Reservation
from reconciler.views import funding, line
from reconciler.views.fleet import Fleet
from schemas import API_VERSION
from schemas.common import format_time, parse_time

VERSION = 1
RECENT_EVENTS = 10  # ledger events `watch` shows


def header(kind: str, fleet: Fleet, now: int) -> dict[str, Any]:
    """The keys every document starts with: what it is, what was read, and when it was shown."""
    return {
        "version": VERSION, "kind": kind, "rev": fleet.rev, "commit": fleet.sha, "now": format_time(now),
        "asOf": fleet.fleet_state.get("asOf"),
    }  # fmt: skip


def domain_of(fleet: Fleet, node: str) -> str:
    """`region/cluster/fabric.domain` of a node, as reservations name domains."""
    obs = fleet.nodes.get(node)
    if obs is None:
        return "?"
    labels = obs.labels
    return f"{labels.get('region', '?')}/{labels.get('cluster', '?')}/{labels.get('fabric.domain', '?')}"


NOT_PLANNED = "not planned yet: no reconcile pass has read its file since it was submitted"


def status(fleet: Fleet, run: str) -> dict[str, Any]:
    """The run's status as the planner wrote it; a run no pass has planned yet says so."""
    return fleet.status(run) or {"message": NOT_PLANNED}


def countdown(eta: int | None, now: int) -> int | None:
    return None if eta is None else max(0, eta - now)


def pending_reservation(fleet: Fleet, run: str) -> Reservation | None:
    res = fleet.reservation(run)
    return res if res is not None and res.state == ResState.PENDING else None


# -- get ---------------------------------------------------------------------------------------------


def row(fleet: Fleet, run: str, now: int, waiting: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One line of `get`: namespace, name, phase, width, desired, why it waits, ETA, and (wide) its
    owner, place in line (from `waiting`, `line.in_line`'s), start and message."""
    st = status(fleet, run)
    width = st.get("width") or {}
    res = pending_reservation(fleet, run)
    phase = st.get("phase")
    if res is not None:
        why: str | None = res.reason
    elif phase in (Phase.PENDING, Phase.WAITING, None):
        why = st.get("message") or None
    else:
        why = width.get("pending")
    eta = res.earliest_start if res is not None else None
    ns, name = run.split("/", 1)
    return {
        "namespace": ns,
        "name": name,
        "phase": phase,
        "allocatedGPUs": width.get("allocated", 0),
        "desiredGPUs": width.get("desired"),
        "pendingReason": why,
        "earliestStart": format_time(eta) if eta is not None else None,
        "countdownSeconds": countdown(eta, now),
        "message": st.get("message", ""),
        "owner": fleet.owner_of(run),
        "startedAt": st.get("startedAt"),
        "inLine": _place((waiting or {}).get(run)),
    }


def _place(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if entry is None else {k: entry[k] for k in ("position", "of", "ahead")}


def run_list(fleet: Fleet, runs: list[str], now: int) -> dict[str, Any]:
    waiting = line.in_line(fleet)
    return header("RunList", fleet, now) | {"runs": [row(fleet, run, now, waiting) for run in runs]}


def run_object(fleet: Fleet, run: str) -> dict[str, Any]:
    """The Run as `kubectl get runs RUN -o yaml` shows its mirror in a cluster: the spec as the fleet
    holds it (a file that does not validate: as written, if it reads) and its status as the planner
    wrote it (GPU-hours included: this is the record itself)."""
    ns, name = run.split("/", 1)
    model = fleet.specs.get(run)
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    spec: Any = None
    if model is not None:
        meta |= {
            k: v
            for k, v in (("labels", model.metadata.labels), ("annotations", model.metadata.annotations))
            if v
        }
        spec = model.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    else:
        held = fleet.run_file(run)
        try:
            written = yaml.safe_load(held[1]) if held is not None else None
        except yaml.YAMLError:
            written = None
        if isinstance(written, dict):
            spec = written.get("spec")
    obj: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Run", "metadata": meta}
    if spec is not None:
        obj["spec"] = spec
    return obj | {"status": fleet.status(run) or {}}


# -- plan --------------------------------------------------------------------------------------------


def reservation_doc(fleet: Fleet, res: Reservation, now: int) -> dict[str, Any]:
    """A waiting reservation as the planner wrote it, with its countdown, why its ETA is when it is,
    its last move and its place in line."""
    gpus = list(res.remedy_gpus)
    return {
        "state": res.state.value,
        "earliestStart": format_time(res.earliest_start) if res.earliest_start is not None else None,
        "countdownSeconds": countdown(res.earliest_start, now),
        "confidence": res.confidence.value,
        "deficitGPUs": res.deficit,
        "scope": list(res.domains),
        "nodes": list(res.nodes),
        "payingEnvelope": res.paying.as_dict() if res.paying is not None else None,
        "conflictSet": [
            {"run": c.run, "probability": c.probability, "since": format_time(c.since)} for c in res.conflicts
        ],
        "remedies": [
            {"remedy": r.value, "gpus": gpus[i] if i < len(gpus) else None}
            for i, r in enumerate(res.remedies)
        ],
        "reason": res.reason,
        "windowOpens": format_time(res.window) if res.window is not None else None,
        "etaReason": line.eta_reason(fleet, res),
        "lastMove": line.last_move(fleet, res),
        "inLine": line.in_line(fleet, scoped=res.run).get(res.run),
    }


def groups(fleet: Fleet, run: str, leases: list[Lease] | None = None) -> list[dict[str, Any]]:
    """The run's open leases by group and role: domain, nodes with their GPUs, who pays."""
    held: dict[tuple[int, str], dict[str, Any]] = {}
    unfunded = fleet.unfunded
    owner = fleet.owner_of(run) or ""
    for lease in leases if leases is not None else fleet.leases(run):
        if not lease.open:
            continue
        entry = held.setdefault(
            (lease.group, lease.role.value),
            {
                "group": lease.group,
                "role": lease.role.value,
                "gpus": 0,
                "domain": domain_of(fleet, lease.node),
                "nodes": {},
                "payers": [],
                "unfunded": (run, lease.group) in unfunded and lease.role != Role.BORROWED,
                "since": format_time(lease.start),
            },
        )
        entry["gpus"] += lease.gpus
        entry["nodes"][lease.node] = entry["nodes"].get(lease.node, 0) + lease.gpus
        payer = lease.payer.as_dict()
        paid = next((p for p in entry["payers"] if {k: p[k] for k in payer} == payer), None)
        if paid is None:
            entry["payers"].append(payer | {"gpus": lease.gpus, "funding": _funding(fleet, owner, lease)})
        else:
            paid["gpus"] += lease.gpus
        entry["since"] = min(entry["since"], format_time(lease.start))
    for entry in held.values():  # own first, then family, then sponsors: cover's order (§4.2)
        entry["payers"].sort(key=lambda p: (funding.RANK.get(p["funding"], 9), p["owner"], str(p["budget"])))
    return [held[k] for k in sorted(held, key=lambda k: (k[0], _ROLE_ORDER.get(k[1], 9)))]


def _funding(fleet: Fleet, owner: str, lease: Lease) -> str:
    """How the lease is paid: its label (own, family, sponsor), else classified now; fill for fill."""
    if lease.role == Role.BORROWED:
        return funding.FILL
    return lease.funding or funding.source(fleet, owner, lease.payer.as_dict())


_ROLE_ORDER = {Role.ACTIVE.value: 0, Role.SPARE.value: 1, Role.BORROWED.value: 2}


def plan(fleet: Fleet, run: str, now: int) -> dict[str, Any]:
    """The seeds' `kubectl runs plan` block: the reservation's ETA, deficit, scope, conflict set and
    remedies, or what the run holds now when nothing waits."""
    st = status(fleet, run)
    res = pending_reservation(fleet, run)
    held = groups(fleet, run)
    return header("RunPlan", fleet, now) | {
        "run": run,
        "phase": st.get("phase"),
        "message": st.get("message", ""),
        "width": st.get("width") or {},
        "reservation": reservation_doc(fleet, res, now) if res is not None else None,
        "holds": held,
        "conflicts": [threat(c, now) for c in st.get("conflicts") or []],
    }


def threat(entry: dict[str, Any], now: int) -> dict[str, Any]:
    """A reservation whose activation may cut this run, with the countdown to it."""
    eta = entry.get("earliestStart")
    return {
        "reservation": entry["reservation"],
        "probability": entry["probability"],
        "earliestStart": eta,
        "countdownSeconds": countdown(parse_time(eta), now) if eta else None,
    }


# -- watch -------------------------------------------------------------------------------------------


def watch(fleet: Fleet, run: str, now: int, recent: int = RECENT_EVENTS) -> dict[str, Any]:
    """Phase, desired vs allocated width, active and spare leases, funding split, recent events."""
    st = status(fleet, run)
    leases = fleet.leases(run)
    held = groups(fleet, run, leases)
    by_role: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for g in held:
        by_role[g["role"]].append(g)
    res = pending_reservation(fleet, run)
    events = events_by_group(fleet.events(run))[-recent:] if recent else []
    return header("RunWatch", fleet, now) | {
        "run": run,
        "phase": st.get("phase"),
        "message": st.get("message", ""),
        "width": st.get("width") or {},
        "leases": {
            "active": by_role[Role.ACTIVE.value],
            "spare": by_role[Role.SPARE.value],
            "fill": by_role[Role.BORROWED.value],
        },
        "funding": st.get("funding") or {},
        "reservation": reservation_doc(fleet, res, now) if res is not None else None,
        "events": events,
    }


def events_by_group(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ledger events with one entry per group, role and reason at an instant (a group's leases on
    several nodes, or with several payers, are one event to a reader)."""
    out: list[dict[str, Any]] = []
    for e in events:
        if e.get("event") not in ("Start", "End"):
            out.append({k: e.get(k) for k in ("at", "event", "earliestStart", "previous", "reason")})
            continue
        nodes = sorted({n.rsplit("#", 1)[0] for n in e.get("nodes") or []})
        last = out[-1] if out else None
        key = tuple(e.get(k) for k in ("at", "event", "group", "role", "reason"))
        if last is not None and tuple(last.get(k) for k in ("at", "event", "group", "role", "reason")) == key:
            last["gpus"] += e["gpus"]
            last["nodes"] = sorted(set(last["nodes"]) | set(nodes))
            continue
        out.append(
            {k: e.get(k) for k in ("at", "event", "group", "role", "gpus", "reason")} | {"nodes": nodes}
        )
    return out


# -- leases ------------------------------------------------------------------------------------------


def lease_objects(fleet: Fleet, run: str) -> list[dict[str, Any]]:
    """The run's Lease objects as `state/` holds them (and the cluster mirrors the open ones)."""
    return [records.lease_obj(x) for x in fleet.leases(run)]


def lease_rows(fleet: Fleet, run: str, now: int) -> dict[str, Any]:
    """Every lease of the run in `state/`: group, role, nodes and slots, payer, interval, closure."""
    rows = []
    owner = fleet.owner_of(run) or ""
    for x in fleet.leases(run):
        rows.append(
            {
                "lease": x.name,
                "group": x.group,
                "role": x.role.value,
                "node": x.node,
                "slots": list(x.slots),
                "gpus": x.gpus,
                "payer": x.payer.as_dict(),
                "funding": _funding(fleet, owner, x),
                "reason": x.reason.value,
                "start": format_time(x.start),
                "end": format_time(x.ended) if x.ended is not None else None,
                "closureReason": x.closure,
            }
        )
    return header("RunLeases", fleet, now) | {"run": run, "leases": rows}
