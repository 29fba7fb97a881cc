"""The Scenario kind: a fleet, an inventory and timed steps, played by `jobtree simulate`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from schemas.common import Duration, Model, ClusterMetadata
from schemas.fleet import FleetSpec, Inventory

OFFSET_OR_TIME = r"^(\+([0-9]+[hms])+|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))$"


class PatchStep(Model):
    kind: Literal["Budget", "Run"]
    name: str = Field(min_length=1)
    namespace: str | None = None
    merge: dict[str, Any]


class DeleteStep(Model):
    kind: Literal["Budget", "Run"]
    name: str = Field(min_length=1)
    namespace: str | None = None


class NodeStep(Model):
    name: str = Field(min_length=1)
    event: Literal["Fail", "Cordon", "Uncordon", "NotReady", "Ready", "Delete"]


class WorkloadStep(Model):
    run: str = Field(pattern=r"^[a-z0-9-]+/[a-z0-9-]+$")
    event: Literal["Succeed", "Fail"]
    group: int | None = Field(default=None, ge=0)


class Step(Model):
    at: str = Field(pattern=OFFSET_OR_TIME)
    apply: list[dict[str, Any]] | None = None
    patch: PatchStep | None = None
    delete: DeleteStep | None = None
    node: NodeStep | None = None
    workload: WorkloadStep | None = None
    checkpoint: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        actions = [k for k in ("apply", "patch", "delete", "node", "workload", "checkpoint") if getattr(self, k) is not None]
        if len(actions) != 1:
            raise ValueError(f"a step has exactly one of apply, patch, delete, node, workload, checkpoint (found {actions or 'none'})")
        return self


class ScenarioSpec(Model):
    start: str = Field(pattern=OFFSET_OR_TIME)
    fleet: FleetSpec = Field(default_factory=FleetSpec)
    inventory: Inventory
    steps: list[Step] = Field(default_factory=list)
    until: str = Field(pattern=OFFSET_OR_TIME)
    tick: Duration | None = None


class Scenario(Model):
    apiVersion: Literal["rq.davidlangworthy.io/v1"]
    kind: Literal["Scenario"]
    metadata: ClusterMetadata
    spec: ScenarioSpec
