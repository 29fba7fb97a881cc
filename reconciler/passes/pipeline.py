"""The pipeline every pass runs (steps 3-5): observe → plan → render, over a validated `Spec` and a cluster.

Each stage is a plain function over data; the simulator, `reconcile` and `plan` all run this same
sequence. Reading the spec is `reconciler.spec`'s (`validated.Spec`); the cluster is a two-method
`Cluster` (the embedded one, or the configured clusters: `passes.clusters`). Owns no clock (callers pass
`now`), no Git and no printing: a plan breaking an invariant raises `InvariantViolation`.
"""

from __future__ import annotations

from typing import Protocol

from planner import invariants, records
from planner import plan as planner_plan
from planner.world import Failover, FleetState, NodeObs, WorkloadEvent, World
from reconciler.spec.validated import Spec
from schemas.layout import INVENTORY_FILE, SPEC_FILES


class Cluster(Protocol):
    def observe(self) -> tuple[tuple[NodeObs, ...], tuple[WorkloadEvent, ...]]: ...

    def apply_cordons(self, names: list[str]) -> None: ...


def frozen(spec: Spec, state: FleetState) -> tuple[dict[str, str], dict[str, str]]:
    """Objects whose file is present but invalid now: their running work is left exactly as it is,
    and a run invalid from its first commit gets a status naming the file (it waits for the fix).

    Runs and budgets, each with the file to fix (their status names it).
    """
    runs: dict[str, str] = {}
    budgets: dict[str, str] = {}
    for key, path in sorted(spec.rejected.items()):
        kind, _, name = key.partition(" ")
        if kind == "Run" and "/" in name:
            runs[name] = path
        elif kind == "Budget":
            budgets[name] = path
    if spec.linked:  # a runs folder committed as a link: the runs it held are not deleted
        valid = {f"{r.metadata.namespace}/{r.metadata.name}" for r in spec.runs}
        for name in sorted(state.runs):
            folder = _linked_folder_of(name, spec.linked)
            if folder is not None and name not in valid:
                runs.setdefault(name, folder)
    return runs, budgets


def _linked_folder_of(run: str, linked: dict[str, str]) -> str | None:
    """The linked folder (`runs`, or `runs/<namespace>`) that held `run` (`<namespace>/<name>`)."""
    namespace = run.split("/", 1)[0]
    return linked.get(f"runs/{namespace}") or linked.get("runs")


def stalled(spec: Spec, state: FleetState) -> dict[str, str]:
    """`{file: why}` for the files a pass cannot go on without: jobtree.yaml and inventory/nodes.yaml
    hold what every object depends on (tenants, accounting and the Git identity; the embedded
    cluster's nodes). While one is invalid, or the inventory is missing or lists no node while
    leases are open (the embedded cluster is the fleet a pass observes), planning would re-fund or
    fail every running run: a pass then plans nothing. With `clusters` configured the inventory is
    not read, so it stops nothing."""
    out = {d.path: "does not validate" for d in spec.diagnostics if d.path in SPEC_FILES}
    if spec.fleet.clusters:
        out.pop(INVENTORY_FILE, None)
        return out
    open_leases = sum(1 for x in state.leases if x.open)
    inventory = spec.inventory
    if (
        INVENTORY_FILE not in out
        and open_leases
        and (inventory is None or not (inventory.nodes or any(b.nodes for b in inventory.domains)))
    ):
        leases = f"{open_leases} lease{'s' * (open_leases != 1)} {'are' if open_leases != 1 else 'is'}"
        out[INVENTORY_FILE] = f"is missing or lists no node while {leases} open"
    return dict(sorted(out.items()))


def run_pass(
    spec: Spec,
    cluster: Cluster,
    state: FleetState,
    now: int,
    render: bool = True,
    journal: tuple[Failover, ...] = (),
) -> planner_plan.Plan:
    """Observe, plan and (with `render`) render the pods: a plan breaking an invariant raises.

    Callers that write or apply manifests render; the simulator and `jobtree plan` report decisions
    only and skip the render stage, and `reconcile` renders with its next tree, only the runs whose
    pods' inputs changed (`state.rendering`, which checks the pods it renders). `journal`: the
    in-cluster agent's swaps not yet Folded (§7.5), which the planner folds in first.
    """
    nodes, workload = cluster.observe()
    frozen_runs, frozen_budgets = frozen(spec, state)
    world = World(
        now,
        records.settings_of(spec.fleet),
        (*spec.budgets, *spec.kept),
        tuple(spec.runs),
        nodes,
        state,
        workload,
        frozen_runs,
        frozen_budgets,
        journal,
    )
    result = planner_plan.plan(world)
    if result.violations:
        raise InvariantViolation(result.violations)
    if render:
        problems = invariants.check_pods(result.open_leases, result.manifests)
        if problems:
            raise InvariantViolation(problems)
    cluster.apply_cordons(result.cordon)
    return result


class InvariantViolation(RuntimeError):
    """The plan breaks a §4.9 invariant: nothing is written."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("plan breaks invariants, nothing written:\n  " + "\n  ".join(problems[:20]))
        self.problems = problems
