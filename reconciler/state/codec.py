"""State files: the planner's FleetState as Kubernetes-shaped objects under `state/`, and back.

Byte-stable: sorted keys and files, one YAML style, timestamps RFC 3339 UTC. Knows the layout
of `state/` and `rendered/`; does not read or write Git (that is `git.write`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from planner import manifests, records
from planner.plan import Plan
from planner.reasons import Confidence, OpenReason, Remedy, ResState, Role
from planner.world import ConflictEntry, EnvelopeMeter, FleetState, Lease, Payer, Reservation
from reconciler.state import fleetmap, layout, timeline
from reconciler.state import yamlstyle as yamlout
from schemas import API_VERSION

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]  # the pure-Python loader where libyaml is missing


def dump(obj: Any) -> bytes:
    return yamlout.dumps(obj).encode()


def dump_all(objs: list[Any]) -> bytes:
    return yamlout.dumps_all(objs).encode()


def _t(v: int | None) -> str | None:
    return records.time_text(v) if v is not None else None


_ts = records.instant


def reservation_obj(r: Reservation) -> dict[str, Any]:
    ns, name = r.run.split("/", 1)
    spec: dict[str, Any] = {
        "runRef": {"namespace": ns, "name": name},
        "intendedSlice": {"domains": list(r.domains), "nodes": list(r.nodes)},
        "earliestStart": None if r.earliest_start is None else records.time_text(r.earliest_start),
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
        "forecast": {
            "deficitGPUs": r.deficit,
            "confidence": r.confidence.value,
            "remedies": [x.value for x in r.remedies],
        }
        | ({"remedyGPUs": list(r.remedy_gpus)} if r.remedy_gpus else {}),
        "conflictSet": [
            {"run": c.run, "probability": c.probability, "since": records.time_text(c.since)}
            for c in r.conflicts
        ],
    }
    if r.seed:
        status["seed"] = r.seed
    if r.ended is not None:
        status["ended"] = records.time_text(r.ended)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "annotations": {"rq.davidlangworthy.io/created": records.time_text(r.created)},
    }
    if r.window is not None:
        meta["annotations"]["rq.davidlangworthy.io/window"] = records.time_text(r.window)
    if r.basis is not None:
        meta["annotations"]["rq.davidlangworthy.io/forecast-from"] = records.time_text(r.basis)
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
    eta = spec.get("earliestStart")
    created = ann.get("rq.davidlangworthy.io/created", eta)
    basis = ann.get("rq.davidlangworthy.io/forecast-from")
    return Reservation(
        run, _ts(eta) if eta else None, _ts(created) if created else 0,
        ResState(st.get("state", "Pending")), st.get("reason", ""), int(fc.get("deficitGPUs", 0)),
        Confidence(fc.get("confidence", "conservative")), tuple(Remedy(x) for x in fc.get("remedies") or ()),
        tuple(spec.get("intendedSlice", {}).get("domains") or ()),
        tuple(spec.get("intendedSlice", {}).get("nodes") or ()), Payer(pe["owner"], pe["budget"], pe["envelope"]) if pe else None,
        _ts(basis) if basis else None,
        [ConflictEntry(c["run"], float(c["probability"]), _ts(c["since"])) for c in st.get("conflictSet") or []],
        st.get("seed"), _ts(st["ended"]) if st.get("ended") else None, tuple(int(n) for n in fc.get("remedyGPUs") or ()),
        _ts(ann["rq.davidlangworthy.io/window"]) if ann.get("rq.davidlangworthy.io/window") else None,
    )  # fmt: skip


# ------------------------------------------------------------------------------ files of a plan
#
# Every owned file (but the ledger) has a kind and a *key*: plain data that determines its bytes
# exactly (`file_object` then `file_bytes`). State files also have a *piece*: what `decode` takes
# from them, as rows. Keys and pieces are plain tuples, lists and dicts, so the pass cache can keep
# them (see `reconciler.state.memo`) and a later pass can tell an unchanged file without writing it.

Row = tuple[Any, ...]
LEASES, RESERVATION, RUN, BUDGET, FLEET, RENDERED = (
    "leases",
    "reservation",
    "run",
    "budget",
    "fleet",
    "rendered",
)
# the pictures: their files hold no decision of their own (drawn from the others)
FLEET_MAP, TIMELINE = "fleetmap", "timeline"
PICTURES = frozenset({FLEET_MAP, TIMELINE})
UNDECODED = PICTURES | {RENDERED}  # kinds of owned file `decode` does not read
FLEET_FILE = layout.FLEET
_KIND_PREFIXES = (
    (layout.LEASES, LEASES),
    (layout.RESERVATIONS, RESERVATION),
    (layout.RUN_STATUS, RUN),
    (layout.BUDGET_STATUS, BUDGET),
    (layout.RENDERED, RENDERED),
)


def kind_of(path: str) -> str | None:
    """The kind of an owned file, None for the ledger and for files jobtree does not write."""
    if path == FLEET_FILE:
        return FLEET
    if path == layout.FLEET_MAP:
        return FLEET_MAP
    if path == layout.TIMELINE:
        return TIMELINE
    for prefix, kind in _KIND_PREFIXES:
        if path.startswith(prefix):
            return kind
    return None


def _payer_row(p: Payer | None) -> Row | None:
    return (p.owner, p.budget, p.envelope) if p is not None else None


def lease_row(x: Lease) -> Row:
    return (
        x.name, x.run, x.group, str(x.role), x.node, tuple(x.slots), _payer_row(x.payer), x.start,
        str(x.reason), x.ended, x.closure, x.rank, x.funding,
    )  # fmt: skip


def lease_of(row: Row, payers: dict[Row, Payer] | None = None) -> Lease:
    name, run, group, role, node, slots, payer, start, reason, ended, closure, rank, funding = row
    found = payers.get(payer) if payers is not None else None
    if found is None:
        found = Payer(*payer)
        if payers is not None:
            payers[payer] = found
    return Lease(
        name,
        run,
        group,
        Role(role),
        node,
        tuple(slots),
        found,
        start,
        OpenReason(reason),
        ended,
        closure,
        rank,
        funding,
    )


def reservation_row(r: Reservation) -> Row:
    return (
        r.run, r.earliest_start, r.created, r.state.value, r.reason, r.deficit, r.confidence.value,
        tuple(x.value for x in r.remedies), tuple(r.domains), tuple(r.nodes), _payer_row(r.paying), r.basis,
        tuple((c.run, c.probability, c.since) for c in r.conflicts), r.seed, r.ended, tuple(r.remedy_gpus),
        r.window,
    )  # fmt: skip


def reservation_of(row: Row) -> Reservation:
    (run, earliest, created, state, reason, deficit, confidence, remedies, domains, nodes, paying, basis,
     conflicts, seed, ended, remedy_gpus, window) = row  # fmt: skip
    return Reservation(
        run, earliest, created, ResState(state), reason, deficit, Confidence(confidence),
        tuple(Remedy(x) for x in remedies), tuple(domains), tuple(nodes),
        Payer(*paying) if paying is not None else None, basis, [ConflictEntry(*c) for c in conflicts], seed,
        ended, tuple(remedy_gpus), window,
    )  # fmt: skip


def sources(plan: Plan, pods: Mapping[str, dict[str, Any]] | None = None) -> dict[str, tuple[str, Any]]:
    """`{path: (kind, key)}` for every file under `state/` (but the ledger) and `rendered/`, the
    pictures (`state/fleet.svg`, `state/timeline.svg`) included. `pods`: the manifests to group into
    rendered files (by default `Plan.manifests`, every open lease's; `state.rendering` passes only
    the runs it renders again)."""
    st = plan.state
    out: dict[str, tuple[str, Any]] = {}
    by_run: dict[str, list[Lease]] = defaultdict(list)
    for lease in st.leases:
        by_run[lease.run].append(lease)
    for run, leases in sorted(by_run.items()):
        rows = tuple(lease_row(x) for x in sorted(leases, key=lambda x: (x.start, x.name)))
        out[layout.lease_file(run)] = (LEASES, rows)
    for run, res in sorted(st.reservations.items()):
        out[layout.reservation_file(run)] = (RESERVATION, reservation_row(res))
    for run, rec in sorted(st.runs.items()):
        body = dict(plan.runs.get(run, {}))
        body["hours"] = {"owned": round(rec.owned_hours, 6), "borrowed": round(rec.borrowed_hours, 6)}
        body["started"] = _t(rec.started)
        body["finished"] = _t(rec.finished)
        if rec.cause:
            body["cause"] = rec.cause
        if rec.next_group:
            body["nextGroup"] = rec.next_group
        if rec.completed:
            body["completedGPUs"] = rec.completed
        if rec.resized is not None:
            body["resized"] = _t(rec.resized)
        if rec.invalid:
            body["specInvalid"] = True
        out[layout.run_status_file(run)] = (RUN, {"run": run, "status": body})
    meters: dict[str, dict[str, Any]] = defaultdict(dict)
    for (b, e), m in sorted(st.meters.items()):
        meters[b][e] = {
            "consumed": round(m.consumed, 6),
            "spare": round(m.spare, 6),
            "lent": round(m.lent, 6),
        }
    for name in sorted(set(plan.budgets) | set(meters)):
        doc = {"budget": name, "status": plan.budgets.get(name, {}), "meters": meters.get(name, {})}
        out[layout.budget_status_file(name)] = (BUDGET, doc)
    out[FLEET_FILE] = (
        FLEET,
        {
            "asOf": _t(st.as_of),
            "cordoned": sorted(st.cordoned),
            "unfunded": [f"{r}#{g}" for r, g in sorted(st.unfunded)],
        },
    )
    # rendered/<cluster>/<namespace>/<run>.yaml: a run's pods in that cluster and its headless Service,
    # in the order `manifests.render` gives them (groups in order, spares after, the Service last)
    files: dict[str, list[Any]] = defaultdict(list)
    for path, manifest in (plan.manifests if pods is None else pods).items():
        cluster = path.split("/", 1)[0]
        files[layout.rendered_file(cluster, manifests.run_of(manifest))].append(manifest)
    for path, docs in sorted(files.items()):
        out[path] = (RENDERED, tuple(docs))
    owners = {key: run.spec.owner for key, run in plan.specs.items()}
    out[layout.FLEET_MAP] = (
        FLEET_MAP,
        fleetmap.key(plan.nodes, st.leases, st.unfunded, st.cordoned, owners, st.runs),
    )
    out[layout.TIMELINE] = (TIMELINE, timeline.key(st.reservations, st.runs))
    return out


def file_object(kind: str, key: Any) -> Any:
    """The YAML object a file holds (a list of documents for lease and rendered files)."""
    if kind == LEASES:
        payers: dict[Row, Payer] = {}
        return [records.lease_obj(lease_of(row, payers)) for row in key]
    if kind == RESERVATION:
        return reservation_obj(reservation_of(key))
    if kind == RENDERED:
        return list(key)
    if kind == FLEET_MAP:
        return fleetmap.draw(key)
    if kind == TIMELINE:
        return timeline.draw(key)
    return key


def file_bytes(kind: str, obj: Any) -> bytes:
    if kind in PICTURES:
        return str(obj).encode("utf-8")
    return dump_all(obj) if kind in (LEASES, RENDERED) else dump(obj)


def as_last_rendered(docs: tuple[dict[str, Any], ...], last: bytes) -> tuple[dict[str, Any], ...]:
    """A frozen run's manifests (rendered from no spec: its file is invalid now) as the rendered file
    `last` held them, by kind and name: the workload keeps running as its last valid spec said, and
    the pods of leases closed since are gone. A file that does not read leaves `docs` as they are."""
    try:
        held = {
            (d.get("kind"), (d.get("metadata") or {}).get("name")): d
            for d in documents(last)
            if isinstance(d, dict)
        }
    except yaml.YAMLError:
        return docs
    return tuple(held.get((m["kind"], m["metadata"]["name"]), m) for m in docs)


def encode(plan: Plan) -> dict[str, bytes]:
    """Every file under `state/` and `rendered/` for this plan (paths relative to the repo root)."""
    return {path: file_bytes(kind, file_object(kind, key)) for path, (kind, key) in sources(plan).items()}


def documents(data: bytes) -> list[Any]:
    """All YAML documents of a file, as `yaml.load_all` reads them; quick for what `state.yamlstyle` wrote."""
    try:
        docs = yamlout.load_all(data.decode("utf-8"))
    except UnicodeDecodeError:
        docs = None
    return docs if docs is not None else list(yaml.load_all(data, Loader=_Loader))


def load(kind: str, data: bytes) -> Any:
    """A file's YAML object as `decode` reads it (all documents of a lease file, else the first)."""
    if kind == LEASES:
        return [o for o in documents(data) if o]
    try:
        docs = yamlout.load_all(data.decode("utf-8"))
    except UnicodeDecodeError:
        docs = None
    if docs is not None and len(docs) <= 1:
        return docs[0] if docs else None
    return yaml.load(data, Loader=_Loader)  # PyYAML's answer, or its error for a file of several documents


