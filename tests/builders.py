"""Builders for fleet objects as manifests (plain dicts), so tests read like the seeds' YAML.

`a_run("t/r1", owner="org:t").gpus(16).groups(8).spares(1).build()` — each method returns the
builder; `build()` gives the manifest a scenario step or `Run.model_validate` takes.
"""

from __future__ import annotations

import copy
from typing import Any

API = "rq.davidlangworthy.io/v1"


class RunBuilder:
    def __init__(self, key: str, owner: str, flavor: str = "H100-80GB") -> None:
        ns, name = key.split("/")
        self.doc: dict[str, Any] = {
            "apiVersion": API,
            "kind": "Run",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"owner": owner, "resources": {"gpuType": flavor, "totalGPUs": 8}},
        }

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.doc["spec"]
        return spec

    def gpus(self, total: int) -> RunBuilder:
        self.spec["resources"]["totalGPUs"] = total
        return self

    def groups(self, size: int, spread: bool = True) -> RunBuilder:
        self.spec["locality"] = {"groupGPUs": size, **({} if spread else {"allowCrossGroupSpread": False})}
        return self

    def spares(self, n: int) -> RunBuilder:
        self.spec["sparesPerGroup"] = n
        return self

    def malleable(self, low: int, high: int, step: int, desired: int | None = None) -> RunBuilder:
        self.spec["malleable"] = {"minTotalGPUs": low, "maxTotalGPUs": high, "stepGPUs": step}
        if desired is not None:
            self.spec["malleable"]["desiredTotalGPUs"] = desired
        return self

    def borrowing(self, *sponsors: str, cap: int | None = None) -> RunBuilder:
        self.spec["funding"] = {"allowBorrow": True, "sponsors": list(sponsors)}
        if cap is not None:
            self.spec["funding"]["maxBorrowGPUs"] = cap
        return self

    def opportunistic(self) -> RunBuilder:
        self.spec["opportunistic"] = True
        return self

    def checkpointed(self) -> RunBuilder:
        self.spec["runtime"] = {"checkpoint": "15m"}
        return self

    def after(self, *names: str) -> RunBuilder:
        self.spec["after"] = list(names)
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.doc)


class BudgetBuilder:
    def __init__(self, name: str, owner: str, parents: tuple[str, ...] = ()) -> None:
        self.doc: dict[str, Any] = {
            "apiVersion": API,
            "kind": "Budget",
            "metadata": {"name": name},
            "spec": {"owner": owner, "envelopes": [], **({"parents": list(parents)} if parents else {})},
        }

    def envelope(self, name: str, gpus: int, flavor: str = "H100-80GB", **fields: Any) -> BudgetBuilder:
        self.doc["spec"]["envelopes"].append({"name": name, "flavor": flavor, "concurrency": gpus, **fields})
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.doc)


def a_run(key: str, owner: str, flavor: str = "H100-80GB") -> RunBuilder:
    return RunBuilder(key, owner, flavor)


def a_budget(name: str, owner: str, *parents: str) -> BudgetBuilder:
    return BudgetBuilder(name, owner, parents)


def scenario(
    tenants: dict[str, str],
    domains: list[dict[str, Any]],
    steps: list[dict[str, Any]],
    *,
    until: str = "+1m",
    fleet: dict[str, Any] | None = None,
    nodes: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A Scenario manifest: tenants {namespace: owner}, inventory domains, steps as in DESIGN §6."""
    return {
        "apiVersion": API,
        "kind": "Scenario",
        "metadata": {"name": "test"},
        "spec": {
            "start": "2026-03-02T09:00:00Z",
            "fleet": {"tenants": [{"namespace": ns, "owner": o} for ns, o in sorted(tenants.items())]}
            | (fleet or {}),
            "inventory": {"domains": domains, "nodes": nodes or []},
            "steps": steps,
            "until": until,
        },
    }


def domain(name: str, nodes: int, gpus: int = 8, flavor: str = "H100-80GB", **labels: str) -> dict[str, Any]:
    return {
        "name": name,
        "region": labels.get("region", "west"),
        "cluster": labels.get("cluster", "c1"),
        "flavor": flavor,
        "nodes": nodes,
        "gpusPerNode": gpus,
    }
