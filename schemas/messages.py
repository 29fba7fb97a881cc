"""Pydantic validation errors as one-line sentences that name the field, the value and what to write.

Wording only: which document is wrong, and where, is `schemas.load`'s business; no rule lives here.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel

from schemas.common import OWNER_PATTERN
from schemas.kubenames import DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN

Loc = tuple[str | int, ...]
_PATTERNS = {
    DNS_LABEL_PATTERN: "lowercase letters, digits and '-', starting and ending with a letter or digit",
    DNS_SUBDOMAIN_PATTERN: "lowercase letters, digits, '-' and '.', each dot-separated part starting and ending "
    "with a letter or digit",
    OWNER_PATTERN: "an owner such as org:example:team, with no spaces",
}


def listed(names: typing.Sequence[str], shown: int = 5) -> str:
    """`a, b, c, d, e and 3 more`: the first `shown` names, and how many are left unsaid."""
    text = ", ".join(names[:shown])
    return text + (f" and {len(names) - shown} more" if len(names) > shown else "")


def field_path(loc: Loc) -> str:
    """`("spec", "envelopes", 1, "start")` as `spec.envelopes[1].start`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def shown(value: Any) -> str:
    """A value as the user wrote it, short enough for one line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "an empty value"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"the text {text!r}"
    return repr(value)


def _is_number_text(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def _field_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _field_models(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, tuple):
        return [m for arg in typing.get_args(annotation) for m in _field_models(arg)]
    return []


def known_fields(model: type[BaseModel], loc: Loc) -> list[str]:
    """The field names the model accepts at `loc` (a mapping's path), aliases included."""
    current: list[type[BaseModel]] = [model]
    for part in loc:
        if isinstance(part, int):
            continue
        nxt: list[type[BaseModel]] = []
        for m in current:
            info = m.model_fields.get(part)
            if info is not None:
                nxt += _field_models(info.annotation)
        current = nxt
    names = {name for m in current for name in m.model_fields}
    if "sparesPerGroup" in names:
        names.add("spares")  # the seeds' alias
    return sorted(names)


def describe(err: dict[str, Any], model: type[BaseModel] | None = None) -> str:
    """One pydantic error (with a cleaned `loc`) as a sentence saying what to change."""
    loc: Loc = tuple(err["loc"])
    where, kind, value, ctx = field_path(loc), err["type"], err.get("input"), err.get("ctx") or {}
    if kind == "missing":
        return f"{where} is required; add it"
    if kind == "extra_forbidden" and loc:
        fields = known_fields(model, loc[:-1]) if model is not None else []
        close = difflib.get_close_matches(str(loc[-1]), fields, n=1, cutoff=0.6)
        if close:
            return f"unknown field {where}; did you mean {close[0]}? rename it (or remove it)"
        allowed = f" (allowed here: {', '.join(fields)})" if fields else ""
        return f"unknown field {where}; remove it or fix its spelling{allowed}"
    is_text_number = _is_number_text(value)
    if kind == "literal_error":
        return f"{where} is {shown(value)}; set it to {ctx.get('expected', 'one of the listed values')}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        if is_text_number:
            return f"{where} is {shown(value)}; remove the quotes so it is a whole number"
        return f"{where} is {shown(value)}; set a whole number such as 8"
    if kind in ("float_type", "float_parsing"):
        if is_text_number:
            return f"{where} is {shown(value)}; remove the quotes so it is a number"
        return f"{where} is {shown(value)}; set a number such as 0.5"
    if kind in ("bool_type", "bool_parsing"):
        return f"{where} is {shown(value)}; set true or false"
    if kind == "string_type":
        return f'{where} is {shown(value)}; set text (quote it, like "{value}")'
    if kind == "list_type":
        return f"{where} is {shown(value)}; set a list: [a, b], or one '- item' per line"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"{where} is {shown(value)}; set a mapping of fields (name: value, indented below it)"
    if kind == "greater_than_equal":
        return f"{where} is {shown(value)}; set {ctx.get('ge')} or more"
    if kind == "greater_than":
        return f"{where} is {shown(value)}; set more than {ctx.get('gt')}"
    if kind == "less_than_equal":
        return f"{where} is {shown(value)}; set {ctx.get('le')} or less"
    if kind == "finite_number":
        return f"{where} is {shown(value)}; set a finite number"
    if kind == "string_too_short":
        if ctx.get("min_length") == 1:
            return f"{where} is empty; set a value"
        return f"{where} is too short; use at least {ctx.get('min_length')} characters"
    if kind == "string_too_long":
        return f"{where} is longer than {ctx.get('max_length')} characters; use a shorter one"
    if kind == "too_short":
        return f"{where} is empty; add at least {ctx.get('min_length')} item(s)"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        want = _PATTERNS.get(pattern, f"text matching {pattern}")
        return f"{where} is {shown(value)}; use {want}"
    msg = " ".join(str(err["msg"]).replace("Value error, ", "").split())
    return f"{where}: {msg}" if where else msg
