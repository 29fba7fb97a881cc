"""The in-cluster agent run in-process against a test API server, as its Deployment runs it: a builder for tests.

`running(fleet, server)` starts `reconciler.cluster.agent.loop.Agent` for cluster `east` of fleet
`acme` through the kubeconfig `ClusterFleet` wrote, with its watches and worker on threads and a
clock the test sets; `until(...)` waits for something the agent does to show on the server.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from reconciler.cluster import connect
from reconciler.cluster.agent.loop import Agent, Quiet
from tests.support.clusterfleet import FAST

EAST = "east"


class Clock:
    """A wall clock a test moves by hand (epoch seconds)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def an_agent(cluster: str = EAST, fleet: str = "acme", clock: Callable[[], float] = time.time,
             leading: Callable[[], bool] = lambda: True) -> Agent:  # fmt: skip
    target = connect.Target(cluster, cluster, fleet, policy=FAST)
    return Agent(connect.api(target), cluster, fleet, leading=leading, observer=Quiet(), clock=clock)


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


def until(check: Callable[[], Any], timeout: float = 5.0, what: str = "the agent to act") -> Any:
    """`check()`'s first truthy answer, polled; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"waited {timeout} s for {what}")
