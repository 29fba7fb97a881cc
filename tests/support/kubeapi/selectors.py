"""Label and field selectors as list, watch and deletecollection take them.

Label selectors: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, `a>1`, `a<1`,
comma-joined (AND). Field selectors: `=`, `==`, `!=` on the field labels each kind supports
(`metadata.name` and `metadata.namespace` everywhere; see `resources` for the rest); any other
label is refused with 400 as the real server does. Neither module decides which objects exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.kubeapi import status

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*\/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_OP_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*(?:(==|!=|=|>|<)\s*({_VALUE}))?\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # =, !=, in, notin, exists, !, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.key)
        if self.op == "=":
            return have == self.values[0]
        if self.op == "!=":
            return have != self.values[0]
        if self.op == "in":
            return have is not None and have in self.values
        if self.op == "notin":
            return have is None or have not in self.values
        if self.op == "exists":
            return have is not None
        if self.op == "!":
            return have is None
        if have is None or not _is_int(have):
            return False
        bound = int(self.values[0])
        return int(have) > bound if self.op == "gt" else int(have) < bound


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside `( … )`."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t for t in terms if t.strip()]


def parse_labels(text: str | None) -> tuple[Requirement, ...]:
    if not text:
        return ()
    out = []
    for term in _split_terms(text):
        found = _SET_RE.match(term)
        if found:
            values = tuple(v.strip() for v in found.group(3).split(",") if v.strip())
            for value in values:
                if not re.fullmatch(_VALUE, value):
                    raise status.bad_request(f"unable to parse requirement: invalid label value: {value!r}")
            out.append(Requirement(found.group(1), found.group(2), values))
            continue
        found = _OP_RE.match(term)
        if not found:
            raise status.bad_request(f"unable to parse requirement: found '{term.strip()}', expected: key")
        negated, key, op, value = found.groups()
        if negated and op:
            raise status.bad_request(f"unable to parse requirement: '{term.strip()}'")
        if negated:
            out.append(Requirement(key, "!"))
        elif not op:
            out.append(Requirement(key, "exists"))
        elif op in ("=", "=="):
            out.append(Requirement(key, "=", (value,)))
        elif op == "!=":
            out.append(Requirement(key, "!=", (value,)))
        else:
            if not _is_int(value or ""):
                raise status.bad_request(
                    f"unable to parse requirement: for 'gt', 'lt' operators, the value must be an integer: {value}"
                )
            out.append(Requirement(key, "gt" if op == ">" else "lt", (value,)))
    return tuple(out)


def labels_match(requirements: tuple[Requirement, ...], obj: Mapping[str, Any]) -> bool:
    if not requirements:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(r.matches(labels) for r in requirements)


@dataclass(frozen=True, slots=True)
class FieldTerm:
    label: str
    equal: bool
    value: str


FieldReader = Callable[[Mapping[str, Any]], str]


def parse_fields(text: str | None, readers: Mapping[str, FieldReader]) -> tuple[FieldTerm, ...]:
    if not text:
        return ()
    out = []
    for term in text.split(","):
        if not term.strip():
            continue
        found = re.fullmatch(r"\s*([A-Za-z0-9_.\-/\[\]]+)\s*(==|!=|=)\s*(.*?)\s*", term)
        if not found:
            raise status.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        label, op, value = found.groups()
        if label not in readers:
            raise status.bad_request(f"field label not supported: {label}")
        out.append(FieldTerm(label, op != "!=", value))
    return tuple(out)


def fields_match(
    terms: tuple[FieldTerm, ...], obj: Mapping[str, Any], readers: Mapping[str, FieldReader]
) -> bool:
    return all((readers[t.label](obj) == t.value) == t.equal for t in terms)


def read_path(*keys: str) -> FieldReader:
    """A field reader for a dotted path; a missing or null value reads as "" (as Kubernetes does)."""

    def read(obj: Mapping[str, Any]) -> str:
        node: Any = obj
        for key in keys:
            if not isinstance(node, Mapping):
                return ""
            node = node.get(key)
        if node is None:
            return ""
        if isinstance(node, bool):
            return "true" if node else "false"
        return str(node)

    return read


COMMON_FIELDS: dict[str, FieldReader] = {
    "metadata.name": read_path("metadata", "name"),
    "metadata.namespace": read_path("metadata", "namespace"),
}
