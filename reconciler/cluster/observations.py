"""Kubernetes nodes and pods as the planner's observations (§7.2, §4.8): shared by observe and the in-cluster agent.

Pure: node and pod dicts in, `planner.world.NodeObs` and `WorkloadEvent` out. A node's topology
labels are read through the cluster's `topologyLabels` and written under the planner's keys; its
GPUs are its `nvidia.com/gpu` capacity (nodes without any are not part of the fleet); `Ready` and
its transition time, `spec.unschedulable` (cordon), the `node.kubernetes.io/out-of-service` taint
and a deletion in progress are its health. A node missing a topology label, or labelled with
another cluster's name, is handed over without that label: the planner reports and excludes it and
leaves its leases alone. Workload outcomes are per placement group: one failed pod fails its
group, a group whose pods all succeeded completed; pods on a failed node are the node's business
(failover), and a pod the record holds but the cluster does not is re-created by apply.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from planner import records
from planner.reasons import Role
from planner.world import REQUIRED_LABELS, Lease, NodeObs, WorkloadEvent
from schemas import GROUP

GPU = "nvidia.com/gpu"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
TOPOLOGY_KEYS = (*REQUIRED_LABELS, "rack")
RUN_LABEL, GROUP_LABEL, ROLE_LABEL = f"{GROUP}/run", f"{GROUP}/group-index", f"{GROUP}/role"
LEASES_ANNOTATION = f"{GROUP}/leases"
Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PodObs:
    """One of this fleet's pods: whose (run, group, role), where, for which leases, and its phase."""

    name: str
    run: str  # "ns/name"
    group: int
    role: str
    node: str
    leases: frozenset[str]
    phase: str
    terminating: bool = False


def node_obs(node: Obj, labels: Mapping[str, str], cluster: str) -> tuple[NodeObs | None, str | None]:
    """The planner's view of a node of `cluster` (None: it has no GPUs), and a problem to report.

    `labels`: topology key -> the label key this cluster uses (`schemas.fleet.TopologyLabels`)."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    name = str(meta.get("name", ""))
    gpus = _quantity((status.get("capacity") or {}).get(GPU))
    if gpus <= 0:
        return None, None
    have = meta.get("labels") or {}
    topology: dict[str, str] = {}
    missing: list[str] = []
    for key in TOPOLOGY_KEYS:
        value = have.get(labels.get(key, key))
        if value:
            topology[key] = str(value)
        elif key == "cluster":
            topology[key] = cluster  # the cluster a node is observed in is its cluster
        elif key in REQUIRED_LABELS:
            missing.append(key)
    problem = None
    if topology["cluster"] != cluster:
        problem = (
            f"node {name} in cluster {cluster} is labelled {labels.get('cluster', 'cluster')}="
            f"{topology['cluster']}; it is left out until the label names {cluster} (or is removed)"
        )
        del topology["cluster"]
    elif missing:
        named = ", ".join(f"{labels.get(k, k)} ({k})" if labels.get(k, k) != k else k for k in missing)
        problem = f"node {name} in cluster {cluster} lacks label {named}; it is left out until labelled"
    ready, since = _ready(status)
    taints = spec.get("taints") or []
    return (
        NodeObs(
            name,
            gpus,
            topology,
            ready=ready,
            cordoned=bool(spec.get("unschedulable")),
            out_of_service=any(t.get("key") == OUT_OF_SERVICE for t in taints),
            deleted=bool(meta.get("deletionTimestamp")),
            not_ready_since=since if not ready else None,
        ),  # fmt: skip
        problem,
    )


def pod_obs(pod: Obj) -> PodObs | None:
    """A pod jobtree rendered (its labels name run, group and role), else None."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    labels = meta.get("labels") or {}
    run, group, role = labels.get(RUN_LABEL), labels.get(GROUP_LABEL), labels.get(ROLE_LABEL)
    if not run or group is None or not str(group).isdigit() or not role:
        return None
    leases = ((meta.get("annotations") or {}).get(LEASES_ANNOTATION) or "").split(",")
    return PodObs(
        str(meta.get("name", "")), f"{meta.get('namespace', '')}/{run}", int(group), str(role),
        str(spec.get("nodeName") or ""), frozenset(x for x in leases if x), str(status.get("phase") or "Pending"),
        bool(meta.get("deletionTimestamp")),
    )  # fmt: skip


def workload(
    pods: Iterable[PodObs], leases: Iterable[Lease], healthy: set[str]
) -> tuple[list[WorkloadEvent], list[str]]:
    """Per open group on the `healthy` nodes (present, not fenced): `Fail` when one of its pods
    failed, `Succeed` when every pod succeeded; and the pods its open leases hold that are missing.

    A pod counts for a group only when its leases annotation names exactly the group's open leases
    on its node (an older pod of the same name, not yet replaced, says nothing about this one)."""
    want: dict[tuple[str, int], dict[tuple[str, str], set[str]]] = defaultdict(lambda: defaultdict(set))
    for lease in leases:
        if lease.open and lease.role != Role.SPARE and lease.node in healthy:
            want[(lease.run, lease.group)][(lease.node, str(lease.role))].add(lease.name)
    seen: dict[tuple[str, int, str, str], PodObs] = {}
    for pod in pods:
        seen[(pod.run, pod.group, pod.node, pod.role)] = pod
    events: list[WorkloadEvent] = []
    missing: list[str] = []
    for (run, group), slices in sorted(want.items()):
        phases = []
        for (node, role), names in sorted(slices.items()):
            found = seen.get((run, group, node, role))
            if found is None or found.leases != names:
                if found is None:
                    missing.append(f"{run} group {group} on {node}")
                phases.append("Missing")
                continue
            phases.append(found.phase)
        if "Failed" in phases:
            events.append(WorkloadEvent(run, "Fail", group))
        elif phases and all(p == "Succeeded" for p in phases):
            events.append(WorkloadEvent(run, "Succeed", group))
    return events, missing


def _quantity(value: Any) -> int:
    """A GPU count quantity (`"8"`); anything else counts as none."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def _ready(status: Obj) -> tuple[bool, int | None]:
    """Whether the Ready condition is True, and since when it has been what it is (epoch seconds)."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True", _epoch(condition.get("lastTransitionTime"))
    return False, None  # a node that never reported: not ready, and no grace has started


def _epoch(text: Any) -> int | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return records.epoch(text)
    except ValueError:
        return None
