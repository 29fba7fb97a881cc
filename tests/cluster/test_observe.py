"""Observing a cluster (DESIGN §7.2) through the official client: nodes and this fleet's pods become the planner's observations."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from planner.reasons import OpenReason, Role
from planner.world import Lease, NodeObs, Payer, WorkloadEvent
from reconciler.cluster import connect, observe
from reconciler.cluster.errors import Unreachable
from tests.support.clusterfleet import FAST, OUT_OF_SERVICE, node
from tests.support.controlplane import Cluster, write_kubeconfig

GFD = {
    "region": "topology.kubernetes.io/region",
    "gpu.flavor": "nvidia.com/gpu.product",
    "fabric.domain": "nvidia.com/gpu.clique",
}


@pytest.fixture
def east(server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", {"east": server})))
    return server


def target(labels: dict[str, str] | None = None, fleet: str = "acme") -> connect.Target:
    keys = {k: k for k in ("region", "cluster", "fabric.domain", "gpu.flavor", "rack")} | (labels or {})
    return connect.Target("east", "east", fleet, keys, FAST)


def lease(run: str, group: int, node_name: str, name: str, role: Role = Role.ACTIVE) -> Lease:
    return Lease(
        name, run, group, role, node_name, (0, 1, 2, 3), Payer("org:t", "t", "h100"), 0, OpenReason.START
    )


def pod(name: str, run: str, group: int, node_name: str, leases: str, role: str = "Active") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": run.split("/")[0],
            "labels": {
                "app.kubernetes.io/managed-by": "jobtree",
                "rq.davidlangworthy.io/fleet": "acme",
                "rq.davidlangworthy.io/run": run.split("/")[1],
                "rq.davidlangworthy.io/group-index": str(group),
                "rq.davidlangworthy.io/role": role,
            },
            "annotations": {"rq.davidlangworthy.io/leases": leases},
        },
        "spec": {"nodeName": node_name, "containers": [{"name": "workload", "image": "x"}]},
    }


def seen(
    east: Cluster, t: connect.Target, leases: Sequence[Lease] = (), known: Iterable[str] = ()
) -> observe.Observation:
    """What one pass observes of `east`: `leases` open, on nodes `known` from the last observation."""
    return observe.observe(connect.api(t), t, leases, known, 0, None)


def test_nodes_are_read_through_the_clusters_topology_labels_and_their_gpu_capacity(
    east: Cluster,
) -> None:
    gfd = {GFD["region"]: "us-east", GFD["gpu.flavor"]: "H100-80GB", GFD["fabric.domain"]: "clique-7"}
    east.seed(node("g1", labels=gfd), node("cpu-only", gpus=0, labels=gfd))
    found = seen(east, target(GFD))
    want = NodeObs(
        "g1", 8, {"region": "us-east", "gpu.flavor": "H100-80GB", "fabric.domain": "clique-7", "cluster": "east"},
        not_ready_since=None,
    )  # fmt: skip
    assert found.nodes == (
        want,
    )  # the CPU node is not part of the fleet, and the cluster is the one observed
    assert found.problems == ()


def test_a_node_missing_a_topology_label_is_reported_and_handed_over_without_it_never_fatal(
    east: Cluster,
) -> None:
    east.seed(node("g1", labels={GFD["region"]: "us-east", GFD["gpu.flavor"]: "H100-80GB"}), node("g2"))
    found = seen(east, target(GFD))
    assert [n.name for n in found.nodes] == ["g1", "g2"]
    assert "fabric.domain" not in found.nodes[0].labels  # the planner leaves it out, and its leases alone
    assert found.problems == (
        "node g1 in cluster east lacks label nvidia.com/gpu.clique (fabric.domain); it is left out until labelled",
        "node g2 in cluster east lacks label topology.kubernetes.io/region (region), nvidia.com/gpu.clique "
        "(fabric.domain), nvidia.com/gpu.product (gpu.flavor); it is left out until labelled",
    )


def test_a_node_labelled_with_another_clusters_name_is_left_out_and_named(east: Cluster) -> None:
    east.seed(node("g1", cluster="west"), node("g2", cluster="east"))
    found = seen(east, target())
    assert {n.name: n.labels.get("cluster") for n in found.nodes} == {"g1": None, "g2": "east"}
    assert found.problems == (
        "node g1 in cluster east is labelled cluster=west; it is left out until the label names east (or is removed)",
    )


def test_health_is_ready_and_its_transition_time_the_cordon_the_out_of_service_taint_and_deletion(
    east: Cluster,
) -> None:
    taint = OUT_OF_SERVICE
    east.seed(
        node("ready"),
        node("down", ready=False),
        node("cordoned") | {"spec": {"unschedulable": True}},
        node("fenced") | {"spec": {"taints": [taint]}},
    )
    by_name = {n.name: n for n in seen(east, target()).nodes}
    assert (by_name["ready"].ready, by_name["ready"].not_ready_since) == (True, None)
    assert (by_name["down"].ready, by_name["down"].not_ready_since) == (False, 1772438400)  # 08:00Z
    assert by_name["cordoned"].cordoned and not by_name["cordoned"].out_of_service
    assert by_name["fenced"].out_of_service


def test_a_failed_pod_fails_its_group_and_a_group_whose_pods_all_succeeded_completed(
    east: Cluster,
) -> None:
    east.seed(node("n1"), node("n2"), node("n3"))
    east.seed(
        pod("a-g0-n1", "t/a", 0, "n1", "a0"),
        pod("a-g1-n2", "t/a", 1, "n2", "a1"),
        pod("b-g0-n3", "t/b", 0, "n3", "b0"),
    )
    east.kubelet.set_phase("t", "a-g0-n1", "Succeeded")
    east.kubelet.set_phase("t", "a-g1-n2", "Running")
    east.kubelet.set_phase("t", "b-g0-n3", "Failed")
    leases = [lease("t/a", 0, "n1", "a0"), lease("t/a", 1, "n2", "a1"), lease("t/b", 0, "n3", "b0")]
    found = seen(east, target(), leases, {"n1", "n2", "n3"})
    assert found.workload == (WorkloadEvent("t/a", "Succeed", 0), WorkloadEvent("t/b", "Fail", 0))


def test_a_pod_the_record_holds_but_the_cluster_lacks_is_named_and_is_no_outcome(east: Cluster) -> None:
    east.seed(node("n1"))
    found = seen(east, target(), [lease("t/a", 0, "n1", "a0")], {"n1"})
    assert (found.workload, found.missing) == ((), ("t/a group 0 on n1",))


def test_an_older_pod_of_the_same_name_or_a_pod_on_a_failed_node_says_nothing_about_the_workload(
    east: Cluster,
) -> None:
    taint = {"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}
    east.seed(node("n1"), node("n2") | {"spec": {"taints": [taint]}})
    east.seed(pod("a-g0-n1", "t/a", 0, "n1", "an-older-lease"), pod("b-g0-n2", "t/b", 0, "n2", "b0"))
    east.kubelet.set_phase("t", "a-g0-n1", "Failed")
    east.kubelet.set_phase("t", "b-g0-n2", "Failed")  # its node failed: failover moves it, the run goes on
    found = seen(east, target(), [lease("t/a", 0, "n1", "a0"), lease("t/b", 0, "n2", "b0")], {"n1", "n2"})
    assert found.workload == ()


def test_another_fleets_pods_are_not_this_fleets_workload(east: Cluster) -> None:
    east.seed(node("n1"))
    theirs = pod("a-g0-n1", "t/a", 0, "n1", "a0")
    theirs["metadata"]["labels"]["rq.davidlangworthy.io/fleet"] = "other"
    east.seed(theirs)
    east.kubelet.set_phase("t", "a-g0-n1", "Failed")
    found = seen(east, target(), [lease("t/a", 0, "n1", "a0")], {"n1"})
    assert (found.workload, found.missing) == ((), ("t/a group 0 on n1",))


def test_a_cluster_listing_no_gpu_node_while_leases_are_open_there_is_not_believed(
    east: Cluster,
) -> None:
    with pytest.raises(
        Unreachable, match="lists no GPU node, yet 1 open leases are on nodes last observed there"
    ):
        seen(east, target(), [lease("t/a", 0, "n1", "a0")], {"n1"})
