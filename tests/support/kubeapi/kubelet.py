"""The emulated kubelet: pod phases and node readiness written through the API's /status, as a kubelet would.

A test hook on each server (`server.kubelet`). Writes go through the same registry path as a
`PUT .../status` from a real kubelet (field manager `kubelet`, a new resourceVersion, watch
events) but are not HTTP requests, so they stay out of the request log. With kubelet emulation
on, it also finishes graceful pod deletions. It never schedules pods: a pod's `spec.nodeName` is
whatever its creator set.
"""

from __future__ import annotations

from typing import Any

from tests.support.kubeapi import deletion
from tests.support.kubeapi.admission import Call
from tests.support.kubeapi.registry import Registry

Obj = dict[str, Any]
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


class Kubelet:
    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def _call(self, plural: str, namespace: str, name: str) -> Call:
        rt = self._registry.catalog.builtin(plural)
        return Call(rt, namespace, name, "status", "kubelet")

    def set_phase(
        self,
        namespace: str,
        name: str,
        phase: str,
        *,
        reason: str = "",
        message: str = "",
        pod_ip: str = "10.0.0.10",
    ) -> Obj:
        """Report a pod's phase with the conditions and container states a kubelet reports with it."""
        if phase not in PHASES:
            raise ValueError(f"unknown pod phase {phase!r}; want one of {PHASES}")
        now = self._registry.stamp()

        def report(pod: Obj) -> None:
            status = pod.setdefault("status", {})
            ready = phase == "Running"
            status["phase"] = phase
            status.setdefault("startTime", now)
            if phase != "Pending":
                status["podIP"] = pod_ip
                status["podIPs"] = [{"ip": pod_ip}]
            for key, value in (("reason", reason), ("message", message)):
                if value:
                    status[key] = value
                else:
                    status.pop(key, None)
            status["conditions"] = [
                _condition("PodScheduled", True, now),
                _condition("Initialized", phase != "Pending", now),
                _condition("ContainersReady", ready, now),
                _condition("Ready", ready, now),
            ]
            status["containerStatuses"] = [
                _container_status(c, phase, now) for c in (pod.get("spec") or {}).get("containers") or []
            ]

        return self._registry.write_as(self._call("pods", namespace, name), report).body

    def set_node_ready(self, name: str, ready: bool, *, reason: str = "") -> Obj:
        """Report a node's Ready condition (True, or False with `reason`, as a kubelet or the node controller would)."""
        now = self._registry.stamp()

        def report(node: Obj) -> None:
            conditions = [
                c for c in (node.setdefault("status", {}).get("conditions") or []) if c.get("type") != "Ready"
            ]
            previous: Obj = next(
                (c for c in node["status"].get("conditions") or [] if c.get("type") == "Ready"), {}
            )
            wanted = "True" if ready else "False"
            since = previous.get("lastTransitionTime") if previous.get("status") == wanted else now
            conditions.append(
                {
                    "type": "Ready",
                    "status": wanted,
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": since or now,
                    "reason": reason or ("KubeletReady" if ready else "KubeletNotReady"),
                    "message": "kubelet is posting ready status"
                    if ready
                    else "kubelet stopped posting node status",
                }
            )
            node["status"]["conditions"] = conditions

        return self._registry.write_as(self._call("nodes", "", name), report).body

    def terminating_pods(self) -> list[tuple[str, str]]:
        """(namespace, name) of pods deleted gracefully and waiting for the kubelet."""
        registry = self._registry
        rt = registry.catalog.builtin("pods")
        with registry.store.lock:
            return sorted(
                (o["metadata"]["namespace"], o["metadata"]["name"])
                for o in registry.store.objects(rt.storage_key)
                if o["metadata"].get("deletionTimestamp")
            )

    def finish_termination(self, namespace: str, name: str) -> None:
        """The kubelet has stopped the pod's containers: confirm the deletion (grace period 0)."""
        rt = self._registry.catalog.builtin("pods")
        deletion.delete(self._registry, Call(rt, namespace, name, "", "kubelet"), {"gracePeriodSeconds": 0})


def _condition(kind: str, true: bool, now: str) -> Obj:
    return {
        "type": kind,
        "status": "True" if true else "False",
        "lastProbeTime": None,
        "lastTransitionTime": now,
    }


def _container_status(container: Obj, phase: str, now: str) -> Obj:
    state: Obj
    if phase == "Running":
        state = {"running": {"startedAt": now}}
    elif phase in ("Succeeded", "Failed"):
        code = 0 if phase == "Succeeded" else 1
        state = {
            "terminated": {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": now,
                "finishedAt": now,
            }
        }
    else:
        state = {"waiting": {"reason": "ContainerCreating"}}
    return {
        "name": container.get("name", ""),
        "image": container.get("image", ""),
        "imageID": "",
        "ready": phase == "Running",
        "started": phase == "Running",
        "restartCount": 0,
        "state": state,
    }
