"""The Lease kind: an immutable fact that some GPU slots served a run's group, paid by one envelope."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.common import Metadata, Model, NonNegInt, Owner, RunRef, Timestamp

Role = Literal["Active", "Spare", "Borrowed"]
OpenReason = Literal["Start", "Grow", "Swap", "Fill"]
CLOSURE_REASONS = (
    "Completed",
    "NodeFailure",
    "Swap",
    "ReclaimedBySpare",
    "RunFailed",
    "Shrink",
    "DropSpare",
    "ReclaimUnfunded",
    "WorkloadFailed",
    "RunDeleted",
)
LOTTERY_CLOSURE = r"RandomPreempt\(0x[0-9a-f]{16}\)"  # a lottery cut, with the draw's seed
CLOSURE_PATTERN = "^(" + "|".join((*CLOSURE_REASONS, LOTTERY_CLOSURE)) + ")$"


class Slice(Model):
    nodes: list[str] = Field(min_length=1)
    role: Role
    rank: NonNegInt | None = None  # first rendezvous rank these GPUs serve; a swap moves it, never renumbers


class Payer(Model):
    owner: Owner
    budget: str | None = None
    envelope: str | None = None


class Interval(Model):
    start: Timestamp
    end: Timestamp | None = None


class LeaseSpec(Model):
    runRef: RunRef
    group: NonNegInt
    slice: Slice
    payer: Payer
    interval: Interval
    reason: OpenReason


class LeaseStatus(Model):
    closed: bool = False
    ended: Timestamp | None = None
    closureReason: str | None = Field(default=None, pattern=CLOSURE_PATTERN)


class Lease(Model):
    apiVersion: Literal["rq.davidlangworthy.io/v1"]
    kind: Literal["Lease"]
    metadata: Metadata
    spec: LeaseSpec
    status: LeaseStatus = Field(default_factory=LeaseStatus)
