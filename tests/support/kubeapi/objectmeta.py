"""ObjectMeta rules every kind shares: name syntax, label and annotation syntax, finalizers, times.

Called by the registry on every write before anything is stored. It validates and normalises; it
never decides which object a request is about or whether it exists.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tests.support.kubeapi.status import Cause

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_DNS1123_LABEL = re.compile(_LABEL)
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
QUALIFIED_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def name_problems(name: str, rule: str, field: str = "metadata.name") -> list[Cause]:
    if rule == "any":
        return (
            []
            if name
            else [Cause("FieldValueRequired", "Required value: name or generateName is required", field)]
        )
    if not name:
        return [Cause("FieldValueRequired", "Required value: name or generateName is required", field)]
    limit, pattern, message = {
        "label": (63, _DNS1123_LABEL, LABEL_MESSAGE),
        "dns1035": (63, _DNS1035_LABEL, DNS1035_MESSAGE),
    }.get(rule, (253, _SUBDOMAIN, SUBDOMAIN_MESSAGE))
    out = []
    if len(name) > limit:
        out.append(
            Cause(
                "FieldValueInvalid",
                f'Invalid value: "{name}": must be no more than {limit} characters',
                field,
            )
        )
    if not pattern.fullmatch(name):
        out.append(Cause("FieldValueInvalid", f'Invalid value: "{name}": {message}', field))
    return out


def _qualified_key_problems(key: str, field: str) -> list[Cause]:
    prefix, _, name = key.rpartition("/")
    out = []
    if "/" in prefix or (key.count("/") and not prefix):
        out.append(
            Cause(
                "FieldValueInvalid",
                f'Invalid value: "{key}": a qualified name must consist of a prefix and a name',
                field,
            )
        )
        return out
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix)):
        out.append(
            Cause("FieldValueInvalid", f'Invalid value: "{key}": prefix part {SUBDOMAIN_MESSAGE}', field)
        )
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        detail = "name part must be no more than 63 characters" if len(name) > 63 else QUALIFIED_MESSAGE
        out.append(Cause("FieldValueInvalid", f'Invalid value: "{key}": {detail}', field))
    return out


def meta_problems(meta: Mapping[str, Any]) -> list[Cause]:
    """Labels, annotations and finalizers as ValidateObjectMeta checks them."""
    out: list[Cause] = []
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        return [Cause("FieldValueTypeInvalid", "Invalid value: must be a map of strings", "metadata.labels")]
    for key, value in labels.items():
        out.extend(_qualified_key_problems(key, "metadata.labels"))
        if not isinstance(value, str):
            out.append(
                Cause(
                    "FieldValueTypeInvalid",
                    f"Invalid value: {value!r}: label values must be strings",
                    "metadata.labels",
                )
            )
        elif len(value) > 63:
            out.append(
                Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{value}": must be no more than 63 characters',
                    "metadata.labels",
                )
            )
        elif not _LABEL_VALUE.fullmatch(value):
            out.append(
                Cause(
                    "FieldValueInvalid", f'Invalid value: "{value}": {LABEL_VALUE_MESSAGE}', "metadata.labels"
                )
            )
    annotations = meta.get("annotations") or {}
    total = 0
    for key, value in annotations.items():
        out.extend(_qualified_key_problems(key.lower(), "metadata.annotations"))
        if not isinstance(value, str):
            out.append(
                Cause(
                    "FieldValueTypeInvalid",
                    "Invalid value: annotation values must be strings",
                    "metadata.annotations",
                )
            )
        else:
            total += len(key) + len(value)
    if total > 256 * 1024:
        out.append(
            Cause("FieldValueTooLong", "Too long: must have at most 262144 bytes", "metadata.annotations")
        )
    for i, finalizer in enumerate(meta.get("finalizers") or []):
        if not isinstance(finalizer, str) or "/" not in finalizer and finalizer not in STANDARD_FINALIZERS:
            out.append(
                Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{finalizer}": name is neither a standard finalizer name nor is it fully qualified',
                    f"metadata.finalizers[{i}]",
                )
            )
    return out


STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def format_time(moment: datetime) -> str:
    """metav1.Time on the wire: RFC 3339, UTC, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime) -> str:
    """metav1.MicroTime on the wire: RFC 3339, UTC, exactly six fractional digits."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_TIME_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
_MICRO_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")


def parse_time(text: str, micro: bool) -> datetime | None:
    """A wire time as Go's decoder would accept it (MicroTime demands six digits), else None."""
    if not isinstance(text, str) or not (_MICRO_RE if micro else _TIME_RE).fullmatch(text):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def micro_time_error(kind: str, field: str, text: Any) -> str:
    return (
        f'{kind} in version "v1" cannot be handled as a {kind}: parsing time "{text}" as '
        f'"2006-01-02T15:04:05.000000Z07:00": cannot parse as RFC3339Micro ({field})'
    )


def time_error(kind: str, field: str, text: Any) -> str:
    return (
        f'{kind} in version "v1" cannot be handled as a {kind}: parsing time "{text}" as '
        f'"2006-01-02T15:04:05Z07:00": cannot parse as RFC3339 ({field})'
    )
