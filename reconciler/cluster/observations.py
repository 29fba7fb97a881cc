"""Kubernetes nodes and pods as the planner's observations (§7.2, §7.6, §4.8): shared by observe, apply and the in-cluster agent.

Pure: node and pod dicts in, `planner.world.NodeObs` and `WorkloadEvent` out. A node's topology
labels are read through the cluster's `topologyLabels` and written under the planner's keys; its
GPUs are its `nvidia.com/gpu` allocatable less what pods this fleet did not render request there
(`foreign`; nodes without any are not part of the fleet); `Ready` and its transition time,
`spec.unschedulable` (cordon), the `node.kubernetes.io/out-of-service` taint and a deletion in
progress are its health. A node missing a topology label, or labelled with another cluster's name,
is handed over without that label: the planner reports and excludes it and leaves its leases alone.

A pod's ending is read as a kubelet writes it (`ending`, §7.6): `Succeeded` is completion; the
`DisruptionTarget` condition (eviction by the kubelet or the Eviction API, node shutdown,
preemption, the taint manager, pod GC), a refusal of the kubelet about the node's resources or
state (`OutOf…`, `UnexpectedAdmissionError`, `NodeShutdown`, …) or a deletion by someone else is a
disruption, never the workload's failure; a container that exited non-zero, or a refusal about the
pod's own spec (`SysctlForbidden`, `NodeAffinity`, …: it could never run there), is the
workload's failure. Each carries the Kubernetes reason. Workload outcomes are per placement group:
one failed pod fails its group, a group whose pods all succeeded completed, a disrupted pod is a
`Disrupt` of its group on its node (the planner re-creates it in place when the node is healthy
and schedulable, else handles it as that node's failure for the group); pods on a failed node are
the failover's, and a pod the record holds but the cluster lacks on a node that would take it back
is re-created by apply (on one that would not, a cordoned or NotReady node, it was drained: a
disruption). `slim_node` and `slim_pod` keep only what these functions read, so a cache of them
stays small at 10,000 nodes; `NodeFields` names what `slim_node` reads, so a list of nodes can be
decoded into that alone (`Api.pages`' `shape`).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from planner import records
from planner.reasons import Role
from planner.world import REQUIRED_LABELS, Lease, NodeObs, WorkloadEvent
from schemas import GROUP

GPU = "nvidia.com/gpu"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
TOPOLOGY_KEYS = (*REQUIRED_LABELS, "rack")
RUN_LABEL, GROUP_LABEL, ROLE_LABEL = f"{GROUP}/run", f"{GROUP}/group-index", f"{GROUP}/role"
FLEET_LABEL = f"{GROUP}/fleet"
LEASES_ANNOTATION = f"{GROUP}/leases"
DISRUPTION_TARGET = "DisruptionTarget"
Obj = dict[str, Any]

# The ways a pod ends (§7.6)
COMPLETED, WORKLOAD_FAILED, DISRUPTED = "Completed", "WorkloadFailed", "Disrupted"
FINISHED = ("Succeeded", "Failed")  # pod phases whose containers have ended
# Reasons a kubelet writes on a pod it failed that say nothing about the workload: node-pressure
# eviction, preemption for a critical pod, node shutdown (older kubelets write no condition), and
# its admission refusals about the node's resources or state (the `OutOf…` family is matched by
# prefix). The kubelet's own names (pkg/kubelet/eviction, preemption, nodeshutdown, lifecycle).
KUBELET_DISRUPTIONS = frozenset({
    "Evicted", "Preempting", "Terminated", "NodeShutdown", "UnexpectedAdmissionError", "TopologyAffinityError",
    "UnknownReason", "UnexpectedPredicateFailureType", "InvalidNodeInfo", "NodePorts", "TaintToleration",
    "VolumeAttachmentLimitExceeded", "NodeName",
})  # fmt: skip
OUT_OF = "OutOf"
DELETED = "Deleted"  # a pod deleted by someone else and gone (nothing of it says why)


@dataclass(frozen=True, slots=True)
class PodObs:
    """One of this fleet's pods: whose (run, group, role), where, for which leases, how it ended."""

    name: str
    run: str  # "ns/name"
    group: int
    role: str
    node: str
    leases: frozenset[str]
    phase: str
    terminating: bool = False
    ending: str = ""  # COMPLETED, WORKLOAD_FAILED, DISRUPTED; "" while it runs (or waits to)
    reason: str = ""  # the Kubernetes reason of its ending


