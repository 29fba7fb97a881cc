"""Mirrors (§7.3): the record in Git as in-cluster objects, so `kubectl get runs -A` shows it and the agent has its world.

Runs (spec and status) and Reservations in their namespaces, Budgets (cluster-scoped, with status),
the open Leases of runs placed on the cluster, and the fleet's settings as a cluster-scoped
`FleetConfig` named after the fleet (its status: the cluster and the commit last applied in full).
Each mirror is the object the state file already holds, or the spec model and its status file;
statuses leave out what moves with the clock alone (GPU-hours: `planner.records.CLOCK_FIELDS`, as
the state commit does), so a pass that changed one run rewrites that run's mirrors, not every running one's.
Pure: models and state documents in, manifests out; stamping and applying are `stamp` and `sync`'s.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

from planner import records
from schemas import API_VERSION
from schemas.budget import Budget
from schemas.fleet import FleetSpec
from schemas.run import Run

Obj = dict[str, Any]


def _meta(name: str, namespace: str | None, labels: dict[str, str], notes: dict[str, str]) -> Obj:
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    if notes:
        meta["annotations"] = dict(notes)
    return meta


def run(model: Run, status: Obj | None) -> Obj:
    """A Run with its status file's `status` (None: the run has no status yet)."""
    meta = model.metadata
    return {
        "apiVersion": API_VERSION,
        "kind": "Run",
        "metadata": _meta(meta.name, meta.namespace, meta.labels, meta.annotations),
        "spec": model.spec.model_dump(mode="json", by_alias=True, exclude_none=True),
        "status": _status(status),
    }


def budget(model: Budget, status: Obj | None) -> Obj:
    """A Budget with its status file's `status` (the meters stay in Git)."""
    meta = model.metadata
    return {
        "apiVersion": API_VERSION,
        "kind": "Budget",
        "metadata": _meta(meta.name, None, meta.labels, meta.annotations),
        "spec": model.spec.model_dump(mode="json", by_alias=True, exclude_none=True),
        "status": _status(status),
    }


def recorded(doc: Obj) -> Obj:
    """A Reservation or Lease as its state file holds it (already a Kubernetes object), without its
    nulls: server-side apply reads a null as "remove the field", so an absent field says it."""
    meta = doc.get("metadata") or {}
    notes = meta.get("annotations") or {}
    return {
        "apiVersion": doc["apiVersion"],
        "kind": doc["kind"],
        "metadata": _meta(meta["name"], meta.get("namespace"), meta.get("labels") or {}, notes),
        "spec": without_nulls(doc["spec"]),
        "status": _status(doc),
    }


def without_nulls(value: Any) -> Any:
    """`value` without the fields whose value is null, at any depth."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def _status(doc: Obj | None) -> Obj:
    """A state document's status as mirrored: no clock-only field, no null."""
    status: Obj = without_nulls(records.without_clock((doc or {}).get("status") or {}))
    return status


def is_open_lease(doc: Obj) -> bool:
    return doc.get("kind") == "Lease" and not (doc.get("status") or {}).get("closed", False)


def fleet(name: str, spec: FleetSpec, cluster: str, commit: str) -> Obj:
    """The fleet's settings (jobtree.yaml's spec) for the agent; status: this cluster and the commit
    applied to it in full."""
    return {
        "apiVersion": API_VERSION,
        "kind": "FleetConfig",
        "metadata": {"name": name},
        "spec": spec.model_dump(mode="json", by_alias=True, exclude_none=True),
        "status": {"cluster": cluster, "commit": commit},
    }


def definitions() -> list[Obj]:
    """The CRDs `make schemas` published (`schemas/crds/`, carried in the wheel), by file name."""
    folder = resources.files("schemas").joinpath("crds")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".yaml")), key=lambda f: f.name)
    return [yaml.safe_load(f.read_text(encoding="utf-8")) for f in files]


def run_event(namespace: str, run: str, meta: Obj, reason: str, message: str, warning: bool, component: str,
              at: str, uid: str = "") -> Obj:  # fmt: skip
    """A core Event on the Run mirror `namespace/run` (what `kubectl describe run` shows), with the
    object metadata `meta` (its name or generateName), by `component` at `at`."""
    involved = {"apiVersion": API_VERSION, "kind": "Run", "name": run, "namespace": namespace}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {**meta, "namespace": namespace},
        "involvedObject": {**involved, **({"uid": uid} if uid else {})},
        "reason": reason,
        "message": message,
        "type": "Warning" if warning else "Normal",
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }
