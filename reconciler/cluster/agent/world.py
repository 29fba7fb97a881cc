"""The agent's world (§7.4): the small planner `World` a fence is decided on, built from the mirrors alone.

No Git: the fleet's settings come from its FleetConfig mirror, run specs and statuses from the Run
mirrors, budgets from the Budget mirrors, leases from the Lease mirrors (apply mirrors the open
ones), nodes from the cluster. Small: only the runs with an open lease on a fenced node, the runs
filling their spares' nodes, and every node any of their leases is on, so the planner decides on
a handful of runs whatever the fleet's size (building it reads every open lease once, and only
the nodes and mirrors of those runs: measured in `bench/scale.py` at 10,000 nodes). A Run mirror
that does not read is a run whose spec is invalid now (`World.frozen_runs`: nothing of it moves).
`slim_mirror` and `lease_mirror` are what the agent's caches keep of the mirrors (a Lease parsed
once, as it arrives). Pure: mirrors in, a `World` out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from planner import records
from planner.reasons import Role
from planner.topology import is_fenced
from planner.world import FleetState, Lease, NodeObs, RunRecord, Settings, World
from schemas.budget import Budget
from schemas.fleet import FleetSpec
from schemas.run import Run

Obj = dict[str, Any]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Fleet:
    """The fleet's settings as its FleetConfig mirror holds them."""

    name: str
    spec: FleetSpec
    settings: Settings

    def labels_of(self, cluster: str) -> Mapping[str, str]:
        """Topology key -> node label key on `cluster` (the seeds' keys when not configured)."""
        for c in self.spec.clusters:
            if c.name == cluster:
                return c.topologyLabels.keys()
        return {}


def fleet_of(obj: Obj) -> Fleet:
    """A FleetConfig mirror as the agent's settings; ValidationError when it does not read."""
    spec = FleetSpec.model_validate(obj.get("spec") or {}, strict=False)
    return Fleet(str(obj["metadata"]["name"]), spec, records.settings_of(spec))


def slim_mirror(obj: Obj) -> Obj:
    """A Run or Budget mirror as the agent keeps it: name, namespace, version, spec and status."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "namespace", "resourceVersion") if meta.get(k)}
    out = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": kept,
        "spec": obj.get("spec"),
    }
    if obj.get("status") is not None:
        out["status"] = obj["status"]
    return out


def lease_mirror(obj: Obj) -> Obj:
    """A Lease mirror as the agent keeps it: its name and version, and the open lease it holds,
    parsed once as it arrives (`lease`: None when it does not read, or is closed)."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "namespace", "resourceVersion") if meta.get(k)}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": kept,
        "lease": _open(obj),
    }


def _open(obj: Obj) -> Lease | None:
    if "lease" in obj:
        lease: Lease | None = obj["lease"]
        return lease
    try:
        found = records.lease_from(obj)
    except (KeyError, ValueError, TypeError, IndexError):
        return None
    return found if found.open else None


def leases_of(mirrors: Iterable[Obj]) -> list[Lease]:
    """The open leases the Lease mirrors hold (as `lease_mirror` keeps them, or as listed; a mirror
    that does not read is left out)."""
    out = [lease for lease in map(_open, mirrors) if lease is not None]
    return sorted(out, key=lambda x: (x.run, x.start, x.name))


def affected(leases: list[Lease], fenced: set[str]) -> tuple[set[str], set[str]]:
    """The runs a decision on the `fenced` nodes may change, and the nodes their leases are on:
    runs with an open lease there, and the runs filling any node those runs hold spares on."""
    runs = {x.run for x in leases if x.node in fenced}
    spare_nodes = {x.node for x in leases if x.run in runs and x.role == Role.SPARE}
    runs |= {x.run for x in leases if x.role == Role.BORROWED and (x.node in spare_nodes or x.node in fenced)}
    nodes = {x.node for x in leases if x.run in runs} | fenced
    return runs, nodes


def build(
    now: int,
    fleet: Fleet,
    nodes: Mapping[str, NodeObs],
    gone: set[str],
    leases: list[Lease],
    run_mirrors: Mapping[str, Obj],
    budget_mirrors: Iterable[Obj],
) -> World:
    """The world of the fenced nodes among `nodes` at `now`: their runs, leases and nodes only.

    `nodes`: the cluster's GPU nodes by name (at least those the leases are on); `gone`: nodes seen
    deleted from this cluster; `run_mirrors`: "ns/name" -> Run mirror, for every run (those not affected are left out). A lease
    on a node this cluster never listed (a run with groups in another cluster) is no failure here:
    that node is handed over unlabelled, so the planner leaves it alone, and the cluster it is in
    decides its fate. Linear in the leases, never in the nodes."""
    grace = fleet.settings.not_ready_grace
    held = {x.node for x in leases}
    fenced = {
        n for n in held if (n in nodes and is_fenced(nodes[n], now, grace)) or (n in gone and n not in nodes)
    }
    runs, wanted = affected(leases, fenced)
    by_name = {n: nodes[n] for n in wanted if n in nodes}
    elsewhere: dict[str, int] = {}
    for x in leases:
        if x.run in runs and x.node not in by_name and x.node not in gone:
            elsewhere[x.node] = max(elsewhere.get(x.node, 0), max(x.slots) + 1)
    by_name.update({name: NodeObs(name, gpus, {}) for name, gpus in elsewhere.items()})
    specs: list[Run] = []
    frozen: dict[str, str] = {}
    state = FleetState(as_of=now, leases=[x.copy() for x in leases if x.run in runs])
    for key in sorted(runs):
        mirror = run_mirrors.get(key)
        model = _run(mirror) if mirror is not None else None
        if model is None:
            frozen[key] = f"Run mirror {key}"
        else:
            specs.append(model)
        record = _record(key, mirror)
        if record is not None:
            state.runs[key] = record
    budgets = [b for b in (_budget(o) for o in budget_mirrors) if b is not None]
    return World(
        now,
        fleet.settings,
        tuple(sorted(budgets, key=lambda b: b.metadata.name)),
        tuple(specs),
        tuple(by_name[n] for n in sorted(wanted) if n in by_name),
        state,
        frozen_runs=frozen,
    )


def _run(obj: Obj) -> Run | None:
    return _model(Run, obj, namespaced=True)


def _budget(obj: Obj) -> Budget | None:
    return _model(Budget, obj, namespaced=False)


def _model(model: type[M], obj: Obj, namespaced: bool) -> M | None:
    """The spec model of a mirror (its name, namespace and spec: what jobtree mirrored from Git);
    None when it does not read."""
    meta = obj.get("metadata") or {}
    name = {"name": meta.get("name"), **({"namespace": meta.get("namespace")} if namespaced else {})}
    doc = {
        "apiVersion": obj.get("apiVersion"),
        "kind": model.__name__,
        "metadata": name,
        "spec": obj.get("spec"),
    }
    try:
        return model.model_validate(doc, strict=False)
    except ValidationError:
        return None


def _record(key: str, obj: Obj | None) -> RunRecord | None:
    status = (obj or {}).get("status") or {}
    try:
        return records.record_of(records.run_row(key, status))
    except (KeyError, ValueError, TypeError):
        return None
