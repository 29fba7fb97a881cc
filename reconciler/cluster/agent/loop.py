"""The agent's loop (§7.4): watch, notice a fence, decide on the mirrors' world, carry the swap out, journal it.

Threads: one `cache.Cache` per kind watched (nodes; this fleet's pods, Runs, Budgets, Lease mirrors
and journal entries; its FleetConfig), and one worker that acts, only while this replica leads.
A node event that makes a node fenced (deleted, out-of-service taint, NotReady past the fleet's
`failure.notReadyGraceSeconds`; a cordon never) while it holds open leases wakes the worker at
once; a NotReady node wakes it when its grace ends. On taking the lead the worker first finishes
every entry left in `Intent` (a killed or deposed leader's), then looks at every node. Each
decision is one JSON log line per group (run, group, nodes, journal id). Owns no decision rule
(`planner.failover` does) and no step (`swap` does); reads the clock (the instant of a swap), which
the planner never does.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from planner.topology import is_fenced
from planner.world import Lease, NodeObs
from reconciler.cluster import journal, kinds, observations, stamp
from reconciler.cluster.agent import swap
from reconciler.cluster.agent import world as agent_world
from reconciler.cluster.agent.cache import Cache, wait_synced
from reconciler.cluster.api import Api
from reconciler.cluster.errors import ClusterError
from reconciler.cluster.journal import Fenced

Obj = dict[str, Any]
LOG = logging.getLogger("jobtree.agent")


class Observer(Protocol):
    """What the agent reports as it works (metrics, health)."""

    def swapped(self, seconds: float) -> None: ...
    def declined(self, reason: str) -> None: ...
    def finished_intent(self) -> None: ...
    def awaiting_fold(self, count: int) -> None: ...
    def beat(self, loop: str) -> None: ...


class Quiet:
    """An observer that keeps only the count of Intent entries finished (tests, and the default)."""

    def __init__(self) -> None:
        self.finished = 0

    def swapped(self, seconds: float) -> None:
        pass

    def declined(self, reason: str) -> None:
        pass

    def finished_intent(self) -> None:
        self.finished += 1

    def awaiting_fold(self, count: int) -> None:
        pass

    def beat(self, loop: str) -> None:
        pass


LOOK_EVERY = 1.0  # seconds: the worker's look between events (grace ends; leadership re-checked)


@dataclass(slots=True)
class Agent:
    """One cluster's agent for one fleet. `leading()` says whether this replica may act now."""

    api: Api
    cluster: str
    fleet: str
    leading: Callable[[], bool] = lambda: True
    observer: Observer = field(default_factory=Quiet)
    clock: Callable[[], float] = time.time
    wake: queue.Queue[float] = field(default_factory=queue.Queue)
    caches: dict[str, Cache] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # nodes seen deleted
    led: bool = False
    _settings: tuple[str, agent_world.Fleet | None] = ("", None)  # (resourceVersion, parsed)

    def __post_init__(self) -> None:
        mine = stamp.selector(self.fleet)
        for name, kind, selector in (
            ("nodes", kinds.NODE, ""),
            ("pods", kinds.POD, mine),
            ("runs", kinds.RUN, mine),
            ("budgets", kinds.BUDGET, mine),
            ("leases", kinds.LEASE, mine),
            ("fleet", kinds.FLEET, mine),
            ("journal", kinds.JOURNAL, f"{mine},{journal.CLUSTER_LABEL}={self.cluster}"),
        ):
            self.caches[name] = Cache(self.api, kind, selector, self._changed)

    # ---------------------------------------------------------------------------- watching

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        """The watch threads and the worker, started as daemons."""
        threads = [
            threading.Thread(target=c.run, args=(stop, lambda n=n: self.observer.beat(n)), name=f"watch-{n}",
                             daemon=True)
            for n, c in self.caches.items()
        ]  # fmt: skip
        threads.append(threading.Thread(target=self.work, args=(stop,), name="worker", daemon=True))
        self.wake.put(time.monotonic())  # look at every node once the caches are in
        for t in threads:
            t.start()
        return threads

    def synced(self, stop: threading.Event, timeout: float = 60.0) -> bool:
        return wait_synced(list(self.caches.values()), stop, timeout)

    def _changed(self, kind: kinds.Kind, event: str, obj: Obj) -> None:
        if kind == kinds.NODE:
            name = str((obj.get("metadata") or {}).get("name") or "")
            if event == "DELETED":
                self.gone.add(name)
                self.wake.put(time.monotonic())
            else:
                self.gone.discard(name)
                obs, _ = observations.node_obs(obj, {}, self.cluster)
                if obs is not None and is_fenced(obs, int(self.clock()), self._grace()):
                    self.wake.put(time.monotonic())
        elif kind == kinds.JOURNAL:
            self.observer.awaiting_fold(len(journal.unfolded(self.caches["journal"].items())))

    # ------------------------------------------------------------------------------ acting

    def work(self, stop: threading.Event) -> None:
        """Act on every wake-up while leading, and once a second between them (so a NotReady node
        whose grace ended, which no event announces, is seen within a second of it)."""
        self.synced(stop)
        while not stop.is_set():
            self.observer.beat("worker")
            try:
                seen = self.wake.get(timeout=LOOK_EVERY)
                while not self.wake.empty():  # one decision covers every fence seen so far
                    self.wake.get_nowait()
            except queue.Empty:
                seen = time.monotonic()
            if stop.is_set():
                return
            if not self.leading():
                self.led = False
                continue
            try:
                if not self.led:
                    self.finish_intents()
                    self.led = True
                self.act(seen)
            except ClusterError as err:
                LOG.warning("error", extra=dict(error=str(err)))
                stop.wait(0.5)
                self.wake.put(time.monotonic())  # try again: every step is idempotent

    def finish_intents(self) -> int:
        """Carry out every entry of this cluster left in `Intent` (each step is idempotent)."""
        done = 0
        for entry in journal.listed(self.api, self.fleet, self.cluster):
            if journal.state_of(entry) != journal.INTENT:
                continue
            journal.check(entry, self.cluster)
            swap.carry_out(self.api, entry, self.fleet, int(self.clock()))
            self._remember(entry)
            LOG.info("finished", extra=dict(entry=entry["metadata"]["name"]))
            self.observer.finished_intent()
            done += 1
        return done

    def act(self, seen: float) -> swap.Prepared | None:
        """Decide on the fenced nodes that hold open leases now, and carry the swap out."""
        now = int(self.clock())  # the instant of the decision: fences judged and leases timed by it
        leases = agent_world.leases_of(self.caches["leases"].items())
        nodes, fenced = self.fences(now, leases)
        if not fenced:
            return None
        fleet = self.settings()
        if fleet is None:
            LOG.warning("declined", extra=dict(reason="no readable FleetConfig mirror", nodes=_names(fenced)))
            return None
        runs = {
            f"{o['metadata'].get('namespace')}/{o['metadata']['name']}": o
            for o in self.caches["runs"].items()
        }
        world = agent_world.build(
            now, fleet, nodes, set(self.gone), leases, runs, self.caches["budgets"].items()
        )
        prepared = swap.prepare(world, self.cluster, self.fleet, fenced, self.caches["pods"].items())
        if prepared is None:
            return None
        created_at: list[float] = []
        swap.carry_out(
            self.api, prepared.entry, self.fleet, now, lambda pod: created_at.append(time.monotonic())
        )
        self._remember(prepared.entry)
        for run, group, node in prepared.swapped:
            self.observer.swapped((created_at[0] if created_at else time.monotonic()) - seen)
            LOG.info("swap", extra=dict(entry=prepared.id, run=run, group=group, to=node,
                                        fenced=_names(fenced)))  # fmt: skip
        for run, group, reason in prepared.declined:
            self.observer.declined(reason)
            LOG.info("declined", extra=dict(entry=prepared.id, run=run, group=group, reason=reason,
                                            fenced=_names(fenced)))  # fmt: skip
        return prepared

    def fences(
        self, now: int | None = None, leases: list[Lease] | None = None
    ) -> tuple[list[NodeObs], list[Fenced]]:
        """Every GPU node of the cluster, and the fenced ones holding open `leases` at `now` (with
        the cause); by default the clock's now and the Lease mirrors' leases."""
        fleet = self.settings()
        labels = fleet.labels_of(self.cluster) if fleet is not None else {}
        grace = fleet.settings.not_ready_grace if fleet is not None else None
        now = int(self.clock()) if now is None else now
        if leases is None:
            leases = agent_world.leases_of(self.caches["leases"].items())
        held = {x.node for x in leases}
        nodes: list[NodeObs] = []
        fenced: list[Fenced] = []
        for raw in self.caches["nodes"].items():
            obs, _ = observations.node_obs(raw, labels, self.cluster)
            if obs is None:
                continue
            nodes.append(obs)
            if obs.name in held and is_fenced(obs, now, grace):
                fenced.append(Fenced(obs.name, _cause(obs)))
        fenced += [Fenced(n, "Deleted") for n in sorted(self.gone & held)]
        return nodes, sorted(fenced, key=lambda f: f.node)

    def _remember(self, entry: Obj) -> None:
        """The entry's effect in the caches at once, ahead of its watch events."""
        spec = entry["spec"]
        leases = self.caches["leases"]
        for item in spec.get("closed") or []:
            leases.drop(item["name"], item["namespace"])
        for item in spec.get("opened") or []:
            leases.put({"apiVersion": kinds.LEASE.api_version, "kind": "Lease",
                        "metadata": {"name": item["name"], "namespace": item["namespace"]},
                        "spec": item["spec"], "status": {"closed": False}})  # fmt: skip
        pods = self.caches["pods"]
        for ref in spec["pods"]["delete"]:
            pods.drop(ref["name"], ref["namespace"])
        for pod in spec["pods"]["create"]:
            pods.put(pod)

    def settings(self) -> agent_world.Fleet | None:
        """The fleet's settings from its FleetConfig mirror (parsed once per version); None when
        there is none or it does not read."""
        obj = self.caches["fleet"].get(self.fleet)
        if obj is None:
            return None
        version = str(obj["metadata"].get("resourceVersion") or id(obj))
        if self._settings[0] != version:
            try:
                self._settings = (version, agent_world.fleet_of(obj))
            except ValueError as err:  # pydantic's ValidationError is one
                LOG.warning("unreadable", extra=dict(what=f"FleetConfig {self.fleet}", error=str(err)[:300]))
                self._settings = (version, None)
        return self._settings[1]

    def _grace(self) -> int | None:
        fleet = self.settings()
        return fleet.settings.not_ready_grace if fleet is not None else None


def _cause(obs: NodeObs) -> str:
    if obs.deleted:
        return "Deleted"
    if obs.out_of_service:
        return "OutOfService"
    return "NotReady"


def _names(fenced: list[Fenced]) -> list[str]:
    return [f.node for f in fenced]
