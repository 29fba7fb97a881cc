"""`reconcile --interval`: the clusters' nodes and pods kept by watch between passes (`reconciler.cluster.watched`).

The fleet: tenant `t` with a 32-GPU envelope, cluster `east` of four 8-GPU nodes n1..n4, run r1 of
16 GPUs in groups of 8: group 0 on n1, group 1 on n2. Each test keeps one process's `Kept` (with
its `Watches`) across passes, as the command's loop does, and reads the requests the real API
server received through the test's fault proxy.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest
import yaml

from reconciler.cluster import kinds
from reconciler.cluster.watched import Watched, Watches
from reconciler.git import read as gitread
from reconciler.passes.reconcile import Kept, reconcile_once
from tests.support import REPO
from tests.support.agents import until
from tests.support.clusterfleet import T0, ClusterFleet, a_fleet, api, pods, sixteen
from tests.support.controlplane import Cluster, Fault


@pytest.fixture
def fleet(server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClusterFleet:
    return a_fleet(server, tmp_path, monkeypatch, 4, r1=sixteen("r1"))


@pytest.fixture
def kept() -> Iterator[Kept]:
    kept = Kept(watches=Watches(first_wait=30.0))
    try:
        yield kept
    finally:
        assert kept.watches is not None
        kept.watches.close()
        # no watch thread outlives the reconciler
        assert [t.name for t in threading.enumerate() if t.name.startswith("watch-east")] == []


def lists(server: Cluster, mark: int) -> list[str]:
    """The node and pod lists (not watches) the server was sent since `mark`."""
    return [
        r.path
        for r in server.requests.since(mark)
        if r.method == "GET" and not r.watch and r.path in ("/api/v1/nodes", "/api/v1/pods")
    ]


def watched(kept: Kept) -> Watched:
    assert kept.watches is not None
    found = kept.watches.get("east")
    assert found is not None
    return found


def applied_once(fleet: ClusterFleet, kept: Kept) -> Watched:
    """The first pass, pushed and applied (the watches started); its caches."""
    first = reconcile_once(fleet.path, now=T0, push=True, apply=True, kept=kept)
    assert first.applied is not None and first.applied.failed == []
    return watched(kept)


def node_row(repo: pygit2.Repository, commit: str, name: str) -> dict[str, Any] | None:
    doc = yaml.safe_load(gitread.read_file(repo, commit, "state/observed/east.yaml") or b"")
    return next((n for n in doc["nodes"] if n["name"] == name), None)


def test_node_and_pod_changes_reach_the_next_pass_through_the_watch_and_it_commits_what_a_listing_pass_commits(
    fleet: ClusterFleet, server: Cluster, kept: Kept, tmp_path: Path
) -> None:
    first = reconcile_once(fleet.path, now=T0, push=True, apply=True, kept=kept)
    assert first.applied is not None and first.applied.failed == []
    assert not [w for w in first.warnings if "listed" in w]  # the first pass waited for the caches
    assert pods(server) == ["r1-g0-n1", "r1-g1-n2"]
    api(fleet).patch_node("n3", {"spec": {"unschedulable": True}})  # kubectl cordon n3
    api(fleet).delete_node("n4")
    server.kubelet.set_phase("t", "r1-g1-n2", "Succeeded")  # group 1's workload ended, as a kubelet writes it
    caches = watched(kept)

    def arrived() -> bool:
        nodes = {n["metadata"]["name"]: n for n in caches.nodes.items()}
        pod = caches.pods.get("r1-g1-n2", "t") or {}
        return (
            "n4" not in nodes
            and bool(nodes["n3"].get("spec", {}).get("unschedulable"))
            and (pod.get("status") or {}).get("phase") == "Succeeded"
        )

    until(arrived, what="the watch to bring the cordon, the removed node and the pod's end")
    mark = server.requests.mark()
    cached = reconcile_once(fleet.path, now=T0 + 60, push=False, apply=False, kept=kept)
    assert lists(server, mark) == []  # nothing listed: the pass read its caches
    assert cached.commit is not None
    assert (node_row(fleet.repo, cached.commit, "n3") or {}).get("cordoned") is True
    assert node_row(fleet.repo, cached.commit, "n4") is None
    leases = [
        d
        for d in yaml.safe_load_all(
            gitread.read_file(fleet.repo, cached.commit, "state/leases/t/r1.yaml") or b""
        )
        if d
    ]
    assert sorted((x["spec"]["group"], x["status"].get("closureReason")) for x in leases) == [
        (0, None), (1, "Completed"),
    ]  # fmt: skip
    # the same pass by a process that lists (a one-shot pass on a second clone at the same head)
    other = pygit2.clone_repository(
        str(tmp_path / "fleet.git"), str(tmp_path / "other"), checkout_branch="main"
    )
    mark = server.requests.mark()
    listed = reconcile_once(other.workdir, now=T0 + 60, push=False, apply=False)
    assert sorted(lists(server, mark)) == ["/api/v1/nodes", "/api/v1/pods"]
    assert listed.commit == cached.commit  # the same tree and message: the same decisions, byte for byte


def test_a_watch_cut_resumes_and_one_failing_makes_the_pass_list_and_say_so(
    fleet: ClusterFleet, server: Cluster, kept: Kept
) -> None:
    caches = applied_once(fleet, kept)
    # every open connection cut (the watches with them); new node watches refused by the server
    refused = server.faults.add(
        Fault.respond(500, method="GET", path="/api/v1/nodes", watch=True, times=None)
    )
    server.proxy.partition()
    server.proxy.heal()
    until(lambda: caches.nodes.error != "", what="the node watch to fail")
    api(fleet).patch_node("n3", {"spec": {"unschedulable": True}})
    mark = server.requests.mark()
    fallen = reconcile_once(fleet.path, now=T0 + 60, push=True, apply=True, kept=kept)
    assert lists(server, mark).count("/api/v1/nodes") == 1  # listed, as a one-shot pass does
    assert mirror_lists(server, mark) == []  # the mirrors' caches are current: read by apply still
    [said] = [w for w in fallen.warnings if "watch" in w]
    assert said.startswith("jobtree: cluster east: its watch failed (nodes: ") and said.endswith(
        "this pass listed its nodes and pods"
    )
    assert fallen.commit is not None and (node_row(fleet.repo, fallen.commit, "n3") or {}).get("cordoned")
    assert fallen.applied is not None and fallen.applied.failed == []
    # the fault lifted: the watch resumes from the version it had and brings what it missed
    server.faults.clear()
    assert refused.fired >= 1
    api(fleet).patch_node("n4", {"spec": {"unschedulable": True}})
    until(lambda: caches.why_not() == "", timeout=30.0, what="the node watch to resume")
    until(
        lambda: bool((caches.nodes.get("n4") or {}).get("spec", {}).get("unschedulable")),
        what="the watch to bring n4's cordon",
    )
    mark = server.requests.mark()
    again = reconcile_once(fleet.path, now=T0 + 120, push=True, apply=True, kept=kept)
    assert lists(server, mark) == [] and not [w for w in again.warnings if "watch" in w]
    assert again.commit is not None and (node_row(fleet.repo, again.commit, "n4") or {}).get("cordoned")
    assert (
        again.applied is not None and again.applied.failed == [] and pods(server) == ["r1-g0-n1", "r1-g1-n2"]
    )


def test_ctrl_c_stops_the_long_lived_reconciler_without_a_traceback(fleet: ClusterFleet) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler.cli", "reconcile", str(fleet.path), "--interval", "1h", "--apply"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    seen: list[bytes] = []
    for line in proc.stderr:  # until the first pass is done and it waits for the next
        seen.append(line)
        if b"next pass at" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    stderr = b"".join(seen) + err
    assert b"nodes and pods from its watch" in stderr  # the first pass read the caches it started
    assert proc.returncode == 130 and b"Traceback" not in stderr, stderr.decode()[-3000:]


def test_the_pods_a_pass_creates_are_in_its_cache_at_once_so_the_next_pass_writes_nothing_again(
    fleet: ClusterFleet, server: Cluster, kept: Kept
) -> None:
    reconcile_once(fleet.path, now=T0, push=True, apply=False, kept=kept)  # caches synced; no pod yet
    caches = watched(kept)
    caches.close()  # a watch that has not brought anything yet (here: it cannot)
    first = reconcile_once(fleet.path, now=T0 + 60, push=True, apply=True, kept=kept)
    assert (
        first.applied is not None and first.applied.failed == [] and pods(server) == ["r1-g0-n1", "r1-g1-n2"]
    )
    for name in ("r1-g0-n1", "r1-g1-n2"):  # the server's answers, uid and all
        live = server.get("v1", "Pod", name, "t")
        assert (
            live is not None
            and (caches.pods.get(name, "t") or {})["metadata"]["uid"] == live["metadata"]["uid"]
        )
    mark = server.requests.mark()
    again = reconcile_once(fleet.path, now=T0 + 120, push=True, apply=True, kept=kept)
    assert again.applied is not None and again.applied.failed == []
    assert server.requests.writes(since=mark) == []  # nothing created twice


def test_a_pass_while_the_watch_lists_again_lists_itself_and_says_so(
    fleet: ClusterFleet, server: Cluster, kept: Kept
) -> None:
    reconcile_once(fleet.path, now=T0, push=True, apply=True, kept=kept)
    caches = watched(kept)
    # the node watch, cut, resumes too late (410): its cache lists again, slowly (5 s)
    server.faults.add(Fault.respond(410, method="GET", path="/api/v1/nodes", watch=True))
    server.faults.add(Fault.slow(5.0, method="GET", path="/api/v1/nodes"))
    server.proxy.partition()
    server.proxy.heal()
    until(lambda: "listing again" in caches.why_not(), what="the node cache to list again")
    api(fleet).patch_node("n3", {"spec": {"unschedulable": True}})
    mark = server.requests.mark()
    during = reconcile_once(fleet.path, now=T0 + 60, push=True, apply=True, kept=kept)
    assert lists(server, mark).count("/api/v1/nodes") == 1  # its own list, not the half-done cache
    assert "jobtree: cluster east: its watch is listing again (its resourceVersion expired); this pass listed " \
        "its nodes and pods" in during.warnings  # fmt: skip
    assert during.commit is not None and (node_row(fleet.repo, during.commit, "n3") or {}).get("cordoned")
    until(lambda: caches.why_not() == "", what="the node cache's list to end")
    assert bool((caches.nodes.get("n3") or {}).get("spec", {}).get("unschedulable"))


MIRRORS_API = "rq.davidlangworthy.io/v1"


def mirror_lists(server: Cluster, mark: int) -> list[str]:
    """The lists (not watches) of jobtree's mirrors and Services the server was sent since `mark`."""
    return sorted(
        r.path
        for r in server.requests.since(mark)
        if r.method == "GET"
        and not r.watch
        and (r.path.startswith(f"/apis/{MIRRORS_API}/") or r.path == "/api/v1/services")
        and not r.path.endswith("/journalentries")
    )


