"""The agent's loop (§7.4): watch, notice a fence, decide on the mirrors' world, carry the swap out, journal it.

Threads: one `informer.Cache` per kind watched (its FleetConfig; nodes; this fleet's pods, Runs,
Budgets, Lease mirrors and journal entries), each keeping only what the agent reads (§7.6), and
one worker that acts, only while this replica leads. Events drive the work: a node event that
makes a node fenced (deleted, out-of-service taint, NotReady past the fleet's
`failure.notReadyGraceSeconds`; a cordon never) names it to the worker at once; a NotReady node
is named when its grace ends (a timer, since no event announces it). Between those the worker
sleeps: it looks at the nodes named since it last acted, never at every node. On taking the lead
it first finishes every entry left in `Intent` (a killed or deposed leader's), then looks at
every node once. Every write it makes checks the leader's renew deadline first (`Api.fence`): a
replica that lost the lead stops at its next write (`LostLead`) and `on_lost` ends the process,
as controller-runtime does. Each decision is one JSON log line per group (run, group, nodes,
journal id; a swap's with its seconds from the fence's event to the replacement created, and to the
decision). Owns no decision rule (`planner.failover` does) and no step (`swap` does); reads the
clock (the instant of a swap), which the planner never does.
"""

from __future__ import annotations

import heapq
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from planner.topology import is_fenced
from planner.world import Lease, NodeObs
from reconciler.cluster import journal, kinds, observations, stamp
from reconciler.cluster.agent import swap
from reconciler.cluster.agent import world as agent_world
from reconciler.cluster.api import Api
from reconciler.cluster.errors import ClusterError, LostLead, TemporaryClusterError
from reconciler.cluster.informer import Cache, unmanaged, wait_synced
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


BEAT_EVERY = 10.0  # seconds: the worker beats for /healthz at least this often, even with nothing to do
NODE_PAGE = 100  # nodes per list page: a real GPU node is ~20 KB, held whole only while its page is cut
GONE_WAIT = 60.0  # seconds a swap waits at most for the pods on the spare's GPUs to be gone


