"""Kubernetes' own syntax for object names, label and annotation keys and values: what kube-apiserver refuses.

The rules of k8s.io/apimachinery's validation (IsDNS1123Label, IsDNS1123Subdomain, IsQualifiedName,
IsValidLabelValue, ValidateAnnotations), as typed fields whose published JSON Schema says the same as
the model. Syntax only: which names jobtree derives from them (pods, Services) is `planner.manifests`'.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

# Every pattern is plain ECMA-262 (no look-around; `$` only at the end), as `schemas.common` says.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_LABEL = DNS_LABEL_PATTERN[1:-1]
DNS_SUBDOMAIN_PATTERN = rf"^{_LABEL}(\.{_LABEL})*$"
MAX_SUBDOMAIN = 253
# A qualified name (label and annotation keys): an optional DNS-subdomain prefix and `/`, then a name
# of at most 63 characters of letters, digits, '-', '_' and '.', starting and ending alphanumeric.
_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]"
QUALIFIED_NAME_PATTERN = rf"^({_LABEL}(\.{_LABEL})*/)?{_NAME}$"
# kube-apiserver checks an annotation key with its prefix lowercased: `Example.COM/x` is a valid key
_ANY_CASE_LABEL = "[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?"
ANNOTATION_KEY_PATTERN = rf"^({_ANY_CASE_LABEL}(\.{_ANY_CASE_LABEL})*/)?{_NAME}$"
KEY_LENGTHS_PATTERN = r"^([^/]{1,253}/)?[^/]{1,63}$"  # prefix at most 253 characters, name at most 63
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"  # at most 63, may be empty
MAX_ANNOTATIONS_BYTES = 256 * 1024  # keys and values together (TotalAnnotationSizeLimitB)


def _full(pattern: str) -> re.Pattern[str]:
    """ECMA's `$` (the end, never before a final newline) in Python: `\\Z`."""
    return re.compile(pattern[:-1] + r"\Z")


_QUALIFIED = _full(QUALIFIED_NAME_PATTERN)
_ANNOTATION_KEY = _full(ANNOTATION_KEY_PATTERN)
_KEY_LENGTHS = _full(KEY_LENGTHS_PATTERN)
_LABEL_VALUE = _full(LABEL_VALUE_PATTERN)

NAME_SYNTAX = "letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
PREFIX_SYNTAX = "a DNS name such as example.com (lowercase letters, digits, '-' and '.')"


def key_problem(key: str, annotation: bool = False) -> str | None:
    """What is wrong with a label (or annotation) key, in Kubernetes' terms, or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return f"key {key!r} has an empty prefix before '/'; write prefix/name (a prefix such as example.com) or drop the '/'"
    if len(name) > 63:
        return f"key {key!r} has a name part of {len(name)} characters; the part after the last '/' is at most 63"
    if len(prefix) > MAX_SUBDOMAIN:
        return f"key {key!r} has a prefix of {len(prefix)} characters; a prefix is at most {MAX_SUBDOMAIN}"
    if (_ANNOTATION_KEY if annotation else _QUALIFIED).match(key) and _KEY_LENGTHS.match(key):
        return None
    if slash and not (_ANNOTATION_KEY if annotation else _QUALIFIED).match(f"{prefix}/x"):
        return f"key {key!r} has the prefix {prefix!r}; a prefix is {PREFIX_SYNTAX}"
    return f"key {key!r} is not a Kubernetes key: its name part {name!r} may hold only {NAME_SYNTAX}"


def value_problem(key: str, value: str) -> str | None:
    if _LABEL_VALUE.match(value):
        return None
    if len(value) > 63:
        return f"label {key} has a value of {len(value)} characters; a label value is at most 63"
    return (
        f"label {key} has the value {value!r}; a label value holds only {NAME_SYNTAX} "
        f"(write it as {_suggest(value)!r}, or keep free text in an annotation)"
    )


def _suggest(value: str) -> str:
    cleaned = re.sub(r"[^-A-Za-z0-9_.]+", "-", value).strip("-_.")
    return cleaned[:63].rstrip("-_.")


Problems = list[tuple[tuple[str, ...], str]]  # (where below the checked mapping, what to do)


def _problems(found: Problems, what: str) -> None:
    if found:
        raise PydanticCustomError(
            "kubernetes_syntax",
            "{count} " + what + " Kubernetes refuses",
            {"count": len(found), "problems": tuple(found)},
        )


def _labels(value: Mapping[str, str]) -> Mapping[str, str]:
    found: Problems = []
    for key, text in value.items():
        problem = key_problem(key) or value_problem(key, text)
        if problem is not None:
            found.append(((key,), problem))
    _problems(found, "label(s)")
    return value


def _annotations(value: Mapping[str, str]) -> Mapping[str, str]:
    found: Problems = [((key,), p) for key in value if (p := key_problem(key, annotation=True)) is not None]
    size = sum(len(k.encode()) + len(v.encode()) for k, v in value.items())
    if size > MAX_ANNOTATIONS_BYTES:
        found.append(
            (
                (),
                f"annotations hold {size} bytes; Kubernetes keeps at most {MAX_ANNOTATIONS_BYTES} (256 KiB) "
                "of keys and values together: move large text to a ConfigMap or a file in the image",
            )
        )
    _problems(found, "annotation(s)")
    return value


_KEYS: dict[str, Any] = {"allOf": [{"pattern": QUALIFIED_NAME_PATTERN}, {"pattern": KEY_LENGTHS_PATTERN}]}
Labels = Annotated[
    dict[str, str],
    AfterValidator(_labels),
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": _KEYS,
            "additionalProperties": {"type": "string", "pattern": LABEL_VALUE_PATTERN},
            "description": "Kubernetes labels: qualified-name keys, values of at most 63 characters",
        }
    ),
]
Annotations = Annotated[
    dict[str, str],
    AfterValidator(_annotations),
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {
                "allOf": [{"pattern": ANNOTATION_KEY_PATTERN}, {"pattern": KEY_LENGTHS_PATTERN}]
            },
            "additionalProperties": {"type": "string"},
            "description": "Kubernetes annotations: qualified-name keys, at most 256 KiB of keys and values",
        }
    ),
]


def _qualified(value: str) -> str:
    problem = key_problem(value)
    if problem is not None:
        raise PydanticCustomError("kubernetes_syntax", problem)
    return value


QualifiedName = Annotated[str, AfterValidator(_qualified), WithJsonSchema({"type": "string", **_KEYS})]
DnsLabel = Annotated[str, Field(pattern=DNS_LABEL_PATTERN, max_length=63)]
DnsSubdomain = Annotated[str, Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=MAX_SUBDOMAIN)]
