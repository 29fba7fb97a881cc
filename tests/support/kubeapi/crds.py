"""CustomResourceDefinitions: their validation, defaults and status, and the types they serve.

Sits behind the `customresourcedefinitions` resource: the registry asks this module whether a CRD
is acceptable, what it looks like after defaulting (with `Established` and `NamesAccepted` set at
once, as a healthy control plane does within milliseconds), and which `ResourceType`s it serves.
Conversion webhooks, the scale subresource and name-conflict detection between CRDs are not done.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.support.kubeapi import selectors, shapes
from tests.support.kubeapi.resources import ALL_VERBS, PrinterColumn, ResourceType
from tests.support.kubeapi.status import Cause

AGE = PrinterColumn(
    "Age",
    "date",
    ".metadata.creationTimestamp",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
)


def default(crd: dict[str, Any]) -> None:
    """Fill in what the API server defaults on a CRD (in place)."""
    spec = crd.setdefault("spec", {})
    names = spec.setdefault("names", {})
    if "kind" in names:
        names.setdefault("singular", str(names["kind"]).lower())
        names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})
    for version in spec.get("versions") or []:
        if isinstance(version, dict):
            schema = version.get("schema")
            if isinstance(schema, dict) and isinstance(schema.get("openAPIV3Schema"), dict):
                schema["openAPIV3Schema"].setdefault("type", "object")


def validate(crd: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    plural = names.get("plural") or ""
    name = crd.get("metadata", {}).get("name", "")
    if not group:
        causes.append(Cause("FieldValueRequired", "Required value", "spec.group"))
    if not plural:
        causes.append(Cause("FieldValueRequired", "Required value", "spec.names.plural"))
    if not names.get("kind"):
        causes.append(Cause("FieldValueRequired", "Required value", "spec.names.kind"))
    if group and plural and name != f"{plural}.{group}":
        causes.append(
            Cause(
                "FieldValueInvalid",
                f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                "metadata.name",
            )
        )
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(
            Cause(
                "FieldValueNotSupported",
                f'Unsupported value: "{spec.get("scope", "")}": supported values: "Cluster", "Namespaced"',
                "spec.scope",
            )
        )
    if old is not None and old.get("spec", {}).get("scope") != spec.get("scope"):
        causes.append(
            Cause(
                "FieldValueInvalid", f'Invalid value: "{spec.get("scope")}": field is immutable', "spec.scope"
            )
        )
    versions = spec.get("versions") or []
    if not versions:
        causes.append(
            Cause("FieldValueRequired", "Required value: must have at least one version", "spec.versions")
        )
    storage = [v for v in versions if isinstance(v, dict) and v.get("storage")]
    if versions and len(storage) != 1:
        causes.append(
            Cause(
                "FieldValueInvalid",
                f"Invalid value: {len(storage)}: must have exactly one version marked as storage version",
                "spec.versions",
            )
        )
    for i, version in enumerate(versions):
        schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema")
        where = f"spec.versions[{i}].schema.openAPIV3Schema"
        if not isinstance(schema, dict):
            causes.append(Cause("FieldValueRequired", "Required value: schemas are required", where))
            continue
        causes.extend(_structural(schema, where, top=True))
    return causes


def _structural(schema: Mapping[str, Any], where: str, top: bool = False) -> list[Cause]:
    """The structural-schema rules a client is likely to trip over: every node has a type."""
    causes: list[Cause] = []
    if top and schema.get("type") not in (None, "object"):
        causes.append(
            Cause(
                "FieldValueInvalid",
                f'Invalid value: "{schema.get("type")}": must be object at the root',
                f"{where}.type",
            )
        )
    if not schema.get("type") and not top:
        if not (
            schema.get("x-kubernetes-int-or-string") or schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            causes.append(
                Cause(
                    "FieldValueRequired",
                    "Required value: must not be empty for specified object fields",
                    f"{where}.type",
                )
            )
    for key, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            causes.extend(_structural(sub, f"{where}.properties[{key}]"))
    items = schema.get("items")
    if isinstance(items, dict):
        causes.extend(_structural(items, f"{where}.items"))
    elif schema.get("type") == "array":
        causes.append(Cause("FieldValueRequired", "Required value: must be specified", f"{where}.items"))
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        if schema.get("properties"):
            causes.append(
                Cause(
                    "FieldValueForbidden",
                    "Forbidden: additionalProperties and properties are mutual exclusive",
                    f"{where}.additionalProperties",
                )
            )
        causes.extend(_structural(extra, f"{where}.additionalProperties"))
    return causes


def with_status(crd: dict[str, Any], old: Mapping[str, Any] | None, now: str) -> None:
    """Set the status a healthy apiextensions controller would: names accepted, established."""
    spec = crd.get("spec") or {}
    stored = list((old or {}).get("status", {}).get("storedVersions") or [])
    for version in spec.get("versions") or []:
        if version.get("storage") and version.get("name") not in stored:
            stored.append(version["name"])
    previous = {c.get("type"): c for c in (old or {}).get("status", {}).get("conditions") or []}

    def condition(kind: str, reason: str, message: str) -> dict[str, Any]:
        since = previous.get(kind, {}).get("lastTransitionTime", now)
        return {
            "type": kind,
            "status": "True",
            "lastTransitionTime": since,
            "reason": reason,
            "message": message,
        }

    crd["status"] = {
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": dict(spec.get("names") or {}),
        "storedVersions": stored,
    }


def served_types(crd: Mapping[str, Any]) -> tuple[ResourceType, ...]:
    spec = crd["spec"]
    names = spec["names"]
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    out = []
    for version in spec["versions"]:
        if not version.get("served"):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        columns = tuple(
            PrinterColumn(
                c["name"],
                c.get("type", "string"),
                c["jsonPath"],
                c.get("description", ""),
                c.get("format", ""),
                int(c.get("priority", 0)),
            )
            for c in version.get("additionalPrinterColumns") or []
        ) or (AGE,)
        labels = dict(selectors.COMMON_FIELDS)
        for selectable in version.get("selectableFields") or []:
            path = str(selectable.get("jsonPath", "")).lstrip(".")
            if path:
                labels[path] = selectors.read_path(*path.split("."))
        out.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                singular=names.get("singular") or names["kind"].lower(),
                kind=names["kind"],
                namespaced=spec["scope"] == "Namespaced",
                shape=shapes.for_custom_resource(schema),
                verbs=ALL_VERBS,
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=frozenset(k for k in (version.get("subresources") or {}) if k == "status"),
                field_labels=labels,
                tracks_generation=True,
                custom=True,
                schema=schema,
                printer_columns=columns,
                storage_version=storage,
            )
        )
    return tuple(out)
