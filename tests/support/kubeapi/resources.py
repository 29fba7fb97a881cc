"""The resource types the server serves: built-in ones here, custom ones added from CRDs (`crds`).

A `ResourceType` is everything discovery, routing, storage and the verbs need to know about one
group/version/resource: kind, scope, verbs, short names, subresources, field-selector labels, the
merge shape, and for custom resources the schema and printer columns. The `Catalog` indexes them.
It holds no objects and does no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.support.kubeapi import selectors, shapes, status
from tests.support.kubeapi.shapes import Shape

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
SUBRESOURCE_VERBS = ("get", "patch", "update")


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    name: str
    type: str
    json_path: str
    description: str = ""
    format: str = ""
    priority: int = 0


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    shape: Shape
    verbs: tuple[str, ...] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    field_labels: Mapping[str, selectors.FieldReader] = field(default_factory=dict)
    tracks_generation: bool = False
    name_rule: str = "subdomain"
    custom: bool = False
    schema: Mapping[str, Any] | None = None
    printer_columns: tuple[PrinterColumn, ...] = ()
    storage_version: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> tuple[str, str]:
        return (self.group, self.version)

    @property
    def storage_key(self) -> tuple[str, str]:
        """Objects are stored once per group/resource, whatever version they are read at."""
        return (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def resource(self) -> status.Resource:
        return status.Resource(self.group, self.plural, self.kind)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _fields(extra: Mapping[str, selectors.FieldReader] | None = None) -> dict[str, selectors.FieldReader]:
    return {**selectors.COMMON_FIELDS, **(extra or {})}


def _bool_field(*keys: str) -> selectors.FieldReader:
    read = selectors.read_path(*keys)
    return lambda obj: read(obj) or "false"


_r = selectors.read_path
POD_FIELDS = _fields(
    {
        "spec.nodeName": _r("spec", "nodeName"),
        "spec.restartPolicy": _r("spec", "restartPolicy"),
        "spec.schedulerName": _r("spec", "schedulerName"),
        "spec.serviceAccountName": _r("spec", "serviceAccountName"),
        "spec.hostNetwork": _bool_field("spec", "hostNetwork"),
        "status.phase": _r("status", "phase"),
        "status.podIP": _r("status", "podIP"),
        "status.nominatedNodeName": _r("status", "nominatedNodeName"),
    }
)
EVENT_FIELDS = _fields(
    {
        **{
            f"involvedObject.{k}": _r("involvedObject", k)
            for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
        },
        "reason": _r("reason"),
        "reportingComponent": _r("reportingComponent"),
        "source": _r("source", "component"),
        "type": _r("type"),
    }
)

BUILTINS: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        False,
        shapes.NAMESPACE,
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        short_names=("ns",),
        subresources=frozenset({"status", "finalize"}),
        field_labels=_fields({"status.phase": _r("status", "phase")}),
        name_rule="label",
    ),
    ResourceType(
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        False,
        shapes.NODE,
        short_names=("no",),
        subresources=frozenset({"status"}),
        field_labels=_fields({"spec.unschedulable": _bool_field("spec", "unschedulable")}),
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        True,
        shapes.POD,
        short_names=("po",),
        categories=("all",),
        subresources=frozenset({"status"}),
        field_labels=POD_FIELDS,
    ),
    ResourceType(
        "",
        "v1",
        "services",
        "service",
        "Service",
        True,
        shapes.SERVICE,
        short_names=("svc",),
        categories=("all",),
        subresources=frozenset({"status"}),
        field_labels=_fields(),
        name_rule="dns1035",
    ),
    ResourceType(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        True,
        shapes.CONFIG_MAP,
        short_names=("cm",),
        field_labels=_fields(),
    ),
    ResourceType(
        "",
        "v1",
        "events",
        "event",
        "Event",
        True,
        shapes.PLAIN,
        short_names=("ev",),
        field_labels=EVENT_FIELDS,
        name_rule="any",
    ),
    ResourceType(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        True,
        shapes.PLAIN,
        field_labels=_fields(),
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        shapes.CUSTOM_RESOURCE_DEFINITION,
        short_names=("crd", "crds"),
        subresources=frozenset({"status"}),
        field_labels=_fields(),
        tracks_generation=True,
    ),
)


class Catalog:
    """Served resource types by group/version/plural; custom ones come and go with their CRDs.

    Changed only under the store's lock; read from any thread (every scan works on a copy).
    """

    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._custom_by_crd: dict[str, tuple[ResourceType, ...]] = {}
        for rt in BUILTINS:
            self._types[(rt.group, rt.version, rt.plural)] = rt

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def find_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rt in list(self._types.values()):
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def by_storage_key(self, key: tuple[str, str]) -> ResourceType | None:
        for rt in list(self._types.values()):
            if rt.storage_key == key and (not rt.custom or rt.version == rt.storage_version):
                return rt
        return None

    def builtin(self, plural: str, group: str = "") -> ResourceType:
        return self._types[(group, "v1", plural)]

    def serve_custom(self, crd_name: str, types: tuple[ResourceType, ...]) -> None:
        self.withdraw_custom(crd_name)
        self._custom_by_crd[crd_name] = types
        for rt in types:
            self._types[(rt.group, rt.version, rt.plural)] = rt

    def withdraw_custom(self, crd_name: str) -> tuple[ResourceType, ...]:
        gone = self._custom_by_crd.pop(crd_name, ())
        for rt in gone:
            self._types.pop((rt.group, rt.version, rt.plural), None)
        return gone

    def custom_for(self, crd_name: str) -> tuple[ResourceType, ...]:
        return self._custom_by_crd.get(crd_name, ())

    def all(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))

    def group_versions(self) -> dict[str, list[str]]:
        """Group name → versions, preferred first (core group is "")."""
        out: dict[str, list[str]] = {}
        for rt in list(self._types.values()):
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        for versions in out.values():
            versions.sort(key=_version_priority)
        return out


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version ordering: GA before beta before alpha, higher numbers first."""
    found = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not found:
        return (3, 0, 0)
    major, stage, minor = found.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0))
