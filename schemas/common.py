"""Shared field types of every kind: names, timestamps, durations, metadata.

Shape only: cross-field and cross-object rules live in `schemas.rules`.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema

from schemas.kubenames import DNS_LABEL_PATTERN, Annotations, DnsLabel, DnsSubdomain, Labels

# Every published pattern is plain ECMA-262 / RE2 / Rust-regex: no look-around, ASCII classes only
# (`[0-9]`, not `\d`, which is Unicode-aware in Python and Rust), so editors, Kubernetes and
# pydantic agree on what they accept.
_HOUR, _MINSEC = "([01][0-9]|2[0-3])", "[0-5][0-9]"
RFC3339_PATTERN = (
    "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    f"T{_HOUR}:{_MINSEC}:{_MINSEC}([.][0-9]+)?(Z|[+-]{_HOUR}:{_MINSEC})$"
)
DURATION_PATTERN = "^([0-9]+h([0-9]+m)?([0-9]+s)?|[0-9]+m([0-9]+s)?|[0-9]+s)$"
_LABEL = DNS_LABEL_PATTERN[1:-1]
RUN_KEY_PATTERN = f"^{_LABEL}/{_LABEL}$"  # a run as `<namespace>/<name>`
OWNER_PATTERN = r"^[^ \t\n\r\f\v]+$"

_RFC3339 = re.compile(RFC3339_PATTERN)
_DURATION = re.compile(DURATION_PATTERN)


def parse_time(text: str) -> int:
    """RFC 3339 text to whole UTC epoch seconds (fractions truncated)."""
    if not isinstance(text, str) or not _RFC3339.fullmatch(text):
        raise ValueError(f"{text!r} is not an RFC 3339 time; write one like 2026-03-02T09:00:00Z")
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
    except ValueError as err:  # the shape is right but the calendar says no (February 30th)
        raise ValueError(f"{text!r} is not a real date ({err}); fix the day or month") from None


@functools.lru_cache(maxsize=8192)  # a pass writes the same few instants thousands of times
def format_time(epoch: int) -> str:
    """Whole UTC epoch seconds to RFC 3339 with a Z, as every written timestamp is."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration(text: str) -> int:
    """`1h30m`, `15m`, `10s` to seconds."""
    m = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"{text!r} is not a duration; write one like 15m, 1h30m or 90s")
    unit = {"h": 3600, "m": 60, "s": 1}
    return sum(int(n) * unit[u] for n, u in re.findall(r"(\d+)([hms])", text))


def format_duration(seconds: int) -> str:
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s else "")
    return out or "0s"


def integral(value: Any) -> Any:
    """JSON has one number type: a float with no fraction (`8.0`) is the integer it denotes."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _time_in(value: Any) -> int:
    value = integral(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value  # epoch seconds
    return parse_time(value)


def _duration_in(value: Any) -> int:
    value = integral(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{value} is negative; a duration is 0 or more seconds")
        return value  # seconds
    return parse_duration(value)


Timestamp = Annotated[
    int,
    BeforeValidator(_time_in),
    PlainSerializer(format_time, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": RFC3339_PATTERN, "format": "date-time"},
                {"type": "integer"},
            ],
            "description": "RFC 3339 time such as 2026-03-02T09:00:00Z (or epoch seconds)",
        }
    ),
]
Duration = Annotated[
    int,
    BeforeValidator(_duration_in),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [{"type": "string", "pattern": DURATION_PATTERN}, {"type": "integer", "minimum": 0}],
            "description": "duration such as 15m, 1h30m or 90s (or whole seconds)",
        }
    ),
]
RunKey = Annotated[str, Field(pattern=RUN_KEY_PATTERN)]
Owner = Annotated[str, Field(min_length=1, max_length=253, pattern=OWNER_PATTERN)]
NonNegInt = Annotated[int, Field(ge=0, strict=True), BeforeValidator(integral)]
NonNegNumber = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class Model(BaseModel):
    """Frozen, closed model: a typo is an error, and parsed objects never change.

    Validators are built on a model's first use, not at import: a reconcile pass builds those of
    the kinds it validates (Run, Budget, FleetConfig, Inventory), never the Lease, Reservation or
    Scenario models it has no documents of.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, strict=True, defer_build=True
    )


class Metadata(Model):
    """Metadata of a namespaced kind: names, labels and annotations as Kubernetes accepts them (a
    name is a DNS-1123 label, as the pods and Services jobtree names after it must be)."""

    name: DnsLabel
    namespace: DnsLabel | None = None
    labels: Labels = Field(default_factory=dict)
    annotations: Annotations = Field(default_factory=dict)


class ClusterMetadata(Model):
    """Metadata of a cluster-scoped kind (Budget, FleetConfig, Scenario): the name a DNS-1123 subdomain."""

    name: DnsSubdomain
    labels: Labels = Field(default_factory=dict)
    annotations: Annotations = Field(default_factory=dict)


class RunRef(Model):
    namespace: DnsLabel
    name: DnsLabel
