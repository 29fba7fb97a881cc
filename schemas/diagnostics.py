"""Diagnostics: one problem, one line `path:line:col: CODE message`, naming what to change."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Diagnostic:
    path: str
    line: int
    col: int
    code: str
    message: str
    obj: str = ""  # "Kind ns/name" of the object concerned, when known
    severity: str = "error"  # "warning": reported, but the object is valid and takes part in planning

    def __post_init__(self) -> None:
        # one problem, one line: a message quoting user text never breaks the format
        flat = " ".join(self.message.split())
        if flat != self.message:
            object.__setattr__(self, "message", flat)

    def __str__(self) -> str:
        tag = "warning: " if self.severity == "warning" else ""
        return f"{self.path}:{self.line}:{self.col}: {self.code} {tag}{self.message}"

    def as_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "code": self.code,
            "message": self.message,
            "object": self.obj,
            "severity": self.severity,
        }


# The codes, stable for tools and for the corpus under tests/corpus/invalid.
YAML_SYNTAX = "JT001"
NOT_AN_OBJECT = "JT002"
UNKNOWN_KIND = "JT003"
NOT_READ = "JT004"  # a fleet file where jobtree does not read it (folder, extension)
SCHEMA = "JT010"
DUPLICATE_KEY = "JT011"
DUPLICATE_OBJECT = "JT012"
TENANT = "JT020"
OWNER_MISMATCH = "JT021"
TENANT_UNFUNDED = "JT022"  # warning: a tenant whose owner has no Budget
PARENT_CYCLE = "JT030"
UNKNOWN_OWNER = "JT031"
ENVELOPE_NAME = "JT032"
WINDOW = "JT033"
LENDING = "JT034"
AGGREGATE = "JT035"
MALLEABLE = "JT040"
ALIGNMENT = "JT041"
AFTER = "JT042"
POD_TEMPLATE = (
    "JT043"  # the pod template: its GPU container, names and mounts (error); a field jobtree sets (warning)
)
GROUP_SIZE = "JT044"  # groupGPUs larger than the run
LOCATION = "JT050"
INVENTORY = "JT060"
INVENTORY_NOT_READ = "JT061"  # warning: inventory/nodes.yaml while clusters are configured (it is not read)
SPARES = "JT070"  # warning: a group's hot spares cannot cover one of its nodes failing, or far exceed it
SPONSORS = "JT071"  # warning: sponsors named while allowBorrow is false
FLAVOR = "JT072"  # warning: a gpuType no node of the fleet has
CLUSTER_NAME = "JT080"  # two clusters[] entries with one name
CLUSTER_UNMATCHED = "JT081"  # a cluster name no node label carries, or pods rendered for an unnamed one
