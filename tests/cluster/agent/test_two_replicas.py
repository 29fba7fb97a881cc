"""Two agent replicas, one leader (§7.4): only the leader acts, and a new leader finishes what the old one began.

The fleet of `test_swap`: `r1` (16 GPUs, groups of 8, 8 spare GPUs per group) on n1..n4, group 0 on
n1 with its spare on n3, group 1 on n2 with its spare on n4. Each replica is an `Agent` with its own
client, campaigning through `leader.Elector` for one coordination.k8s.io Lease with short times
(lease 3 s, renew deadline 2 s, retry 0.2 s), as the Deployment's two pods do with their defaults.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import config

from reconciler.cluster import journal
from reconciler.cluster.agent import leader, main
from reconciler.cluster.agent.loop import Agent, Quiet
from reconciler.cluster.api import AGENT_FIELD_MANAGER, Api
from tests.cluster.agent.test_restart import DyingApi, Killed
from tests.support.agents import Clock, agent_api, applied, until
from tests.support.clusterfleet import (
    API,
    FAST,
    OUT_OF_SERVICE,
    T0,
    ClusterFleet,
    api,
    pods,
    spared_fleet,
)
from tests.support.controlplane import Cluster, Fault
from tests.support.controlplane.plane import merge_kubeconfigs
from tests.support.controlplane.proxy import FaultProxy

LEASE = ("jobtree-system", "jobtree-agent-acme-east")  # where deploy/ lets the agent hold it


class Replica:
    """One pod of the agent's Deployment: an elector and an agent sharing nothing with the other."""

    def __init__(self, name: str, api: Api, clock: Clock) -> None:
        self.name = name
        self.elector = leader.Elector(api, *LEASE, name, duration=3.0, renew_deadline=2.0, retry_period=0.2)
        self.lost = threading.Event()  # the process would exit (the verb's AgentError)
        self.agent = Agent(main.fenced(api, self.elector), "east", "acme", leading=lambda: self.elector.is_leader,
                           observer=Quiet(), clock=clock, on_lost=self._lose)  # fmt: skip
        self.stop = threading.Event()
        self.campaign = threading.Thread(target=self.elector.run, args=(self.stop, self._started, self._stopped),
                                         daemon=True)  # fmt: skip

    def _started(self) -> None:
        self.agent.wake.put(time.monotonic())

    def _stopped(self) -> None:
        self.agent.led = False
        if not self.stop.is_set():  # the lead lost, not given up: main.run ends the process
            self._lose()

    def _lose(self) -> None:
        self.lost.set()
        self.stop.set()
        self.agent.wake.put(time.monotonic())

    def start(self) -> Replica:
        self.agent.start(self.stop)
        assert self.agent.synced(self.stop, 10.0)
        self.campaign.start()
        return self

    def halt(self) -> None:
        """A clean stop (SIGTERM): the worker and the campaign end, and the lead is given up."""
        self.stop.set()
        self.agent.wake.put(time.monotonic())
        self.campaign.join(timeout=5)

    def crash(self) -> None:
        """The pod dies: nothing released, nothing finished (its threads just stop acting)."""
        self.elector.release = lambda: False  # type: ignore[method-assign]  # a dead pod releases nothing
        self.stop.set()
        self.agent.wake.put(time.monotonic())


def replica_api(cluster_api: Api | None = None) -> Api:
    return cluster_api or agent_api()


@contextlib.contextmanager
def own_path(server: Cluster, tmp_path: Path) -> Iterator[tuple[FaultProxy, Api]]:
    """A replica's own path to the API server, through a fault proxy that can cut it off."""
    cut = FaultProxy("127.0.0.1", server.plane.port, server.plane.ssl_context()).start()
    try:
        doc = server.plane.kubeconfig("east", server.credentials("agent"), cut.url, "jobtree-system")
        path = merge_kubeconfigs(tmp_path / "partitioned", [doc])
        yield cut, Api(config.new_client_from_config(str(path), context="east"), "east", FAST,
                       manager=AGENT_FIELD_MANAGER)  # fmt: skip
    finally:
        cut.stop()


@contextlib.contextmanager
def leader_on_a_cuttable_path(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ClusterFleet, FaultProxy, Replica, Replica]]:
    """The spared fleet reconciled; replica a leading over its own path (a fault proxy that can cut
    it off), replica b standing by over the direct one."""
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    with own_path(server, tmp_path) as (cut, cut_api):
        clock = Clock(T0 + 60)
        with replicas(Replica("a", cut_api, clock)) as (a,):
            until(lambda: a.elector.is_leader, what="a to lead")
            with replicas(Replica("b", replica_api(), clock)) as (b,):
                yield fleet, cut, a, b


@contextlib.contextmanager
def replicas(*made: Replica) -> Iterator[tuple[Replica, ...]]:
    try:
        yield tuple(r.start() for r in made)
    finally:
        for r in made:
            r.halt()


