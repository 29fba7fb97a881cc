"""Shared field types of every kind: names, timestamps, durations, metadata.

Shape only: cross-field and cross-object rules live in `schemas.rules`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema

RFC3339_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$"
DURATION_PATTERN = r"^(?=\d)(\d+h)?(\d+m)?(\d+s)?$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

_RFC3339 = re.compile(RFC3339_PATTERN)
_DURATION = re.compile(DURATION_PATTERN)


def parse_time(text: str) -> int:
    """RFC 3339 text to whole UTC epoch seconds (fractions truncated)."""
    if not isinstance(text, str) or not _RFC3339.match(text):
        raise ValueError(f"{text!r} is not an RFC 3339 time like 2026-03-02T09:00:00Z")
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def format_time(epoch: int) -> str:
    """Whole UTC epoch seconds to RFC 3339 with a Z, as every written timestamp is."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration(text: str) -> int:
    """`1h30m`, `15m`, `10s` to seconds."""
    m = _DURATION.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"{text!r} is not a duration like 15m, 1h or 90s")
    h, mi, s = (int(g[:-1]) if g else 0 for g in m.groups())
    return h * 3600 + mi * 60 + s


def format_duration(seconds: int) -> str:
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s else "")
    return out or "0s"


def _time_in(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return parse_time(value)


def _duration_in(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return parse_duration(value)


Timestamp = Annotated[
    int,
    BeforeValidator(_time_in),
    PlainSerializer(format_time, return_type=str),
    WithJsonSchema({"type": "string", "pattern": RFC3339_PATTERN, "format": "date-time"}),
]
Duration = Annotated[
    int,
    BeforeValidator(_duration_in),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN}),
]
DnsLabel = Annotated[str, Field(pattern=DNS_LABEL_PATTERN, max_length=63)]
Owner = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^\S+$")]
NonNegInt = Annotated[int, Field(ge=0, strict=True)]
PosInt = Annotated[int, Field(ge=1, strict=True)]


class Model(BaseModel):
    """Frozen, closed model: a typo is an error, and parsed objects never change."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, strict=True)


class Metadata(Model):
    name: DnsLabel
    namespace: DnsLabel | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ClusterMetadata(Model):
    """Metadata of a cluster-scoped kind (Budget, FleetConfig, Scenario)."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)]
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class RunRef(Model):
    namespace: DnsLabel
    name: DnsLabel
