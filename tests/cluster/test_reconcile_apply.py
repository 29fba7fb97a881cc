"""`reconcile --apply` and `jobtree apply` on a fleet repository pointed at a cluster (DESIGN §7.2, §7.3).

The fleet: tenant `t` (owner org:t) with a 32-GPU H100 envelope, and the cluster `east`: one
fabric domain A of four 8-GPU nodes n1..n4. Run r1 asks 16 GPUs in groups of 8, so it is packed
onto the two emptiest nodes by name: group 0 on n1, group 1 on n2 (pods `r1-g0-n1`, `r1-g1-n2`,
and the headless Service `r1`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import main
from reconciler.passes import clusters, provenance
from reconciler.passes.reconcile import reconcile_once
from tests.support.agents import until
from tests.support.builders import a_budget, a_run
from tests.support.clusterfleet import T0, ClusterFleet, api, fleet_config, manifest, node, pods, rehearsed
from tests.support.controlplane import Cluster, Fault

R1_PODS = ["r1-g0-n1", "r1-g1-n2"]


def fleet_files(**runs: dict[str, Any]) -> dict[str, bytes]:
    files = {
        "jobtree.yaml": fleet_config({"t": "org:t"}, [{"name": "east", "context": "east"}]),
        "budgets/t.yaml": manifest(a_budget("t", "org:t").envelope("h100", 32).build()),
        "runs/t/r1.yaml": manifest(a_run("t/r1", "org:t").gpus(16).groups(8).build()),
    }
    files.update({f"runs/t/{name}.yaml": manifest(doc) for name, doc in runs.items()})
    return files


@pytest.fixture
def fleet(server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClusterFleet:
    server.seed(*(node(f"n{i}") for i in range(1, 5)))
    return ClusterFleet(tmp_path, {"east": server}, monkeypatch, fleet_files())


def test_a_first_pass_applies_exactly_what_rendered_holds(fleet: ClusterFleet, server: Cluster) -> None:
    outcome = fleet.reconcile(T0)
    assert outcome.applied is not None and outcome.applied.failed == []
    want = fleet.rendered("east")
    assert sorted(want) == [("Pod", "t", "r1-g0-n1"), ("Pod", "t", "r1-g1-n2"), ("Service", "t", "r1")]
    live = {("Pod", "t", name): server.get("v1", "Pod", name, "t") for name in pods(server)}
    live[("Service", "t", "r1")] = server.get("v1", "Service", "r1", "t")
    assert sorted(live) == sorted(want)
    for key, doc in want.items():
        have = live[key]
        assert have is not None
        assert have["metadata"]["labels"] == doc["metadata"]["labels"] | {
            "rq.davidlangworthy.io/fleet": "acme"
        }
        if key[0] == "Pod":
            assert have["spec"]["nodeName"] == doc["spec"]["nodeName"]
            assert have["spec"]["containers"][0]["env"] == doc["spec"]["containers"][0]["env"]
            served = {
                k: {r: str(n) for r, n in v.items()}
                for k, v in doc["spec"]["containers"][0]["resources"].items()
            }
            assert (
                have["spec"]["containers"][0]["resources"] == served
            )  # quantities as the server serves them


def test_the_record_is_mirrored_so_kubectl_get_runs_shows_phase_width_and_reason(
    fleet: ClusterFleet, server: Cluster
) -> None:
    fleet.reconcile(T0)
    run = server.get("rq.davidlangworthy.io/v1", "Run", "r1", "t")
    assert run is not None
    assert (run["status"]["phase"], run["status"]["width"]["allocated"], run["status"]["message"]) == (
        "Running",
        16,
        "bound 16 GPUs",
    )
    assert run["spec"]["resources"] == {"gpuType": "H100-80GB", "totalGPUs": 16}
    leases = server.list("rq.davidlangworthy.io/v1", "Lease", "t")
    assert sorted((x["spec"]["group"], x["spec"]["slice"]["nodes"][0]) for x in leases) == [
        (0, "n1#0"),
        (1, "n2#0"),
    ]
    budget = server.get("rq.davidlangworthy.io/v1", "Budget", "t")
    assert budget is not None
    assert [(e["name"], e["usage"]["activeGPUs"]) for e in budget["status"]["envelopes"]] == [("h100", 16)]
    settings = server.get("rq.davidlangworthy.io/v1", "FleetConfig", "acme")
    assert settings is not None and settings["status"]["commit"] == str(fleet.repo.head.target)


def test_a_second_pass_with_nothing_new_commits_nothing_and_writes_nothing_to_the_cluster(
    fleet: ClusterFleet, server: Cluster
) -> None:
    fleet.reconcile(T0)
    mark = server.requests.mark()
    again = fleet.reconcile(T0 + 60)
    assert again.commit is None
    assert server.requests.writes(since=mark) == []
    alone = fleet.apply()
    assert server.requests.writes(since=mark) == []
    # 6 CRDs, namespace t, FleetConfig, Budget t, Run r1, 2 Lease mirrors, the Service, 2 pods
    assert [c.unchanged for c in alone.clusters] == [15]


def test_a_removed_run_is_pruned_and_another_fleets_pods_on_the_cluster_are_not(
    fleet: ClusterFleet, server: Cluster
) -> None:
    fleet.reconcile(T0)
    theirs = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "r1-g0-n3",
            "namespace": "t",
            "labels": {"app.kubernetes.io/managed-by": "jobtree", "rq.davidlangworthy.io/fleet": "other"},
        },
        "spec": {"nodeName": "n3", "containers": [{"name": "w", "image": "x"}]},
    }
    server.seed(theirs)
    fleet.change({"runs/t/r1.yaml": None}, "delete r1\n")
    outcome = fleet.reconcile(T0 + 60)  # r1's pods are all the fleet runs there: a mass prune, held
    assert outcome.applied is not None and "would prune 2 of the 2 running pods" in outcome.applied.failed[0]
    assert pods(server) == R1_PODS
    outcome = fleet.reconcile(T0 + 120, allow_mass_prune=True)
    assert outcome.applied is not None and outcome.applied.failed == []
    assert pods(server) == []
    assert pods(server, "other") == ["r1-g0-n3"]
    assert server.get("rq.davidlangworthy.io/v1", "Run", "r1", "t") is None
    assert server.list("rq.davidlangworthy.io/v1", "Lease", "t") == []
    assert [x["status"]["closureReason"] for x in fleet.leases("t/r1")] == ["RunDeleted", "RunDeleted"]


def test_a_pod_deleted_by_hand_comes_back_with_the_next_apply(fleet: ClusterFleet, server: Cluster) -> None:
    fleet.reconcile(T0)
    before = server.get("v1", "Pod", "r1-g0-n1", "t")
    api(fleet).delete_namespaced_pod("r1-g0-n1", "t")
    until(lambda: pods(server) == ["r1-g1-n2"], what="the kubelet to finish the deleted pod")
    again = fleet.reconcile(T0 + 60)
    assert again.commit is None  # a vanished pod is no decision: its lease stays open
    assert pods(server) == R1_PODS
    after = server.get("v1", "Pod", "r1-g0-n1", "t")
    assert before is not None and after is not None and after["metadata"]["uid"] != before["metadata"]["uid"]


def test_a_pass_lists_the_nodes_and_the_pods_once_and_apply_acts_on_that_list(
    fleet: ClusterFleet, server: Cluster
) -> None:
    fleet.reconcile(T0)
    api(fleet).delete_namespaced_pod("r1-g0-n1", "t")
    until(lambda: pods(server) == ["r1-g1-n2"], what="the kubelet to finish the deleted pod")
    mark = server.requests.mark()
    fleet.reconcile(T0 + 60)
    sent = server.requests.since(mark)
    listed = [r.path for r in sent if r.method == "GET" and not r.watch]
    # observe's two lists are the ones apply compares with (each one page at four nodes)
    assert (listed.count("/api/v1/nodes"), listed.count("/api/v1/pods")) == (1, 1)
    # jobtree's mirrors from the API server's watch cache, as new at least as apply's first list
    runs = [r.query for r in sent if r.path == "/apis/rq.davidlangworthy.io/v1/runs"]
    assert [q.get("resourceVersionMatch") for q in runs] == ["NotOlderThan"]
    assert [(r.method, r.path) for r in sent if r.is_write] == [
        ("PATCH", "/api/v1/namespaces/t/pods/r1-g0-n1")
    ]
    assert pods(server) == R1_PODS
    mark = server.requests.mark()
    fleet.reconcile(T0 + 120)
    assert server.requests.writes(since=mark) == []


def test_a_pod_made_again_after_the_pass_listed_it_is_not_deleted_by_that_pass_and_the_conflict_is_named(
    fleet: ClusterFleet, server: Cluster
) -> None:
    fleet.reconcile(T0)
    fleet.change({"runs/t/r1.yaml": None}, "delete r1\n")
    listed = server.get("v1", "Pod", "r1-g0-n1", "t")
    assert listed is not None

    def observed_then_made_again(spec: Any, state: Any, recorded: Any, now: int) -> Any:
        seen = clusters.cluster_for(spec, state, recorded, now, live=True)
        api(fleet).delete_namespaced_pod("r1-g0-n1", "t")  # deleted and made again by someone else
        until(lambda: "r1-g0-n1" not in pods(server), what="the kubelet to finish the deleted pod")
        server.seed(
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "r1-g0-n1", "namespace": "t", "labels": listed["metadata"]["labels"]},
             "spec": {"nodeName": "n1", "containers": [{"name": "w", "image": "x"}]}}
        )  # fmt: skip
        return seen

    outcome = reconcile_once(fleet.path, now=T0 + 60, push=True, apply=True, allow_mass_prune=True,
                             observer=observed_then_made_again)  # fmt: skip
    assert outcome.applied is not None
    [failed] = outcome.applied.failed
    assert "prune Pod t/r1-g0-n1" in failed and "409" in failed  # the delete named the pod it listed
    made = server.get("v1", "Pod", "r1-g0-n1", "t")
    assert made is not None and made["metadata"]["uid"] != listed["metadata"]["uid"]
    # r1-g1-n2 pruned as listed: deleted gracefully, gone once the kubelet (kwok) confirms
    until(lambda: pods(server) == ["r1-g0-n1"], what="r1-g1-n2 pruned and the pod made again kept")
    outcome = fleet.reconcile(T0 + 120, allow_mass_prune=True)  # the next pass lists it, and prunes it
    assert outcome.applied is not None and outcome.applied.failed == []
    until(lambda: pods(server) == [], what="the pod made again to be pruned")


def test_a_dry_run_lists_the_changes_and_a_real_apply_makes_them(
    fleet: ClusterFleet, server: Cluster
) -> None:
    fleet.reconcile(T0, apply=False)
    mark = server.requests.mark()
    dry = fleet.apply(dry_run=True)
    assert rehearsed(server, mark)
    assert pods(server) == [] and server.get("v1", "Namespace", "t") is None  # the server stored nothing
    lines = dry.lines(detail=True)
    # namespace t, FleetConfig, Budget t, Run r1, 2 Lease mirrors, the Service, 2 pods: the CRDs are
    # there already (deploy/ installs them)
    assert lines[0].startswith("east: would apply ") and "9 create" in lines[0]
    assert "  create Pod t/r1-g0-n1" in lines and "  create Run t/r1" in lines
    done = fleet.apply()
    assert done.failed == [] and pods(server) == R1_PODS


def test_api_faults_leave_the_cluster_behind_and_the_next_pass_repairs_it(
    fleet: ClusterFleet, server: Cluster
) -> None:
    server.faults.add(Fault.respond(500, method="PATCH", path="/api/v1/namespaces/*/pods/*", times=None))
    first = fleet.reconcile(T0)
    assert first.applied is not None and len(first.applied.failed) == 1
    assert first.applied.failed[0].startswith("cluster east applied in part (2 errors)")
    assert pods(server) == []
    settings = server.get("rq.davidlangworthy.io/v1", "FleetConfig", "acme")
    assert settings is not None and "commit" not in (settings.get("status") or {})  # not applied in full
    server.faults.clear()
    second = fleet.reconcile(T0 + 60)
    assert second.commit is None and second.applied is not None and second.applied.failed == []
    assert pods(server) == R1_PODS
    settings = server.get("rq.davidlangworthy.io/v1", "FleetConfig", "acme")
    assert settings is not None and settings["status"]["commit"] == str(fleet.repo.head.target)


def test_every_state_commit_made_against_the_cluster_is_recomputed_from_git_alone(
    fleet: ClusterFleet, server: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet.reconcile(T0)
    for name in R1_PODS:
        server.kubelet.set_phase("t", name, "Succeeded")
    done = fleet.reconcile(T0 + 60)
    assert done.commit is not None
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")  # no credentials: only what Git holds
    for sha in (done.commit, str(fleet.repo[done.commit].parents[0].id)):
        assert provenance.verify(fleet.repo, fleet.repo[sha]).proven, sha


def test_jobtree_plan_in_ci_plans_against_the_last_observed_cluster_without_credentials(
    fleet: ClusterFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet.reconcile(T0)
    base = str(fleet.repo.head.target)
    head = fleet.change(
        {"runs/t/r2.yaml": manifest(a_run("t/r2", "org:t").gpus(16).groups(8).build())}, "r2\n"
    )
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")
    result = CliRunner().invoke(
        main,
        [
            "plan",
            str(fleet.path),
            "--base",
            base,
            "--head",
            head,
            "--format",
            "json",
            "--now",
            "2026-03-02T09:05:00Z",
        ],
    )
    assert result.exit_code == 0, result.output
    assert '"t/r2"' in result.stdout and '"A"' in result.stdout  # r2 starts in domain A, which Git recorded


def test_the_apply_verb_names_an_unknown_cluster_as_a_usage_error(fleet: ClusterFleet) -> None:
    fleet.reconcile(T0, apply=False)
    result = CliRunner().invoke(main, ["apply", str(fleet.path), "--cluster", "nowhere"])
    assert result.exit_code == 2
    assert "no cluster 'nowhere' in jobtree.yaml (it configures east)" in result.output


def test_the_apply_verb_prints_a_line_per_cluster_and_exits_0(fleet: ClusterFleet, server: Cluster) -> None:
    fleet.reconcile(T0, apply=False)
    result = CliRunner().invoke(main, ["apply", str(fleet.path), "--quiet"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"east: applied {str(fleet.repo.head.target)[:12]}: 9 create")
    assert pods(server) == R1_PODS


def test_a_cluster_that_stops_answering_is_planned_as_last_observed_and_nothing_is_invented(
    fleet: ClusterFleet, server: Cluster
) -> None:
    fleet.reconcile(T0)
    server.stop()
    again = fleet.reconcile(T0 + 60)
    assert again.commit is None  # r1's nodes are as Git last recorded them: its leases stay open
    assert any(
        "cluster east not observed" in w and "planned with its last observation" in w for w in again.warnings
    )
    assert fleet.status("t/r1")["phase"] == "Running"
    assert again.applied is not None and again.applied.failed[0].startswith("cluster east not applied")


def test_the_webhooks_pass_fails_when_a_cluster_was_not_applied_so_healthz_says_failing(
    fleet: ClusterFleet, server: Cluster
) -> None:
    from reconciler.cli import webhook

    one_pass, branch = webhook._reconcile_for(str(fleet.path), apply=True, branch=None)
    assert branch == "main"
    one_pass()  # committed, pushed and applied
    assert pods(server) == R1_PODS
    server.stop()
    with pytest.raises(webhook.ApplyFailed, match="cluster east not applied: east: the API server at"):
        one_pass()
