"""The agent swaps a fenced node's group onto its hot spare at once (DESIGN §7.4, §4.8), with no reconcile.

Tenant `t` (org:t) has a 32-GPU H100 envelope; runs come in groups of 8 GPUs on 8-GPU nodes of one
fabric domain, so every group is one pod on one node. `r1` (16 GPUs, 8 spare GPUs per group) holds
group 0 on n1, group 1 on n2, and their spares on n3 and n4 (nodes packed emptiest first, then by
name). The agent's clock stands at T0 + 60: every lease the swap opens starts then.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from reconciler.cluster.agent.loop import Agent, Quiet
from tests.support.agents import Clock, act_once, an_agent, applied, entries, running, until
from tests.support.builders import a_budget, a_run
from tests.support.clusterfleet import (
    API,
    OUT_OF_SERVICE,
    T0,
    ClusterFleet,
    a_fleet,
    api,
    fleet_config,
    manifest,
    node,
    pods,
    sixteen,
    spared_fleet,
)
from tests.support.controlplane import Cluster, Fault


def env(pod: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}


def test_an_out_of_service_node_moves_its_group_to_the_spare_keeping_ranks_and_environment(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n2", "r1-g1-spare-n4"]
    failed = server.get("v1", "Pod", "r1-g1-n2", "t")
    with running(an_agent(clock=Clock(T0 + 60))):
        api(fleet).patch_node("n2", {"spec": {"taints": [OUT_OF_SERVICE]}})
        until(lambda: server.get("v1", "Pod", "r1-g1-n4", "t"), what="the replacement pod on the spare")
        until(lambda: applied(server))
        until(lambda: events(server), what="the Event on the run")
    moved = server.get("v1", "Pod", "r1-g1-n4", "t")
    assert failed is not None and moved is not None
    assert env(moved) == env(failed)  # same rank base (8), world size (16), run, group: zero topology change
    assert env(moved)["JOBTREE_RANK_BASE"] == "8"
    assert moved["spec"]["nodeName"] == "n4"
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n4"]  # failed pod and used spare gone
    node = server.get("v1", "Node", "n2")
    assert node is not None and node["spec"]["unschedulable"] is True
    (entry,) = entries(server)
    assert entry["spec"]["fenced"] == [{"node": "n2", "cause": "OutOfService"}]
    assert entry["spec"]["at"] == "2026-03-02T09:01:00Z"
    assert sorted((c["closure"]) for c in entry["spec"]["closed"]) == ["NodeFailure", "Swap"]
    (opened,) = entry["spec"]["opened"]
    assert (opened["spec"]["slice"]["nodes"], opened["spec"]["slice"]["role"]) == (
        [f"n4#{i}" for i in range(8)],
        "Active",
    )
    assert opened["spec"]["slice"]["rank"] == 8 and opened["spec"]["reason"] == "Swap"
    mirrors = {x["metadata"]["name"]: x for x in server.list(API, "Lease", "t")}
    assert opened["name"] in mirrors and not any(c["name"] in mirrors for c in entry["spec"]["closed"])
    run = server.get(API, "Run", "r1", "t")
    assert run is not None and run["status"]["message"] == "group 1 swapped to spare after node failure"
    # `kubectl describe run r1` / `kubectl get events` say so too, naming the journal entry
    assert events(server) == [
        ("Normal", "NodeFailure", "Run/r1",
         f"group 1 swapped to spare after node failure (journal entry {entry['metadata']['name']})"),
    ]  # fmt: skip


def events(server: Cluster) -> list[tuple[str, str, str, str]]:
    """The core Events in namespace t: type, reason, the object they are about, message."""
    return sorted(
        (e["type"], e["reason"], f"{e['involvedObject']['kind']}/{e['involvedObject']['name']}", e["message"])
        for e in server.list("v1", "Event", "t")
    )


def not_ready(agent: Agent, name: str) -> bool:
    return any(n.name == name and not n.ready for n in agent.fences()[0].values())


def graced_fleet(server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClusterFleet:
    """`r1` as above on a fleet whose nodes fail after 300 s NotReady."""
    server.seed(*(node(f"n{i}") for i in range(1, 5)))
    files = {
        "jobtree.yaml": fleet_config(
            {"t": "org:t"}, [{"name": "east", "context": "east"}], failure={"notReadyGraceSeconds": 300}
        ),
        "budgets/t.yaml": manifest(a_budget("t", "org:t").envelope("h100", 32).build()),
        "runs/t/r1.yaml": manifest(sixteen("r1", spares=8)),
    }
    return ClusterFleet(tmp_path, {"east": server}, monkeypatch, files)


class Timed(Quiet):
    """An observer that keeps each swap's latency, as the histogram does."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []

    def swapped(self, seconds: float) -> None:
        self.seconds.append(seconds)


