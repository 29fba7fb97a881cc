"""The agent's leader election (§7.4) through a coordination.k8s.io/v1 Lease on the real control plane, with stepped clocks."""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client, config

from reconciler.cluster.agent import leader
from reconciler.cluster.api import Api
from tests.support.agents import Clock, until
from tests.support.clusterfleet import FAST
from tests.support.controlplane import Cluster, Fault, write_kubeconfig

NAMESPACE, NAME = "jobtree-system", "jobtree-agent-east"
MICRO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


@pytest.fixture
def kubeconfig(server: Cluster, tmp_path: Path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", {"test": server}, "agent")


def replica_api(kubeconfig: Path) -> Api:
    """Each replica its own client, as two pods have."""
    return Api(config.new_client_from_config(config_file=str(kubeconfig), context="test"), "test", FAST)


@pytest.fixture
def apis(kubeconfig: Path) -> Iterator[tuple[Api, Api]]:
    pair = (replica_api(kubeconfig), replica_api(kubeconfig))
    yield pair
    for api in pair:
        api.client.close()


def elector(api: Api, identity: str, clock: Clock, wall: datetime | None = None) -> leader.Elector:
    at = wall or datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    return leader.Elector(
        api, NAMESPACE, NAME, identity, duration=15.0, renew_deadline=10.0, retry_period=2.0,
        clock=clock, wall=lambda: at + timedelta(seconds=clock()),
    )  # fmt: skip


def stored(server: Cluster) -> dict[str, object]:
    lease = server.get("coordination.k8s.io/v1", "Lease", NAME, NAMESPACE)
    assert lease is not None
    spec: dict[str, object] = lease["spec"]
    return spec


def test_of_two_replicas_exactly_one_leads(apis: tuple[Api, Api], server: Cluster) -> None:
    a, b = elector(apis[0], "agent-a", Clock(100.0)), elector(apis[1], "agent-b", Clock(7.0))

    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False

    assert (a.is_leader, b.is_leader) == (True, False)
    assert b.why == "held by agent-a"
    spec = stored(server)
    assert spec["holderIdentity"] == "agent-a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0


def test_replicas_racing_for_an_absent_lease_elect_one(kubeconfig: Path, server: Cluster) -> None:
    apis = [replica_api(kubeconfig) for _ in range(4)]
    electors = [elector(api, f"agent-{i}", Clock(0.0)) for i, api in enumerate(apis)]
    start = threading.Barrier(len(electors))
    won: dict[str, bool] = {}

    def campaign(e: leader.Elector) -> None:
        start.wait()
        won[e.identity] = e.try_acquire_or_renew()

    threads = [threading.Thread(target=campaign, args=(e,)) for e in electors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    want_leader = stored(server)["holderIdentity"]
    assert [name for name, leads in won.items() if leads] == [want_leader]
    assert [e.identity for e in electors if e.is_leader] == [want_leader]


def test_a_crashed_leader_is_replaced_only_after_the_duration_by_the_successors_own_clock(
    apis: tuple[Api, Api], server: Cluster
) -> None:
    # the replicas' clocks disagree wildly, and so do the times they write: neither matters
    clock_a, clock_b = Clock(5_000.0), Clock(3.0)
    a = elector(apis[0], "agent-a", clock_a, wall=datetime(2020, 1, 1, tzinfo=UTC))
    b = elector(apis[1], "agent-b", clock_b, wall=datetime(2031, 1, 1, tzinfo=UTC))
    assert a.try_acquire_or_renew()

    assert not b.try_acquire_or_renew()  # b first sees a's record now, by its clock
    clock_b.step(14.9)
    assert not b.try_acquire_or_renew()
    assert stored(server)["holderIdentity"] == "agent-a"

    clock_a.step(10.0)  # a, crashed or not, has stopped acting by its own renew deadline
    assert not a.is_leader
    clock_b.step(0.2)
    assert b.try_acquire_or_renew()

    spec = stored(server)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("agent-b", 1)
    assert spec["acquireTime"] == spec["renewTime"] == "2031-01-01T00:00:18.100000Z"


def test_a_successor_that_first_sees_an_old_record_still_waits_the_whole_duration(
    apis: tuple[Api, Api],
) -> None:
    clock_a, clock_b = Clock(0.0), Clock(0.0)
    a, b = elector(apis[0], "agent-a", clock_a), elector(apis[1], "agent-b", clock_b)
    assert a.try_acquire_or_renew()
    clock_b.step(600.0)  # b starts long after a's last renewal: renewTime is far in b's past

    assert not b.try_acquire_or_renew()
    clock_b.step(14.0)
    assert not b.try_acquire_or_renew()
    clock_b.step(1.5)
    assert b.try_acquire_or_renew()


def test_a_leader_that_keeps_renewing_is_never_replaced(apis: tuple[Api, Api], server: Cluster) -> None:
    clock_a, clock_b = Clock(0.0), Clock(40.0)
    a, b = elector(apis[0], "agent-a", clock_a), elector(apis[1], "agent-b", clock_b)
    assert a.try_acquire_or_renew()
    acquired = stored(server)["acquireTime"]

    for _ in range(20):  # 100 seconds: many lease durations
        clock_a.step(5.0)
        clock_b.step(5.0)
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()

    spec = stored(server)
    assert (spec["holderIdentity"], spec["acquireTime"], spec["leaseTransitions"]) == ("agent-a", acquired, 0)
    assert spec["renewTime"] == "2026-03-02T09:01:40.000000Z"


def test_a_leader_that_releases_is_replaced_at_once(apis: tuple[Api, Api], server: Cluster) -> None:
    a, b = elector(apis[0], "agent-a", Clock(0.0)), elector(apis[1], "agent-b", Clock(0.0))
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()

    assert a.release()

    assert not a.is_leader
    spec = stored(server)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("", 1, 0)
    assert b.try_acquire_or_renew()  # no clock step: a released it
    spec = stored(server)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == (
        "agent-b",
        15,
        1,
    )


def test_releasing_a_lease_held_by_another_writes_nothing(apis: tuple[Api, Api], server: Cluster) -> None:
    a, b = elector(apis[0], "agent-a", Clock(0.0)), elector(apis[1], "agent-b", Clock(0.0))
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    mark = server.requests.mark()

    assert b.release()

    assert server.requests.writes(since=mark) == []
    assert stored(server)["holderIdentity"] == "agent-a"


def test_a_leader_whose_renewal_meets_another_writer_loses_leadership(
    apis: tuple[Api, Api], server: Cluster
) -> None:
    a = elector(apis[0], "agent-a", Clock(0.0))
    assert a.try_acquire_or_renew()
    client.CoordinationV1Api(apis[1].client).patch_namespaced_lease(
        NAME, NAMESPACE, {"spec": {"holderIdentity": "intruder"}}
    )
    mark = server.requests.mark()

    assert not a.try_acquire_or_renew()

    assert not a.is_leader
    assert a.why == "held by intruder"
    patches = [r.code for r in server.requests.since(mark) if r.method == "PATCH"]
    assert patches == [409]  # the renewal with a's resourceVersion, refused once and not retried
    assert stored(server)["holderIdentity"] == "intruder"


def test_a_leader_that_cannot_renew_leads_until_its_renew_deadline_and_no_longer(
    apis: tuple[Api, Api], server: Cluster
) -> None:
    clock = Clock(0.0)
    a = elector(apis[0], "agent-a", clock)
    assert a.try_acquire_or_renew()
    server.faults.add(Fault.respond(503, method="PATCH", times=None))

    clock.step(9.9)
    assert a.try_acquire_or_renew()  # the renewal failed, but the term still runs
    assert a.why.startswith("writing the lease failed") and "503" in a.why
    clock.step(0.1)
    assert not a.try_acquire_or_renew()
    assert not a.is_leader and a.deadline == 10.0


def test_a_leader_whose_lease_was_only_relabelled_renews_after_a_conflict(
    apis: tuple[Api, Api], server: Cluster
) -> None:
    a = elector(apis[0], "agent-a", Clock(0.0))
    assert a.try_acquire_or_renew()
    client.CoordinationV1Api(apis[1].client).patch_namespaced_lease(
        NAME, NAMESPACE, {"metadata": {"labels": {"team": "infra"}}}
    )

    assert a.try_acquire_or_renew()

    assert a.is_leader
    assert stored(server)["leaseTransitions"] == 0


def test_the_official_client_reads_the_record_written(apis: tuple[Api, Api], server: Cluster) -> None:
    a = elector(apis[0], "agent-a", Clock(1.5), wall=datetime(2026, 3, 2, 9, 0, tzinfo=UTC))
    assert a.try_acquire_or_renew()

    spec = stored(server)
    assert MICRO.fullmatch(str(spec["acquireTime"])) and MICRO.fullmatch(str(spec["renewTime"]))
    assert spec["renewTime"] == "2026-03-02T09:00:01.500000Z"
    lease = client.CoordinationV1Api(apis[1].client).read_namespaced_lease(NAME, NAMESPACE)
    assert isinstance(lease, client.V1Lease) and lease.spec is not None
    assert lease.spec.holder_identity == "agent-a"
    assert lease.spec.lease_duration_seconds == 15
    assert lease.spec.lease_transitions == 0
    assert lease.spec.renew_time == datetime(2026, 3, 2, 9, 0, 1, 500000, tzinfo=UTC)
    assert lease.spec.acquire_time == lease.spec.renew_time


def test_micro_time_has_six_fractional_digits_and_z() -> None:
    moment = datetime(2026, 3, 2, 10, 0, tzinfo=UTC).astimezone(datetime.now().astimezone().tzinfo)
    assert leader.micro_time(moment) == "2026-03-02T10:00:00.000000Z"


def test_leader_election_refuses_a_renew_deadline_not_shorter_than_the_duration(
    apis: tuple[Api, Api],
) -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        leader.Elector(apis[0], NAMESPACE, NAME, "agent-a", duration=10.0, renew_deadline=10.0)


@pytest.mark.parametrize("seed", range(8))
def test_two_replicas_never_both_lead_whatever_the_interleaving(apis: tuple[Api, Api], seed: int) -> None:
    chance = random.Random(seed)
    # one real time; each replica's clock is offset from it (clocks run at one rate)
    clock_a, clock_b = Clock(chance.uniform(-1e4, 1e4)), Clock(chance.uniform(-1e4, 1e4))
    a, b = elector(apis[0], "agent-a", clock_a), elector(apis[1], "agent-b", clock_b)
    crashed: set[str] = set()
    leads = {"agent-a": 0, "agent-b": 0}
    for _ in range(60):
        step = chance.choice([0.5, 1.0, 2.0, 4.0, 9.0])
        clock_a.step(step)
        clock_b.step(step)
        for e in chance.sample([a, b], 2):
            if e.identity in crashed:
                continue
            if chance.random() < 0.05:
                crashed.add(e.identity)  # stops calling: no renewal, no release
            elif chance.random() < 0.05:
                e.release()
            else:
                e.try_acquire_or_renew()
        assert not (a.is_leader and b.is_leader)
        for e in (a, b):
            leads[e.identity] += e.is_leader
        if len(crashed) == 2:
            crashed.clear()  # both restart (same identities, same clocks)
    assert sum(leads.values()) > 0


def test_run_hands_over_on_a_clean_stop(kubeconfig: Path) -> None:
    events: list[str] = []
    lock = threading.Lock()

    def note(what: str) -> None:
        with lock:
            events.append(what)

    apis = [replica_api(kubeconfig) for _ in range(2)]
    electors = [
        leader.Elector(api, NAMESPACE, NAME, name, duration=3.0, renew_deadline=2.0, retry_period=0.05)
        for api, name in zip(apis, ("agent-a", "agent-b"), strict=True)
    ]
    stops = [threading.Event(), threading.Event()]
    threads = [
        threading.Thread(target=e.run, args=(stop, lambda n=e.identity: note(f"{n} started"),
                                             lambda n=e.identity: note(f"{n} stopped")))
        for e, stop in zip(electors, stops, strict=True)
    ]  # fmt: skip
    threads[0].start()
    until(lambda: events == ["agent-a started"])
    threads[1].start()
    time.sleep(0.3)
    assert events == ["agent-a started"] and electors[0].is_leader and not electors[1].is_leader

    stops[0].set()
    threads[0].join(timeout=5)
    until(lambda: len(events) == 3)  # well before the 3 s duration: a released the lease

    assert events == ["agent-a started", "agent-a stopped", "agent-b started"]
    stops[1].set()
    threads[1].join(timeout=5)
    assert events[-1] == "agent-b stopped"


def test_run_stops_acting_by_the_renew_deadline_when_renewals_hang(kubeconfig: Path, server: Cluster) -> None:
    stopped = threading.Event()
    started = threading.Event()
    e = leader.Elector(
        replica_api(kubeconfig),
        NAMESPACE,
        NAME,
        "agent-a",
        duration=2.0,
        renew_deadline=1.0,
        retry_period=0.1,
    )
    stop = threading.Event()
    thread = threading.Thread(target=e.run, args=(stop, started.set, stopped.set))
    thread.start()
    assert started.wait(5)

    server.faults.add(Fault.slow(3.0, method="PATCH", times=None))  # every write hangs past the duration
    hung = time.monotonic()
    assert stopped.wait(5)
    took = time.monotonic() - hung

    assert took < 2.0  # by the renew deadline (1 s) and a request's slack: before anyone may take over
    assert not e.is_leader
    server.faults.clear()
    stop.set()
    thread.join(timeout=5)