def piece(kind: str, obj: Any) -> Any:
    """What `decode` takes from a state file holding `obj`, as plain rows."""
    if kind == LEASES:
        return tuple(lease_row(records.lease_from(o)) for o in obj if o)
    if kind == RESERVATION:
        return reservation_row(reservation_from(obj))
    if kind == RUN:
        return records.run_row(obj["run"], obj["status"])
    if kind == BUDGET:
        return tuple(
            (obj["budget"], env, float(m["consumed"]), float(m["spare"]), float(m["lent"]))
            for env, m in (obj.get("meters") or {}).items()
        )
    if kind == FLEET:
        doc = obj or {}
        unfunded = tuple((g.rsplit("#", 1)[0], int(g.rsplit("#", 1)[1])) for g in doc.get("unfunded") or ())
        return (_ts(doc["asOf"]) if doc.get("asOf") else None, tuple(doc.get("cordoned") or ()), unfunded)
    return None


def assemble(pieces: Mapping[str, tuple[str, Any]]) -> FleetState:
    """The FleetState of a `state/` tree given each file's `(kind, piece)`, exactly as `decode` builds it."""
    st = FleetState()
    payers: dict[Row, Payer] = {}
    for path in sorted(pieces):
        kind, rows = pieces[path]
        if rows is None:
            continue
        if kind == FLEET:
            st.as_of, cordoned, unfunded = rows
            st.cordoned, st.unfunded = frozenset(cordoned), frozenset(tuple(u) for u in unfunded)
        elif kind == LEASES:
            st.leases += [lease_of(row, payers) for row in rows]
        elif kind == RESERVATION:
            r = reservation_of(rows)
            st.reservations[r.run] = r
        elif kind == RUN:
            st.runs[rows[0]] = records.record_of(rows)
        elif kind == BUDGET:
            for budget, env, consumed, spare, lent in rows:
                st.meters[(budget, env)] = EnvelopeMeter(consumed, spare, lent)
    st.leases.sort(key=lambda x: (x.run, x.start, x.name))
    return st


