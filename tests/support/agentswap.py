"""A failure swap carried out by the in-cluster agent's own code, without its threads: a builder for tests.

`swap(fleet, "east", "n1", at)` runs `reconciler.cluster.agent.loop.Agent` once at `at`: its caches
listed from the cluster (the mirrors, the nodes, the pods), its world built from them, the swap
decided by `planner.failover.decide` and carried out step by step (the JournalEntry in state
Intent, the pods on the spare's GPUs deleted, the replacement created, the failed node's pods
deleted with no grace period, the node cordoned, the Lease mirrors swapped, the entry Applied).
`out_of_service` taints a node as an operator fencing it does.
"""

from __future__ import annotations

from typing import Any

from reconciler.cluster import connect, kinds
from reconciler.cluster.agent.loop import Agent
from reconciler.cluster.api import Api
from reconciler.git import read as gitread
from reconciler.spec import commit as speccache
from tests.support.agents import act_once, agent_api
from tests.support.clusterfleet import API, OUT_OF_SERVICE, ClusterFleet

Obj = dict[str, Any]


def target_api(fleet: ClusterFleet, cluster: str) -> tuple[connect.Target, Api]:
    head = gitread.resolve(fleet.repo, "refs/heads/main")
    spec, _, _ = speccache.read_spec(fleet.repo, head)
    target = next(t for t in connect.targets(spec.name, spec.fleet.clusters) if t.name == cluster)
    return target, connect.api(target)


def out_of_service(fleet: ClusterFleet, cluster: str, node: str) -> None:
    """Taint `node` `node.kubernetes.io/out-of-service`: fenced (§4.8)."""
    _, api = target_api(fleet, cluster)
    api.merge_patch(kinds.NODE, node, {"spec": {"taints": [OUT_OF_SERVICE]}})


def swap(fleet: ClusterFleet, cluster: str, node: str, at: int) -> Obj:
    """The agent's swap for the fenced `node` at `at` on `cluster`; the JournalEntry as created."""
    target, _ = target_api(fleet, cluster)
    api = agent_api(cluster)
    agent = Agent(api, cluster, target.fleet, clock=lambda: float(at))
    prepared = act_once(agent)
    assert prepared is not None, f"the agent found nothing to swap for {node}"
    assert [f["node"] for f in prepared.entry["spec"]["fenced"]] == [node]
    made = fleet.servers[cluster].get(API, "JournalEntry", prepared.id)  # the test's own look
    assert made is not None
    return made
