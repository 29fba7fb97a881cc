"""A CRD's structural schema applied to a custom resource: prune, default, validate (OpenAPI v3 subset).

Sits between decoding a request body and storing a custom resource. Implemented: pruning of
unknown fields (kept under `x-kubernetes-preserve-unknown-fields`), null pruning for non-nullable
fields, `default`, and the value validations `type`, `nullable`, `required`, `enum`, `pattern`,
`minimum`/`maximum` (and exclusive), `multipleOf`, `minLength`/`maxLength`, `minItems`/`maxItems`,
`uniqueItems`, `minProperties`/`maxProperties`, `anyOf`/`allOf`/`oneOf`/`not`,
`x-kubernetes-int-or-string`, and duplicate detection for `x-kubernetes-list-type: set|map`.
Not implemented: `format`, CEL `x-kubernetes-validations`, `x-kubernetes-embedded-resource`
checks, and ratcheting. Messages follow kube-openapi's wording.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson

from tests.support.kubeapi.status import Cause

OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)

Schema = Mapping[str, Any]


@dataclass(slots=True)
class Admission:
    """What the schema did to one object: the pruned, defaulted copy, what it dropped, what is wrong."""

    obj: dict[str, Any]
    unknown_fields: list[str] = field(default_factory=list)
    causes: list[Cause] = field(default_factory=list)


def admit(obj: dict[str, Any], schema: Schema | None) -> Admission:
    """Prune and default a copy of a custom resource, then validate it against `schema`."""
    out: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    result = Admission(out)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        for key in [k for k in meta if k not in OBJECT_META_FIELDS]:
            del meta[key]
            result.unknown_fields.append(f"metadata.{key}")
    if schema is None:
        return result
    properties = schema.get("properties", {})
    for key in [k for k in out if k not in ("apiVersion", "kind", "metadata")]:
        sub = properties.get(key)
        if sub is None and not schema.get("x-kubernetes-preserve-unknown-fields"):
            del out[key]
            result.unknown_fields.append(key)
        elif sub is not None:
            out[key] = _prune(out[key], sub, key, result)
            if out[key] is _DROP:
                del out[key]
    _default(out, schema)
    _validate(
        out, {**schema, "properties": {k: v for k, v in properties.items() if k != "metadata"}}, "", result
    )
    return result


_DROP: Any = object()


def _prune(value: Any, schema: Schema, path: str, result: Admission) -> Any:
    if value is None:
        return None if schema.get("nullable") else _DROP
    if isinstance(value, dict) and not schema.get("x-kubernetes-int-or-string"):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        for key in list(value):
            sub = (properties or {}).get(key)
            if sub is None and isinstance(extra, dict):
                sub = extra
            child_path = f"{path}.{key}"
            if sub is None:
                if not preserve and extra is not True:
                    del value[key]
                    result.unknown_fields.append(child_path)
                continue
            pruned = _prune(value[key], sub, child_path, result)
            if pruned is _DROP:
                del value[key]
            else:
                value[key] = pruned
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        items = schema["items"]
        kept = []
        for i, item in enumerate(value):
            pruned = _prune(item, items, f"{path}[{i}]", result)
            kept.append(None if pruned is _DROP else pruned)
        return kept
    return value


def _default(value: Any, schema: Schema) -> None:
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                _default(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key in value:
                if key not in (schema.get("properties") or {}):
                    _default(value[key], extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _default(item, schema["items"])


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _fits(value: Any, wanted: str) -> bool:
    actual = type_name(value)
    if wanted == actual:
        return True
    if wanted == "number" and actual == "integer":
        return True
    return wanted == "integer" and isinstance(value, float) and value.is_integer()


def show(value: Any) -> str:
    """A value the way field errors print it."""
    if isinstance(value, (dict, list)):
        return json.dumps(type_name(value))
    return json.dumps(value)


def _invalid(
    result: Admission, path: str, value: Any, detail: str, reason: str = "FieldValueInvalid"
) -> None:
    result.causes.append(Cause(reason, f"Invalid value: {show(value)}: {detail}", path))


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _validate(value: Any, schema: Schema, path: str, result: Admission) -> None:
    label = path or "body"
    where = f"{path} in body" if path else "body"
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            result.causes.append(
                Cause(
                    "FieldValueTypeInvalid",
                    f'Invalid value: "null": {where} must be of type {schema["type"]}: "null"',
                    label,
                )
            )
        return
    if schema.get("x-kubernetes-int-or-string"):
        if type_name(value) not in ("integer", "string"):
            result.causes.append(
                Cause(
                    "FieldValueTypeInvalid",
                    f'Invalid value: "{type_name(value)}": {where} must be of type integer,string: "{type_name(value)}"',
                    label,
                )
            )
            return
    else:
        wanted = schema.get("type")
        if wanted and not _fits(value, wanted):
            actual = type_name(value)
            result.causes.append(
                Cause(
                    "FieldValueTypeInvalid",
                    f'Invalid value: "{actual}": {where} must be of type {wanted}: "{actual}"',
                    label,
                )
            )
            return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(v) for v in schema["enum"])
        result.causes.append(
            Cause(
                "FieldValueNotSupported",
                f"Unsupported value: {show(value)}: supported values: {allowed}",
                label,
            )
        )
    if isinstance(value, str):
        _validate_string(value, schema, path, where, result)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _validate_number(value, schema, path, where, result)
    elif isinstance(value, list):
        _validate_array(value, schema, path, where, result)
    elif isinstance(value, dict):
        _validate_object(value, schema, path, where, result)
    _validate_combinators(value, schema, path, where, result)


def _validate_string(value: str, schema: Schema, path: str, where: str, result: Admission) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        _invalid(result, path, value, f"{where} should be at least {schema['minLength']} chars long")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        result.causes.append(
            Cause("FieldValueTooLong", f"Too long: may not be more than {schema['maxLength']} bytes", path)
        )
    if "pattern" in schema and not _regex(schema["pattern"]).search(value):
        _invalid(result, path, value, f"{where} should match '{schema['pattern']}'")


def _validate_number(value: float, schema: Schema, path: str, where: str, result: Admission) -> None:
    if "minimum" in schema:
        low = schema["minimum"]
        if value < low or (schema.get("exclusiveMinimum") and value == low):
            relation = "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
            _invalid(result, path, value, f"{where} should be {relation} {low}")
    if "maximum" in schema:
        high = schema["maximum"]
        if value > high or (schema.get("exclusiveMaximum") and value == high):
            relation = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
            _invalid(result, path, value, f"{where} should be {relation} {high}")
    if "multipleOf" in schema and schema["multipleOf"] and (value / schema["multipleOf"]) % 1:
        _invalid(result, path, value, f"{where} should be a multiple of {schema['multipleOf']}")


def _validate_array(value: list[Any], schema: Schema, path: str, where: str, result: Admission) -> None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        _invalid(result, path, value, f"{where} should have at least {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        result.causes.append(
            Cause(
                "FieldValueTooMany",
                f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                path,
            )
        )
    list_type = schema.get("x-kubernetes-list-type")
    if schema.get("uniqueItems") or list_type in ("set", "map"):
        seen: set[str] = set()
        keys = schema.get("x-kubernetes-list-map-keys", ())
        for i, item in enumerate(value):
            ident = item
            if list_type == "map" and isinstance(item, dict):
                ident = {k: item.get(k) for k in keys}
            token = json.dumps(ident, sort_keys=True)
            if token in seen:
                result.causes.append(
                    Cause("FieldValueDuplicate", f"Duplicate value: {token}", f"{path}[{i}]")
                )
            seen.add(token)
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", result)


def _validate_object(value: dict[str, Any], schema: Schema, path: str, where: str, result: Admission) -> None:
    prefix = f"{path}." if path else ""
    for name in schema.get("required", ()):
        if name not in value:
            result.causes.append(Cause("FieldValueRequired", "Required value", f"{prefix}{name}"))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        _invalid(result, path, value, f"{where} should have at least {schema['minProperties']} properties")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        _invalid(result, path, value, f"{where} should have at most {schema['maxProperties']} properties")
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, child in value.items():
        sub = properties.get(key)
        if sub is None and isinstance(extra, Mapping):
            sub = extra
        if sub is not None:
            _validate(child, sub, f"{prefix}{key}", result)


def _passes(value: Any, schema: Schema, path: str) -> bool:
    probe = Admission({})
    _validate(value, schema, path, probe)
    return not probe.causes


def _validate_combinators(value: Any, schema: Schema, path: str, where: str, result: Admission) -> None:
    for sub in schema.get("allOf", ()):
        _validate(value, sub, path, result)
    any_of = schema.get("anyOf")
    if (
        any_of
        and not schema.get("x-kubernetes-int-or-string")
        and not any(_passes(value, s, path) for s in any_of)
    ):
        _invalid(result, path, value, f"{where} must validate at least one schema (anyOf)")
    one_of = schema.get("oneOf")
    if one_of and sum(_passes(value, s, path) for s in one_of) != 1:
        _invalid(result, path, value, f"{where} must validate one and only one schema (oneOf)")
    if "not" in schema and _passes(value, schema["not"], path):
        _invalid(result, path, value, f"{where} must not validate the schema (not)")
