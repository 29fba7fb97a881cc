"""Records: the planner's facts as the Kubernetes-shaped documents Git and the clusters both hold.

A lease as its state file and its Lease mirror hold it (`lease_obj`, `lease_from`), a run's status
document as the row a `RunRecord` is made of (`run_row`), and the FleetConfig numbers the planner
reads (`settings_of`). Shared by the state files (`reconciler.state`) and the cluster plane
(`reconciler.cluster`: mirrors, the agent's world, the journal), so both read one spelling.
Pure: documents in, planner values out; no file layout, no YAML, no clock.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from planner.reasons import OpenReason, Phase, Role
from planner.world import Lease, Payer, RunRecord, Settings
from schemas import API_VERSION
from schemas.common import format_time, parse_time
from schemas.fleet import FleetSpec

# A pass writes and reads the same few hundred instants tens of thousands of times.
time_text = functools.lru_cache(maxsize=100_000)(format_time)
epoch = functools.lru_cache(maxsize=100_000)(parse_time)  # RFC 3339 text to epoch seconds, cached

Row = tuple[Any, ...]

# Status fields that move with the clock alone, not with a decision (GPU-hours, meters, `asOf`): a
# state file whose other fields are unchanged holds the same decisions, and the mirrors leave them out.
CLOCK_FIELDS = frozenset(
    {"asOf", "meters", "hours", "ownedGPUHours", "borrowedGPUHours", "consumedGPUHours", "spareGPUHours"}
)


def without_clock(value: Any) -> Any:
    """`value` without the fields in `CLOCK_FIELDS`, at any depth."""
    if isinstance(value, dict):
        return {k: without_clock(v) for k, v in value.items() if k not in CLOCK_FIELDS}
    if isinstance(value, list):
        return [without_clock(v) for v in value]
    return value


def instant(value: Any) -> int:
    """Epoch seconds of an RFC 3339 text, or of a datetime a YAML loader made of one."""
    if isinstance(value, str):
        return epoch(value)
    if isinstance(value, datetime):
        return parse_time(value.strftime("%Y-%m-%dT%H:%M:%SZ"))
    raise ValueError(f"not a time: {value!r}")


FUNDING_LABEL = "rq.davidlangworthy.io/funding"  # own, family or sponsor: how the lease is paid


def lease_obj(x: Lease) -> dict[str, Any]:
    """A Lease record (state file and mirror): spec as opened, status once closed."""
    ns, name = x.run.split("/", 1)
    interval: dict[str, Any] = {"start": time_text(x.start)}
    if x.ended is not None:
        interval["end"] = time_text(x.ended)
    st: dict[str, Any] = {"closed": x.ended is not None}
    if x.ended is not None:
        st["ended"], st["closureReason"] = time_text(x.ended), x.closure
    meta: dict[str, Any] = {"name": x.name, "namespace": ns}
    if x.funding is not None:
        meta["labels"] = {FUNDING_LABEL: x.funding}
    return {
        "apiVersion": API_VERSION,
        "kind": "Lease",
        "metadata": meta,
        "spec": {
            "runRef": {"namespace": ns, "name": name},
            "group": x.group,
            "slice": {"nodes": [f"{x.node}#{s}" for s in x.slots], "role": str(x.role)}
            | ({"rank": x.rank} if x.rank is not None else {}),
            "payer": {k: v for k, v in x.payer.as_dict().items() if v is not None},
            "interval": interval,
            "reason": str(x.reason),
        },
        "status": st,
    }


def lease_from(obj: dict[str, Any]) -> Lease:
    """The lease a Lease record holds; KeyError or ValueError when it is not one."""
    spec, st = obj["spec"], obj.get("status") or {}
    nodes = spec["slice"]["nodes"]
    node = nodes[0].rsplit("#", 1)[0]
    p = spec["payer"]
    ended = st.get("ended")
    return Lease(
        obj["metadata"]["name"], f"{spec['runRef']['namespace']}/{spec['runRef']['name']}", int(spec["group"]),
        Role(spec["slice"]["role"]), node, tuple(int(n.rsplit("#", 1)[1]) for n in nodes),
        Payer(p["owner"], p.get("budget"), p.get("envelope")), instant(spec["interval"]["start"]),
        OpenReason(spec["reason"]), instant(ended) if ended else None, st.get("closureReason"),
        spec["slice"].get("rank"), (obj["metadata"].get("labels") or {}).get(FUNDING_LABEL),
    )  # fmt: skip


def run_row(run: str, s: dict[str, Any]) -> Row:
    """A run status document's fields, in `RunRecord` order (`record_of` makes the record)."""
    hours = s.get("hours") or {}
    w = s.get("width") or {}
    return (
        run, instant(s["submittedAt"]), s["phase"], s.get("message", ""),
        instant(s["started"]) if s.get("started") else None, instant(s["finished"]) if s.get("finished") else None,
        float(hours.get("owned", 0)), float(hours.get("borrowed", 0)),
        (int(w["min"]), int(w["max"]), int(w["desired"])) if "desired" in w else None,
        s.get("cause", ""), int(s.get("nextGroup", 0)), int(s.get("completedGPUs", 0)),
        instant(s["resized"]) if s.get("resized") else None, bool(s.get("specInvalid", False)),
    )  # fmt: skip


def record_of(row: Row) -> RunRecord:
    return RunRecord(row[0], row[1], Phase(row[2]), *row[3:])


def settings_of(fleet: FleetSpec) -> Settings:
    """The FleetConfig numbers the planner reads, in seconds and fractions."""
    return Settings(
        spare_rate=fleet.accounting.spareRate,
        lookahead=fleet.accounting.admissionLookahead,
        notice=fleet.reservations.noticePeriod,
        min_runtime=fleet.reservations.minRuntime,
        retention=fleet.reservations.retention,
        lottery=fleet.reservations.lottery,
        not_ready_grace=fleet.failure.notReadyGraceSeconds,
        tenants=tuple(sorted((t.namespace, t.owner) for t in fleet.tenants)),
        fill_grace=fleet.fill.gracePeriodSeconds,
    )
