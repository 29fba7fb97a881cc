"""Builders for fleet objects as manifests (plain dicts), so tests read like the seeds' YAML, and for
the planner's world (nodes, leases, a `World`), so a planner test needs no shell.

`a_run("t/r1", owner="org:t").gpus(16).groups(8).spares(1).build()` — each method returns the
builder; `build()` gives the manifest a scenario step or `Run.model_validate` takes.

`a_world(now).node(a_node("A-n00")).budget(...).run(...).lease(a_lease("t/r1", "A-n00", 8)).build()`
gives a `planner.world.World` to hand to `planner.plan.plan` directly (Kueue's wrappers, in short).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from planner.reasons import OpenReason, Phase, Role
from planner.world import FleetState, Lease, NodeObs, Payer, RunRecord, Settings, WorkloadEvent, World
from schemas.budget import Budget
from schemas.run import Run

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

    def image(self, image: str) -> RunBuilder:
        self.spec.setdefault("template", {})["image"] = image
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

    def template(self, template: dict[str, Any]) -> RunBuilder:
        """The pod template: the short form (image, command, args, env) or a full PodTemplateSpec."""
        self.spec["template"] = copy.deepcopy(template)
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


# -- the planner's world -------------------------------------------------------------------------


def a_node(
    name: str,
    gpus: int = 8,
    domain: str | None = None,
    flavor: str = "H100-80GB",
    *,
    region: str = "west",
    cluster: str = "c1",
    **state: Any,
) -> NodeObs:
    """A node as the cluster reports it; `domain` defaults to the name's prefix (`A-n00` -> `A`), as
    the embedded inventory names them. `state`: ready, cordoned, out_of_service, deleted, ..."""
    fabric = domain or name.split("-n")[0]
    labels = {"region": region, "cluster": cluster, "fabric.domain": fabric, "gpu.flavor": flavor}
    return NodeObs(name, gpus, labels, **state)


def nodes(domain: str, count: int, gpus: int = 8, **labels: Any) -> list[NodeObs]:
    """`count` nodes `<domain>-n00`, `-n01`, ... of one fabric domain."""
    return [a_node(f"{domain}-n{i:02d}", gpus, **labels) for i in range(count)]


def a_lease(
    run: str,
    node: str,
    gpus: int,
    *,
    group: int = 0,
    role: str = "Active",
    owner: str | None = None,
    budget: str | None = None,
    envelope: str | None = None,
    start: int = 0,
    reason: str = "Start",
    first_slot: int = 0,
    rank: int | None = None,
) -> Lease:
    """An open lease of `gpus` slots on `node` for `run`, paid by `owner` (default: the run's
    namespace as `org:<ns>`) through `budget`/`envelope` when given. A working lease serves ranks
    from `rank` (default: group x its GPUs); a spare serves none."""
    payer = Payer(owner or f"org:{run.split('/')[0]}", budget, envelope)
    slots = tuple(range(first_slot, first_slot + gpus))
    serves = None if role == "Spare" else (rank if rank is not None else group * gpus)
    return Lease(f"{run.replace('/', '-')}-g{group}-{node}", run, group, Role(role), node, slots, payer, start,
                 OpenReason(reason), rank=serves)  # fmt: skip


class WorldBuilder:
    """A `World` one piece at a time; `build()` validates the manifests into models."""

    def __init__(self, now: int, **settings: Any) -> None:
        self.now = now
        self.settings = Settings(**settings)
        self.nodes: list[NodeObs] = []
        self.budgets: list[dict[str, Any]] = []
        self.runs: list[dict[str, Any]] = []
        self.state = FleetState()
        self.tenants: dict[str, str] = {}
        self.events: tuple[WorkloadEvent, ...] = ()

    def node(self, *nodes: NodeObs) -> WorldBuilder:
        self.nodes += nodes
        return self

    def budget(self, *budgets: BudgetBuilder | dict[str, Any]) -> WorldBuilder:
        self.budgets += [b.build() if isinstance(b, BudgetBuilder) else b for b in budgets]
        return self

    def run(self, *runs: RunBuilder | dict[str, Any], submitted: int | None = None) -> WorldBuilder:
        for r in runs:
            doc = r.build() if isinstance(r, RunBuilder) else r
            self.runs.append(doc)
            key = f"{doc['metadata']['namespace']}/{doc['metadata']['name']}"
            self.tenants.setdefault(doc["metadata"]["namespace"], doc["spec"]["owner"])
            if submitted is not None:
                self.state.runs[key] = RunRecord(key, submitted)
        return self

    def lease(self, *leases: Lease, phase: str = "Running") -> WorldBuilder:
        """Open leases as the last pass left them, their runs Running since the leases' start (and
        their groups' indices taken)."""
        for lease in leases:
            self.state.leases.append(lease)
            record = self.state.runs.get(lease.run) or RunRecord(lease.run, lease.start)
            self.state.runs[lease.run] = replace(
                record,
                phase=Phase(phase),
                started=record.started or lease.start,
                next_group=max(record.next_group, lease.group + 1),
            )
        return self

    def record(self, *records: RunRecord) -> WorldBuilder:
        """Runs as the last pass left them (phase, start, counters), replacing what `lease` set."""
        for rec in records:
            self.state.runs[rec.run] = rec
        return self

    def as_of(self, when: int) -> WorldBuilder:
        """The instant of the last pass (GPU-hours are metered from it)."""
        self.state.as_of = when
        return self

    def workload(self, *events: WorkloadEvent) -> WorldBuilder:
        self.events += events
        return self

    def build(self) -> World:
        settings = replace(self.settings, tenants=tuple(sorted(self.tenants.items())))
        return World(
            self.now,
            settings,
            tuple(Budget.model_validate(b) for b in self.budgets),
            tuple(Run.model_validate(r) for r in self.runs),
            tuple(self.nodes),
            self.state,
            self.events,
        )


def a_world(now: int, **settings: Any) -> WorldBuilder:
    """A world at `now` (settings as `planner.world.Settings` takes them); add nodes, budgets, runs, leases."""
    return WorldBuilder(now, **settings)
