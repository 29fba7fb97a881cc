"""The 10,000-node rows' harness: realistic nodes jobtree reads as a GPU cluster's, the template-style fleet on one cluster, the rows' verdicts."""

from __future__ import annotations

import json
from typing import Any

import yaml

from bench import cluster10k, generate, gpunodes
from reconciler.cluster.observations import node_obs
from schemas import fleetcheck
from tests.support.controlplane.nodes import TOPOLOGY_LABELS


def test_a_node_is_about_20_kb_and_the_same_name_gives_the_same_bytes() -> None:
    node = gpunodes.gpu_node("r1c1d000-n07", cluster="fleet", region="us-west", clique="r1c1d000")
    size = len(json.dumps(node))
    assert 18_000 <= size <= 24_000, size
    again = gpunodes.gpu_node("r1c1d000-n07", cluster="fleet", region="us-west", clique="r1c1d000")
    assert json.dumps(again) == json.dumps(node)
    other = gpunodes.gpu_node("r1c1d000-n08", cluster="fleet", region="us-west", clique="r1c1d000")
    assert other["status"]["nodeInfo"]["systemUUID"] != node["status"]["nodeInfo"]["systemUUID"]
    assert len(node["status"]["images"]) == 50  # the kubelet's nodeStatusMaxImages
    assert node["metadata"]["labels"]["kwok.x-k8s.io/node"] == "fake"


def test_jobtree_reads_a_realistic_node_through_the_gfd_topology_labels() -> None:
    node = gpunodes.gpu_node("r1c1d000-n07", cluster="fleet", region="us-west", clique="r1c1d000")
    obs, problem = node_obs(node, TOPOLOGY_LABELS, "fleet")
    assert problem is None and obs is not None
    assert obs.gpus == 8 and obs.ready and not obs.cordoned
    assert obs.labels == {
        "region": "us-west",
        "fabric.domain": "r1c1d000",
        "gpu.flavor": "H100-80GB",
        "cluster": "fleet",
    }


def test_ten_thousand_nodes_are_the_generated_fleet_at_scale_0_8() -> None:
    fleet = generate.build(7, 0.8)
    assert fleet.gpus == 80_000 and len(fleet.domains) == 200
    names = [n["metadata"]["name"] for n in gpunodes.fleet(fleet.domains[:2], "fleet")]
    assert len(names) == 100 and names[0] == f"{fleet.domains[0]['name']}-n00"  # as the inventory names them


def test_the_one_cluster_repository_is_valid_and_every_run_carries_the_template_pod_spec() -> None:
    fleet = generate.build(7, 0.01)
    files = cluster10k.repo_files(fleet)
    assert "inventory/nodes.yaml" not in files
    checked = fleetcheck.check_fleet({p: t.encode() for p, t in files.items()})
    assert [str(d) for d in checked.diagnostics] == []
    config = yaml.safe_load(files["jobtree.yaml"])
    assert config["spec"]["clusters"] == [
        {"name": "fleet", "context": "fleet", "topologyLabels": TOPOLOGY_LABELS}
    ]
    template = yaml.safe_load(cluster10k.TEMPLATE_RUN.read_text())["spec"]["template"]
    runs = [yaml.safe_load(t) for p, t in files.items() if p.startswith("runs/")]
    assert len(runs) == len(fleet.runs) and all(r["spec"]["template"] == template for r in runs)
    selectors = [e["selector"] for p, t in files.items() if p.startswith("budgets/")
                 for e in yaml.safe_load(t)["spec"].get("envelopes") or []]  # fmt: skip
    assert selectors and all("cluster" not in s for s in selectors)


RESULT: dict[str, Any] = {
    "nodes": 10_000, "nodeKB": 20.9, "gpus": 80_000, "runs": 4_000, "createNodes": 50.0, "pods": 9_000,
    "podsPerSecond": 250.0, "loadBefore": [2.5, 2.0, 1.0], "loadAfter": [3.5, 2.0, 1.0],
    "reconcile": {"seconds": 12.0, "cpu": 9.0, "rssMB": 900.0, "reads": 4, "writes": 0, "changed": 0},
    "first": {"seconds": 36.0, "cpu": 20.0, "rssMB": 1000.0, "reads": 20, "writes": 18_000, "changed": 9_500},
    "settle": {"seconds": 11.0, "cpu": 9.0, "rssMB": 950.0, "reads": 21, "writes": 0, "changed": 0},
    "unchanged": {"seconds": 9.5, "cpu": 8.0, "rssMB": 950.0, "reads": 21, "writes": 0, "changed": 0,
                  "nodePages": 20, "podPages": 18},
}  # fmt: skip


def test_the_rows_judge_pods_per_second_and_the_unchanged_pass() -> None:
    rows = {r["name"]: r for r in cluster10k.rows(RESULT)}
    first, unchanged = (
        rows["10k nodes: apply, first (empty cluster)"],
        rows["10k nodes: reconcile --apply, nothing changed"],
    )
    assert first["verdict"] == "meets target" and first["throughput"].startswith("250 pods/s (9,000 pods)")
    assert unchanged["verdict"] == "meets target" and unchanged["rss"] == "950 MB"
    assert "(nodes listed in 20 pages, pods in 18)" in unchanged["note"]
    slow = {r["name"]: r for r in cluster10k.rows({**RESULT, "podsPerSecond": 199.9,
                                                    "unchanged": {**RESULT["unchanged"], "seconds": 10.01}})}  # fmt: skip
    assert slow[first["name"]]["verdict"] == "MISSES target"
    assert slow[unchanged["name"]]["verdict"] == "MISSES target"
    assert (
        "load average 2.5 before, 3.5 after" in rows["10k nodes: created (parallel, official client)"]["note"]
    )