def behind_jobtrees_back(server: Cluster, lease: str) -> None:
    """kubectl patch run r1 (32 GPUs instead of 16), kubectl delete gpulease `lease`."""
    server.patch(MIRRORS_API, "Run", "r1", {"spec": {"resources": {"totalGPUs": 32}}}, "t")
    assert server.delete(MIRRORS_API, "Lease", lease, "t")


def seen_by(caches: Watched, lease: str) -> bool:
    run = caches.mirrors[kinds.RUN].get("r1", "t") or {}
    return (run.get("spec") or {}).get("resources", {}).get("totalGPUs") == 32 and (
        caches.mirrors[kinds.LEASE].get(lease, "t") is None
    )


def restored(server: Cluster, lease: str) -> bool:
    run = server.get(MIRRORS_API, "Run", "r1", "t") or {}
    return (
        run["spec"]["resources"]["totalGPUs"] == 16
        and server.get(MIRRORS_API, "Lease", lease, "t") is not None
    )


def test_mirrors_changed_behind_jobtrees_back_are_restored_from_the_watch_and_its_own_writes_are_kept_at_once(
    fleet: ClusterFleet, server: Cluster, kept: Kept
) -> None:
    caches = applied_once(fleet, kept)
    answered = server.get(MIRRORS_API, "Run", "r1", "t")  # as apply's write of it was answered
    assert answered is not None
    lease = server.list(MIRRORS_API, "Lease", "t")[0]["metadata"]["name"]
    behind_jobtrees_back(server, lease)
    until(
        lambda: seen_by(caches, lease), what="the watch to bring the edited Run and the deleted Lease mirror"
    )
    caches.wrote(answered)  # a write's answer arriving after the hand edit's event: never kept over it
    assert seen_by(caches, lease)
    caches.close()  # no more events: the next passes read what the watch brought and their own writes
    mark = server.requests.mark()
    cached = reconcile_once(fleet.path, now=T0 + 60, push=True, apply=True, kept=kept)
    assert cached.applied is not None and cached.applied.failed == []
    [east] = cached.applied.clusters
    assert mirror_lists(server, mark) == [] and east.listed == ""  # read from the caches
    assert east.restored == ["Run t/r1"] and f"create Lease t/{lease}" in east.done
    assert restored(server, lease)
    mark = server.requests.mark()
    again = reconcile_once(fleet.path, now=T0 + 120, push=True, apply=True, kept=kept)
    assert again.applied is not None and again.applied.failed == []
    assert server.requests.writes(since=mark) == []  # the restored mirrors were in the caches at once


