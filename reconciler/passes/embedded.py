"""The embedded cluster: nodes from an inventory plus recorded node and workload events.

Used when no Kubernetes cluster is configured (and by the simulator). Observes and records;
it applies only what a real cluster would (cordons), and never decides anything.
"""

from __future__ import annotations

from dataclasses import replace

from planner.world import NodeObs, WorkloadEvent
from schemas.fleet import Inventory


def nodes_from_inventory(inv: Inventory | None) -> dict[str, NodeObs]:
    out: dict[str, NodeObs] = {}
    if inv is None:
        return out
    for block in inv.domains:
        for i in range(block.nodes):
            name = f"{block.name}-n{i:02d}"
            labels = {
                "region": block.region,
                "cluster": block.cluster,
                "fabric.domain": block.name,
                "gpu.flavor": block.flavor,
            }
            if block.rack:
                labels["rack"] = block.rack
            out[name] = _observed(
                name, block.gpusPerNode, labels, block.states.get(name, "Ready"), name in block.cordoned
            )
    for node in inv.nodes:
        out[node.name] = _observed(node.name, node.gpus, dict(node.labels), node.state, node.cordoned)
    return out


def _observed(name: str, gpus: int, labels: dict[str, str], state: str, cordoned: bool) -> NodeObs:
    """A node as the inventory states it: Ready, NotReady, Failed (out of service) or Deleted."""
    return NodeObs(
        name, gpus, labels, ready=state not in ("NotReady", "Failed"), cordoned=cordoned,
        out_of_service=state == "Failed", deleted=state == "Deleted",
    )  # fmt: skip


class EmbeddedCluster:
    """Inventory nodes with their state, and workload outcomes waiting to be observed."""

    def __init__(self, inventory: Inventory | None) -> None:
        self.nodes = nodes_from_inventory(inventory)
        self.workload: list[WorkloadEvent] = []

    def node_event(self, name: str, event: str, now: int) -> str | None:
        """Apply a node event; returns an error message for an unknown node."""
        node = self.nodes.get(name)
        if node is None:
            return f"unknown node {name}"
        if event == "Fail":
            node = replace(node, out_of_service=True)
        elif event == "Delete":
            node = replace(node, deleted=True)
        elif event == "Cordon":
            node = replace(node, cordoned=True)
        elif event == "Uncordon":
            node = replace(node, cordoned=False)
        elif event == "NotReady":
            node = replace(node, ready=False, not_ready_since=now)
        elif event == "Ready":
            node = replace(node, ready=True, not_ready_since=None, out_of_service=False)
        self.nodes[name] = node
        return None

    def observe(self) -> tuple[tuple[NodeObs, ...], tuple[WorkloadEvent, ...]]:
        events = tuple(self.workload)
        self.workload = []
        return tuple(n for n in self.nodes.values() if not n.deleted), events

    def apply_cordons(self, names: list[str]) -> None:
        for name in names:
            if name in self.nodes:
                self.nodes[name] = replace(self.nodes[name], cordoned=True)

    def node_report(self) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {}
        for name in sorted(self.nodes):
            n = self.nodes[name]
            state = (
                "Deleted"
                if n.deleted
                else "Failed"
                if n.out_of_service
                else "NotReady"
                if not n.ready
                else "Ready"
            )
            if state != "Ready" or n.cordoned:
                out[name] = {"cordoned": n.cordoned, "state": state}
        return out
