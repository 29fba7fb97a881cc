"""The Reservation kind: the plan and honest ETA for a run that cannot start yet."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.common import Fraction, Metadata, Model, NonNegInt, Owner, RunRef, Timestamp


class IntendedSlice(Model):
    domains: list[str] = Field(default_factory=list)
    nodes: list[str] = Field(default_factory=list)


class PayingEnvelope(Model):
    owner: Owner
    budget: str
    envelope: str


class ReservationSpec(Model):
    runRef: RunRef
    intendedSlice: IntendedSlice = Field(default_factory=IntendedSlice)
    payingEnvelope: PayingEnvelope | None = None
    # null or absent: nothing known (a window, a known end) makes the run startable; confidence
    # `unknown`. Not required: a mirror in a cluster leaves it out (server-side apply reads a null
    # as "remove the field").
    earliestStart: Timestamp | None = None


class Forecast(Model):
    deficitGPUs: NonNegInt = 0
    confidence: Literal["conservative", "window-aligned", "unknown"] = "conservative"
    remedies: list[str] = Field(default_factory=list)
    remedyGPUs: list[NonNegInt] = Field(default_factory=list)  # per remedy, the GPUs it can free in scope


class ConflictEntry(Model):
    run: str
    probability: Fraction
    since: Timestamp


class ReservationStatus(Model):
    state: Literal["Pending", "Released", "Failed"] = "Pending"
    reason: str = ""
    forecast: Forecast = Field(default_factory=Forecast)
    conflictSet: list[ConflictEntry] = Field(default_factory=list)
    seed: str | None = Field(default=None, pattern=r"^0x[0-9a-f]{16}$")
    ended: Timestamp | None = None


class Reservation(Model):
    apiVersion: Literal["rq.davidlangworthy.io/v1"]
    kind: Literal["Reservation"]
    metadata: Metadata
    spec: ReservationSpec
    status: ReservationStatus = Field(default_factory=ReservationStatus)
