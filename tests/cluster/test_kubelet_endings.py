"""Pods end as kubelets end them (DESIGN §7.6): a disruption never fails a run, a drained pod never comes back to its cordoned node.

The fleet of `test_nodes_and_workloads`: tenant `t` (org:t), a 32-GPU H100 envelope, runs in
groups of 8 GPUs on 8-GPU nodes of one fabric domain (one pod per group), nodes packed emptiest
first, then by name: `r1` holds group 0 on n1 and group 1 on n2 (with spares: on n3 and n4). Every
pod status is written as the kubelet (or the API server's Eviction API) writes it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster.test_nodes_and_workloads import closures
from tests.support.clusterfleet import T0, ClusterFleet, a_fleet, api, pods, sixteen, spared_fleet
from tests.support.controlplane import Cluster

DAY = "2026-03-02"


def workload_rows(fleet: ClusterFleet) -> list[tuple[Any, ...]]:
    """The ledger's Workload events: run, group, node, outcome, Kubernetes reason."""
    return [
        (r["run"], r.get("group"), r.get("node"), r["outcome"], r.get("reason"))
        for r in fleet.ledger(DAY)
        if r["event"] == "Workload"
    ]


def uid(server: Cluster, name: str) -> str | None:
    pod = server.get("v1", "Pod", name, "t")
    return None if pod is None else str(pod["metadata"]["uid"])


def drain(fleet: ClusterFleet, server: Cluster, node: str, pod: str) -> None:
    """`kubectl drain`: cordon the node, evict its pod through the Eviction API, wait until it is gone."""
    core = api(fleet)
    core.patch_node(node, {"spec": {"unschedulable": True}})
    core.create_namespaced_pod_eviction(
        pod, "t", client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace="t"))
    )
    deadline = time.monotonic() + 30
    while server.get("v1", "Pod", pod, "t") is not None:
        assert time.monotonic() < deadline, f"{pod} was not removed after its eviction"
        time.sleep(0.05)


TERMINATION_BY_KUBELET = {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}


def placed(server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClusterFleet:
    """r1 (16 GPUs, no spare) on n1 and n2, after its first pass."""
    fleet = a_fleet(server, tmp_path, monkeypatch, 2, r1=sixteen("r1"))
    fleet.reconcile(T0)
    return fleet


def test_a_pod_the_kubelet_evicted_is_re_created_in_place_and_the_run_goes_on(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = placed(server, tmp_path, monkeypatch)
    before = uid(server, "r1-g1-n2")
    server.kubelet.set_phase("t", "r1-g1-n2", "Failed", reason="Evicted", conditions=[
        TERMINATION_BY_KUBELET | {"message": "The node was low on resource: memory."}])  # fmt: skip
    fleet.reconcile(T0 + 60)
    assert fleet.status("t/r1")["phase"] == "Running"
    assert closures(fleet, "t/r1") == [(0, "n1", "Active", None), (1, "n2", "Active", None)]
    assert pods(server) == ["r1-g0-n1", "r1-g1-n2"]
    assert uid(server, "r1-g1-n2") not in (None, before)  # a new pod, on the same node
    assert workload_rows(fleet) == [("t/r1", 1, "n2", "Disrupted", "Evicted")]


def test_a_pod_the_kubelet_refused_for_gpus_still_held_is_re_created_and_never_fails_the_run(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = placed(server, tmp_path, monkeypatch)
    server.kubelet.set_phase("t", "r1-g0-n1", "Failed", reason="OutOfnvidia.com/gpu")
    fleet.reconcile(T0 + 60)
    assert fleet.status("t/r1")["phase"] == "Running"
    pod = server.get("v1", "Pod", "r1-g0-n1", "t")
    assert pod is not None and pod["status"].get("phase") != "Failed"
    assert workload_rows(fleet) == [("t/r1", 0, "n1", "Disrupted", "OutOfnvidia.com/gpu")]


def test_a_container_that_exited_non_zero_fails_the_run_with_its_exit_code_in_the_ledger(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = placed(server, tmp_path, monkeypatch)
    server.kubelet.set_phase("t", "r1-g1-n2", "Failed", exit_code=2)
    fleet.reconcile(T0 + 60)
    assert fleet.status("t/r1")["phase"] == "Failed"
    assert closures(fleet, "t/r1") == [
        (0, "n1", "Active", "RunFailed"),
        (1, "n2", "Active", "WorkloadFailed"),
    ]
    assert workload_rows(fleet) == [("t/r1", 1, "n2", "Failed", "Error (exit code 2)")]


def test_a_drained_pod_moves_to_its_spare_and_never_back_onto_the_cordoned_node(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    drain(fleet, server, "n1", "r1-g0-n1")
    fleet.reconcile(T0 + 60)
    assert fleet.status("t/r1")["phase"] == "Running"
    assert pods(server) == ["r1-g0-n3", "r1-g1-n2", "r1-g1-spare-n4"]
    assert closures(fleet, "t/r1")[:3] == [
        (0, "n1", "Active", "NodeFailure"), (0, "n3", "Spare", "Swap"), (1, "n2", "Active", None),
    ]  # fmt: skip
    assert workload_rows(fleet) == [("t/r1", 0, "n1", "Disrupted", "Deleted")]
    node = server.get("v1", "Node", "n1")
    assert node is not None and node["spec"]["unschedulable"] is True  # still the operator's cordon
    fleet.reconcile(T0 + 120)
    assert pods(server) == ["r1-g0-n3", "r1-g1-n2", "r1-g1-spare-n4"]


def test_a_drained_pod_with_no_spare_requeues_its_run_never_fails_it(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = placed(server, tmp_path, monkeypatch)
    drain(fleet, server, "n1", "r1-g0-n1")
    fleet.reconcile(T0 + 60)
    status = fleet.status("t/r1")
    assert status["phase"] == "Pending"  # 16 GPUs no longer fit on the one schedulable node
    assert [c[3] for c in closures(fleet, "t/r1")] == ["NodeFailure", "RunFailed"]
    assert "r1-g0-n1" not in pods(
        server
    )  # (group 1's prune is all the cluster runs: the mass-prune guard holds it)


def test_a_node_shutting_down_moves_its_group_to_the_spare(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    # graceful node shutdown: the kubelet fails its pods, then stops posting status
    server.kubelet.set_phase("t", "r1-g1-n2", "Failed", reason="Terminated", conditions=[
        TERMINATION_BY_KUBELET | {"message": "Pod was terminated in response to imminent node shutdown."}])  # fmt: skip
    server.kubelet.set_node_ready("n2", False, reason="KubeletNotReady")
    fleet.reconcile(T0 + 60)
    assert fleet.status("t/r1")["phase"] == "Running"
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n4"]
    assert workload_rows(fleet) == [("t/r1", 1, "n2", "Disrupted", "Terminated")]


def test_apply_never_puts_a_drained_pod_back_on_its_cordoned_node(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = placed(server, tmp_path, monkeypatch)
    drain(fleet, server, "n1", "r1-g0-n1")
    done = fleet.apply()  # the commit still holds the pod on n1: no pass has planned since the drain
    assert done.clusters[0].held == [
        "Pod t/r1-g0-n1 not created: node n1 is cordoned (the next pass moves it)"
    ]
    assert pods(server) == ["r1-g1-n2"]
