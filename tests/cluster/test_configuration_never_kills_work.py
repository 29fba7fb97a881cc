"""Configuration never kills work (§7.1, §7.3): a renamed cluster, a cluster seen for the first time through the wrong context, a commit pruning most of a cluster's pods.

The two-cluster fleet of `test_two_clusters`: east (n1, n2) holds r1 (16 GPUs, pods r1-g0-n1 and
r1-g1-n2), west (w1, w2) holds r2 (8 GPUs, r2-g0-w1); r3 waits for budget headroom. Renaming west
in jobtree.yaml, or misspelling it by one letter, while r2 runs there: a pass would re-render r2's
pod elsewhere and apply would prune it while Git says Running. Instead the pass plans nothing
(exit 3), `jobtree apply` sends nothing (exit 3) and `jobtree validate` says so (exit 3).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import main
from tests.cluster.test_two_clusters import files as two_cluster_files
from tests.support.builders import a_budget, a_run
from tests.support.clusterfleet import T0, ClusterFleet, fleet_config, manifest, node, pods
from tests.support.controlplane import Cluster


@pytest.fixture
def fleet(server: Cluster, west: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClusterFleet:
    server.seed(node("n1", domain="A", region="us-east"), node("n2", domain="A", region="us-east"))
    west.seed(node("w1", domain="B", region="us-west"), node("w2", domain="B", region="us-west"))
    return ClusterFleet(tmp_path, {"east": server, "west": west}, monkeypatch, two_cluster_files())


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("renamed", ["wset", "us-west-2"], ids=["a one-letter typo", "a rename"])
def test_a_renamed_cluster_holding_a_running_run_stops_the_pass_and_nothing_is_pruned(
    fleet: ClusterFleet, server: Cluster, west: Cluster, renamed: str
) -> None:
    fleet.reconcile(T0)
    assert pods(west) == ["r2-g0-w1"]
    clusters = [{"name": "east", "context": "east"}, {"name": renamed, "context": "west"}]
    head = fleet.change({"jobtree.yaml": fleet_config({"t": "org:t"}, clusters)}, "rename west\n")
    marks = server.requests.mark(), west.requests.mark()

    code, _, said = cli(
        "reconcile", str(fleet.path), "--once", "--push", "--apply", "--now", "2026-03-02T09:10:00Z"
    )

    assert code == 3, said
    assert f"no cluster west is named (jobtree.yaml names east, {renamed})" in said
    assert "the last state commit has 1 open lease of 1 run there (rendered/west/)" in said
    assert "Nothing was planned, committed or applied" in said
    assert str(fleet.repo.references["refs/heads/main"].target) == head  # no state commit
    assert fleet.status("t/r2")["phase"] == "Running"
    assert pods(west) == ["r2-g0-w1"] and pods(server) == ["r1-g0-n1", "r1-g1-n2"]
    assert server.requests.writes(marks[0]) == [] and west.requests.writes(marks[1]) == []

    code, _, said = cli("apply", str(fleet.path))  # the verb alone: refused before a cluster is touched
    assert (
        code == 3
        and "renders pods for cluster west (rendered/west/), which jobtree.yaml does not name" in said
    )
    assert west.requests.writes(marks[1]) == [] and pods(west) == ["r2-g0-w1"]

    code, shown, _ = cli("validate", str(fleet.path))
    assert code == 3
    assert f"JT081 cluster {renamed} matches no node label" in shown
    assert "JT081 rendered/west/ holds pods on cluster west, which clusters (east, " in shown
    assert "did you mean west?" in shown

    # named again: the pass goes on as if the rename never happened
    fleet.change({"jobtree.yaml": two_cluster_files()["jobtree.yaml"]}, "west again\n")
    assert fleet.reconcile(T0 + 900).applied is not None
    assert fleet.status("t/r2")["phase"] == "Running" and pods(west) == ["r2-g0-w1"]


def embedded(tmp_path: Path, server: Cluster, monkeypatch: pytest.MonkeyPatch) -> ClusterFleet:
    """A fleet on the embedded cluster (inventory: n1, n2 in cluster east) with r1 running on both."""
    inventory = {
        "nodes": [
            {"name": n, "gpus": 8, "labels": {"region": "us-east", "cluster": "east", "fabric.domain": "A",
                                              "gpu.flavor": "H100-80GB"}}
            for n in ("n1", "n2")
        ]
    }  # fmt: skip
    files = {
        "jobtree.yaml": fleet_config({"t": "org:t"}, []),
        "inventory/nodes.yaml": yaml.safe_dump(inventory).encode(),
        "budgets/t.yaml": manifest(a_budget("t", "org:t").envelope("h100", 16).build()),
        "runs/t/r1.yaml": manifest(a_run("t/r1", "org:t").gpus(16).groups(8).build()),
    }
    fleet = ClusterFleet(tmp_path, {"east": server}, monkeypatch, files)
    fleet.reconcile(T0, apply=False)
    assert fleet.status("t/r1")["phase"] == "Running"
    fleet.change(
        {"jobtree.yaml": fleet_config({"t": "org:t"}, [{"name": "east", "context": "east"}]), "inventory/nodes.yaml": None},
        "drive the cluster east\n",
    )  # fmt: skip
    return fleet


def test_adopting_a_cluster_whose_nodes_hold_the_leases_keeps_the_run_and_creates_its_pods(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.seed(node("n1", region="us-east"), node("n2", region="us-east"))
    fleet = embedded(tmp_path, server, monkeypatch)
    outcome = fleet.reconcile(T0 + 600)
    assert outcome.applied is not None and outcome.applied.failed == []
    assert fleet.status("t/r1")["phase"] == "Running"
    assert pods(server) == ["r1-g0-n1", "r1-g1-n2"]


def test_a_cluster_seen_for_the_first_time_without_the_nodes_holding_its_leases_is_not_believed(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.seed(node("x1", region="us-east"), node("x2", region="us-east"))  # another cluster's nodes
    fleet = embedded(tmp_path, server, monkeypatch)
    head = str(fleet.repo.references["refs/heads/main"].target)
    code, _, said = cli(
        "reconcile", str(fleet.path), "--once", "--push", "--apply", "--now", "2026-03-02T09:10:00Z"
    )
    assert code == 3, said
    assert (
        "cluster east, observed for the first time, lists none of the 2 nodes where the last state commit has "
        "2 open leases of 1 run (n1, n2): is its context the right cluster?"
    ) in said
    assert str(fleet.repo.references["refs/heads/main"].target) == head
    assert fleet.status("t/r1")["phase"] == "Running" and pods(server) == []


def mass_fleet(server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClusterFleet:
    """Cluster east with four nodes and four 8-GPU runs, one pod each: r1 on n1 ... r4 on n4."""
    server.seed(*(node(f"n{i}") for i in range(1, 5)))
    files = {
        "jobtree.yaml": fleet_config({"t": "org:t"}, [{"name": "east", "context": "east"}]),
        "budgets/t.yaml": manifest(a_budget("t", "org:t").envelope("h100", 32).build()),
        **{f"runs/t/r{i}.yaml": manifest(a_run(f"t/r{i}", "org:t").gpus(8).build()) for i in range(1, 5)},
    }
    fleet = ClusterFleet(tmp_path, {"east": server}, monkeypatch, files)
    fleet.reconcile(T0)
    assert len(pods(server)) == 4
    return fleet


def test_a_commit_pruning_more_than_half_of_a_clusters_running_pods_prunes_none_until_allowed(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = mass_fleet(server, tmp_path, monkeypatch)
    before = pods(server)
    fleet.change({f"runs/t/r{i}.yaml": None for i in (1, 2, 3)}, "end three runs\n")

    code, shown, said = cli(
        "reconcile", str(fleet.path), "--once", "--push", "--apply", "--now", "2026-03-02T09:10:00Z"
    )

    assert code == 4, said
    assert (
        "east: this commit would prune 3 of the 4 running pods of fleet acme there, more than 50% in one pass"
        in said
    )
    assert "apply again with --allow-mass-prune" in said
    assert "held: 3 running pods not pruned (--allow-mass-prune prunes them)" in shown
    assert pods(server) == before  # Git says the runs ended; the cluster keeps them until told
    assert all(
        fleet.status(f"t/r{i}") == {} or fleet.status(f"t/r{i}")["phase"] != "Running" for i in (1, 2, 3)
    )
    mirror = server.get("rq.davidlangworthy.io/v1", "FleetConfig", "acme") or {}
    head = str(fleet.repo.references["refs/heads/main"].target)
    assert (mirror.get("status") or {}).get("commit") != head  # the commit is not marked applied

    code, shown, said = cli("apply", str(fleet.path), "--dry-run")  # the dry run says it too
    assert code == 4 and "would prune 3 of the 4 running pods" in said

    code, shown, said = cli("apply", str(fleet.path), "--allow-mass-prune")
    assert code == 0, said
    assert pods(server) == ["r4-g0-n4"]


def test_pruning_at_most_the_share_or_finished_pods_needs_no_flag(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = mass_fleet(server, tmp_path, monkeypatch)
    fleet.change({f"runs/t/r{i}.yaml": None for i in (1, 2)}, "end two runs\n")  # 2 of 4: half
    fleet.reconcile(T0 + 600, apply=False)  # the pass drops their pods from rendered/; apply prunes them
    code, _, said = cli("apply", str(fleet.path))
    assert code == 0, said
    assert pods(server) == ["r3-g0-n3", "r4-g0-n4"]
    # r3's pod has finished: pruning it stops no work, so a lower share still lets it go
    server.kubelet.set_phase("t", "r3-g0-n3", "Succeeded")
    fleet.change({"runs/t/r3.yaml": None}, "r3 done\n")
    fleet.reconcile(T0 + 1200, apply=False)
    code, _, said = cli("apply", str(fleet.path), "--prune-share", "0.1")
    assert code == 0, said
    assert pods(server) == ["r4-g0-n4"]
    fleet.change({"runs/t/r4.yaml": None}, "r4 too\n")  # the last running pod: 100% of them
    fleet.reconcile(T0 + 1800, apply=False)
    code, _, said = cli("apply", str(fleet.path), "--prune-share", "0.9")
    assert code == 4 and "would prune 1 of the 1 running pods" in said
    assert pods(server) == ["r4-g0-n4"]


def test_a_cluster_never_observed_through_a_context_typo_is_not_believed_and_nothing_is_cut(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.seed(node("n1", region="us-east"), node("n2", region="us-east"))
    fleet = embedded(tmp_path, server, monkeypatch)
    typo = fleet_config({"t": "org:t"}, [{"name": "east", "context": "eats"}])
    head = fleet.change({"jobtree.yaml": typo}, "a context typo\n")
    code, _, said = cli(
        "reconcile", str(fleet.path), "--once", "--push", "--apply", "--now", "2026-03-02T09:10:00Z"
    )
    assert code == 3, said
    assert "cluster east not observed: " in said and "eats" in said
    assert (
        "cluster east was never observed, yet the last state commit has 2 open leases of 1 run on it: planning "
        "would end them all as failed. Give the pass the cluster's credentials"
    ) in said
    assert str(fleet.repo.references["refs/heads/main"].target) == head
    assert fleet.status("t/r1")["phase"] == "Running" and fleet.file("rendered/east/t/r1.yaml") != []
