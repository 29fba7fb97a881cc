"""Builders for the planner's own inputs — nodes, leases, worlds — so planner tests run without the shell.

`a_world(budgets=[...], runs=[...], nodes=nodes("A", 4))` takes Budget and Run manifests from
`tests.builders` and validates them into the models the planner reads; `a_lease(...)` opens a
lease on given slots; `snapshot(world)` is the pass's working set, as `planner.plan` builds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from planner.plan import snapshot
from planner.reasons import OpenReason, Phase, Role
from planner.world import FleetState, Lease, NodeObs, Payer, RunRecord, Settings, World
from schemas.budget import Budget
from schemas.run import Run

T0 = 1_772_442_000  # 2026-03-02T09:00:00Z


def a_node(
    name: str,
    gpus: int = 8,
    *,
    region: str = "west",
    cluster: str = "c1",
    flavor: str = "H100-80GB",
    **state: Any,
) -> NodeObs:
    """A node named `<domain>-n<NN>` sits in fabric domain `<domain>`."""
    domain = name.split("-")[0]
    labels = {"region": region, "cluster": cluster, "fabric.domain": domain, "gpu.flavor": flavor}
    return NodeObs(name, gpus, labels, **state)


def nodes(domain: str, count: int, gpus: int = 8, **labels: Any) -> list[NodeObs]:
    return [a_node(f"{domain}-n{i:02d}", gpus, **labels) for i in range(count)]


def a_lease(
    run: str,
    group: int,
    node: str,
    slots: Iterable[int],
    *,
    role: Role = Role.ACTIVE,
    payer: tuple[str, str, str] | None = None,
    start: int = T0,
    rank: int | None = None,
) -> Lease:
    """An open lease; `payer` is (owner, budget, envelope), by default the run's namespace's own."""
    ns = run.split("/")[0]
    owner, budget, envelope = payer or (f"org:{ns}", ns, "h")
    slots = tuple(slots)
    return Lease(
        f"{run.split('/')[1]}-g{group}-{role.value[0].lower()}{node}", run, group, role, node, slots,
        Payer(owner, budget, envelope), start, OpenReason.START, rank=rank if role != Role.SPARE else None,
    )  # fmt: skip


def running(run: str, started: int = T0, submitted: int = T0) -> RunRecord:
    return RunRecord(run, submitted, Phase.RUNNING, "bound", started, next_group=8)


def a_world(
    *,
    budgets: Iterable[dict[str, Any]] = (),
    runs: Iterable[dict[str, Any]] = (),
    nodes: Iterable[NodeObs] = (),
    leases: Iterable[Lease] = (),
    records: Iterable[RunRecord] = (),
    now: int = T0,
    settings: Settings | None = None,
    as_of: int | None = None,
) -> World:
    """A world whose state holds these leases and run records (a run with leases is Running)."""
    leases = list(leases)
    recs = {r.run: r for r in records}
    for lease in leases:
        recs.setdefault(lease.run, running(lease.run))
    state = FleetState(as_of, leases, {}, recs)
    tenants = tuple(sorted({(r["metadata"]["namespace"], r["spec"]["owner"]) for r in runs}))
    return World(
        now,
        settings or Settings(tenants=tenants),
        tuple(Budget.model_validate(b) for b in budgets),
        tuple(Run.model_validate(r) for r in runs),
        tuple(nodes),
        state,
    )


__all__ = ["T0", "a_lease", "a_node", "a_world", "nodes", "running", "snapshot"]
