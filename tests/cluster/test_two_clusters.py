"""One fleet repository, two clusters (DESIGN §7.1, §7.3): each gets its rendered/<cluster>/ and its mirrors, one budget caps both.

Cluster `east` has fabric domain A (us-east: n1, n2), cluster `west` domain B (us-west: w1, w2),
all 8-GPU H100 nodes. Tenant `t` (org:t) has one envelope of 24 GPUs that selects any node. Runs,
in line by name (submitted together): r1 asks 16 GPUs in groups of 8, r2 and r3 8 each. r1 goes
to the emptier domain, a tie of 16 free GPUs broken by domain key (us-east/east/A first): n1, n2.
r2 then fits only in B: w1. That spends the envelope (16 + 8 = 24), so r3 waits for budget
headroom although w2 has 8 GPUs free: the cap holds across both clusters.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import main
from tests.support.builders import a_budget, a_run
from tests.support.clusterfleet import T0, ClusterFleet, fleet_config, manifest, node, pods
from tests.support.controlplane import Cluster

GROUP = "rq.davidlangworthy.io/v1"


def files() -> dict[str, bytes]:
    clusters = [{"name": "east", "context": "east"}, {"name": "west", "context": "west"}]
    return {
        "jobtree.yaml": fleet_config({"t": "org:t"}, clusters),
        "budgets/t.yaml": manifest(a_budget("t", "org:t").envelope("h100", 24).build()),
        "runs/t/r1.yaml": manifest(a_run("t/r1", "org:t").gpus(16).groups(8).build()),
        "runs/t/r2.yaml": manifest(a_run("t/r2", "org:t").gpus(8).build()),
        "runs/t/r3.yaml": manifest(a_run("t/r3", "org:t").gpus(8).build()),
    }


@pytest.fixture
def fleet(server: Cluster, west: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClusterFleet:
    server.seed(node("n1", domain="A", region="us-east"), node("n2", domain="A", region="us-east"))
    west.seed(node("w1", domain="B", region="us-west"), node("w2", domain="B", region="us-west"))
    return ClusterFleet(tmp_path, {"east": server, "west": west}, monkeypatch, files())


def test_each_cluster_gets_its_own_pods_and_one_budgets_cap_holds_across_both(
    fleet: ClusterFleet, server: Cluster, west: Cluster
) -> None:
    outcome = fleet.reconcile(T0)
    assert outcome.applied is not None and outcome.applied.failed == []
    assert sorted(k[2] for k in fleet.rendered("east")) == ["r1", "r1-g0-n1", "r1-g1-n2"]
    assert sorted(k[2] for k in fleet.rendered("west")) == ["r2", "r2-g0-w1"]
    assert pods(server) == ["r1-g0-n1", "r1-g1-n2"]
    assert pods(west) == ["r2-g0-w1"]
    r3 = fleet.status("t/r3")
    assert r3["phase"] == "Pending" and "budget headroom short by 8 GPUs" in r3["message"]
    for cluster in (server, west):
        runs = {r["metadata"]["name"]: r["status"]["phase"] for r in cluster.list(GROUP, "Run", "t")}
        assert runs == {"r1": "Running", "r2": "Running", "r3": "Pending"}
        budget = cluster.get(GROUP, "Budget", "t")
        assert budget is not None
        assert [e["usage"]["activeGPUs"] for e in budget["status"]["envelopes"]] == [24]
    assert {x["spec"]["runRef"]["name"] for x in server.list(GROUP, "Lease", "t")} == {"r1"}
    assert {x["spec"]["runRef"]["name"] for x in west.list(GROUP, "Lease", "t")} == {"r2"}
    assert [n["name"] for n in fleet.file("state/observed/west.yaml")[0]["nodes"]] == ["w1", "w2"]


def test_when_r2_finishes_r3_takes_its_funding_on_west_and_east_is_left_as_it_was(
    fleet: ClusterFleet, server: Cluster, west: Cluster
) -> None:
    fleet.reconcile(T0)
    west.kubelet.set_phase("t", "r2-g0-w1", "Succeeded")
    mark = server.requests.mark()
    fleet.reconcile(T0 + 60)
    assert fleet.status("t/r3")["phase"] == "Running"
    assert pods(west) == ["r3-g0-w1"]
    east_writes = {(r.method, r.path.rsplit("/", 2)[-2]) for r in server.requests.writes(since=mark)}
    assert ("PATCH", "pods") not in east_writes and (
        "DELETE",
        "pods",
    ) not in east_writes  # east's pods untouched


def test_an_unreachable_cluster_is_named_and_exits_4_while_the_other_is_applied(
    fleet: ClusterFleet, server: Cluster, west: Cluster
) -> None:
    gone = f"west: the API server at {west.proxy.url} cannot be reached ([Errno 111] Connection refused)"
    west.stop()
    result = CliRunner().invoke(
        main, ["reconcile", str(fleet.path), "--once", "--apply", "--now", "2026-03-02T09:00:00Z"]
    )
    assert result.exit_code == 4, result.output
    assert (
        f"jobtree: cluster west not observed: {gone}; never observed yet, so no node of it is known"
        in result.stderr
    )
    assert f"jobtree: cluster west not applied: {gone}; the next pass retries" in result.stderr
    assert "apply: east: applied" in result.stdout
    assert pods(server) == ["r1-g0-n1", "r1-g1-n2"]  # west never observed: planned with east's nodes alone


def test_a_node_name_seen_in_both_clusters_is_kept_in_the_first_and_named(
    fleet: ClusterFleet, server: Cluster, west: Cluster
) -> None:
    west.seed(node("n1", domain="B", region="us-west"))  # east has an n1 too
    outcome = fleet.reconcile(T0)
    assert (
        "jobtree: node n1 is in clusters east and west; a node name names one node, so the one in west is left out until renamed"
        in outcome.warnings
    )
    assert pods(server) == ["r1-g0-n1", "r1-g1-n2"]
