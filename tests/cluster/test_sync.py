"""Applying one commit's record to one cluster (DESIGN §7.3) through the official client, with the server's request log as witness."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cluster import connect, mirrors, retry, sync
from reconciler.cluster.changes import Record
from schemas.fleet import FleetSpec
from schemas.run import Run
from tests.support.agents import until
from tests.support.builders import a_run
from tests.support.clusterfleet import FAST, node, rehearsed
from tests.support.controlplane import Cluster, Fault, write_kubeconfig

COMMIT = "c0ffee" + "0" * 34
FLEET = "acme"


@pytest.fixture
def east(server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", {"east": server})))
    server.seed(node("n1"), node("n2"))
    return server


def target(policy: retry.Backoff = FAST, timeout: float = 30.0) -> connect.Target:
    return connect.Target("east", "east", FLEET, {}, policy, timeout)


def a_pod(
    name: str, node_name: str = "n1", image: str = "train:1", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "t",
            "labels": {"rq.davidlangworthy.io/run": "r1", **(labels or {})},
        },
        "spec": {
            "nodeName": node_name,
            "restartPolicy": "Never",
            "containers": [{"name": "workload", "image": image}],
        },
    }


def record(*pods: dict[str, Any], commit: str = COMMIT, cordoned: tuple[str, ...] = ()) -> Record:
    run = Run.model_validate(a_run("t/r1", "org:t").gpus(8).build())
    status = {
        "run": "t/r1",
        "status": {"phase": "Running", "message": "bound 8 GPUs", "hours": {"owned": 1.5}},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "r1", "namespace": "t"},
        "spec": {"clusterIP": "None", "selector": {"rq.davidlangworthy.io/run": "r1"}},
    }
    return Record(
        commit, mirrors.fleet(FLEET, FleetSpec(), "east", commit), tuple(mirrors.definitions()), ("t",),
        (mirrors.run(run, status),), (service, *pods), cordoned=cordoned,
    )  # fmt: skip


def apply(
    east: Cluster, rec: Record, *, dry_run: bool = False, t: connect.Target | None = None
) -> sync.Applied:
    chosen = t or target()
    return sync.sync(connect.api(chosen), chosen, rec, dry_run, settle=5.0)


def writes(east: Cluster, since: int) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in east.requests.writes(since=since)]


def test_a_first_apply_creates_exactly_what_the_record_holds_each_object_labelled_as_this_fleets(
    east: Cluster,
) -> None:
    done = apply(east, record(a_pod("r1-g0-n1")))
    assert done.ok and not done.held
    assert sorted(p["metadata"]["name"] for p in east.list("v1", "Pod")) == ["r1-g0-n1"]
    assert [s["metadata"]["name"] for s in east.list("v1", "Service", "t")] == ["r1"]
    pod = east.get("v1", "Pod", "r1-g0-n1", "t")
    assert pod is not None
    assert pod["metadata"]["labels"]["rq.davidlangworthy.io/fleet"] == FLEET
    assert pod["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "jobtree"
    assert pod["spec"]["containers"][0]["image"] == "train:1"
    mirrored = east.get("rq.davidlangworthy.io/v1", "Run", "r1", "t")
    assert mirrored is not None
    assert mirrored["status"] == {"phase": "Running", "message": "bound 8 GPUs"}  # GPU-hours stay in Git
    settings = east.get("rq.davidlangworthy.io/v1", "FleetConfig", FLEET)
    assert settings is not None and settings["status"] == {"cluster": "east", "commit": COMMIT}
    namespace = east.get("v1", "Namespace", "t")
    assert namespace is not None and namespace["metadata"]["labels"]["rq.davidlangworthy.io/fleet"] == FLEET


def test_a_second_apply_of_the_same_record_sends_no_write_at_all(east: Cluster) -> None:
    apply(east, record(a_pod("r1-g0-n1")))
    mark = east.requests.mark()
    again = apply(east, record(a_pod("r1-g0-n1")))
    assert writes(east, mark) == []
    assert (again.ok, again.done, again.writes) == (True, [], 0)


def test_what_the_record_no_longer_holds_is_pruned_but_never_another_fleets_nor_a_namespace_or_crd(
    east: Cluster,
) -> None:
    apply(east, record(a_pod("r1-g0-n1"), a_pod("r1-g1-n2", "n2")))
    theirs = a_pod("other-g0-n2", "n2")
    theirs["metadata"]["labels"] |= {
        "app.kubernetes.io/managed-by": "jobtree",
        "rq.davidlangworthy.io/fleet": "other",
    }
    east.seed(theirs)
    done = apply(east, record(a_pod("r1-g0-n1")))
    assert "prune Pod t/r1-g1-n2" in done.done
    # deleted gracefully: gone once its kubelet (kwok) confirms, which a loaded machine may delay
    until(
        lambda: sorted(p["metadata"]["name"] for p in east.list("v1", "Pod")) == ["other-g0-n2", "r1-g0-n1"],
        10.0, "the pruned pod to be gone and the other fleet's to stay",
    )  # fmt: skip
    assert east.get("v1", "Namespace", "t") is not None
    assert len(east.list("apiextensions.k8s.io/v1", "CustomResourceDefinition")) == 6


def test_an_object_another_fleet_applied_under_the_same_name_is_left_alone_and_named(
    east: Cluster,
) -> None:
    theirs = a_pod("r1-g0-n1", image="theirs:1")
    theirs["metadata"]["labels"] |= {
        "app.kubernetes.io/managed-by": "jobtree",
        "rq.davidlangworthy.io/fleet": "other",
    }
    east.seed(theirs)
    done = apply(east, record(a_pod("r1-g0-n1")))
    assert done.conflicts == ["Pod t/r1-g0-n1 belongs to fleet other: left alone"]
    pod = east.get("v1", "Pod", "r1-g0-n1", "t")
    assert pod is not None and pod["spec"]["containers"][0]["image"] == "theirs:1"


def test_a_pod_whose_spec_changed_is_deleted_and_created_again_and_a_label_change_is_applied_in_place(
    east: Cluster,
) -> None:
    apply(east, record(a_pod("r1-g0-n1"), a_pod("r1-g1-n2", "n2")))
    first = east.get("v1", "Pod", "r1-g0-n1", "t")
    mark = east.requests.mark()
    done = apply(
        east, record(a_pod("r1-g0-n1", image="train:2"), a_pod("r1-g1-n2", "n2", labels={"tier": "gold"}))
    )
    assert done.ok
    sent = writes(east, mark)
    assert sorted(sent) == [
        ("DELETE", "/api/v1/namespaces/t/pods/r1-g0-n1"),
        ("PATCH", "/api/v1/namespaces/t/pods/r1-g0-n1"),
        ("PATCH", "/api/v1/namespaces/t/pods/r1-g1-n2"),
    ]  # and the old pod went before the new one came:
    assert sent.index(("DELETE", "/api/v1/namespaces/t/pods/r1-g0-n1")) == 0
    replaced = east.get("v1", "Pod", "r1-g0-n1", "t")
    assert replaced is not None and first is not None
    assert replaced["metadata"]["uid"] != first["metadata"]["uid"]
    assert replaced["spec"]["containers"][0]["image"] == "train:2"
    relabelled = east.get("v1", "Pod", "r1-g1-n2", "t")
    assert relabelled is not None and relabelled["metadata"]["labels"]["tier"] == "gold"


def test_a_pod_on_a_node_that_is_gone_is_held_and_the_commit_is_not_marked_applied(
    east: Cluster,
) -> None:
    done = apply(east, record(a_pod("r1-g0-n9", "n9")))
    assert done.held == ["Pod t/r1-g0-n9 not created: node n9 is gone (the next pass moves it)"]
    assert east.get("v1", "Pod", "r1-g0-n9", "t") is None
    settings = east.get("rq.davidlangworthy.io/v1", "FleetConfig", FLEET)
    assert settings is not None and "commit" not in (settings.get("status") or {})


def test_nodes_jobtree_cordoned_are_cordoned_once(east: Cluster) -> None:
    done = apply(east, record(a_pod("r1-g0-n1"), cordoned=("n2", "elsewhere")))
    assert "cordon Node n2" in done.done
    cordoned = east.get("v1", "Node", "n2")
    assert cordoned is not None and cordoned["spec"]["unschedulable"] is True
    mark = east.requests.mark()
    apply(east, record(a_pod("r1-g0-n1"), cordoned=("n2",)))
    assert writes(east, mark) == []


def test_a_dry_run_lists_what_would_change_and_the_server_checks_it_storing_nothing(east: Cluster) -> None:
    apply(east, record(a_pod("r1-g0-n1"), a_pod("r1-g1-n2", "n2")))
    before = east.list("v1", "Pod", "t")
    mark = east.requests.mark()
    done = apply(east, record(a_pod("r1-g0-n1", image="train:2"), a_pod("r1-g2-n2", "n2")), dry_run=True)
    sent = east.requests.writes(since=mark)
    assert sorted((r.method, r.path.rsplit("/", 1)[1]) for r in sent) == [
        ("DELETE", "r1-g0-n1"), ("DELETE", "r1-g1-n2"), ("PATCH", "r1-g2-n2"),
    ]  # fmt: skip
    assert rehearsed(east, mark), sent
    assert done.ok, done.errors
    assert east.list("v1", "Pod", "t") == before  # the server stored nothing
    assert done.done == [
        "replace Pod t/r1-g0-n1",
        "create Pod t/r1-g2-n2",
        "prune Pod t/r1-g1-n2",
    ]
    assert str(done).startswith(f"east: would apply {COMMIT[:12]}: 1 create, 1 replace, 1 prune")


@pytest.mark.parametrize(
    "fault",
    [
        Fault.respond(409, method="PATCH", times=2),
        Fault.respond(429, method="PATCH", times=2, retry_after=1),
        Fault.respond(500, method="PATCH", times=2),
        Fault.respond(503, method="GET", times=2),
        Fault.disconnect_request(method="PATCH", times=2),
        Fault.cut_answer(method="PATCH", times=2),
    ],
    ids=[
        "409 Conflict",
        "429 with Retry-After",
        "500",
        "503 on a read",
        "a connection cut mid-write",
        "an answer cut after its headers",
    ],  # fmt: skip
)
def test_a_refused_request_is_retried_and_the_cluster_ends_exactly_as_recorded(
    east: Cluster, fault: Fault
) -> None:
    east.faults.add(fault)
    started = time.monotonic()
    done = apply(east, record(a_pod("r1-g0-n1")))
    assert fault.fired == 2
    assert done.ok, done.errors
    assert [p["metadata"]["name"] for p in east.list("v1", "Pod")] == ["r1-g0-n1"]
    if fault.retry_after:
        assert time.monotonic() - started >= 1.0  # the server's Retry-After, honoured
    mark = east.requests.mark()
    apply(east, record(a_pod("r1-g0-n1")))
    assert writes(east, mark) == []


def test_a_request_slower_than_the_timeout_is_retried(east: Cluster) -> None:
    east.faults.add(Fault.slow(1.5, method="PATCH", times=1))
    mark = east.requests.mark()
    done = apply(east, record(a_pod("r1-g0-n1")), t=target(timeout=0.5))
    assert done.ok, done.errors
    time.sleep(1.5)  # the slow one is logged once the server answers it, after the client gave up
    seen = east.requests.since(mark)
    (slow,) = [r for r in seen if r.fault]
    assert [r.path for r in seen if r.method == "PATCH"].count(
        slow.path
    ) == 2  # given up on after 0.5 s, retried
    assert [p["metadata"]["name"] for p in east.list("v1", "Pod")] == ["r1-g0-n1"]


def test_a_field_the_crd_does_not_declare_is_not_retried_and_stops_nothing_else(
    east: Cluster,
) -> None:
    apply(east, record())  # the CRDs and namespace exist
    rec = record(a_pod("r1-g0-n1"), commit="d" * 40)
    bad = dict(rec.mirrors[0])
    bad["spec"] = {**bad["spec"], "notAField": True}
    mark = east.requests.mark()
    done = apply(east, Record(rec.commit, rec.fleet, rec.crds, rec.namespaces, (bad,), rec.rendered))
    assert len(done.errors) == 1 and "field not declared in schema" in done.errors[0]
    assert done.errors[0].startswith("change Run t/r1: ")  # named, with the server's own words
    run_patches = [p for m, p in writes(east, mark) if p.endswith("/runs/r1")]
    assert run_patches == ["/apis/rq.davidlangworthy.io/v1/namespaces/t/runs/r1"]  # once: no retry
    assert east.get("v1", "Pod", "r1-g0-n1", "t") is not None  # the refused mirror stopped nothing else
    settings = east.get("rq.davidlangworthy.io/v1", "FleetConfig", FLEET)
    assert settings is not None and settings["status"]["commit"] == COMMIT  # the new one: not applied in full


def test_waiting_for_a_replaced_pod_to_terminate_survives_a_dropped_watch(east: Cluster) -> None:
    apply(east, record(a_pod("r1-g0-n1")))
    east.kubelet.hold("n1")  # a deleted pod lingers until its kubelet says it has stopped
    dropped = east.faults.add(Fault.drop_watch(0, path="/api/v1/pods"))

    def kubelet_finishes() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not east.kubelet.terminating_pods():
            time.sleep(0.05)
        time.sleep(0.3)
        east.kubelet.finish_termination("t", "r1-g0-n1")

    helper = threading.Thread(target=kubelet_finishes)
    helper.start()
    done = apply(east, record(a_pod("r1-g0-n1", image="train:2")))
    helper.join()
    assert done.ok and done.held == [], (done.errors, done.held)
    pod = east.get("v1", "Pod", "r1-g0-n1", "t")
    assert pod is not None and pod["spec"]["containers"][0]["image"] == "train:2"
    assert dropped.fired == 1, "it watched for the old pod to go, and the watch was cut"


def test_a_cluster_that_cannot_be_reached_is_named_and_nothing_else_is_claimed(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_kubeconfig(tmp_path / "kubeconfig", {"east": server})
    url = server.proxy.url
    server.proxy.stop()
    monkeypatch.setenv("KUBECONFIG", str(path))  # the proxy is stopped: nobody listens there
    t = target()
    done = sync.sync(connect.api(t), t, record(a_pod("r1-g0-n1")), settle=1.0)
    assert done.unreachable and done.done == []
    assert done.errors == [
        f"east: the API server at {url} cannot be reached ([Errno 111] Connection refused)"
    ]


def test_mirrors_leave_out_exactly_the_fields_the_state_commit_treats_as_clock_only() -> None:
    from planner.records import CLOCK_FIELDS
    from reconciler.state import nexttree

    for name in sorted(CLOCK_FIELDS):  # a move of one of them alone is no decision, in Git or in a mirror
        before = {"kind": "Lease", "status": {"closed": False, "funding": {name: 1.0}, name: 1.0}}
        after = {"kind": "Lease", "status": {"closed": False, "funding": {name: 2.0}, name: 2.0}}
        assert mirrors.recorded({**before, "apiVersion": "v1", "metadata": {"name": "x"}, "spec": {}})[
            "status"
        ] == {"closed": False, "funding": {}}
        assert nexttree._same_decisions(yaml.safe_dump(before).encode(), yaml.safe_dump(after).encode())
    changed = {"kind": "Lease", "status": {"closed": True}}
    assert not nexttree._same_decisions(
        yaml.safe_dump(changed).encode(), b"kind: Lease\nstatus: {closed: false}\n"
    )


def test_a_reservation_whose_eta_becomes_unknown_loses_the_field_instead_of_being_refused(
    east: Cluster,
) -> None:
    def reserved(eta: str | None) -> Record:
        doc = {
            "apiVersion": "rq.davidlangworthy.io/v1",
            "kind": "Reservation",
            "metadata": {"name": "r2", "namespace": "t"},
            "spec": {"runRef": {"namespace": "t", "name": "r2"}, "earliestStart": eta},
            "status": {"state": "Pending", "reason": "cluster short by 8 GPUs in scope", "seed": None},
        }
        rec = record()
        return Record(rec.commit, rec.fleet, rec.crds, rec.namespaces, (mirrors.recorded(doc),))

    assert apply(east, reserved("2026-03-02T09:15:00Z")).ok
    done = apply(east, reserved(None))  # server-side apply reads a null as "remove": the field is left out
    assert done.ok, done.errors
    live = east.get("rq.davidlangworthy.io/v1", "Reservation", "r2", "t")
    assert live is not None and "earliestStart" not in live["spec"]