def test_two_replicas_one_leader_one_swap_and_the_other_takes_over_when_it_goes(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    clock = Clock(T0 + 60)
    with replicas(Replica("a", replica_api(), clock), Replica("b", replica_api(), clock)) as (a, b):
        first = until(lambda: [r for r in (a, b) if r.elector.is_leader], what="a leader")
        assert len(first) == 1
        lead, other = (a, b) if a.elector.is_leader else (b, a)
        api(fleet).patch_node("n2", {"spec": {"taints": [OUT_OF_SERVICE]}})
        until(lambda: applied(server), what="the swap")
        time.sleep(0.5)  # the follower saw the same fence: it must not have acted
        assert len(server.list(API, "JournalEntry")) == 1
        assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n4"]
        assert not other.agent.led
        lead.halt()  # a clean stop (SIGTERM) gives the lead up at once
        until(lambda: other.elector.is_leader, timeout=3.0, what="the other replica to lead within the lease")
        clock.now += 60
        api(fleet).patch_node("n1", {"spec": {"taints": [OUT_OF_SERVICE]}})
        until(lambda: len(applied(server)) == 2, what="the new leader's swap")
    assert pods(server) == ["r1-g0-n3", "r1-g1-n4"]


def test_a_new_leader_finishes_the_swap_its_crashed_predecessor_left_in_intent(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    clock = Clock(T0 + 60)
    dying = Replica("a", DyingApi(replica_api(), 2), clock)  # dies after the entry and one pod delete
    dying.agent.leading = lambda: False  # its worker stays still: the test makes its one move
    dying.agent.start(dying.stop)
    assert dying.agent.synced(dying.stop, 10.0)
    assert dying.elector.try_acquire_or_renew()
    api(fleet).patch_node("n2", {"spec": {"taints": [OUT_OF_SERVICE]}})
    until(lambda: dying.agent.fences()[1], what="the leader to see n2 fenced")
    dying.agent.led = True
    with pytest.raises(Killed):
        dying.agent.act(0.0)
    dying.crash()
    (entry,) = server.list(API, "JournalEntry")
    assert journal.state_of(entry) == journal.INTENT
    started = time.monotonic()
    with replicas(Replica("b", replica_api(), clock)) as (b,):
        until(lambda: applied(server), timeout=8.0, what="the successor to finish the entry")
        assert time.monotonic() - started >= 2.5  # not before the crashed leader's lease (3 s) ran out
        observer = b.agent.observer
        assert isinstance(observer, Quiet)
        until(lambda: observer.finished == 1, what="the entry counted as finished (not decided again)")
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n4"]
    assert len(server.list(API, "JournalEntry")) == 1


def test_a_partitioned_leader_stops_writing_and_the_replica_that_still_reaches_the_server_swaps(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with leader_on_a_cuttable_path(server, tmp_path, monkeypatch) as (fleet, cut, a, b):
        cut.partition()  # a's node loses the network: its requests get no answer
        mark = cut.requests.mark()
        until(lambda: not a.elector.is_leader, timeout=3.0, what="a to stop by its renew deadline")
        until(lambda: b.elector.is_leader, timeout=10.0, what="b to take over once the lease ran out")
        api(fleet).patch_node("n2", {"spec": {"taints": [OUT_OF_SERVICE]}})
        until(lambda: applied(server), what="b's swap")
        reached = [r for r in cut.requests.since(mark) if r.is_write and r.code]
        assert reached == []  # a wrote nothing once cut off (its open watches just ended)
        assert len(server.list(API, "JournalEntry")) == 1
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n4"]


def test_a_leader_cut_off_mid_swap_writes_nothing_after_its_deadline_exits_and_the_standby_finishes_the_entry(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with leader_on_a_cuttable_path(server, tmp_path, monkeypatch) as (fleet, cut, a, b):
        # a's create of the replacement pod is slow to arrive: a is mid-swap when its node is cut off
        cut.faults.add(Fault.slow(30.0, method="POST", path="/api/v1/namespaces/t/pods"))
        api(fleet).patch_node("n2", {"spec": {"taints": [OUT_OF_SERVICE]}})
        until(lambda: server.list(API, "JournalEntry"), what="a's entry, in Intent")
        time.sleep(0.3)
        cut.partition()
        deadline = a.elector.deadline
        assert deadline is not None
        until(lambda: a.lost.is_set(), timeout=4.0, what="a to give up by its renew deadline")
        assert time.monotonic() >= deadline - 0.05  # not before: it led until then
        cut.heal()  # the network is back, after a's deadline and before b leads
        mark = cut.requests.mark()
        until(lambda: b.elector.is_leader, timeout=10.0, what="b to take over once the lease ran out")
        until(lambda: applied(server), what="b to finish a's entry")
        observer = b.agent.observer
        assert isinstance(observer, Quiet)
        until(lambda: observer.finished == 1, what="the entry finished, not decided again")
        assert [r for r in cut.requests.since(mark) if r.is_write] == []  # a sent nothing more
        assert len(server.list(API, "JournalEntry")) == 1
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n4"]
