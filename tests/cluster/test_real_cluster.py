"""Kubernetes as it really is (DESIGN §7.6), against a real kube-apiserver: what it refuses, and what jobtree does about it.

The fleet: tenant `t` (org:t) with a 32-GPU H100 envelope on cluster `east`, one fabric domain A
of 8-GPU nodes. Run r1 asks 8 GPUs (one group, one pod); where a test adds runs it says so.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import main
from reconciler.cluster import mirrors, stamp
from reconciler.cluster.agent import main as agent_main
from tests.support.agents import until
from tests.support.builders import a_budget, a_run
from tests.support.clusterfleet import T0, ClusterFleet, api, fleet_config, manifest, node, pods, rehearsed
from tests.support.controlplane import Cluster

API = "rq.davidlangworthy.io/v1"
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# the published CRDs (schemas/crds/) by digest, and the schema version each one is: a change there
# without a new stamp.SCHEMA_VERSION fails here, so an older jobtree never takes them for its own
PUBLISHED = {"752dfdfad275720d2a07": 1, "0862d1e473b95e18ac25": 2, "908b0c2df1d0ec739be8": 3}


def files(**runs: dict[str, Any]) -> dict[str, bytes]:
    return {
        "jobtree.yaml": fleet_config({"t": "org:t"}, [{"name": "east", "context": "east"}]),
        "budgets/t.yaml": manifest(a_budget("t", "org:t").envelope("h100", 32).build()),
        **{f"runs/t/{name.removeprefix('_')}.yaml": manifest(doc) for name, doc in runs.items()},
    }


def a_fleet(server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: list[str],
            **runs: dict[str, Any]) -> ClusterFleet:  # fmt: skip
    server.seed(*(node(name) for name in nodes))
    return ClusterFleet(tmp_path, {"east": server}, monkeypatch, files(**runs))


def refuse(server: Cluster, resource: str, name: str) -> None:
    """An admission policy of the cluster's own (CEL, in the API server) refusing `resource` objects
    named `name`: a real refusal among good objects."""
    server.seed(
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": f"refuse-{name}"},
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                                                          "operations": ["CREATE", "UPDATE"], "resources": [resource]}]},
                  "validations": [{"expression": f"object.metadata.name != '{name}'",
                                   "message": f"{resource} named {name} are not allowed here"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": f"refuse-{name}"},
         "spec": {"policyName": f"refuse-{name}", "validationActions": ["Deny"]}},
    )  # fmt: skip
    probe, where = (
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
          "spec": {"containers": [{"name": "c", "image": "x"}]}}, "/api/v1/namespaces/default/pods")
        if resource == "pods" else
        ({"apiVersion": API, "kind": "Run", "metadata": {"name": name, "namespace": "default"},
          "spec": {"owner": "x", "resources": {"gpuType": "H100-80GB", "totalGPUs": 8}}},
         f"/apis/{API}/namespaces/default/runs")
    )  # fmt: skip

    def in_force() -> bool:  # the policy is compiled and loaded a moment after it is stored
        try:
            server.call("POST", f"{where}?dryRun=All", probe)
        except RuntimeError as err:
            return "not allowed here" in str(err)
        return False

    until(in_force, timeout=30.0, what="the admission policy to be in force")


def test_eks_node_names_and_a_run_name_starting_with_a_digit_make_pods_and_a_service_the_server_accepts(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"ip-10-0-1-{i}.us-west-2.compute.internal" for i in (23, 24, 25, 26)]
    run = a_run("t/7b-pretrain", "org:t").gpus(16).groups(8).spares(8).build()
    fleet = a_fleet(server, tmp_path, monkeypatch, names, **{"7b-pretrain": run})
    outcome = fleet.reconcile(T0)
    assert outcome.applied is not None and outcome.applied.failed == []
    live = [server.get("v1", "Pod", name, "t") for name in pods(server)]
    assert len(live) == 4  # two groups, two spares: every one accepted
    (service,) = server.list("v1", "Service", "t")
    assert DNS1035_LABEL.fullmatch(service["metadata"]["name"])
    for pod in live:
        assert pod is not None
        assert DNS1123_LABEL.fullmatch(pod["spec"]["hostname"]) and len(pod["spec"]["hostname"]) <= 63
        assert pod["spec"]["hostname"] == pod["metadata"]["name"]
        assert pod["spec"]["subdomain"] == service["metadata"]["name"]
        assert pod["spec"]["nodeName"] in names
    # the same names every pass: a second pass replaces nothing
    mark = server.requests.mark()
    assert fleet.reconcile(T0 + 60).commit is None
    assert server.requests.writes(since=mark) == []


def test_a_spare_pod_runs_the_pause_images_own_entrypoint(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = a_run("t/r1", "org:t").gpus(8).groups(8).spares(8).image("train:1").build()
    fleet = a_fleet(server, tmp_path, monkeypatch, ["n1", "n2"], r1=run)
    fleet.reconcile(T0)
    spare = server.get("v1", "Pod", "r1-g0-spare-n2", "t")
    assert spare is not None
    (container,) = spare["spec"]["containers"]
    assert container["image"].startswith("registry.k8s.io/pause:")  # not the workload's image
    assert "command" not in container and "args" not in container  # pause's own entrypoint: ends on SIGTERM


def test_one_refused_object_stops_nothing_else_and_the_apply_exits_4_naming_it(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r1, r2, r3 = (a_run(f"t/{n}", "org:t").gpus(8).groups(8).build() for n in ("r1", "r2", "r3"))
    fleet = a_fleet(server, tmp_path, monkeypatch, ["n1", "n2", "n3", "n4"], r1=r1, r3=r3)
    fleet.reconcile(T0)
    assert pods(server) == ["r1-g0-n1", "r3-g0-n2"]
    refuse(server, "runs", "r2")
    fleet.change({"runs/t/r2.yaml": manifest(r2), "runs/t/r3.yaml": None}, "r2 in, r3 out\n")
    fleet.reconcile(T0 + 60, apply=False)
    result = CliRunner().invoke(main, ["apply", str(fleet.path), "--quiet"])
    assert result.exit_code == 4, result.output
    assert "cluster east applied in part (1 errors)" in result.stderr
    assert (
        "create Run t/r2: east: PATCH" in result.stderr
        and "runs named r2 are not allowed here" in result.stderr
    )
    assert pods(server) == [
        "r1-g0-n1",
        "r2-g0-n2",
    ]  # r2's pod created, r3's pruned: the refusal stopped neither
    assert server.get(API, "Run", "r3", "t") is None and server.get(API, "Run", "r2", "t") is None


def test_a_dry_run_shows_what_the_server_would_refuse_and_stores_nothing(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r1, r2 = (a_run(f"t/{n}", "org:t").gpus(8).groups(8).build() for n in ("r1", "r2"))
    fleet = a_fleet(server, tmp_path, monkeypatch, ["n1", "n2"], r1=r1)
    fleet.reconcile(T0)
    refuse(server, "pods", "r2-g0-n2")
    fleet.change({"runs/t/r2.yaml": manifest(r2)}, "r2\n")
    fleet.reconcile(T0 + 60, apply=False)
    mark = server.requests.mark()
    result = CliRunner().invoke(main, ["apply", str(fleet.path), "--dry-run", "--quiet"])
    assert result.exit_code == 4, result.output
    assert "  create Pod t/r2-g0-n2" in result.stdout
    assert "create Pod t/r2-g0-n2: east: PATCH" in result.stderr and "are not allowed here" in result.stderr
    assert rehearsed(server, mark) and pods(server) == ["r1-g0-n1"]
    assert server.get(API, "Run", "r2", "t") is None  # checked by the server, stored nowhere


def test_a_hand_edited_run_mirror_is_restored_within_the_pass_and_an_event_says_to_change_git(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = a_fleet(server, tmp_path, monkeypatch, ["n1", "n2"], r1=a_run("t/r1", "org:t").gpus(8).build())
    fleet.reconcile(T0)
    # kubectl patch run r1 -n t --type merge -p '{"spec":{"resources":{"totalGPUs":16}}}'
    server.patch(API, "Run", "r1", {"spec": {"resources": {"totalGPUs": 16}}}, "t")
    done = fleet.apply()
    assert done.failed == []
    assert done.clusters[0].restored == ["Run t/r1"]
    run = server.get(API, "Run", "r1", "t")
    assert run is not None and run["spec"]["resources"]["totalGPUs"] == 8
    (event,) = [e for e in server.list("v1", "Event", "t") if e["reason"] == "RestoredFromGit"]
    assert event["involvedObject"]["name"] == "r1" and event["type"] == "Warning"
    assert "Change the Run in Git instead" in event["message"]
    mark = server.requests.mark()
    assert fleet.apply().failed == [] and server.requests.writes(since=mark) == []  # restored once


def test_a_hand_edited_pod_is_replaced_as_rendered(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = a_fleet(
        server, tmp_path, monkeypatch, ["n1"], r1=a_run("t/r1", "org:t").gpus(8).image("train:1").build()
    )
    fleet.reconcile(T0)
    before = server.get("v1", "Pod", "r1-g0-n1", "t")
    assert before is not None
    # kubectl set image pod/r1-g0-n1 workload=train:evil (a pod's image is the one field one may change)
    api(fleet).patch_namespaced_pod(
        "r1-g0-n1", "t", {"spec": {"containers": [{"name": "workload", "image": "train:evil"}]}}
    )
    done = fleet.apply()
    assert done.failed == [] and "replace Pod t/r1-g0-n1" in done.clusters[0].done
    after = until(lambda: server.get("v1", "Pod", "r1-g0-n1", "t"), what="the pod as rendered")
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["spec"]["containers"][0]["image"] == "train:1"


def test_crds_are_applied_when_older_and_never_downgraded(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = a_fleet(server, tmp_path, monkeypatch, ["n1"], r1=a_run("t/r1", "org:t").gpus(8).build())
    fleet.reconcile(T0)
    runs = "runs.rq.davidlangworthy.io"
    newer = stamp.SCHEMA_VERSION + 1  # another fleet's newer jobtree applied its CRDs
    server.patch(*CRD, runs, {"metadata": {"annotations": {stamp.SCHEMA: str(newer)}}})
    mark = server.requests.mark()
    done = fleet.apply()
    assert done.failed == [] and [r for r in server.requests.writes(since=mark) if runs in r.path] == []
    assert done.clusters[0].newer == [
        f"CustomResourceDefinition {runs} has schema version {newer}, newer than this jobtree's "
        f"{stamp.SCHEMA_VERSION}: left alone"
    ]
    server.patch(*CRD, runs, {"metadata": {"annotations": {stamp.SCHEMA: "0"}}})  # an older one
    done = fleet.apply()
    assert f"change CustomResourceDefinition {runs}" in done.clusters[0].done
    live = server.get(*CRD, runs)
    assert live is not None and stamp.schema_version(live) == stamp.SCHEMA_VERSION


def test_the_published_crds_are_the_schema_version_this_jobtree_stamps() -> None:
    assert PUBLISHED.get(stamp.digest(mirrors.definitions())) == stamp.SCHEMA_VERSION, (
        "schemas/crds/ changed: raise reconciler.cluster.stamp.SCHEMA_VERSION and record the new digest here"
    )


def test_the_reconcile_role_recreates_jobtrees_crds_but_may_touch_no_other(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = a_fleet(server, tmp_path, monkeypatch, ["n1"], r1=a_run("t/r1", "org:t").gpus(8).build())
    server.delete(*CRD, "budgets.rq.davidlangworthy.io")
    until(lambda: server.get(*CRD, "budgets.rq.davidlangworthy.io") is None, what="the CRD to go")
    outcome = fleet.reconcile(T0)  # as jobtree-reconcile: applied by name, created by apply
    assert outcome.applied is not None and outcome.applied.failed == []
    assert server.get(*CRD, "budgets.rq.davidlangworthy.io") is not None
    foreign = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": {"type": "object"}}}]}}  # fmt: skip
    from kubernetes import client, config

    as_reconcile = client.ApiextensionsV1Api(
        config.new_client_from_config(str(fleet.kubeconfig), context="east")
    )
    with pytest.raises(client.ApiException) as refused:
        as_reconcile.patch_custom_resource_definition(
            "widgets.example.com", foreign, field_manager="jobtree", force=True,
            _content_type="application/apply-patch+yaml",
        )  # fmt: skip
    assert refused.value.status == 403  # no escalation path through someone else's CRD


def test_the_agent_and_reconcile_write_as_their_own_field_managers(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support import agentswap

    run = a_run("t/r1", "org:t").gpus(8).groups(8).spares(8).build()
    fleet = a_fleet(server, tmp_path, monkeypatch, ["n1", "n2", "n3", "n4"], r1=run)
    fleet.reconcile(T0)
    agentswap.out_of_service(fleet, "east", "n1")
    entry = agentswap.swap(fleet, "east", "n1", T0 + 30)
    fleet.reconcile(T0 + 60)  # folds the swap and marks the entry Folded
    live = server.get(API, "JournalEntry", entry["metadata"]["name"])
    assert live is not None
    status = live["status"]
    assert (
        status["state"] == "Folded" and "applied" in status and "folded" in status
    )  # neither took the other's
    managers = {m["manager"] for m in live["metadata"]["managedFields"] if m.get("subresource") == "status"}
    assert managers == {"jobtree", "jobtree-agent"}


def test_each_agent_process_campaigns_under_an_identity_of_its_own() -> None:
    first, second = agent_main.candidate("jobtree-agent-7d9f"), agent_main.candidate("jobtree-agent-7d9f")
    assert first != second  # a restarted container never takes its predecessor's record for its own
    assert first.startswith("jobtree-agent-7d9f_") and second.startswith("jobtree-agent-7d9f_")
