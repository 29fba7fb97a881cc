"""The emulated kubelet and the coordination Lease the agent elects its leader with."""

from __future__ import annotations

from kubernetes import client, watch
from kubernetes.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from tests.cluster.manifests import a_node, a_pod
from tests.support.kubeapi import KubeApiServer


def test_the_kubelet_reports_a_running_pod_with_ready_conditions_through_status(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    core.create_namespaced_pod("default", a_pod("p"))
    start = core.read_namespaced_pod("p", "default").metadata.resource_version
    server.kubelet.set_phase("default", "p", "Running")
    pod = core.read_namespaced_pod("p", "default")
    assert pod.status.phase == "Running"
    assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
    assert pod.status.container_statuses[0].state.running is not None
    kubelet_entry = next(m for m in pod.metadata.managed_fields if m.manager == "kubelet")
    assert (kubelet_entry.operation, kubelet_entry.subresource) == ("Update", "status")
    seen = []
    watcher = watch.Watch()
    for event in watcher.stream(
        core.list_namespaced_pod, "default", resource_version=start, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].status.phase))
        watcher.stop()
    assert seen == [("MODIFIED", "Running")]


def test_a_failed_pod_reports_a_terminated_container_with_a_non_zero_exit_code(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    core.create_namespaced_pod("default", a_pod("p"))
    server.kubelet.set_phase("default", "p", "Failed", reason="Error")
    pod = core.read_namespaced_pod("p", "default")
    assert (pod.status.phase, pod.status.reason) == ("Failed", "Error")
    assert pod.status.container_statuses[0].state.terminated.exit_code == 1


def test_a_node_goes_not_ready_with_a_fresh_transition_time(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed(a_node("n1"))
    server.kubelet.set_node_ready("n1", True)
    server.kubelet.set_node_ready("n1", False)
    ready = next(c for c in core.read_node("n1").status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "KubeletNotReady")


def test_the_clients_lease_lock_elects_one_holder_and_refuses_a_stale_update(api: client.ApiClient) -> None:
    first, second = LeaseLock("agent", "default", "a"), LeaseLock("agent", "default", "b")
    first.api_instance = second.api_instance = client.CoordinationV1Api(api)
    record = LeaderElectionRecord("a", "15", "2030-01-01 00:00:00.250000", "2030-01-01 00:00:00.250000")
    assert first.create("agent", "default", record) is True
    assert (
        second.create(
            "agent", "default", LeaderElectionRecord("b", "15", record.acquire_time, record.renew_time)
        )
        is False
    )
    found, held = second.get("agent", "default")
    assert (found, held.holder_identity) == (True, "a")
    first.get("agent", "default")
    renewed = LeaderElectionRecord("a", "15", record.acquire_time, "2030-01-01 00:00:05.500000")
    assert first.update("agent", "default", renewed) is True
    taken = LeaderElectionRecord("b", "15", "2030-01-01 00:00:20.125000", "2030-01-01 00:00:20.125000")
    assert second.update("agent", "default", taken) is False
