"""The verbs on stored objects: get, create, update, patch (merge, JSON, strategic, apply).

The REST layer under the HTTP handler and over the store. Each write runs one pipeline: identity
checks, carry-over, admission (schema, strategies), managed fields, generation, then a no-op check
(an unchanged object keeps its resourceVersion and emits no event) before it is stored. Lists are
in `listing`, deletes in `deletion`. It knows nothing of HTTP, faults or the request log.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import yaml

from tests.support.kubeapi import admission, apply, crds, deletion, objectmeta, patches, status
from tests.support.kubeapi.admission import Call
from tests.support.kubeapi.resources import Catalog, ResourceType
from tests.support.kubeapi.store import Store, clone

Obj = dict[str, Any]
Clock = Callable[[], datetime]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)
CUSTOM_PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(slots=True)
class Result:
    code: int
    body: Obj
    warnings: list[str] = field(default_factory=list)


def utc_now() -> datetime:
    return datetime.now(UTC)


class Registry:
    def __init__(self, store: Store, catalog: Catalog, clock: Clock = utc_now, seed: int = 0) -> None:
        self.store = store
        self.catalog = catalog
        self.clock = clock
        self.kubelet_emulation = False
        self._rng = random.Random(seed)
        self._ips = 0
        self._rng_lock = threading.Lock()
        self.terminating: set[tuple[tuple[str, str], str, str]] = set()

    # Server-made values.

    def stamp(self) -> str:
        return objectmeta.format_time(self.clock())

    def new_uid(self) -> str:
        with self._rng_lock:
            return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def allocate_ip(self) -> str:
        self._ips += 1
        return f"10.96.{self._ips // 250}.{self._ips % 250 + 1}"

    def _generated_name(self, prefix: str) -> str:
        with self._rng_lock:
            return prefix + "".join(self._rng.choice(NAME_ALPHABET) for _ in range(5))

    def output(self, rt: ResourceType, obj: Obj) -> Obj:
        """The stored object as served at `rt`'s version (custom resources convert with strategy None)."""
        if obj.get("apiVersion") == rt.api_version:
            return obj
        return {**obj, "apiVersion": rt.api_version}

    # Reads.

    def get(self, call: Call) -> Obj:
        with self.store.lock:
            obj = self.store.get(call.rt.storage_key, call.namespace, call.name)
        if obj is None:
            raise status.not_found(call.rt.resource, call.name)
        return self.output(call.rt, obj)

    # Writes.

    def create(self, call: Call, body: Obj) -> Result:
        if call.subresource:
            raise status.method_not_allowed()
        obj = admission.check_identity(call, body)
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise status.ApiError(
                500,
                "InternalError",
                "resourceVersion should not be set on objects to be created",
                status.Target(),
            )
        with self.store.lock:
            return self._create(
                call,
                obj,
                lambda created: apply.track_update(
                    call.rt, [], None, created, call.manager, "", self.stamp()
                ),
            )

    def _create(self, call: Call, obj: Obj, ownership: Callable[[Obj], list[apply.Manager]]) -> Result:
        rt, meta = call.rt, obj["metadata"]
        if rt.namespaced:
            self._check_namespace(call)
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            name = self._generated_name(meta["generateName"])
            for _ in range(8):
                if self.store.get(rt.storage_key, call.namespace, name) is None:
                    break
                name = self._generated_name(meta["generateName"])
            meta["name"] = name
        problems = objectmeta.name_problems(name, rt.name_rule)
        if problems:
            raise status.invalid(rt.resource, name, problems)
        if self.store.get(rt.storage_key, call.namespace, name) is not None:
            raise status.already_exists(rt.resource, name)
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields"):
            meta.pop(key, None)
        if rt.has_status and rt.custom:
            obj.pop("status", None)
        admitted = admission.admit(call, obj, None, self.allocate_ip, self.stamp())
        obj = admitted.obj
        meta = obj["metadata"]
        meta["uid"] = self.new_uid()
        meta["creationTimestamp"] = self.stamp()
        if rt.tracks_generation:
            meta["generation"] = 1
        managers = ownership(obj)
        if managers:
            meta["managedFields"] = apply.encode(managers)
        if call.dry_run:
            return Result(201, self.output(rt, obj), admitted.warnings)
        stored = self.store.write(rt.storage_key, call.namespace, name, obj)
        if rt.kind == "CustomResourceDefinition" and not rt.custom:
            self.catalog.serve_custom(name, crds.served_types(stored))
        return Result(201, self.output(rt, stored), admitted.warnings)

    def _check_namespace(self, call: Call) -> None:
        namespaces = self.catalog.builtin("namespaces")
        namespace = self.store.get(namespaces.storage_key, "", call.namespace)
        if namespace is None:
            raise status.not_found(namespaces.resource, call.namespace)
        if namespace["metadata"].get("deletionTimestamp"):
            raise status.forbidden(
                call.rt.resource,
                call.name,
                f"unable to create new content in namespace {call.namespace} because it is being terminated",
            )

    def update(self, call: Call, body: Obj) -> Result:
        requested = admission.check_identity(call, body)
        asked_version = requested["metadata"].get("resourceVersion")
        with self.store.lock:
            live = self._live(call)
            if asked_version and asked_version != live["metadata"]["resourceVersion"]:
                raise status.stale(call.rt.resource, call.name)
            if not asked_version and call.rt.custom:
                raise status.invalid(
                    call.rt.resource,
                    call.name,
                    [
                        status.Cause(
                            "FieldValueInvalid",
                            "Invalid value: 0x0: must be specified for an update",
                            "metadata.resourceVersion",
                        )
                    ],
                )
            return self._write_over(call, live, requested)

    def _live(self, call: Call) -> Obj:
        live = self.store.get(call.rt.storage_key, call.namespace, call.name)
        if live is None:
            raise status.not_found(call.rt.resource, call.name)
        return live

    def _write_over(self, call: Call, live: Obj, requested: Obj) -> Result:
        """An update or patch of `live` to `requested`: uid checked, fields carried over, managers tracked."""
        self._check_uid(call, live, requested)
        managers = apply.managers_for_write(live, requested)
        new = admission.carry_over(call, live, requested)
        return self._commit(
            call,
            live,
            new,
            lambda obj: apply.track_update(
                call.rt, managers, live, obj, call.manager, call.subresource, self.stamp()
            ),
        )

    def _check_uid(self, call: Call, live: Obj, requested: Obj) -> None:
        asked = requested["metadata"].get("uid")
        if asked and asked != live["metadata"]["uid"]:
            raise status.conflict(
                call.rt.resource,
                call.name,
                f"Precondition failed: UID in precondition: {asked}, UID in object meta: {live['metadata']['uid']}",
            )

    def patch(self, call: Call, content_type: str, raw: bytes, force: bool | None) -> Result:
        rt = call.rt
        allowed = CUSTOM_PATCH_TYPES if rt.custom else PATCH_TYPES
        if content_type not in allowed:
            raise status.unsupported_media_type(content_type, allowed)
        if content_type == APPLY_PATCH:
            return self._apply(call, raw, force)
        if force is not None:
            raise status.ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch',
                status.Target(),
                (
                    status.Cause(
                        "FieldValueForbidden", "Forbidden: may not be specified for non-apply patch", "force"
                    ),
                ),
            )
        document = _decode_json(raw)
        with self.store.lock:
            live = self._live(call)
            base = clone(live)
            try:
                if content_type == JSON_PATCH:
                    patched = patches.json_patch(base, document)
                elif content_type == MERGE_PATCH:
                    patched = patches.merge_patch(base, document)
                else:
                    patched = patches.strategic_merge_patch(base, document, rt.shape)
            except patches.JsonPatchFailed as failure:
                raise status.ApiError(
                    422,
                    "Invalid",
                    f"the server rejected our request due to an error in our request: {failure}",
                    status.Target(),
                ) from failure
            requested = admission.check_identity(call, patched)
            asked_version = requested["metadata"].get("resourceVersion")
            if asked_version and asked_version != live["metadata"]["resourceVersion"]:
                raise status.stale(rt.resource, call.name)
            return self._write_over(call, live, requested)

    def _apply(self, call: Call, raw: bytes, force: bool | None) -> Result:
        rt = call.rt
        if not call.manager:
            raise status.ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
                status.Target(),
                (
                    status.Cause(
                        "FieldValueRequired", "Required value: is required for apply patch", "fieldManager"
                    ),
                ),
            )
        config = _decode_yaml(raw)
        config = admission.check_identity(call, config, require_type_meta=True)
        undeclared = admission.undeclared(rt, config)
        if undeclared:
            raise status.ApiError(
                500,
                "",
                f"failed to create typed patch object ({call.namespace}/{call.name}; {rt.api_version}, "
                f"Kind={rt.kind}): " + "\n".join(f".{f}: field not declared in schema" for f in undeclared),
            )
        if config["metadata"].get("managedFields") is not None:
            raise status.bad_request("metadata.managedFields must be nil")
        asked_version = config["metadata"].pop("resourceVersion", None)
        with self.store.lock:
            live = self.store.get(rt.storage_key, call.namespace, call.name)
            if live is None:
                if call.subresource:
                    raise status.not_found(rt.resource, call.name)
                if asked_version:
                    raise status.stale(rt.resource, call.name)
                merged, managers = apply.server_side_apply(
                    rt, None, config, call.manager, "", bool(force), self.stamp()
                )
                merged = admission.check_identity(call, merged)
                return self._create(call, merged, lambda created: managers)
            if asked_version and asked_version != live["metadata"]["resourceVersion"]:
                raise status.stale(rt.resource, call.name)
            merged, managers = apply.server_side_apply(
                rt, clone(live), config, call.manager, call.subresource, bool(force), self.stamp()
            )
            merged = admission.check_identity(call, merged)
            merged["metadata"]["managedFields"] = live["metadata"].get("managedFields")
            new = admission.carry_over(call, live, merged)
            return self._commit(call, live, new, lambda obj: managers)

    def _commit(
        self, call: Call, live: Obj, new: Obj, ownership: Callable[[Obj], list[apply.Manager]]
    ) -> Result:
        """Admit, track, and store `new` over `live` (caller holds the lock)."""
        rt = call.rt
        admitted = admission.admit(call, new, live, self.allocate_ip, self.stamp())
        new = admitted.obj
        meta = new["metadata"]
        if rt.tracks_generation and admission.spec_changed(rt, live, new):
            meta["generation"] = int(live["metadata"].get("generation", 1)) + 1
        managers = ownership(new)
        if managers:
            meta["managedFields"] = apply.encode(managers)
        else:
            meta.pop("managedFields", None)
        meta["resourceVersion"] = live["metadata"]["resourceVersion"]
        if new == live:
            return Result(200, self.output(rt, live), admitted.warnings)
        if call.dry_run:
            return Result(200, self.output(rt, new), admitted.warnings)
        if deletion.ready_to_go(rt, new):
            gone = deletion.finish(self, rt, new)
            return Result(200, self.output(rt, gone), admitted.warnings)
        stored = self.store.write(rt.storage_key, call.namespace, call.name, new)
        if rt.kind == "CustomResourceDefinition" and not rt.custom:
            self.catalog.serve_custom(call.name, crds.served_types(stored))
        deletion.after_write(self, rt, live, stored)
        return Result(200, self.output(rt, stored), admitted.warnings)

    def write_as(self, call: Call, mutate: Callable[[Obj], None]) -> Result:
        """A server-side writer (kubelet, controllers): read, change a copy, commit as an Update."""
        with self.store.lock:
            live = self._live(call)
            new = clone(live)
            mutate(new)
            return self._write_over(call, live, new)  # its uid is the live one's: the check passes


def _decode_json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw or b"null")
    except orjson.JSONDecodeError as failure:
        raise status.bad_request(f"error decoding patch: {failure}") from failure


def _decode_yaml(raw: bytes) -> Obj:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            doc = yaml.safe_load(raw)
        except yaml.YAMLError as failure:
            raise status.bad_request(f"error decoding YAML: {failure}") from failure
    if not isinstance(doc, dict):
        raise status.bad_request("error decoding YAML: the apply configuration must be an object")
    return doc
