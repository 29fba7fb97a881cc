"""What jobtree writes on every object it applies: the fleet's labels and the content hashes apply compares.

`app.kubernetes.io/managed-by: jobtree` and `rq.davidlangworthy.io/fleet: <FleetConfig name>` (§7.1)
mark an object as this fleet's: apply prunes by them and never touches an object carrying another
fleet's. `content-hash` is a digest of everything jobtree applies of the object but its status, so
an unchanged object costs no write; `spec-hash`, on pods, of the spec alone: pods are immutable,
so a pod whose spec hash differs is deleted and created again, while a label change is applied in
place. A CRD carries `schema-version`: this jobtree's `SCHEMA_VERSION` of the published CRDs
(raised whenever `schemas/crds/` changes), so a pass never replaces a newer fleet's CRDs with older ones. A pod's resource quantities are sent as text, as the API server serves them. Pure: dicts
in, dicts out.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from schemas import GROUP

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "jobtree"
FLEET = f"{GROUP}/fleet"
CONTENT_HASH = f"{GROUP}/content-hash"
SPEC_HASH = f"{GROUP}/spec-hash"
SCHEMA = f"{GROUP}/schema-version"
SCHEMA_VERSION = 3  # of schemas/crds/: raise it with every change there (tests/cluster/test_real_cluster.py)
Obj = dict[str, Any]


def digest(value: Any) -> str:
    """A short stable digest of plain data (sorted keys, no whitespace)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def selector(fleet: str) -> str:
    """The label selector of everything this fleet applied."""
    return f"{MANAGED_BY}={MANAGER},{FLEET}={fleet}"


def stamped(obj: Obj, fleet: str | None) -> tuple[Obj, Obj | None]:
    """`obj` with the labels (the fleet's when `fleet` is given: shared objects such as CRDs carry
    only managed-by) and hashes, and apart from it its status (None when it has none). `obj` is left
    as it was: what is changed is copied (the metadata, a pod's resources), the rest is shared with
    it, so neither may be changed afterwards."""
    body = dict(obj)
    status = body.pop("status", None)
    meta = body["metadata"] = dict(body.get("metadata") or {})
    labels = meta["labels"] = dict(meta.get("labels") or {})
    labels[MANAGED_BY] = MANAGER
    if fleet:
        labels[FLEET] = fleet
    notes = meta["annotations"] = dict(meta.get("annotations") or {})
    notes.pop(CONTENT_HASH, None)
    notes.pop(SPEC_HASH, None)
    if body.get("kind") == "Pod" and body.get("apiVersion") == "v1":
        if isinstance(body.get("spec"), dict):
            body["spec"] = _quantities_as_text(body["spec"])
        notes[SPEC_HASH] = digest(body.get("spec"))
    if body.get("kind") == "CustomResourceDefinition":
        notes[SCHEMA] = str(SCHEMA_VERSION)
    notes[CONTENT_HASH] = digest(body)
    return body, status


def status_body(body: Obj, status: Obj) -> Obj:
    """What an apply of `status` to the `/status` subresource of `body`'s object sends: its kind,
    name (and namespace), and the status alone."""
    meta = {k: v for k, v in body["metadata"].items() if k in ("name", "namespace")}
    return {"apiVersion": body["apiVersion"], "kind": body["kind"], "metadata": meta, "status": status}


def fleet_of(obj: Obj) -> str | None:
    """The fleet an object is labelled with (None: not applied by a fleet)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(FLEET) if labels.get(MANAGED_BY) == MANAGER else None


def schema_version(crd: Obj) -> int:
    """The schema version a CRD carries (0: none, a CRD from before versions were stamped)."""
    text = annotation(crd, SCHEMA) or ""
    return int(text) if text.isdigit() else 0


def annotation(obj: Obj, key: str) -> str | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(key)
    return value if isinstance(value, str) else None


def _quantities_as_text(spec: Obj) -> Obj:
    """`spec` with its resource quantities as the API server stores them (`8` is served back as
    `"8"`), so a typed client reading the pod finds the type it expects, on any server; what holds
    a quantity is copied, the rest shared."""
    out = dict(spec)
    for part in ("containers", "initContainers"):
        if isinstance(spec.get(part), list):
            out[part] = [_container(c) for c in spec[part]]
    return out


def _container(container: Any) -> Any:
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return container
    copied = dict(resources)
    for part in ("limits", "requests"):
        amounts = resources.get(part)
        if isinstance(amounts, dict):
            copied[part] = {
                name: str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
                for name, value in amounts.items()
            }
    return {**container, "resources": copied}
