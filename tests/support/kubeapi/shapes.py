"""How each part of an object merges: struct, map, atomic, or list (atomic, set, or map by keys).

Server-side apply, strategic merge patch and managed-fields tracking all ask the same question, "is
this list merged by `name` or replaced whole?"; this module answers it from a CRD's structural
schema (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`) or, for built-in kinds, from a
hand-written table of the merge keys Kubernetes declares. Parts of a built-in kind that the table
does not list behave as structs whose lists are atomic; that is a deliberate subset of the real
OpenAPI models, which this server does not carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Shape:
    """One node of a merge schema. `kind` is struct, map, list, scalar or atomic."""

    __slots__ = ("kind", "fields", "elem", "list_type", "keys", "key_defaults", "open")

    def __init__(
        self,
        kind: str,
        fields: Mapping[str, Shape] | None = None,
        elem: Shape | None = None,
        list_type: str = "atomic",
        keys: tuple[str, ...] = (),
        key_defaults: Mapping[str, Any] | None = None,
        open: Shape | None = None,
    ) -> None:
        self.kind = kind
        self.fields = dict(fields or {})
        self.elem = elem
        self.list_type = list_type
        self.keys = keys
        self.key_defaults = dict(key_defaults or {})
        self.open = open

    def child(self, key: str) -> tuple[Shape, bool]:
        """The shape under `key` and whether `key` is a declared struct field (not a map entry)."""
        if self.kind == "struct":
            found = self.fields.get(key)
            if found is not None:
                return found, True
            if self.open is LOOSE:
                return LOOSE, True
            return self.open or DEDUCED, False
        if self.kind == "map":
            return self.elem or DEDUCED, False
        return DEDUCED, False

    def item(self) -> Shape:
        return self.elem or (DEDUCED if self is DEDUCED else LOOSE)

    def merges_dict(self) -> str:
        """How a dict value at this node merges: `struct`, `map` or `atomic`."""
        if self.kind in ("struct", "map", "atomic"):
            return self.kind
        return "atomic" if self.kind == "scalar" else "struct"

    def merges_list(self) -> str:
        """How a list value at this node merges: `atomic`, `set` or `map`."""
        return self.list_type if self.kind == "list" else "atomic"

    def item_key(self, item: Any) -> dict[str, Any] | None:
        """The list-map key of `item` (defaults filled in, as Kubernetes defaults key fields)."""
        if not isinstance(item, dict):
            return None
        key = {}
        for name in self.keys:
            if name in item:
                key[name] = item[name]
            elif name in self.key_defaults:
                key[name] = self.key_defaults[name]
        return key


LOOSE = Shape("struct")
LOOSE.open = LOOSE
DEDUCED = Shape("map")
DEDUCED.elem = DEDUCED
SCALAR = Shape("scalar")
ATOMIC = Shape("atomic")


def struct(fields: Mapping[str, Shape] | None = None) -> Shape:
    return Shape("struct", fields, open=LOOSE)


def map_of(elem: Shape = SCALAR) -> Shape:
    return Shape("map", elem=elem)


def list_map(*keys: str, item: Shape | None = None, key_defaults: Mapping[str, Any] | None = None) -> Shape:
    return Shape("list", elem=item or struct(), list_type="map", keys=keys, key_defaults=key_defaults)


def set_list() -> Shape:
    return Shape("list", elem=SCALAR, list_type="set")


def atomic_list() -> Shape:
    return Shape("list", elem=LOOSE, list_type="atomic")


OBJECT_META = struct(
    {
        "labels": map_of(),
        "annotations": map_of(),
        "finalizers": set_list(),
        "ownerReferences": list_map("uid"),
        "managedFields": atomic_list(),
    }
)


def root(fields: Mapping[str, Shape] | None = None) -> Shape:
    return struct({"metadata": OBJECT_META, **(fields or {})})


_PROTOCOL = {"protocol": "TCP"}
_CONTAINER = struct(
    {
        "env": list_map("name"),
        "ports": list_map("containerPort", "protocol", key_defaults=_PROTOCOL),
        "volumeMounts": list_map("mountPath"),
        "volumeDevices": list_map("devicePath"),
        "resources": struct({"limits": map_of(), "requests": map_of(), "claims": list_map("name")}),
        "resizePolicy": list_map("resourceName"),
    }
)
_CONDITIONS = list_map("type")

POD = root(
    {
        "spec": struct(
            {
                "containers": list_map("name", item=_CONTAINER),
                "initContainers": list_map("name", item=_CONTAINER),
                "ephemeralContainers": list_map("name", item=_CONTAINER),
                "volumes": list_map("name"),
                "imagePullSecrets": list_map("name"),
                "nodeSelector": map_of(),
                "hostAliases": list_map("ip"),
                "topologySpreadConstraints": list_map("topologyKey", "whenUnsatisfiable"),
                "schedulingGates": list_map("name"),
                "resourceClaims": list_map("name"),
                "overhead": map_of(),
            }
        ),
        "status": struct({"conditions": _CONDITIONS, "podIPs": list_map("ip"), "hostIPs": list_map("ip")}),
    }
)
NODE = root(
    {
        "spec": struct({"podCIDRs": set_list()}),
        "status": struct(
            {
                "conditions": _CONDITIONS,
                "addresses": list_map("type"),
                "capacity": map_of(),
                "allocatable": map_of(),
            }
        ),
    }
)
SERVICE = root(
    {
        "spec": struct({"ports": list_map("port", "protocol", key_defaults=_PROTOCOL), "selector": map_of()}),
        "status": struct({"conditions": _CONDITIONS}),
    }
)
CONFIG_MAP = root({"data": map_of(), "binaryData": map_of()})
NAMESPACE = root({"status": struct({"conditions": _CONDITIONS})})
CUSTOM_RESOURCE_DEFINITION = root({"status": struct({"conditions": _CONDITIONS})})
PLAIN = root()


def from_schema(schema: Mapping[str, Any] | None) -> Shape:
    """The merge shape a CRD's structural schema declares."""
    if not schema:
        return DEDUCED
    if schema.get("x-kubernetes-int-or-string"):
        return SCALAR
    kind = schema.get("type")
    if kind == "array":
        list_type = schema.get("x-kubernetes-list-type", "atomic")
        keys = tuple(schema.get("x-kubernetes-list-map-keys", ()))
        return Shape("list", elem=from_schema(schema.get("items")), list_type=list_type, keys=keys)
    if kind == "object" or "properties" in schema or "additionalProperties" in schema:
        if schema.get("x-kubernetes-map-type") == "atomic":
            return ATOMIC
        properties = schema.get("properties")
        if properties:
            fields = {name: from_schema(sub) for name, sub in properties.items()}
            return Shape("struct", fields, open=DEDUCED)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return map_of(from_schema(extra))
        return DEDUCED
    return SCALAR


def for_custom_resource(schema: Mapping[str, Any] | None) -> Shape:
    shape = from_schema(schema)
    fields = dict(shape.fields) if shape.kind == "struct" else {}
    fields["metadata"] = OBJECT_META
    return Shape("struct", fields, open=DEDUCED)
