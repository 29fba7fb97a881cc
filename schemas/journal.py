"""The JournalEntry kind (§7.4, §7.5): one failure swap the in-cluster agent carried out ahead of Git.

Cluster-scoped, one per swap, named by its stable id. The spec is the swap's full effect, written
once in state `Intent` before anything is touched: the fenced nodes, the leases closed (name and
closure) and opened (whole Lease specs, with their times), the nodes cordoned, the run statuses it
changed, and the pods deleted and created (the created ones whole, as `planner.manifests` rendered
them). The status moves `Intent` → `Applied` (every step done) → `Folded` (a reconcile committed it
to Git and applied that commit). Shape only: what the entry means is `planner.failover`'s.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from schemas.common import ClusterMetadata, Model, NonNegInt, RunKey, Timestamp
from schemas.lease import CLOSURE_PATTERN, LeaseSpec
from schemas.state import Phase

State = Literal["Intent", "Applied", "Folded"]
Fence = Literal["Deleted", "OutOfService", "NotReady", "Gone"]


class FencedNode(Model):
    node: str = Field(min_length=1)
    cause: Fence


class ClosedLease(Model):
    name: str = Field(min_length=1)
    namespace: str = Field(min_length=1)
    closure: str = Field(pattern=CLOSURE_PATTERN)


class OpenedLease(Model):
    name: str = Field(min_length=1)
    namespace: str = Field(min_length=1)
    spec: LeaseSpec


class RunStatusChange(Model):
    run: RunKey
    phase: Phase
    message: str
    cause: str = ""


class PodRef(Model):
    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)
    node: str = ""
    gpus: NonNegInt = 0  # GPUs it holds on its node: a pod created there waits until it is gone (§7.6)


class PodEffects(Model):
    delete: list[PodRef] = Field(default_factory=list)  # fillers on the spare's GPUs, then the failed pods
    create: list[dict[str, Any]] = Field(default_factory=list)  # the replacement pods, whole


class JournalSpec(Model):
    cluster: str = Field(min_length=1)
    at: Timestamp  # the instant of the swap: every lease closed or opened by it carries it
    fenced: list[FencedNode] = Field(min_length=1)
    closed: list[ClosedLease] = Field(default_factory=list)
    opened: list[OpenedLease] = Field(default_factory=list)
    cordon: list[str] = Field(default_factory=list)
    status: list[RunStatusChange] = Field(default_factory=list)
    pods: PodEffects = Field(default_factory=PodEffects)


class JournalStatus(Model):
    state: State = "Intent"
    applied: Timestamp | None = None
    folded: Timestamp | None = None
    foldedBy: str | None = None  # the state commit that holds the swap


class JournalEntry(Model):
    apiVersion: Literal["rq.davidlangworthy.io/v1"]
    kind: Literal["JournalEntry"]
    metadata: ClusterMetadata
    spec: JournalSpec
    status: JournalStatus = Field(default_factory=JournalStatus)
