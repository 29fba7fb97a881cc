"""The Scenario kind: a fleet, an inventory and timed steps, played by `jobtree simulate`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from schemas.common import (
    RFC3339_PATTERN,
    ClusterMetadata,
    Duration,
    Model,
    NonNegInt,
    RunKey,
    format_duration,
    parse_duration,
    parse_time,
)
from schemas.fleet import FleetSpec, Inventory

OFFSET_OR_TIME = r"^(\+([0-9]+[hms])+|" + RFC3339_PATTERN[1:-1] + ")$"
ACTIONS = ("apply", "patch", "delete", "node", "workload", "checkpoint")


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
    group: NonNegInt | None = None


class Step(Model):
    """One timed action; the schema's oneOf mirrors `_one_action` (exactly one action key, never null)."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": [a]} for a in ACTIONS]})

    at: str = Field(pattern=OFFSET_OR_TIME)
    apply: list[dict[str, Any]] | SkipJsonSchema[None] = None
    patch: PatchStep | SkipJsonSchema[None] = None
    delete: DeleteStep | SkipJsonSchema[None] = None
    node: NodeStep | SkipJsonSchema[None] = None
    workload: WorkloadStep | SkipJsonSchema[None] = None
    checkpoint: Annotated[str, Field(min_length=1)] | SkipJsonSchema[None] = None

    @model_validator(mode="before")
    @classmethod
    def _one_action(cls, data: Any) -> Any:
        if isinstance(data, dict):
            present = [a for a in ACTIONS if a in data]
            if len(present) != 1:
                found = ", ".join(present) or "none"
                raise ValueError(f"a step has exactly one of {', '.join(ACTIONS)} (found {found}); keep one")
            if data[present[0]] is None:
                raise ValueError(f"{present[0]} is empty; give it a value or remove the step")
        return data


class Workload(Model):
    """A run's useful work: it succeeds once it has run this long at its totalGPUs (docs/scenarios.md)."""

    run: RunKey
    duration: Annotated[Duration, Field(ge=1)]


def _one_workload_per_run(workloads: list[Workload]) -> list[Workload]:
    seen: set[str] = set()
    for w in workloads:
        if w.run in seen:
            raise ValueError(f"{w.run} has two workloads; give each run one duration")
        seen.add(w.run)
    return workloads


MAX_TICKS = 100_000  # periodic passes one scenario may ask for (`tick` over `start`..`until`)


class ScenarioSpec(Model):
    start: str = Field(pattern=OFFSET_OR_TIME)
    fleet: FleetSpec = Field(default_factory=FleetSpec)
    inventory: Inventory
    steps: list[Step] = Field(default_factory=list)
    until: str = Field(pattern=OFFSET_OR_TIME)
    tick: Duration | None = None
    workloads: Annotated[list[Workload], AfterValidator(_one_workload_per_run)] = Field(default_factory=list)

    @field_validator("tick")
    @classmethod
    def _bounded_ticks(cls, tick: int | None, info: ValidationInfo) -> int | None:
        """A tick of zero never advances the clock, and a tiny tick over a long scenario would run
        for days: both are refused with what to change."""
        if tick is None:
            return tick
        if tick <= 0:
            raise ValueError("tick must be at least 1s; set a positive duration such as 1m, or remove tick")
        start, until = info.data.get("start"), info.data.get("until")
        if not isinstance(start, str) or not isinstance(until, str) or start.startswith("+"):
            return tick  # the start's own error (or the simulator's) says what is wrong
        begin = parse_time(start)
        end = begin + parse_duration(until[1:]) if until.startswith("+") else parse_time(until)
        passes = max(0, end - begin) // tick + 1
        if passes > MAX_TICKS:
            raise ValueError(
                f"tick {format_duration(tick)} from start to until {until} asks for {passes:,} passes; at most "
                f"{MAX_TICKS:,} are allowed: set a longer tick or an earlier until"
            )
        return tick


class Scenario(Model):
    apiVersion: Literal["rq.davidlangworthy.io/v1"]
    kind: Literal["Scenario"]
    metadata: ClusterMetadata
    spec: ScenarioSpec