def decode(files: dict[str, bytes]) -> FleetState:
    """The FleetState written by `encode` (ignores rendered/ and the ledger)."""
    pieces = {}
    for path, data in files.items():
        kind = kind_of(path)
        if kind is not None and kind not in UNDECODED:
            pieces[path] = (kind, piece(kind, load(kind, data)))
    return assemble(pieces)


def ledger_lines(plan: Plan, observed: Sequence[tuple[int, dict[str, Any]]] = ()) -> dict[str, bytes]:
    """Ledger events of this pass grouped by day: `state/ledger/<YYYY-MM-DD>.jsonl` -> appended lines.

    `observed`: rows of what the pass observed (workload outcomes, `state.observed`), written first:
    the decisions that follow were made from them."""
    out: dict[str, list[str]] = defaultdict(list)
    encode = json.JSONEncoder(sort_keys=True).encode  # what json.dumps(..., sort_keys=True) writes
    rows = list(observed)
    rows += [(ev.at, ev.as_json(records.time_text)) for ev in plan.events]
    rows += [(m.at, m.as_json(records.time_text)) for m in plan.moves]
    for at, row in rows:
        out[layout.ledger_file(records.time_text(at)[:10])].append(encode(row))
    return {p: ("\n".join(lines) + "\n").encode() for p, lines in out.items()}