def test_a_swaps_latency_runs_from_the_fences_own_event_not_from_an_older_wake_up(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    agent = an_agent(clock=Clock(T0 + 60))
    agent.observer = timed = Timed()
    api(fleet).patch_node("n2", {"spec": {"taints": [OUT_OF_SERVICE]}})
    began = time.monotonic()
    # act_once wakes the agent with the instant 0.0: a wake-up older than any event (one left by
    # the swap before, say); the histogram must count from n2's event, which came after `began`
    assert act_once(agent) is not None
    (seconds,) = timed.seconds
    assert 0 < seconds <= time.monotonic() - began


def test_a_cordon_never_moves_anything(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    with running(an_agent(clock=Clock(T0 + 60))) as agent:
        api(fleet).patch_node("n1", {"spec": {"unschedulable": True}})
        until(lambda: (agent.caches["nodes"].get("n1") or {}).get("spec", {}).get("unschedulable"))
        mark = server.requests.mark()
        assert agent.act(0.0) is None
        assert server.requests.writes(since=mark) == []
    assert entries(server) == []
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n2", "r1-g1-spare-n4"]


def test_not_ready_moves_a_group_only_once_the_fleets_grace_has_passed(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = graced_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    clock = Clock(time.time())
    with running(an_agent(clock=clock)) as agent:
        server.kubelet.set_node_ready("n1", False, reason="KubeletStopped")
        until(lambda: not_ready(agent, "n1"), timeout=10.0, what="the agent to see n1 NotReady")
        mark = server.requests.mark()
        assert agent.act(0.0) is None  # 0 s of 300 s
        clock.now += 250
        assert agent.act(0.0) is None  # 250 s of 300 s
        assert server.requests.writes(since=mark) == [] and entries(server) == []
        clock.now += 60  # 310 s: no event comes; the worker's once-a-second look finds the grace ended
        until(lambda: applied(server), timeout=15.0, what="the swap after the grace, carried out to its end")
    (entry,) = entries(server)
    assert entry["spec"]["fenced"] == [{"node": "n1", "cause": "NotReady"}]
    assert pods(server) == ["r1-g0-n3", "r1-g1-n2", "r1-g1-spare-n4"]


def test_fillers_on_the_spare_end_with_their_grace_and_the_replacement_waits_until_they_are_gone(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # f1 (opportunistic, 8 GPUs) fills group 0's spare on n3
    f1 = a_run("t/f1", "org:t").gpus(8).groups(8).opportunistic().build()
    fleet = a_fleet(server, tmp_path, monkeypatch, 4, r1=sixteen("r1", spares=8), f1=f1)
    fleet.reconcile(T0)
    assert pods(server) == ["f1-g0-n3", "r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n2", "r1-g1-spare-n4"]
    filler = server.get("v1", "Pod", "f1-g0-n3", "t")
    assert (
        filler is not None and filler["spec"]["terminationGracePeriodSeconds"] == 5
    )  # fill.gracePeriodSeconds
    server.kubelet.hold("n3")  # n3's kubelet stops the filler's containers only when the test says so
    mark = server.requests.mark()
    with running(an_agent(clock=Clock(T0 + 60))):
        api(fleet).patch_node("n1", {"spec": {"taints": [OUT_OF_SERVICE]}})
        until(lambda: ("t", "f1-g0-n3") in server.kubelet.terminating_pods(), what="the filler asked to stop")
        time.sleep(0.5)
        assert server.get("v1", "Pod", "r1-g0-n3", "t") is None  # its GPUs are still the filler's
        server.kubelet.finish_termination("t", "f1-g0-n3")
        until(lambda: applied(server))
    assert server.kubelet.terminating_pods() == [("t", "r1-g0-spare-n3")]  # the placeholder holds no GPU
    server.kubelet.finish_termination("t", "r1-g0-spare-n3")
    assert pods(server) == ["r1-g0-n3", "r1-g1-n2", "r1-g1-spare-n4"]
    writes = [(r.method, r.path.rsplit("/", 1)[1], r.options.get("gracePeriodSeconds")) for r in
              server.requests.writes(since=mark) if "/pods" in r.path]  # fmt: skip
    filler_deletes = [w for w in writes if w[:2] == ("DELETE", "f1-g0-n3")]
    assert filler_deletes[0] == ("DELETE", "f1-g0-n3", None)  # the agent leaves it its own grace
    assert writes.index(filler_deletes[0]) < writes.index(("POST", "pods", None))
    assert ("DELETE", "r1-g0-n1", 0) in writes  # its kubelet is gone
    (entry,) = entries(server)
    assert sorted((c["name"].split("-g")[0], c["closure"]) for c in entry["spec"]["closed"]) == [
        ("f1", "ReclaimedBySpare"), ("r1", "NodeFailure"), ("r1", "Swap"),
    ]  # fmt: skip
    f1_status = server.get(API, "Run", "f1", "t")
    assert f1_status is not None and f1_status["status"]["phase"] == "Pending"


def test_a_spare_only_node_that_fails_loses_the_spare_and_nothing_else(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in server.list("v1", "Pod", "t")}
    with running(an_agent(clock=Clock(T0 + 60))):
        api(fleet).delete_node("n4")
        until(lambda: applied(server))
    (entry,) = entries(server)
    assert entry["spec"]["fenced"] == [{"node": "n4", "cause": "Deleted"}]
    assert [c["closure"] for c in entry["spec"]["closed"]] == ["NodeFailure"]
    assert entry["spec"]["opened"] == [] and entry["spec"]["pods"]["create"] == []
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in server.list("v1", "Pod", "t")}
    assert after == {k: v for k, v in before.items() if k != "r1-g1-spare-n4"}  # the rest untouched
    run = server.get(API, "Run", "r1", "t")
    assert run is not None and run["status"]["phase"] == "Running"


@pytest.mark.parametrize(
    ("shape", "phase", "left"),
    [
        ("fixed", "Failed", ["r2-g0-n3"]),  # no spare, no checkpoint: the run fails, all its pods go
        ("checkpointed", "Pending", ["r2-g0-n3"]),  # back in line to restart from its checkpoint
        ("malleable", "Running", ["r1-g1-n2", "r2-g0-n3"]),  # 8 of 16 left, its minimum: keeps training
    ],
)
def test_with_no_usable_spare_a_run_fails_requeues_or_shrinks_and_funded_work_is_never_evicted(
    server: Cluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shape: str,
    phase: str,
    left: list[str],
) -> None:
    r1 = a_run("t/r1", "org:t").gpus(16).groups(8)
    if shape == "checkpointed":
        r1 = r1.checkpointed()
    if shape == "malleable":
        r1 = r1.malleable(8, 16, 8, desired=16)
    r2 = a_run("t/r2", "org:t").gpus(8).groups(8)
    fleet = a_fleet(server, tmp_path, monkeypatch, 3, r1=r1.build(), r2=r2.build())
    fleet.reconcile(T0)
    assert pods(server) == ["r1-g0-n1", "r1-g1-n2", "r2-g0-n3"]
    r2_pod = server.get("v1", "Pod", "r2-g0-n3", "t")
    with running(an_agent(clock=Clock(T0 + 60))):
        api(fleet).patch_node("n1", {"spec": {"taints": [OUT_OF_SERVICE]}})
        until(lambda: applied(server))
        until(lambda: [p for p in server.list("v1", "Pod", "t") if not p["metadata"].get("deletionTimestamp")]
              and pods(server) == left, what=f"the pods to be {left}")  # fmt: skip
    run = server.get(API, "Run", "r1", "t")
    assert run is not None and run["status"]["phase"] == phase
    kept = server.get("v1", "Pod", "r2-g0-n3", "t")
    assert r2_pod is not None and kept is not None and kept["metadata"]["uid"] == r2_pod["metadata"]["uid"]
    (entry,) = entries(server)
    assert entry["spec"]["opened"] == []  # nothing was moved onto r2's funded GPUs
    (event,) = until(lambda: events(server), what="the Event on the run")
    assert event[:3] == (("Normal" if phase == "Running" else "Warning"), "NodeFailure", "Run/r1")


def test_a_group_whose_node_and_spare_fail_together_has_no_spare_and_its_run_fails(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # n2 holds group 1, n4 its spare: both out of service in one decision; group 0 still swaps nothing
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    agent = an_agent(clock=Clock(T0 + 60))
    api(fleet).patch_node("n2", {"spec": {"taints": [OUT_OF_SERVICE]}})
    api(fleet).patch_node("n4", {"spec": {"taints": [OUT_OF_SERVICE]}})
    prepared = act_once(agent)
    assert prepared is not None and prepared.swapped == []
    assert prepared.declined == [("t/r1", 1, "no_spare")]
    (entry,) = entries(server)
    assert [f["node"] for f in entry["spec"]["fenced"]] == ["n2", "n4"]  # one entry for one instant
    closures = sorted((c["name"].split("-g")[1][0], c["closure"]) for c in entry["spec"]["closed"])
    assert closures == [("0", "RunFailed"), ("0", "RunFailed"), ("1", "NodeFailure"), ("1", "NodeFailure")]
    run = server.get(API, "Run", "r1", "t")
    assert run is not None and run["status"]["phase"] == "Failed"  # 16 fixed GPUs, no checkpoint
    assert sorted(n for n in ("n2", "n4") if (server.get("v1", "Node", n) or {})["spec"].get("unschedulable")) == [
        "n2", "n4",
    ]  # fmt: skip


def test_a_dropped_node_watch_and_a_refused_pod_creation_still_end_in_one_swap(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    dropped = server.faults.add(Fault.drop_watch(0, path="/api/v1/nodes"))  # cut before its first event
    refused = server.faults.add(Fault.respond(500, method="POST", path="/api/v1/namespaces/t/pods", times=8))
    with running(an_agent(clock=Clock(T0 + 60))):
        api(fleet).patch_node("n2", {"spec": {"taints": [OUT_OF_SERVICE]}})
        until(lambda: applied(server), timeout=10.0)
    assert dropped.fired == 1  # the taint's event was lost with the watch: the resumed one brought it
    assert refused.fired == 8  # the creation failed 8 times (retried, then the swap again), then went through
    assert len(entries(server)) == 1
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n4"]
