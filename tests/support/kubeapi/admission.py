"""Turning a requested object into the object to store: identity checks, carry-over, validation.

Between the verbs (`registry`) and storage: checks apiVersion/kind/name/namespace against the
URL, keeps what a client may not change (uid, creationTimestamp, deletion state, generation,
the other half of a status subresource), prunes and validates custom resources against their
schema, drops undeclared fields of built-in kinds (Warning headers, or 400 under Strict),
applies the built-in strategies, validates ObjectMeta and CRDs. It reads no storage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.support.kubeapi import crds, declared, objectmeta, schema, status, strategies
from tests.support.kubeapi.resources import ResourceType
from tests.support.kubeapi.status import Cause
from tests.support.kubeapi.store import clone

Obj = dict[str, Any]
SERVER_SET_META = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


@dataclass(frozen=True, slots=True)
class Call:
    """One request against one resource: where it points and how the client asked."""

    rt: ResourceType
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    manager: str = ""
    dry_run: bool = False
    field_validation: str = "Warn"


@dataclass(slots=True)
class Admitted:
    obj: Obj
    warnings: list[str] = field(default_factory=list)


def check_identity(call: Call, obj: Obj, require_type_meta: bool = False) -> Obj:
    """apiVersion, kind, name and namespace of a request body against the URL (400 when they differ).

    Built-in endpoints default a missing apiVersion/kind from the URL; custom resources and
    apply configurations must carry them, as on a real server.
    """
    rt = call.rt
    if not isinstance(obj, dict):
        raise status.bad_request(f"the body of the request was not a {rt.kind} object")
    if (require_type_meta or rt.custom) and not (obj.get("apiVersion") and obj.get("kind")):
        raise status.bad_request(
            "Object 'Kind' is missing in the request body (apiVersion and kind must be set)"
        )
    api_version = obj.get("apiVersion")
    if api_version and api_version != rt.api_version:
        raise status.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version ({rt.api_version})"
        )
    kind = obj.get("kind")
    if kind and kind != rt.kind:
        raise status.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
        )
    obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise status.bad_request("metadata must be an object")
    if call.name and meta.get("name") and meta["name"] != call.name:
        raise status.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({call.name})"
        )
    if call.name:
        meta["name"] = call.name
    if rt.namespaced:
        if meta.get("namespace") and meta["namespace"] != call.namespace:
            raise status.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = call.namespace
    else:
        meta.pop("namespace", None)
    return obj


def carry_over(call: Call, live: Obj, requested: Obj) -> Obj:
    """The object an update of `live` stores, before validation: what the endpoint may change.

    Works on a private copy of `live`: a stored object is shared with watchers and history and
    must never change.
    """
    rt = call.rt
    live = clone(live)
    if call.subresource in ("status", "finalize"):
        new = live
        if call.subresource == "status":
            if "status" in requested:
                new["status"] = requested["status"]
            else:
                new.pop("status", None)
            if not rt.custom:
                for key in ("labels", "annotations"):
                    _copy_key(requested["metadata"], new["metadata"], key)
        else:
            new.setdefault("spec", {})["finalizers"] = (requested.get("spec") or {}).get("finalizers") or []
        new["metadata"]["managedFields"] = requested["metadata"].get(
            "managedFields", live["metadata"].get("managedFields")
        )
        return new
    new = requested
    if rt.has_status:
        _copy_key(live, new, "status")
    meta, before = new["metadata"], live["metadata"]
    for key in SERVER_SET_META:
        _copy_key(before, meta, key)
    meta.pop("selfLink", None)
    if before.get("deletionTimestamp"):
        added = [f for f in meta.get("finalizers") or [] if f not in (before.get("finalizers") or [])]
        if added:
            quoted = ", ".join(f'"{f}"' for f in added)
            raise status.invalid(
                rt.resource,
                call.name,
                [
                    Cause(
                        "FieldValueForbidden",
                        f"Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{quoted}}}",
                        "metadata.finalizers",
                    )
                ],
            )
    return new


def _copy_key(source: Obj, target: Obj, key: str) -> None:
    if key in source:
        target[key] = source[key]
    else:
        target.pop(key, None)


def admit(call: Call, obj: Obj, live: Obj | None, allocate_ip: Any, now: str) -> Admitted:
    """Prune, default and validate; a 422 names every problem, a 400 the undecodable ones."""
    rt = call.rt
    causes: list[Cause] = []
    if rt.custom:
        checked = schema.admit(obj, rt.schema)
        obj, unknown = checked.obj, checked.unknown_fields
        causes.extend(checked.causes)
    else:
        unknown = declared.prune(rt.kind, obj)
    words = [f'unknown field "{f}"' for f in unknown]
    if words and call.field_validation == "Strict":
        raise status.bad_request("strict decoding error: " + ", ".join(words))
    warnings = words if call.field_validation != "Ignore" else []
    if not rt.custom:
        if live is None:
            causes.extend(strategies.on_create(rt, obj, allocate_ip))
        else:
            causes.extend(strategies.on_update(rt, obj, live, allocate_ip))
    causes.extend(objectmeta.meta_problems(obj["metadata"]))
    if rt.kind == "CustomResourceDefinition" and not rt.custom:
        crds.default(obj)
        causes.extend(crds.validate(obj, live))
        if not causes:
            crds.with_status(obj, live, now)
    if causes:
        raise status.invalid(rt.resource, obj["metadata"].get("name", call.name), causes)
    return Admitted(obj, warnings)


def undeclared(rt: ResourceType, config: Obj) -> list[str]:
    """Fields of an apply configuration its kind does not declare (the configuration is not changed)."""
    if rt.custom:
        return schema.admit(config, rt.schema).unknown_fields
    return declared.prune(rt.kind, clone(config))


def spec_changed(rt: ResourceType, old: Obj, new: Obj) -> bool:
    """Whether a write changes what `metadata.generation` counts: everything but metadata (and status)."""
    ignored = {"metadata", "status"} if rt.has_status else {"metadata"}
    return {k: v for k, v in old.items() if k not in ignored} != {
        k: v for k, v in new.items() if k not in ignored
    }