@dataclass(slots=True)
class Agent:
    """One cluster's agent for one fleet. `leading()` says whether this replica may act now."""

    api: Api
    cluster: str
    fleet: str
    leading: Callable[[], bool] = lambda: True
    observer: Observer = field(default_factory=Quiet)
    clock: Callable[[], float] = time.time
    on_lost: Callable[[], None] = lambda: None  # the lead was lost mid-work: the process should end
    wake: queue.Queue[float] = field(default_factory=queue.Queue)
    caches: dict[str, Cache] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # nodes seen deleted
    led: bool = False
    _settings: tuple[str, agent_world.Fleet | None] = ("", None)  # (resourceVersion, parsed)
    _named: dict[str, float] = field(
        default_factory=dict
    )  # node -> when its first event since the last act came (monotonic): it may be a fence
    _due: list[tuple[int, str]] = field(
        default_factory=list
    )  # (instant its grace ends, node) of NotReady nodes
    _everything: bool = True  # look at every node at the next act (a new lead, new fleet settings)
    _mapping: dict[str, str] = field(
        default_factory=dict
    )  # topology key -> node label key, as nodes are kept
    _due_at: dict[str, int] = field(default_factory=dict)  # node -> when its grace ends (in `_due`)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pods_gone: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        mine = stamp.selector(self.fleet)
        for name, kind, selector, slim, page in (
            ("fleet", kinds.FLEET, mine, unmanaged, 500),
            ("nodes", kinds.NODE, "", self._slim_node, NODE_PAGE),
            ("pods", kinds.POD, mine, observations.slim_pod, 500),
            ("runs", kinds.RUN, mine, agent_world.slim_mirror, 500),
            ("budgets", kinds.BUDGET, mine, agent_world.slim_mirror, 500),
            ("leases", kinds.LEASE, mine, agent_world.lease_mirror, 500),
            ("journal", kinds.JOURNAL, f"{mine},{journal.CLUSTER_LABEL}={self.cluster}", unmanaged, 500),
        ):
            self.caches[name] = Cache(self.api, kind, selector, self._changed, slim, page)

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

    def _slim_node(self, raw: Obj) -> Obj:
        """A node as kept: what `observations.node_obs` reads (the topology labels only), with its
        `obs` worked out once, as the fleet's settings map its labels."""
        mapping = self._mapping
        node = observations.slim_node(raw, {mapping.get(k, k) for k in observations.TOPOLOGY_KEYS})
        node["obs"], _ = observations.node_obs(node, mapping, self.cluster)
        return node

    def _changed(self, kind: kinds.Kind, event: str, obj: Obj) -> None:
        if kind == kinds.NODE:
            self._node_changed(event, obj)
        elif kind == kinds.POD and event == "DELETED":
            with self._pods_gone:
                self._pods_gone.notify_all()
        elif kind == kinds.FLEET:
            self._fleet_changed()
        elif kind == kinds.JOURNAL:
            self.observer.awaiting_fold(len(journal.unfolded(self.caches["journal"].items())))

    def _node_changed(self, event: str, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        obs: NodeObs | None = obj.get("obs")
        with self._lock:
            if event == "DELETED":
                self.gone.add(name)
            else:
                self.gone.discard(name)
                if obs is None:
                    return
                grace = self._grace()
                if not is_fenced(obs, int(self.clock()), grace):
                    since = obs.not_ready_since if not obs.ready else None
                    due = since + grace if since is not None and grace is not None else None
                    if due is not None and self._due_at.get(name) != due:
                        self._due_at[name] = due
                        heapq.heappush(self._due, (due, name))
                        self.wake.put(time.monotonic())  # to sleep no longer than until its grace ends
                    return
            self._named.setdefault(name, time.monotonic())
        self.wake.put(time.monotonic())

    def _fleet_changed(self) -> None:
        """New fleet settings: the nodes kept again if the topology labels moved, and every node
        looked at once more (the NotReady grace may have changed)."""
        fleet = self.settings()
        mapping = dict(fleet.labels_of(self.cluster)) if fleet is not None else {}
        if mapping != self._mapping:
            self._mapping = mapping
            if self.caches["nodes"].synced.is_set():
                self.caches["nodes"].relist()
        with self._lock:
            self._everything = True
        self.wake.put(time.monotonic())

    # ------------------------------------------------------------------------------ acting

    def work(self, stop: threading.Event) -> None:
        """Act on every wake-up while leading; sleep until the next event, or the next NotReady
        node's grace end, and beat at least every `BEAT_EVERY` seconds."""
        self.synced(stop)
        while not stop.is_set():
            self.observer.beat("worker")
            try:
                seen = self.wake.get(timeout=self._sleep())
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
                    with self._lock:
                        self._everything = True
                self.act(seen)
            except LostLead as err:
                LOG.warning("lost the lead", extra=dict(why=str(err)))
                self.led = False
                self.on_lost()
                return
            except ClusterError as err:
                LOG.warning("error", extra=dict(error=str(err)))
                self.led = False  # finish what was begun (its entry is in Intent) before deciding anew
                stop.wait(0.5)
                self.wake.put(time.monotonic())  # try again: every step is idempotent

    def _sleep(self) -> float:
        """Seconds until the next NotReady node's grace ends (at most `BEAT_EVERY`)."""
        with self._lock:
            if not self._due:
                return BEAT_EVERY
            return max(0.0, min(BEAT_EVERY, self._due[0][0] - self.clock()))

    def finish_intents(self) -> int:
        """Carry out every entry of this cluster left in `Intent` (each step is idempotent)."""
        done = 0
        for entry in journal.listed(self.api, self.fleet, self.cluster):
            if journal.state_of(entry) != journal.INTENT:
                continue
            journal.check(entry, self.cluster)
            swap.carry_out(self.api, entry, self.fleet, int(self.clock()), gone=self.pods_gone)
            self._remember(entry)
            LOG.info("finished", extra=dict(entry=entry["metadata"]["name"]))
            self.observer.finished_intent()
            done += 1
        return done

    def act(self, seen: float, everything: bool = False) -> swap.Prepared | None:
        """Decide on the fenced nodes that hold open leases now among those named since the last
        act (every node with `everything`), and carry the swap out."""
        now = int(self.clock())  # the instant of the decision: fences judged and leases timed by it
        with self._lock:
            named, self._named = self._named, {}
            while self._due and self._due[0][0] <= now:
                _, name = heapq.heappop(self._due)
                self._due_at.pop(name, None)
                named.setdefault(name, seen)
            everything, self._everything = everything or self._everything, False
        if not named and not everything:
            return None
        leases = agent_world.leases_of(self.caches["leases"].items())
        nodes, fenced = self.fences(now, leases, None if everything else named)
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
        prepared = swap.prepare(
            world, self.cluster, self.fleet, fenced, self._pods_on({f.node for f in fenced})
        )
        if prepared is None:
            return None
        decided = time.monotonic()
        created_at: list[float] = []
        swap.carry_out(
            self.api, prepared.entry, self.fleet, now, lambda pod: created_at.append(time.monotonic()),
            gone=self.pods_gone,
        )  # fmt: skip
        self._remember(prepared.entry)
        # from the event that named a fenced node, not from the wake-up: a wake left by an event of
        # the swap before (its cordon) may be older, and would count time no fence waited
        since = min((named[f.node] for f in fenced if f.node in named), default=seen)
        latency = (created_at[0] if created_at else time.monotonic()) - since
        for run, group, node in prepared.swapped:
            self.observer.swapped(latency)
            LOG.info("swap", extra=dict(entry=prepared.id, run=run, group=group, to=node, fenced=_names(fenced),
                                        seconds=round(latency, 4), decided=round(decided - since, 4)))  # fmt: skip
        for run, group, reason in prepared.declined:
            self.observer.declined(reason)
            LOG.info("declined", extra=dict(entry=prepared.id, run=run, group=group, reason=reason,
                                            fenced=_names(fenced)))  # fmt: skip
        return prepared

    def fences(
        self, now: int | None = None, leases: list[Lease] | None = None, only: Iterable[str] | None = None
    ) -> tuple[dict[str, NodeObs], list[Fenced]]:
        """The GPU nodes open `leases` are on, by name (a fence's world needs no other: looked up
        one by one, so a decision costs the leases, never the cluster's 10,000 nodes), and the
        fenced ones among them at `now` (with the cause) among `only` (default: every node); by
        default the clock's now and the Lease mirrors' leases."""
        grace = self._grace()
        now = int(self.clock()) if now is None else now
        if leases is None:
            leases = agent_world.leases_of(self.caches["leases"].items())
        held = {x.node for x in leases}
        nodes: dict[str, NodeObs] = {}
        for item in self.caches["nodes"].pick(held):
            obs = item.get("obs")
            if obs is not None:
                nodes[obs.name] = obs
        looked = held if only is None else held & set(only)
        fenced = [
            Fenced(name, _cause(nodes[name]))
            for name in sorted(looked)
            if name in nodes and is_fenced(nodes[name], now, grace)
        ]
        with self._lock:
            gone = set(self.gone)
        fenced += [Fenced(n, "Deleted") for n in sorted(gone & looked) if n not in nodes]
        return nodes, sorted(fenced, key=lambda f: f.node)

    def _pods_on(self, nodes: set[str]) -> list[Obj]:
        """This fleet's pods on `nodes`, as the pod cache holds them."""
        return [p for p in self.caches["pods"].items() if (p.get("spec") or {}).get("nodeName") in nodes]

    def pods_gone(self, refs: list[tuple[str, str]], timeout: float = GONE_WAIT) -> None:
        """Return once every pod (namespace, name) of `refs` is gone from the API (its DELETED
        event seen, or, should the watch have missed it, a read finding none); a temporary error
        naming the pods still there after `timeout` seconds (the entry stays Intent and is finished
        by a later attempt)."""
        pods = self.caches["pods"]
        left = list(refs)
        deadline = time.monotonic() + timeout
        asked = time.monotonic()
        while True:
            left = [(ns, name) for ns, name in left if pods.get(name, ns) is not None]
            if left and time.monotonic() - asked >= 1.0:  # a lost event costs a second, never a wrong answer
                left = [(ns, name) for ns, name in left if self.api.get(kinds.POD, name, ns) is not None]
                asked = time.monotonic()
            if not left:
                return
            if time.monotonic() >= deadline:
                named = ", ".join(f"{ns}/{name}" for ns, name in left)
                raise TemporaryClusterError(f"{self.cluster}: {named} still terminating after {timeout:g} s")
            with self._pods_gone:
                self._pods_gone.wait(min(0.2, max(0.0, deadline - time.monotonic())))

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
