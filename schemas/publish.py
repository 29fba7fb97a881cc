"""Publish the contract: Draft 2020-12 JSON Schemas of every kind and the CRDs, derived from the models.

`make schemas` (python -m schemas.publish) writes schemas/json/ and schemas/crds/; `render()` is
pure so a test can prove the committed files are current. Validates nothing itself.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from schemas import API_VERSION, GROUP, podtemplate
from schemas.fleet import Inventory
from schemas.journal import JournalEntry
from schemas.load import KINDS
from schemas.state import BudgetStatusFile, FleetStateFile, LedgerLine, ObservedCluster, RunStatusFile

DRAFT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = f"https://{GROUP}/schemas/v1"
# the files under state/ beside Leases and Reservations (schemas.state): a contract, never parsed at run time
STATE_FILES: dict[str, type[BaseModel]] = {
    "RunStatus": RunStatusFile,
    "BudgetStatus": BudgetStatusFile,
    "FleetState": FleetStateFile,
    "ObservedCluster": ObservedCluster,
    "LedgerLine": LedgerLine,
}
SCHEMAS: dict[str, type[BaseModel]] = {
    **KINDS, "Inventory": Inventory, "JournalEntry": JournalEntry, **STATE_FILES,
}  # fmt: skip


class Crd:
    """One published CRD: its names, scope and the columns `kubectl get` shows (§7.3)."""

    def __init__(
        self,
        kind: str,
        plural: str,
        singular: str,
        scope: str,
        columns: list[dict[str, Any]],
        short: str,
    ) -> None:
        self.kind, self.plural, self.singular, self.scope, self.columns = (
            kind,
            plural,
            singular,
            scope,
            columns,
        )
        self.short = short


# Short names start with `jt` so none collides with a built-in kind's (the core `leases` of
# coordination.k8s.io has none, and `kubectl get leases` keeps meaning it); `kubectl get jobtree -A`
# lists every kind through the shared category.
CATEGORY = "jobtree"
CRDS = (
    Crd(
        "Budget",
        "budgets",
        "budget",
        "Cluster",
        [{"name": "Owner", "type": "string", "jsonPath": ".spec.owner"}],
        "jtbudget",
    ),
    Crd(
        "Run",
        "runs",
        "run",
        "Namespaced",
        [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Width", "type": "integer", "jsonPath": ".status.width.allocated"},
            {"name": "Desired", "type": "integer", "jsonPath": ".status.width.desired"},
            {"name": "Reason", "type": "string", "jsonPath": ".status.message"},
            {"name": "Owner", "type": "string", "jsonPath": ".spec.owner", "priority": 1},
        ],
        "jtrun",
    ),
    Crd(
        "Lease",
        "gpuleases",
        "gpulease",
        "Namespaced",
        [
            {"name": "Run", "type": "string", "jsonPath": ".spec.runRef.name"},
            {"name": "Group", "type": "integer", "jsonPath": ".spec.group"},
            {"name": "Role", "type": "string", "jsonPath": ".spec.slice.role"},
            {"name": "Closed", "type": "boolean", "jsonPath": ".status.closed"},
        ],
        "jtlease",
    ),
    Crd(
        "Reservation",
        "reservations",
        "reservation",
        "Namespaced",
        [
            {"name": "Run", "type": "string", "jsonPath": ".spec.runRef.name"},
            {"name": "Earliest", "type": "string", "jsonPath": ".spec.earliestStart"},
            {"name": "State", "type": "string", "jsonPath": ".status.state"},
            {"name": "Reason", "type": "string", "jsonPath": ".status.reason"},
        ],
        "jtres",
    ),
    Crd(
        "FleetConfig",
        "fleetconfigs",
        "fleetconfig",
        "Cluster",
        [
            {"name": "Cluster", "type": "string", "jsonPath": ".status.cluster"},
            {"name": "Commit", "type": "string", "jsonPath": ".status.commit"},
        ],
        "jtfleet",
    ),
    Crd(
        "JournalEntry",
        "journalentries",
        "journalentry",
        "Cluster",
        [
            {"name": "State", "type": "string", "jsonPath": ".status.state"},
            {"name": "Cluster", "type": "string", "jsonPath": ".spec.cluster"},
            {"name": "At", "type": "string", "jsonPath": ".spec.at"},
            {"name": "Node", "type": "string", "jsonPath": ".spec.fenced[0].node"},
        ],
        "jtjournal",
    ),
)
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
OPEN_STATUS = ("Budget", "Run", "FleetConfig")  # status written by jobtree, kept as-is by the API server


def json_schema(kind: str) -> dict[str, Any]:
    """The published JSON Schema of one kind (the model's own, plus $schema, $id and a title)."""
    schema = podtemplate.published(SCHEMAS[kind].model_json_schema())
    schema["$schema"] = DRAFT
    schema["$id"] = f"{ID_BASE}/{kind.lower()}.schema.json"
    schema["title"] = kind
    return schema


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return _inline({**copy.deepcopy(target), **rest}, defs)
        return {k: _inline(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


# What a CRD schema cannot hold: key rules (label and annotation keys are the API server's own to
# check), and the mark of a core/v1 PodSpec (kept whole, as any object: the API server checks pods).
_NOT_STRUCTURAL = ("propertyNames", podtemplate.CORE_V1_MARK)


def structural(node: Any) -> Any:
    """JSON Schema to a Kubernetes structural schema: nullable for Optional, enum for const,
    int-or-string for times and durations, one object for a choice of forms (the pod template), no
    titles, defaults, key rules or additionalProperties: false."""
    if isinstance(node, list):
        return [structural(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {
        k: v for k, v in node.items() if k not in ("title", "default", "$schema", "$id", *_NOT_STRUCTURAL)
    }
    forms = node.pop("oneOf", None)
    if isinstance(forms, list):  # the pod template's two forms: one object holding the fields of both
        merged: dict[str, Any] = {}
        for form in forms:
            merged.update(form.get("properties", {}))
        node = {**node, "type": "object", "properties": merged}
    branches = node.get("anyOf")
    if isinstance(branches, list):
        non_null = [b for b in branches if b != {"type": "null"}]
        if len(non_null) < len(branches):
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            inner = non_null[0] if len(non_null) == 1 else {"anyOf": non_null}
            return {**structural({**inner, **rest}), "nullable": True}
        types = sorted(b.get("type", "") for b in branches)
        if types == ["integer", "string"]:
            # Kubernetes accepts exactly anyOf [integer, string]; each branch's own checks move up
            # (pattern applies to strings only, minimum to numbers only, so nothing changes).
            lifted = {k: v for b in branches for k, v in b.items() if k in ("pattern", "minimum")}
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            return {
                **rest,
                **lifted,
                "x-kubernetes-int-or-string": True,
                "anyOf": copy.deepcopy(INT_OR_STRING),
            }
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if node.get("type") == "object":
        if "properties" in node:
            node.pop("additionalProperties", None)
        elif node.get("additionalProperties") is True or "additionalProperties" not in node:
            node.pop("additionalProperties", None)
            node["x-kubernetes-preserve-unknown-fields"] = True
    return {k: structural(v) for k, v in node.items()}


def crd_schema(kind: str) -> dict[str, Any]:
    schema = SCHEMAS[kind].model_json_schema()
    body: dict[str, Any] = structural(_inline(schema, schema.get("$defs", {})))
    props = body["properties"]
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    props["metadata"] = {"type": "object"}
    if kind in OPEN_STATUS:
        props["status"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    body["required"] = [r for r in body.get("required", []) if r not in ("apiVersion", "kind", "metadata")]
    return body


def crd(spec: Crd) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{spec.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": spec.kind,
                "listKind": f"{spec.kind}List",
                "plural": spec.plural,
                "singular": spec.singular,
                "shortNames": [spec.short],
                "categories": [CATEGORY],
            },
            "scope": spec.scope,
            "versions": [
                {
                    "name": API_VERSION.rsplit("/", 1)[-1],
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        *spec.columns,
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {"openAPIV3Schema": crd_schema(spec.kind)},
                }
            ],
        },
    }


def render() -> dict[str, str]:
    """Every published file, relative to schemas/, as text with stable bytes."""
    out = {
        f"json/{kind.lower()}.schema.json": json.dumps(json_schema(kind), indent=2, sort_keys=True) + "\n"
        for kind in SCHEMAS
    }
    for spec in CRDS:
        text = yaml.safe_dump(
            crd(spec), sort_keys=True, default_flow_style=False, width=1000, allow_unicode=True
        )
        out[f"crds/{spec.plural}.yaml"] = (
            "# Generated by `make schemas` from the models; do not edit.\n" + text
        )
    return out


def main() -> None:
    root = Path(__file__).parent
    for rel, text in sorted(render().items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote schemas/{rel}")


if __name__ == "__main__":
    main()
