"""Which fields a built-in kind declares, read from the official client's generated models.

Used by admission (and apply) to find fields a built-in object carries that its kind does not
declare: the real server drops them (with a warning, or refuses under fieldValidation=Strict, or
fails a server-side apply). The models' `attribute_map` and `openapi_types` are the API's field
names and types for the client's version (v1.37, a superset of v1.32). Only names are checked,
never value types: the models type quantities as strings, where the server also takes numbers.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from kubernetes.client import models

MODELS = {
    "Pod": "V1Pod",
    "Node": "V1Node",
    "Service": "V1Service",
    "ConfigMap": "V1ConfigMap",
    "Namespace": "V1Namespace",
    "Event": "CoreV1Event",
    "Lease": "V1Lease",
    "CustomResourceDefinition": "V1CustomResourceDefinition",
}
_LIST = re.compile(r"List\[(.+)\]")
_DICT = re.compile(r"Dict\[str, (.+)\]")


@cache
def _fields(model: str) -> dict[str, str] | None:
    """JSON field name → type string for a model, or None when `model` is not a model (a leaf)."""
    cls = getattr(models, model, None)
    attribute_map = getattr(cls, "attribute_map", None)
    types = getattr(cls, "openapi_types", None)
    if not isinstance(attribute_map, dict) or not isinstance(types, dict):
        return None
    return {attribute_map[name]: kind for name, kind in types.items() if name in attribute_map}


def prune(kind: str, obj: dict[str, Any]) -> list[str]:
    """Remove, in place, every field `kind` does not declare; the dotted paths removed."""
    model = MODELS.get(kind)
    if model is None:
        return []
    removed: list[str] = []
    _walk(obj, model, "", removed)
    return [path for path in removed if path not in ("apiVersion", "kind")]


def _walk(value: Any, kind: str, path: str, removed: list[str]) -> None:
    found = _LIST.fullmatch(kind)
    if found:
        if isinstance(value, list):
            for i, item in enumerate(value):
                _walk(item, found.group(1), f"{path}[{i}]", removed)
        return
    found = _DICT.fullmatch(kind)
    if found:
        if isinstance(value, dict):
            for key, item in value.items():
                _walk(item, found.group(1), f"{path}.{key}" if path else key, removed)
        return
    fields = _fields(kind)
    if fields is None or not isinstance(value, dict):
        return
    for key in list(value):
        child = f"{path}.{key}" if path else key
        if key not in fields:
            del value[key]
            removed.append(child)
        else:
            _walk(value[key], fields[key], child, removed)
