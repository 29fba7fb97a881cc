"""Observe one cluster (step 3 of a pass, §7.2): its nodes and this fleet's pods, read once, as the planner's observations.

Two lists (nodes; pods carrying this fleet's label), each one consistent snapshot read page by page,
turned into observations by `observations` (the agent shares that module). The open leases of the
last state commit say which pods the record holds: their outcomes become workload events, and the
ones the cluster lacks are named (apply re-creates them). A cluster that lists no GPU node while
leases are open on nodes last seen there is not taken at its word (a kubeconfig context pointing
at another cluster would otherwise fail every run): `Unreachable`. Writes nothing; commits nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from planner.topology import is_fenced
from planner.world import Lease, NodeObs, WorkloadEvent
from reconciler.cluster import kinds, observations, stamp
from reconciler.cluster.api import Api
from reconciler.cluster.connect import Target
from reconciler.cluster.errors import Unreachable


@dataclass(frozen=True, slots=True)
class Observation:
    """One cluster as one pass saw it."""

    cluster: str
    nodes: tuple[NodeObs, ...]  # every node with GPUs, by name
    workload: tuple[WorkloadEvent, ...]  # outcomes of groups with open leases here
    problems: tuple[str, ...]  # nodes left out, and why (for people)
    missing: tuple[str, ...]  # pods the record holds that the cluster does not (apply re-creates them)
    reads: int = 0  # requests sent


def observe(
    api: Api, target: Target, leases: Iterable[Lease], known: Iterable[str], now: int, grace: int | None
) -> Observation:
    """Nodes and this fleet's pods of `target`. `leases`: the open leases of the last state commit;
    `known`: the nodes the last observation of this cluster held (where its leases are); `now` and
    `grace` (failure.notReadyGraceSeconds): which nodes have failed, whose pods' phases are the
    failover's to act on, not workload outcomes."""
    leases = list(leases)
    raw_nodes, _ = api.list_all(kinds.NODE)
    nodes: list[NodeObs] = []
    problems: list[str] = []
    for raw in raw_nodes:
        obs, problem = observations.node_obs(raw, target.labels, target.name)
        if obs is not None:
            nodes.append(obs)
        if problem is not None:
            problems.append(problem)
    nodes.sort(key=lambda n: n.name)
    last_seen = set(known)
    open_here = [x for x in leases if x.open and x.node in last_seen]
    if not nodes and open_here:
        raise Unreachable(
            f"{target.name}: {target.where} lists no GPU node, yet {len(open_here)} open leases are on nodes "
            "last observed there; is it the right cluster? planned against its last observation"
        )
    raw_pods, _ = api.list_all(kinds.POD, stamp.selector(target.fleet))
    pods = [p for p in map(observations.pod_obs, raw_pods) if p is not None]
    healthy = {n.name for n in nodes if not is_fenced(n, now, grace)}
    events, missing = observations.workload(pods, leases, healthy)
    return Observation(
        target.name, tuple(nodes), tuple(events), tuple(problems), tuple(missing), api.counts.reads
    )
