"""What a cluster shows moves the fleet (DESIGN §7.2, §4.8): nodes added, deleted, fenced or cordoned; workloads that finish.

Each fleet has tenant `t` (org:t) with a 32-GPU H100 envelope and runs in groups of 8 GPUs on
8-GPU nodes of one fabric domain A, so every group is one pod on one node; nodes are packed
emptiest first, then by name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clusterfleet import (
    OUT_OF_SERVICE,
    T0,
    ClusterFleet,
    a_fleet,
    api,
    manifest,
    node,
    pods,
    sixteen,
    spared_fleet,
)
from tests.support.controlplane import Cluster


def closures(fleet: ClusterFleet, run: str) -> list[tuple[int, str, str, str | None]]:
    """(group, node, role, closure) of every lease of a run, in start order."""
    return [
        (x["spec"]["group"], x["spec"]["slice"]["nodes"][0].split("#")[0], x["spec"]["slice"]["role"],
         x["status"].get("closureReason"))
        for x in fleet.leases(run)
    ]  # fmt: skip


def test_a_node_added_to_the_cluster_is_used_by_the_next_pass(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = a_fleet(server, tmp_path, monkeypatch, 2, r1=sixteen("r1"), r2=sixteen("r2"))
    fleet.reconcile(T0)
    assert fleet.status("t/r2")["phase"] == "Pending"  # two nodes: r1 holds both
    server.seed(node("n3"), node("n4"))
    added = fleet.reconcile(T0 + 60)
    assert added.commit is not None
    assert "observed east: added n3, n4" in fleet.repo[added.commit].message
    assert fleet.status("t/r2")["phase"] == "Running"
    assert pods(server) == ["r1-g0-n1", "r1-g1-n2", "r2-g0-n3", "r2-g1-n4"]
    assert [n["name"] for n in fleet.file("state/observed/east.yaml")[0]["nodes"]] == ["n1", "n2", "n3", "n4"]


def test_a_deleted_node_fails_over_its_group_onto_the_hot_spare_and_the_pod_moves(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # r1: group 0 on n1, group 1 on n2; their 8-GPU spares after them, on n3 and n4
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n2", "r1-g1-spare-n4"]
    server.kubelet.set_phase(
        "t", "r1-g0-n1", "Failed"
    )  # its node is gone: failover's, not a workload failure
    api(fleet).delete_node("n1")
    swapped = fleet.reconcile(T0 + 60)
    assert swapped.commit is not None
    assert fleet.status("t/r1")["phase"] == "Running"
    assert fleet.status("t/r1")["message"] == "group 0 swapped to spare after node failure"
    assert closures(fleet, "t/r1") == [
        (0, "n1", "Active", "NodeFailure"),
        (0, "n3", "Spare", "Swap"),
        (1, "n2", "Active", None),
        (1, "n4", "Spare", None),
        (0, "n3", "Active", None),
    ]
    assert pods(server) == ["r1-g0-n3", "r1-g1-n2", "r1-g1-spare-n4"]


def test_a_node_tainted_out_of_service_fails_over_and_is_cordoned_by_jobtree(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    api(fleet).patch_node("n2", {"spec": {"taints": [OUT_OF_SERVICE]}})
    mark = server.requests.mark()
    fleet.reconcile(T0 + 60)
    assert fleet.status("t/r1")["message"] == "group 1 swapped to spare after node failure"
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n4"]
    deleted = {
        r.path.rsplit("/", 1)[1]: r.options
        for r in server.requests.writes(since=mark)
        if r.method == "DELETE"
    }
    assert deleted["r1-g1-n2"].get("gracePeriodSeconds") == 0  # no kubelet on n2 will finish it
    assert "gracePeriodSeconds" not in deleted["r1-g1-spare-n4"]  # the spare's kubelet stops it gracefully
    assert fleet.file("state/fleet.yaml")[0]["cordoned"] == ["n2"]
    fenced = server.get("v1", "Node", "n2")
    assert fenced is not None and fenced["spec"]["unschedulable"] is True  # cordoned for later repair


def test_a_fixed_width_run_whose_node_fails_with_no_spare_fails(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = a_fleet(server, tmp_path, monkeypatch, 4, r1=sixteen("r1"))
    fleet.reconcile(T0)
    api(fleet).patch_node("n1", {"spec": {"taints": [OUT_OF_SERVICE]}})
    fleet.reconcile(T0 + 60)
    assert fleet.status("t/r1")["phase"] == "Failed"
    assert closures(fleet, "t/r1") == [(0, "n1", "Active", "NodeFailure"), (1, "n2", "Active", "RunFailed")]
    assert pods(server) == []


def test_a_cordoned_node_only_stops_new_placements(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = a_fleet(server, tmp_path, monkeypatch, 4, r1=sixteen("r1"))
    fleet.reconcile(T0)
    for name in pods(server):
        server.kubelet.wait_started("t", name)
    running = {name: server.get("v1", "Pod", name, "t") for name in pods(server)}
    api(fleet).patch_node("n1", {"spec": {"unschedulable": True}})  # kubectl cordon n1, under r1's group 0
    api(fleet).patch_node("n3", {"spec": {"unschedulable": True}})
    fleet.change({"runs/t/r2.yaml": manifest(sixteen("r2"))}, "r2\n")
    fleet.reconcile(T0 + 60)
    assert fleet.status("t/r1")["phase"] == "Running"
    assert {name: server.get("v1", "Pod", name, "t") for name in ["r1-g0-n1", "r1-g1-n2"]} == running
    r2 = fleet.status("t/r2")
    assert r2["phase"] == "Pending" and "cluster short by 8 GPUs" in r2["message"]  # only n4 takes work
    api(fleet).patch_node("n3", {"spec": {"unschedulable": False}})
    fleet.reconcile(T0 + 120)
    assert fleet.status("t/r2")["phase"] == "Running"
    assert pods(server) == ["r1-g0-n1", "r1-g1-n2", "r2-g0-n3", "r2-g1-n4"]


def test_a_completed_workload_frees_its_gpus_for_the_run_waiting_in_the_same_pass(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = a_fleet(server, tmp_path, monkeypatch, 2, r1=sixteen("r1"), r2=sixteen("r2"))
    fleet.reconcile(T0)
    for name in ["r1-g0-n1", "r1-g1-n2"]:
        server.kubelet.set_phase("t", name, "Succeeded")
    done = fleet.reconcile(T0 + 60)
    assert done.commit is not None
    assert fleet.status("t/r1")["phase"] == "Succeeded"
    assert [c[3] for c in closures(fleet, "t/r1")] == ["Completed", "Completed"]
    assert fleet.status("t/r2")["phase"] == "Running"
    assert pods(server) == ["r2-g0-n1", "r2-g1-n2"]
    rows = fleet.ledger("2026-03-02")
    observed = [(r["run"], r["group"], r["outcome"], r["cluster"]) for r in rows if r["event"] == "Workload"]
    assert observed == [("t/r1", 0, "Succeeded", "east"), ("t/r1", 1, "Succeeded", "east")]


def test_a_failed_workload_ends_its_runs_leases(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = a_fleet(server, tmp_path, monkeypatch, 2, r1=sixteen("r1"))
    fleet.reconcile(T0)
    server.kubelet.set_phase("t", "r1-g1-n2", "Failed")
    fleet.reconcile(T0 + 60)
    status = fleet.status("t/r1")
    assert status["phase"] == "Failed" and "group 1" in status["message"]
    assert closures(fleet, "t/r1") == [
        (0, "n1", "Active", "RunFailed"),
        (1, "n2", "Active", "WorkloadFailed"),
    ]
    assert pods(server) == []
