"""State files: the planner's FleetState as Kubernetes-shaped objects under `state/`, and back.

Byte-stable: sorted keys and files, one YAML style, timestamps RFC 3339 UTC. Knows the layout
of `state/` and `rendered/`; does not read or write Git (that is `gitstore`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import yaml

from planner.plan import Plan
from planner.world import ConflictEntry, EnvelopeMeter, FleetState, Lease, Payer, Reservation, RunRecord
from reconciler import yamlout
from schemas import API_VERSION
from schemas.common import format_time, parse_time

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]


def dump(obj: Any) -> bytes:
    return yamlout.dumps(obj).encode()


def dump_all(objs: list[Any]) -> bytes:
    return yamlout.dumps_all(objs).encode()


def _t(v: int | None) -> str | None:
    return format_time(v) if v is not None else None


def lease_obj(x: Lease) -> dict[str, Any]:
    ns, name = x.run.split("/", 1)
    interval: dict[str, Any] = {"start": format_time(x.start)}
    if x.ended is not None:
        interval["end"] = format_time(x.ended)
    st: dict[str, Any] = {"closed": x.ended is not None}
    if x.ended is not None:
        st["ended"], st["closureReason"] = format_time(x.ended), x.closure
    return {
        "apiVersion": API_VERSION,
        "kind": "Lease",
        "metadata": {"name": x.name, "namespace": ns},
        "spec": {
            "runRef": {"namespace": ns, "name": name},
            "group": x.group,
            "slice": {"nodes": [f"{x.node}#{s}" for s in x.slots], "role": x.role}
            | ({"rank": x.rank} if x.rank is not None else {}),
            "payer": {k: v for k, v in x.payer.as_dict().items() if v is not None},
            "interval": interval,
            "reason": x.reason,
        },
        "status": st,
    }


def lease_from(obj: dict[str, Any]) -> Lease:
    spec, st = obj["spec"], obj.get("status") or {}
    nodes = spec["slice"]["nodes"]
    node = nodes[0].rsplit("#", 1)[0]
    p = spec["payer"]
    ended = st.get("ended")
    return Lease(
        obj["metadata"]["name"], f"{spec['runRef']['namespace']}/{spec['runRef']['name']}", int(spec["group"]),
        spec["slice"]["role"], node, tuple(int(n.rsplit("#", 1)[1]) for n in nodes),
        Payer(p["owner"], p.get("budget"), p.get("envelope")), _ts(spec["interval"]["start"]), spec["reason"],
        _ts(ended) if ended else None, st.get("closureReason"), spec["slice"].get("rank"),
    )  # fmt: skip


def _ts(v: Any) -> int:
    return parse_time(v if isinstance(v, str) else v.strftime("%Y-%m-%dT%H:%M:%SZ"))


def reservation_obj(r: Reservation) -> dict[str, Any]:
    ns, name = r.run.split("/", 1)
    spec: dict[str, Any] = {
        "runRef": {"namespace": ns, "name": name},
        "intendedSlice": {"domains": list(r.domains), "nodes": list(r.nodes)},
        "earliestStart": format_time(r.earliest_start),
    }
    if r.paying is not None:
        spec["payingEnvelope"] = {
            "owner": r.paying.owner,
            "budget": r.paying.budget,
            "envelope": r.paying.envelope,
        }
    status: dict[str, Any] = {
        "state": r.state,
        "reason": r.reason,
        "forecast": {"deficitGPUs": r.deficit, "confidence": r.confidence, "remedies": list(r.remedies)},
        "conflictSet": [
            {"run": c.run, "probability": c.probability, "since": format_time(c.since)} for c in r.conflicts
        ],
    }
    if r.seed:
        status["seed"] = r.seed
    if r.ended is not None:
        status["ended"] = format_time(r.ended)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "annotations": {"rq.davidlangworthy.io/created": format_time(r.created)},
    }
    if r.window_basis is not None:
        meta["annotations"]["rq.davidlangworthy.io/window"] = format_time(r.window_basis)
    return {
        "apiVersion": API_VERSION,
        "kind": "Reservation",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


def reservation_from(obj: dict[str, Any]) -> Reservation:
    spec, st, ann = obj["spec"], obj.get("status") or {}, obj["metadata"].get("annotations") or {}
    run = f"{spec['runRef']['namespace']}/{spec['runRef']['name']}"
    pe = spec.get("payingEnvelope")
    fc = st.get("forecast") or {}
    return Reservation(
        run, _ts(spec["earliestStart"]), _ts(ann.get("rq.davidlangworthy.io/created", spec["earliestStart"])),
        st.get("state", "Pending"), st.get("reason", ""), int(fc.get("deficitGPUs", 0)), fc.get("confidence", "conservative"),
        tuple(fc.get("remedies") or ()), tuple(spec.get("intendedSlice", {}).get("domains") or ()),
        tuple(spec.get("intendedSlice", {}).get("nodes") or ()), Payer(pe["owner"], pe["budget"], pe["envelope"]) if pe else None,
        _ts(ann["rq.davidlangworthy.io/window"]) if ann.get("rq.davidlangworthy.io/window") else None,
        [ConflictEntry(c["run"], float(c["probability"]), _ts(c["since"])) for c in st.get("conflictSet") or []],
        st.get("seed"), _ts(st["ended"]) if st.get("ended") else None,
    )  # fmt: skip


def encode(plan: Plan) -> dict[str, bytes]:
    """Every file under `state/` and `rendered/` for this plan (paths relative to the repo root)."""
    st = plan.state
    files: dict[str, bytes] = {}
    by_run: dict[str, list[Lease]] = defaultdict(list)
    for lease in st.leases:
        by_run[lease.run].append(lease)
    for run, leases in sorted(by_run.items()):
        files[f"state/leases/{run}.yaml"] = dump_all(
            [lease_obj(x) for x in sorted(leases, key=lambda x: (x.start, x.name))]
        )
    for run, res in sorted(st.reservations.items()):
        files[f"state/reservations/{run}.yaml"] = dump(reservation_obj(res))
    for run, rec in sorted(st.runs.items()):
        body = dict(plan.runs.get(run, {}))
        body["hours"] = {"owned": round(rec.owned_hours, 6), "borrowed": round(rec.borrowed_hours, 6)}
        body["started"] = _t(rec.started)
        body["finished"] = _t(rec.finished)
        files[f"state/status/runs/{run}.yaml"] = dump({"run": run, "status": body})
    meters: dict[str, dict[str, Any]] = defaultdict(dict)
    for (b, e), m in sorted(st.meters.items()):
        meters[b][e] = {
            "consumed": round(m.consumed, 6),
            "spare": round(m.spare, 6),
            "lent": round(m.lent, 6),
        }
    for name in sorted(set(plan.budgets) | set(meters)):
        files[f"state/status/budgets/{name}.yaml"] = dump(
            {"budget": name, "status": plan.budgets.get(name, {}), "meters": meters.get(name, {})}
        )
    files["state/fleet.yaml"] = dump(
        {
            "asOf": _t(st.as_of),
            "cordoned": sorted(st.cordoned),
            "unfunded": [f"{r}#{g}" for r, g in sorted(st.unfunded)],
        }
    )
    for path, manifest in sorted(plan.manifests.items()):
        files[f"rendered/{path}"] = dump(manifest)
    return files


def decode(files: dict[str, bytes]) -> FleetState:
    """The FleetState written by `encode` (ignores rendered/ and the ledger)."""
    st = FleetState()
    for path in sorted(files):
        data = files[path]
        if path == "state/fleet.yaml":
            doc = yaml.load(data, Loader=_Loader) or {}
            st.as_of = _ts(doc["asOf"]) if doc.get("asOf") else None
            st.cordoned = frozenset(doc.get("cordoned") or ())
            st.unfunded = frozenset(
                (g.rsplit("#", 1)[0], int(g.rsplit("#", 1)[1])) for g in doc.get("unfunded") or ()
            )
        elif path.startswith("state/leases/"):
            st.leases += [lease_from(o) for o in yaml.load_all(data, Loader=_Loader) if o]
        elif path.startswith("state/reservations/"):
            r = reservation_from(yaml.load(data, Loader=_Loader))
            st.reservations[r.run] = r
        elif path.startswith("state/status/runs/"):
            doc = yaml.load(data, Loader=_Loader)
            s = doc["status"]
            hours = s.get("hours") or {}
            st.runs[doc["run"]] = RunRecord(
                doc["run"], _ts(s["submittedAt"]), s["phase"], s.get("message", ""),
                _ts(s["started"]) if s.get("started") else None, _ts(s["finished"]) if s.get("finished") else None,
                float(hours.get("owned", 0)), float(hours.get("borrowed", 0)),
            )  # fmt: skip
        elif path.startswith("state/status/budgets/"):
            doc = yaml.load(data, Loader=_Loader)
            for env, m in (doc.get("meters") or {}).items():
                st.meters[(doc["budget"], env)] = EnvelopeMeter(
                    float(m["consumed"]), float(m["spare"]), float(m["lent"])
                )
    st.leases.sort(key=lambda x: (x.run, x.start, x.name))
    return st


def ledger_lines(plan: Plan) -> dict[str, bytes]:
    """Ledger events of this pass grouped by day: `state/ledger/<YYYY-MM-DD>.jsonl` -> appended lines."""
    out: dict[str, list[str]] = defaultdict(list)
    for ev in plan.events:
        out[f"state/ledger/{format_time(ev.at)[:10]}.jsonl"].append(
            json.dumps(ev.as_json(format_time), sort_keys=True)
        )
    return {p: ("\n".join(lines) + "\n").encode() for p, lines in out.items()}
