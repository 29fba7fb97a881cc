"""The Budget kind: an owner's envelopes of GPU concurrency and GPU-hours, its parents and lending."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.common import ClusterMetadata, Model, NonNegInt, NonNegNumber, Owner, Timestamp


class Lending(Model):
    allow: bool = False
    to: list[str] = Field(default_factory=list)
    maxConcurrency: NonNegInt | None = None
    maxGPUHours: NonNegNumber | None = None


class Envelope(Model):
    name: str = Field(min_length=1, max_length=63)
    flavor: str = Field(min_length=1)
    selector: dict[str, str] = Field(default_factory=dict)
    concurrency: NonNegInt
    maxGPUHours: NonNegNumber | None = None
    start: Timestamp | None = None
    end: Timestamp | None = None
    sharing: Literal["family", "none"] = "family"
    lending: Lending | None = None


class AggregateCap(Model):
    name: str = Field(min_length=1)
    envelopes: list[str] = Field(min_length=1)
    maxConcurrency: NonNegInt


class BudgetSpec(Model):
    owner: Owner
    parents: list[Owner] = Field(default_factory=list)
    envelopes: list[Envelope] = Field(default_factory=list)
    aggregateCaps: list[AggregateCap] = Field(default_factory=list)


class Budget(Model):
    apiVersion: Literal["rq.davidlangworthy.io/v1"]
    kind: Literal["Budget"]
    metadata: ClusterMetadata
    spec: BudgetSpec