def ending(pod: Obj) -> tuple[str, str]:
    """How a pod ended, and the Kubernetes reason: ("", "") while it has not (see the module docstring)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    phase, reason = str(status.get("phase") or ""), str(status.get("reason") or "")
    if phase == "Succeeded":
        return COMPLETED, "Completed"
    target = next(
        (c for c in status.get("conditions") or [] if c.get("type") == DISRUPTION_TARGET and c.get("status") == "True"),
        None,
    )  # fmt: skip
    if target is not None:
        return DISRUPTED, reason or str(target.get("reason") or DISRUPTION_TARGET)
    if phase == "Failed":
        if reason in KUBELET_DISRUPTIONS or reason.startswith(OUT_OF):
            return DISRUPTED, reason
        if reason:  # a refusal about the pod's own spec, a deadline it set itself, ...
            return WORKLOAD_FAILED, reason
        return WORKLOAD_FAILED, _exit(status)
    if meta.get("deletionTimestamp"):
        return DISRUPTED, DELETED
    return "", ""


def _exit(status: Obj) -> str:
    """The first container that ended non-zero, as `Error (exit code 1)`; `Failed` when none says."""
    for container in status.get("containerStatuses") or []:
        done = ((container.get("state") or {}).get("terminated")) or {}
        code = done.get("exitCode")
        if isinstance(code, int) and code != 0:
            return f"{done.get('reason') or 'Error'} (exit code {code})"
    return "Failed"


def node_obs(
    node: Obj, labels: Mapping[str, str], cluster: str, foreign: int = 0
) -> tuple[NodeObs | None, str | None]:
    """The planner's view of a node of `cluster` (None: it has no GPUs), and a problem to report.

    `labels`: topology key -> the label key this cluster uses (`schemas.fleet.TopologyLabels`);
    `foreign`: the GPUs pods this fleet did not render request on it (`foreign_gpus`)."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    name = str(meta.get("name", ""))
    allocatable = _quantity((status.get("allocatable") or {}).get(GPU))
    if allocatable <= 0:
        return None, None
    gpus = max(0, allocatable - foreign)
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
    ready, since = ready_since(status)
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
    how, reason = ending(pod)
    return PodObs(
        str(meta.get("name", "")), f"{meta.get('namespace', '')}/{run}", int(group), str(role),
        str(spec.get("nodeName") or ""), frozenset(x for x in leases if x), str(status.get("phase") or "Pending"),
        bool(meta.get("deletionTimestamp")), how, reason,
    )  # fmt: skip


def gpu_request(pod: Obj) -> int:
    """The GPUs a pod holds on its node while it runs: its containers' `nvidia.com/gpu` (a limit
    alone is the request for an extended resource), or its largest init container's when more."""
    spec = pod.get("spec") or {}

    def asks(container: Obj) -> int:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        return _quantity(requests.get(GPU, limits.get(GPU)))

    running = sum(asks(c) for c in spec.get("containers") or [])
    return max([running, *(asks(c) for c in spec.get("initContainers") or [])])


def foreign_gpus(pods: Iterable[Obj], fleet: str) -> dict[str, int]:
    """Per node, the GPUs pods that `fleet` did not render hold (not yet ended): what its nodes lack."""
    out: dict[str, int] = defaultdict(int)
    for pod in pods:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        if (meta.get("labels") or {}).get(FLEET_LABEL) == fleet or status.get("phase") in FINISHED:
            continue
        node, gpus = spec.get("nodeName"), gpu_request(pod)
        if node and gpus:
            out[str(node)] += gpus
    return dict(out)


# ------------------------------------------------------------------------------- projections


class _NodeMeta(TypedDict, total=False):
    name: Any
    labels: Any
    resourceVersion: Any
    deletionTimestamp: Any


class _NodeSpec(TypedDict, total=False):
    unschedulable: Any
    taints: Any


class _Condition(TypedDict, total=False):
    type: Any
    status: Any
    lastTransitionTime: Any


class _NodeStatus(TypedDict, total=False):
    allocatable: Any
    conditions: list[_Condition] | None


class NodeFields(TypedDict, total=False):
    """The fields of a Node that `slim_node` reads (and so `node_obs` and apply): a node decoded
    into these alone gives the same slim node as the whole one."""

    metadata: _NodeMeta | None
    spec: _NodeSpec | None
    status: _NodeStatus | None


