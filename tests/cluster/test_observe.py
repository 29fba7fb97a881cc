"""Observing a cluster (DESIGN §7.2) through the official client: nodes and this fleet's pods become the planner's observations."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from planner.reasons import OpenReason, Role
from planner.world import Lease, NodeObs, Payer, WorkloadEvent
from reconciler.cluster import api as clusterapi
from reconciler.cluster import connect, kinds, observations, observe
from reconciler.cluster.errors import Unreachable
from tests.support.clusterfleet import FAST, OUT_OF_SERVICE, node
from tests.support.controlplane import Cluster, write_kubeconfig
from tests.support.controlplane.nodes import TOPOLOGY_LABELS, gpu_node, realistic

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
    east.kubelet.set_phase("t", "b-g0-n3", "Failed", exit_code=1)
    leases = [lease("t/a", 0, "n1", "a0"), lease("t/a", 1, "n2", "a1"), lease("t/b", 0, "n3", "b0")]
    found = seen(east, target(), leases, {"n1", "n2", "n3"})
    assert found.workload == (
        WorkloadEvent("t/a", "Succeed", 0),
        WorkloadEvent("t/b", "Fail", 0, "n3", "Error (exit code 1)"),
    )


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


def disruption_target(reason: str, message: str) -> dict[str, str]:
    """The condition the kubelet, the scheduler or the Eviction API adds to a pod it disrupts."""
    return {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": "2026-03-02T09:00:00Z"}  # fmt: skip


def test_pod_endings_are_read_as_a_kubelet_writes_them_each_with_its_kubernetes_reason(east: Cluster) -> None:
    """One group per ending, each a pod on its own node; the statuses are those kubelets (and the
    scheduler) write, sent through the API server's status subresource."""
    names = ["exit", "oom", "evicted", "refused", "admission", "shutdown", "preempted", "spec", "done"]
    east.seed(*(node(f"n-{n}") for n in names))
    east.seed(*(pod(f"{n}-g0", f"t/{n}", 0, f"n-{n}", f"{n}0") for n in names))
    k = east.kubelet
    k.set_phase("t", "exit-g0", "Failed", exit_code=3)  # the container exited non-zero
    k.set_phase("t", "oom-g0", "Failed", exit_code=137)
    k.set_phase("t", "evicted-g0", "Failed", reason="Evicted",  # node-pressure eviction
                conditions=[disruption_target("TerminationByKubelet", "The node was low on resource: memory.")])  # fmt: skip
    k.set_phase("t", "refused-g0", "Failed", reason="OutOfnvidia.com/gpu")  # admission: the GPUs not free yet
    k.set_phase("t", "admission-g0", "Failed", reason="UnexpectedAdmissionError")
    k.set_phase("t", "shutdown-g0", "Failed", reason="Terminated",  # graceful node shutdown
                conditions=[disruption_target("TerminationByKubelet", "Pod was terminated in response to imminent node shutdown.")])  # fmt: skip
    k.set_phase("t", "preempted-g0", "Running",
                conditions=[disruption_target("PreemptionByScheduler", "Kubernetes Scheduler: preempting")])  # fmt: skip
    k.set_phase("t", "spec-g0", "Failed", reason="SysctlForbidden")  # refused for its own spec: runs nowhere
    k.set_phase("t", "done-g0", "Succeeded", exit_code=0)
    leases = [lease(f"t/{n}", 0, f"n-{n}", f"{n}0") for n in names]
    found = seen(east, target(), leases, {f"n-{n}" for n in names})
    assert sorted(found.workload, key=lambda e: e.run) == [
        WorkloadEvent("t/admission", "Disrupt", 0, "n-admission", "UnexpectedAdmissionError"),
        WorkloadEvent("t/done", "Succeed", 0),
        WorkloadEvent("t/evicted", "Disrupt", 0, "n-evicted", "Evicted"),
        WorkloadEvent("t/exit", "Fail", 0, "n-exit", "Error (exit code 3)"),
        WorkloadEvent("t/oom", "Fail", 0, "n-oom", "Error (exit code 137)"),
        WorkloadEvent("t/preempted", "Disrupt", 0, "n-preempted", "PreemptionByScheduler"),
        WorkloadEvent("t/refused", "Disrupt", 0, "n-refused", "OutOfnvidia.com/gpu"),
        WorkloadEvent("t/shutdown", "Disrupt", 0, "n-shutdown", "Terminated"),
        WorkloadEvent("t/spec", "Fail", 0, "n-spec", "SysctlForbidden"),
    ]


def test_a_pod_drained_from_a_cordoned_node_is_a_disruption_and_one_missing_elsewhere_is_re_created(
    east: Cluster,
) -> None:
    east.seed(node("n1") | {"spec": {"unschedulable": True}}, node("n2"))
    found = seen(east, target(), [lease("t/a", 0, "n1", "a0"), lease("t/b", 0, "n2", "b0")], {"n1", "n2"})
    assert found.workload == (WorkloadEvent("t/a", "Disrupt", 0, "n1", "Deleted"),)
    assert found.missing == ("t/b group 0 on n2",)


