"""The in-cluster agent run in-process against the real control plane, as its Deployment runs it: a builder for tests.

`an_agent()` is `reconciler.cluster.agent.loop.Agent` for cluster `east` of fleet `acme`, through
the agent's kubeconfig `ClusterFleet` wrote (deploy/'s jobtree-agent ServiceAccount: `agent_api`),
with a clock the test sets; `running(agent)` starts its
watches and worker on threads, `act_once(agent)` makes one decision with none; `until(...)` waits
for something the agent does to show on the server.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import config

from reconciler.cluster import journal
from reconciler.cluster.agent import world
from reconciler.cluster.agent.loop import Agent, Quiet
from reconciler.cluster.agent.swap import Prepared
from reconciler.cluster.api import AGENT_FIELD_MANAGER, Api
from tests.support.clusterfleet import AGENT_KUBECONFIG, API, FAST
from tests.support.controlplane import Cluster

EAST = "east"


class Clock:
    """A clock a test moves by hand (a wall clock's epoch seconds, or a replica's monotonic one)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


def an_agent(cluster: str = EAST, fleet: str = "acme", clock: Callable[[], float] = time.time,
             leading: Callable[[], bool] = lambda: True) -> Agent:  # fmt: skip
    return Agent(agent_api(cluster), cluster, fleet, leading=leading, observer=Quiet(), clock=clock)


def agent_api(cluster: str = EAST) -> Api:
    """`cluster`'s API as the agent's ServiceAccount reaches it (the kubeconfig ClusterFleet wrote)."""
    client = config.new_client_from_config(config_file=os.environ[AGENT_KUBECONFIG], context=cluster)
    return Api(client, cluster, FAST, manager=AGENT_FIELD_MANAGER)


def act_once(agent: Agent) -> Prepared | None:
    """One decision on what the cluster lists now, with no thread: every cache listed, the nodes
    the Lease mirrors name that the cluster no longer lists taken as deleted (what the node watch
    would have told a running agent), then `act`."""
    for cache in agent.caches.values():
        cache.relist()
    listed = {key[1] for key in agent.caches["nodes"].objects}
    agent.gone = {x.node for x in world.leases_of(agent.caches["leases"].items())} - listed
    return agent.act(0.0)


@contextlib.contextmanager
def running(agent: Agent) -> Iterator[Agent]:
    """The agent's threads, started and synced; stopped when the block ends."""
    stop = threading.Event()
    agent.start(stop)
    assert agent.synced(stop, 10.0), "the agent's caches did not sync"
    try:
        yield agent
    finally:
        stop.set()
        agent.wake.put(time.monotonic())


def entries(server: Cluster) -> list[dict]:
    """The journal entries on the server."""
    return server.list(API, "JournalEntry")


def applied(server: Cluster) -> list[dict]:
    """The journal entries whose every step is carried out (the swap done, not just begun)."""
    return [e for e in entries(server) if journal.state_of(e) == journal.APPLIED]


def until(check: Callable[[], Any], timeout: float = 10.0, what: str = "the agent to act") -> Any:
    """`check()`'s first truthy answer, polled; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"waited {timeout} s for {what}")