def slim_node(node: Obj, label_keys: Iterable[str] | None = None) -> Obj:
    """A node with only what `node_obs` and apply read: name, resourceVersion, deletion, the labels
    `label_keys` names (all when None), cordon and taints, GPUs allocatable, the Ready condition."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    labels = meta.get("labels") or {}
    if label_keys is not None:
        labels = {k: _intern(labels[k]) for k in label_keys if k in labels}
    kept: Obj = {"name": _intern(str(meta.get("name", ""))), "labels": labels}
    for key in ("resourceVersion", "deletionTimestamp"):
        if meta.get(key):
            kept[key] = meta[key]
    out: Obj = {"apiVersion": "v1", "kind": "Node", "metadata": kept}
    slim_spec = {k: spec[k] for k in ("unschedulable", "taints") if spec.get(k)}
    if slim_spec:
        out["spec"] = slim_spec
    gpus = (status.get("allocatable") or {}).get(GPU)
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    out["status"] = {
        "allocatable": {GPU: gpus} if gpus is not None else {},
        "conditions": [{k: c[k] for k in ("type", "status", "lastTransitionTime") if k in c} for c in ready],
    }
    return out


def slim_pod(pod: Obj) -> Obj:
    """A pod with only what `pod_obs`, `ending` and the agent read: name, namespace, jobtree's labels,
    the leases annotation, deletion, node, GPUs asked, phase, reason, the DisruptionTarget condition,
    and how each container ended."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    labels = {k: _intern(v) for k, v in (meta.get("labels") or {}).items() if k.startswith(GROUP)}
    leases = (meta.get("annotations") or {}).get(LEASES_ANNOTATION)
    kept: Obj = {
        "name": meta.get("name"),
        "namespace": _intern(str(meta.get("namespace") or "")),
        "labels": labels,
    }
    if leases is not None:
        kept["annotations"] = {LEASES_ANNOTATION: leases}
    for key in ("resourceVersion", "deletionTimestamp"):
        if meta.get(key):
            kept[key] = meta[key]
    gpus = gpu_request(pod)
    slim_spec: Obj = {"nodeName": _intern(str(spec.get("nodeName") or ""))}
    if gpus:
        slim_spec["containers"] = [{"name": "gpus", "resources": {"limits": {GPU: gpus}}}]
    slim_status: Obj = {k: status[k] for k in ("phase", "reason") if status.get(k)}
    conditions = [c for c in status.get("conditions") or [] if c.get("type") == DISRUPTION_TARGET]
    if conditions:
        slim_status["conditions"] = [{k: c.get(k) for k in ("type", "status", "reason")} for c in conditions]
    ended = [
        {"state": {"terminated": {k: done.get(k) for k in ("exitCode", "reason")}}}
        for c in status.get("containerStatuses") or []
        if (done := (c.get("state") or {}).get("terminated"))
    ]
    if ended:
        slim_status["containerStatuses"] = ended
    return {"apiVersion": "v1", "kind": "Pod", "metadata": kept, "spec": slim_spec, "status": slim_status}


def _intern(value: Any) -> Any:
    """Label values repeat across thousands of nodes and pods: one string object each."""
    return sys.intern(value) if isinstance(value, str) else value


# ---------------------------------------------------------------------------------- workload


def workload(
    pods: Iterable[PodObs], leases: Iterable[Lease], healthy: set[str], schedulable: set[str]
) -> tuple[list[WorkloadEvent], list[str]]:
    """Per open group on the `healthy` nodes (present, not fenced): `Fail` when one of its pods
    failed, `Succeed` when every pod succeeded, else a `Disrupt` per pod of it that was disrupted
    (on a node not `schedulable`, a missing pod too: drained); and the pods its open leases hold
    that are missing on `schedulable` nodes (apply re-creates them).

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
        failed: PodObs | None = None
        done = 0
        disrupted: list[tuple[str, str]] = []  # (node, reason)
        for (node, role), names in sorted(slices.items()):
            found = seen.get((run, group, node, role))
            if found is None or found.leases != names:
                if node not in schedulable:
                    disrupted.append((node, DELETED))
                elif found is None:
                    missing.append(f"{run} group {group} on {node}")
                continue
            if found.ending == WORKLOAD_FAILED and failed is None:
                failed = found
            elif found.ending == COMPLETED:
                done += 1
            elif found.ending == DISRUPTED:
                disrupted.append((node, found.reason))
        if failed is not None:
            events.append(WorkloadEvent(run, "Fail", group, failed.node, failed.reason))
        elif done and done == len(slices):
            events.append(WorkloadEvent(run, "Succeed", group))
        else:
            events += [WorkloadEvent(run, "Disrupt", group, node, reason) for node, reason in disrupted]
    return events, missing


def _quantity(value: Any) -> int:
    """A GPU count quantity (`"8"`); anything else counts as none."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def ready_since(status: Obj) -> tuple[bool, int | None]:
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
