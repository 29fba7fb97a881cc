"""The Run kind: a gang job split into placement groups, with elasticity, spares and funding rules."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, model_validator

from schemas.common import Duration, Metadata, Model, Owner, integral
from schemas.kubenames import DnsLabel
from schemas.podtemplate import ShortTemplate, Template

# No run spans a million GPUs; a larger count is a typo (or an attempt to make planning run out of
# memory splitting it into groups), so the schema refuses it at the line where it is written.
MAX_GPUS = 1_000_000
Gpus = Annotated[int, Field(ge=1, le=MAX_GPUS, strict=True), BeforeValidator(integral)]
GpusOrZero = Annotated[int, Field(ge=0, le=MAX_GPUS, strict=True), BeforeValidator(integral)]


class Resources(Model):
    gpuType: str = Field(min_length=1)
    totalGPUs: Gpus


class Locality(Model):
    groupGPUs: Gpus | None = None
    allowCrossGroupSpread: bool = True


class Malleable(Model):
    minTotalGPUs: Gpus
    maxTotalGPUs: Gpus
    stepGPUs: Gpus
    desiredTotalGPUs: Gpus | None = None


class Runtime(Model):
    checkpoint: Duration | None = None


class Funding(Model):
    allowBorrow: bool = False
    maxBorrowGPUs: GpusOrZero | None = None
    sponsors: list[Owner] = Field(default_factory=list)


def _spares_schema(schema: dict[str, Any]) -> None:
    """The published schema accepts the seeds' `spares` alias too, but never both spellings."""
    schema["properties"]["spares"] = {
        "type": "integer",
        "minimum": 0,
        "maximum": MAX_GPUS,
        "description": "alias of sparesPerGroup",
    }
    schema["not"] = {"required": ["spares", "sparesPerGroup"]}


class RunSpec(Model):
    model_config = ConfigDict(json_schema_extra=_spares_schema)

    owner: Owner
    resources: Resources
    locality: Locality = Field(default_factory=Locality)
    malleable: Malleable | None = None
    sparesPerGroup: GpusOrZero = 0
    runtime: Runtime = Field(default_factory=Runtime)
    funding: Funding = Field(default_factory=Funding)
    opportunistic: bool = False
    template: Template = Field(default_factory=ShortTemplate)
    after: list[DnsLabel] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _spares_alias(cls, data: Any) -> Any:
        """The seeds write `spares`; it is an alias of `sparesPerGroup`."""
        if isinstance(data, dict) and "spares" in data:
            if "sparesPerGroup" in data:
                raise ValueError("set sparesPerGroup or its alias spares, not both")
            data = {("sparesPerGroup" if k == "spares" else k): v for k, v in data.items()}
        return data


class RunMetadata(Metadata):
    namespace: DnsLabel


class Run(Model):
    apiVersion: Literal["rq.davidlangworthy.io/v1"]
    kind: Literal["Run"]
    metadata: RunMetadata
    spec: RunSpec