def test_a_nodes_gpus_are_its_allocatable_less_what_other_fleets_pods_ask_for(east: Cluster) -> None:
    unhealthy = node("n1")
    unhealthy["status"]["allocatable"]["nvidia.com/gpu"] = "6"  # the device plugin took 2 GPUs out (Xid)
    east.seed(unhealthy, node("n2"), node("n3"))
    theirs = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "inference", "namespace": "serving"},
              "spec": {"nodeName": "n2", "containers": [
                  {"name": "a", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "3"}}},
                  {"name": "b", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "2"},
                                                           "limits": {"nvidia.com/gpu": "2"}}}]}}  # fmt: skip
    other_fleet = pod("x-g0-n3", "t/x", 0, "n3", "x0")
    other_fleet["metadata"]["labels"]["rq.davidlangworthy.io/fleet"] = "other"
    other_fleet["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    ours = pod("a-g0-n3", "t/a", 0, "n3", "a0")
    ours["spec"]["nodeName"] = "n1"
    ours["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "4"}}
    finished = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "batch", "namespace": "serving"},
                "spec": {"nodeName": "n1", "containers": [
                    {"name": "a", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}  # fmt: skip
    east.ensure_namespace("serving")
    east.seed(theirs, other_fleet, ours, finished)
    east.kubelet.set_phase("serving", "batch", "Succeeded", exit_code=0)  # ended: it holds nothing
    gpus = {n.name: n.gpus for n in seen(east, target()).nodes}
    assert gpus == {"n1": 6, "n2": 3, "n3": 0}  # this fleet's own pod on n1 is its to place, not a stranger's


def odd_nodes() -> list[dict[str, Any]]:
    """Nodes as a real GPU cluster's API server serves them, and every shape of what jobtree reads."""
    out = [realistic(gpu_node(f"g{i}", clique=f"c{i % 2}")) for i in range(3)]
    cordoned = realistic(gpu_node("cordoned"))
    cordoned["spec"] |= {"unschedulable": True, "taints": [{"key": OUT_OF_SERVICE, "effect": "NoExecute"}]}
    going = realistic(gpu_node("going"))
    going["metadata"]["deletionTimestamp"] = "2026-03-02T09:00:00Z"
    bare = {"metadata": {"name": "bare"}}  # no spec, no status, no labels
    nulls = {"metadata": {"name": "nulls", "labels": None}, "spec": None, "status": {"conditions": None}}
    return [*out, cordoned, going, bare, nulls]


@pytest.mark.parametrize("label_keys", [None, set(TOPOLOGY_LABELS.values())])
def test_a_node_decoded_into_the_fields_jobtree_reads_is_the_same_node_to_it(
    label_keys: set[str] | None,
) -> None:
    nodes = odd_nodes()
    page = orjson.dumps(
        {"kind": "NodeList", "metadata": {"resourceVersion": "7", "continue": "t"}, "items": nodes}
    )
    decoded = clusterapi.decoded_list(page, observations.NodeFields)
    assert decoded["metadata"] == {"resourceVersion": "7", "continue": "t"}
    assert [observations.slim_node(n, label_keys) for n in decoded["items"]] == [
        observations.slim_node(n, label_keys) for n in nodes
    ]
    kept = decoded["items"][0]
    assert "images" not in kept["status"] and "annotations" not in kept["metadata"]  # never built
    assert len(orjson.dumps(kept)) < len(orjson.dumps(nodes[0])) / 3


def test_a_node_list_that_does_not_fit_the_fields_is_decoded_whole() -> None:
    odd = {"metadata": {"name": "odd"}, "status": {"conditions": {}, "allocatable": {"nvidia.com/gpu": "8"}}}
    page = orjson.dumps({"metadata": {}, "items": [odd]})
    assert clusterapi.decoded_list(page, observations.NodeFields) == orjson.loads(page)
    with pytest.raises(ValueError):
        clusterapi.decoded_list(b"{not json", observations.NodeFields)


def test_nodes_listed_into_the_fields_jobtree_reads_observe_as_nodes_listed_whole(east: Cluster) -> None:
    east.seed(*[realistic(gpu_node(f"n{i}", clique=f"c{i % 3}")) for i in range(7)])
    api = connect.api(target(GFD))
    keys = set(TOPOLOGY_LABELS.values())
    whole, _ = api.list_all(kinds.NODE, keep=lambda n: observations.slim_node(n, keys))
    pages = list(api.pages(kinds.NODE, limit=3, shape=observations.NodeFields))
    assert len(pages) == 4 and pages[-1].items == [] and pages[-1].version
    assert [observations.slim_node(n, keys) for p in pages for n in p.items] == whole