def test_a_pass_whose_mirror_cache_is_failing_lists_them_says_so_and_writes_what_a_cached_pass_writes(
    fleet: ClusterFleet, server: Cluster, kept: Kept
) -> None:
    caches = applied_once(fleet, kept)
    runs = f"/apis/{MIRRORS_API}/runs"
    server.faults.add(Fault.respond(500, method="GET", path=runs, watch=True, times=None))
    server.proxy.partition()  # every watch cut; the Run mirrors' refused when it resumes
    server.proxy.heal()
    until(lambda: caches.mirrors[kinds.RUN].error != "", what="the Run mirrors' watch to fail")
    lease = server.list(MIRRORS_API, "Lease", "t")[0]["metadata"]["name"]
    behind_jobtrees_back(server, lease)
    mark = server.requests.mark()
    listing = reconcile_once(fleet.path, now=T0 + 60, push=True, apply=True, kept=kept)
    assert listing.applied is not None and listing.applied.failed == []
    [east] = listing.applied.clusters
    assert runs in mirror_lists(server, mark) and east.listed.startswith("its watch failed (runs: ")
    assert f"  {east.listed}; this pass listed its mirrors and Services" in listing.applied.lines()
    assert restored(server, lease)
    # the fault lifted: the same edits, read from the watch, make the same writes
    server.faults.clear()
    until(lambda: isinstance(caches.owned(), dict), timeout=30.0, what="the Run mirrors' watch to resume")
    behind_jobtrees_back(server, lease)
    until(lambda: seen_by(caches, lease), what="the watch to bring the edits")
    mark = server.requests.mark()
    cached = reconcile_once(fleet.path, now=T0 + 120, push=True, apply=True, kept=kept)
    assert cached.applied is not None and cached.applied.failed == []
    [again] = cached.applied.clusters
    assert mirror_lists(server, mark) == [] and again.listed == ""
    assert again.done == east.done and again.restored == east.restored == ["Run t/r1"]
    assert restored(server, lease)
