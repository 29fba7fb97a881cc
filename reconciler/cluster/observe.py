"""Observe one cluster (step 3 of a pass, §7.2): its nodes and its pods, read once, as the planner's observations.

Two lists (nodes; every pod), sent at once, each one consistent snapshot read page by page and
cut down as each page arrives to what `observations` reads (the agent shares that module; a node
is decoded into those fields alone, `observations.NodeFields`), so a pass never holds a cluster's
nodes or pods whole. What apply compares with of those two lists (the nodes, cut down;
the pods any fleet's jobtree applied, without their managedFields) is kept as `Listed`, so a
`reconcile --apply` pass lists them once: apply acts on the snapshot its plan was made from. This
fleet's pods (its label) say how the record's groups are doing; the GPUs every other pod asks for
on a node are not this fleet's to place (§7.6: capacity is allocatable less those). The open leases of the last state commit say which pods the record
holds: their endings become workload events, and the ones the cluster lacks on nodes that would
take them are named (apply re-creates them). A cluster that lists no GPU node while leases are
open on nodes last seen there is not taken at its word (a kubeconfig context pointing at another
cluster would otherwise fail every run): `Unreachable`. A long-lived reconciler hands in its
watch-fed caches instead (`cached`, a `watched.View`): the same nodes and pods, cut the same way,
read in the same order, with no list sent (see `watched` for why a cache that lags is safe); its
mirrors and Services go to apply as they are (`Listed.owned`), read when apply reads what is live.
Writes nothing; commits nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from planner.topology import is_fenced
from planner.world import Lease, NodeObs, WorkloadEvent
from reconciler.cluster import changes, kinds, observations, stamp
from reconciler.cluster.api import Api
from reconciler.cluster.connect import Target
from reconciler.cluster.errors import Unreachable

if TYPE_CHECKING:
    from reconciler.cluster.watched import View

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Listed:
    """What apply compares with, as observe listed it: the nodes (`observations.slim_node`) by name,
    and every pod any fleet's jobtree applied (`changes.as_listed`) by key."""

    nodes: dict[str, Obj]
    pods: dict[kinds.Key, Obj]
    wrote: Callable[[Obj], None] | None = None  # the caches these came from: apply's writes go in at once
    owned: Callable[[], dict[kinds.Key, Obj] | str] | None = (
        None  # the mirrors and Services cached, or why not
    )


@dataclass(frozen=True, slots=True)
class Observation:
    """One cluster as one pass saw it."""

    cluster: str
    nodes: tuple[NodeObs, ...]  # every node with GPUs, by name
    workload: tuple[WorkloadEvent, ...]  # outcomes of groups with open leases here
    problems: tuple[str, ...]  # nodes left out, and why (for people)
    missing: tuple[str, ...]  # pods the record holds that the cluster does not (apply re-creates them)
    reads: int = 0  # requests sent
    listed: Listed | None = None  # for apply in the same pass


def observe(
    api: Api, target: Target, leases: Iterable[Lease], known: Iterable[str], now: int, grace: int | None,
    cached: View | None = None,
) -> Observation:  # fmt: skip
    """Nodes and this fleet's pods of `target`. `leases`: the open leases of the last state commit;
    `known`: the nodes the last observation of this cluster held (where its leases are); `now` and
    `grace` (failure.notReadyGraceSeconds): which nodes have failed, whose pods' phases are the
    failover's to act on, not workload outcomes. `cached`: a long-lived reconciler's caches: its
    nodes and pods read instead of listed when it gives them, its hooks for apply either way."""
    leases = list(leases)
    label_keys = {target.labels.get(k, k) for k in observations.TOPOLOGY_KEYS}
    mine: list[observations.PodObs] = []
    foreign: list[Obj] = []
    applied: dict[kinds.Key, Obj] = {}

    def sort(pod: Obj) -> None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(stamp.FLEET) == target.fleet:
            seen = observations.pod_obs(pod)
            if seen is not None:
                mine.append(seen)
        elif observations.gpu_request(pod):
            foreign.append(observations.slim_pod(pod))
        if labels.get(stamp.MANAGED_BY) == stamp.MANAGER:
            applied[kinds.key(pod)] = changes.as_listed(pod)

    if cached is not None and cached.nodes is not None and cached.pods is not None:
        raw_nodes = cached.nodes
        for pod in cached.pods:
            sort(pod)
    else:
        with ThreadPoolExecutor(max_workers=1) as pool:  # both lists at once: the server serves each
            listing = pool.submit(lambda: api.list_all(kinds.POD, keep=sort))
            raw_nodes, _ = api.list_all(
                kinds.NODE,
                keep=lambda n: observations.slim_node(n, label_keys),
                shape=observations.NodeFields,
            )
            listing.result()
    held = observations.foreign_gpus(foreign, target.fleet)
    nodes: list[NodeObs] = []
    problems: list[str] = []
    for raw in raw_nodes:
        obs, problem = observations.node_obs(
            raw, target.labels, target.name, held.get(raw["metadata"]["name"], 0)
        )
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
    healthy = {n.name for n in nodes if not is_fenced(n, now, grace)}
    schedulable = {n.name for n in nodes if n.name in healthy and n.ready and not n.cordoned}
    events, missing = observations.workload(mine, leases, healthy, schedulable)
    listed = Listed(
        {n["metadata"]["name"]: n for n in raw_nodes}, applied, cached.wrote if cached else None,
        cached.owned if cached else None,
    )  # fmt: skip
    return Observation(
        target.name, tuple(nodes), tuple(events), tuple(problems), tuple(missing), api.counts.reads, listed
    )
