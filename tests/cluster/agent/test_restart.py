"""An agent killed between any two steps of a swap, and restarted, finishes it: no double pod, no lost swap (§7.4).

The same fleet as `test_swap`: `r1` (16 GPUs, groups of 8, 8 spare GPUs per group) on n1..n4; n2 is
tainted out of service, so group 1 moves onto its spare on n4. A full swap is 11 writes: the
entry, the spare's placeholder pod deleted, the replacement created, the failed pod deleted, the
cordon, two Lease mirrors deleted, one applied with its status, the run's status, the entry Applied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.cluster.agent.loop import Agent, Quiet
from reconciler.cluster.api import Api
from tests.support.agents import Clock, agent_api, an_agent, applied, running, until
from tests.support.clusterfleet import (
    API,
    OUT_OF_SERVICE,
    T0,
    api,
    pods,
    spared_fleet,
)
from tests.support.controlplane import Cluster

WRITES = 11


class Killed(BaseException):
    """The agent's process dies here (nothing in the agent catches it)."""


class DyingApi(Api):
    """An Api whose process is killed just before its `left`+1-th write leaves."""

    def __init__(self, base: Api, left: int) -> None:
        super().__init__(base.client, base.cluster, base.policy, base.timeout)
        self.left = left

    def _send(self, method: str, path: str, *rest: Any, **kw: Any) -> Any:
        if method != "GET":
            if self.left == 0:
                raise Killed(f"killed before {method} {path}")
            self.left -= 1
        return super()._send(method, path, *rest, **kw)


@pytest.mark.parametrize("survived", range(WRITES))
def test_a_swap_killed_after_any_number_of_writes_is_finished_by_the_next_agent(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, survived: int
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    api(fleet).patch_node("n2", {"spec": {"taints": [OUT_OF_SERVICE]}})
    dying = Agent(DyingApi(agent_api(), survived), "east", "acme", leading=lambda: False,
                  observer=Quiet(), clock=Clock(T0 + 60))  # fmt: skip
    with running(dying):
        until(lambda: dying.fences()[1], what="the agent to see n2 fenced")
        with pytest.raises(Killed):
            dying.led = True
            dying.act(0.0)
    with running(an_agent(clock=Clock(T0 + 90))) as second:
        until(lambda: applied(server))
        until(lambda: second.led, what="the second agent to take over")
    (entry,) = server.list(API, "JournalEntry")  # one swap, never a second decision for the same fence
    at = (
        "2026-03-02T09:01:00Z" if survived > 0 else "2026-03-02T09:01:30Z"
    )  # decided by the first or the second
    assert entry["spec"]["at"] == at
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n4"]
    creations = [
        r for r in server.requests if r.method == "POST" and r.path.endswith("/pods") and r.code == 201
    ]
    assert len(creations) == 1  # the replacement was created once
    leases = sorted(
        (x["spec"]["group"], x["spec"]["slice"]["nodes"][0]) for x in server.list(API, "Lease", "t")
    )
    assert leases == [(0, "n1#0"), (0, "n3#0"), (1, "n4#0")]
    node = server.get("v1", "Node", "n2")
    assert node is not None and node["spec"]["unschedulable"] is True
