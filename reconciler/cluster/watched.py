"""The long-lived reconciler's clusters (`reconcile --interval`): each one's nodes, pods, mirrors and Services kept by list-then-watch between passes, read by observe and apply instead of listed every pass.

One `Watched` per configured cluster: its nodes (`observations.slim_node`, decoded into
`observations.NodeFields` while listed, as observe cuts them), every pod (jobtree's as
`changes.as_listed` keeps them for apply, any other cut down to `observations.slim_pod`), and
jobtree's mirrors and Services (`MIRRORED`: what `sync.read_live` lists of them, by the same
label, cut the same way), each an `informer.Cache` on a thread of its own. A pass reads the nodes
and pods (`Watches.view`) only when both are `current`: listed whole, no relist half done, the
watch not failing; apply reads the mirrors and Services (`Watched.owned`, when it reads what is
live) only when all of theirs are, and every kind was served when listed. Otherwise it is told
why, and lists as a one-shot pass does (`passes.clusters`, `Applied.listed` say so): nothing acts
on a half-synced cache. A pass starts the watches of clusters not watched yet and waits for their first lists
(`SYNC_WAIT`) on its own thread (`Watches.start`), so Ctrl-C ends the wait; later passes do not wait.

Why a cache that lags errs on the safe side, never on the side of a pod on GPUs another pod holds
(§7.6, issue 27 item 3): a cache is a consistent list as of its last resourceVersion, moved forward
only by the server's own events in order. An object leaves it only on its DELETED event or when a
newer consistent list lacks it, both of which the server sends once the object is gone from
etcd; a terminating pod (deletionTimestamp set, GPUs still held) stays in it as it is listed. So
every pod the cache lacks is gone from the server, or was created after the cache's version (which
a list at the start of a pass misses the same way); every pod it holds still holds its GPUs or
released them since. A lagging view can therefore only count more GPUs held than there are: the
planner places less, apply re-creates nothing the cache still shows, and capacity reads low, not
high. What apply deletes it waits for on a fresh list and watch of its own (`sync._wait_gone`),
never on this cache, before it creates anything on those GPUs. The pass's own writes go in at once
(`put`, from sync's answers, through `observe.Listed.wrote`), so the next pass never reads a pod
as it was before the pass changed it; a deletion is not taken in until the server reports the pod
gone (the cache keeps it, terminating or not: the safe side). An event older than a pod put
since (the predecessor's DELETED after a replacement was put) changes nothing (`informer`).
Nodes: a cordon or taint the cache has not seen yet is the list taken a moment earlier; the
commit records what was observed, and the next pass sees it.

The mirrors and Services hold no GPUs; what a lag there may cost is a write, and it costs one
sent twice or one pass late, never one lost and never a wrong prune. The cache converges on the
server: each object as the server's events, in order, leave it, or as apply's own write was
answered (`wrote`, put at once), whichever is newer (`informer.Cache.put` keeps an event newer
than the answer: another writer's change just after apply's is never hidden behind it). So an
object compared as jobtree wrote it while the server holds another writer's change (a hand edit,
the agent's Run status or Lease mirrors, §7.4) is one whose event has not arrived: that pass writes
nothing, the event arrives, the next pass compares it and restores it. An object compared as it was
before a change the server already holds gets the write anyway: apply is server-side apply of the
whole object, so a second one is idempotent. A deletion is not taken in until the server reports
it: an object pruned (or deleted by hand, or by the agent) whose DELETED event is late is pruned
again (the server answers 404, taken as done) or, if the record holds it, left unwritten that pass
and created by the next; that pass still writes the commit's mark on the FleetConfig status,
though the object is missing until the next pass (a prune and a re-add in two passes closer
together than the DELETED event takes to arrive; no test makes that window). A prune names the uid the cache holds (`sync._write`): an object deleted
and made again under its name since (the agent's Lease mirrors) answers 409, named, and is
compared again next pass; an object the cache lacks is never pruned. What the agent protects is
the journal's to say (`changes.compare`'s `guarded`), read by apply at its start, not cached.

`Watches.close` ends every watch stream and joins the threads. Decides nothing; writes nothing to
the cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from reconciler.cluster import changes, connect, informer, kinds, observations, stamp
from reconciler.cluster.errors import ClusterError

Obj = dict[str, Any]
SYNC_WAIT = 600.0  # seconds the first pass waits for the first lists (10,000 nodes: ~10-60 s here)
NODE_PAGE = 100  # nodes per list page: a page is held whole while it is decoded
JOIN = 10.0  # seconds a stopped watch thread is waited for (a list page being read finishes first)


Owned = dict[kinds.Key, Obj]
MIRRORED = tuple(k for k in kinds.OWNED if k != kinds.POD)  # what apply reads besides pods: mirrors, Services


@dataclass(frozen=True, slots=True)
class View:
    """One cluster's caches for a pass: its nodes and pods as listed, in the list's order, when they
    may be read (else `why` not, and the pass lists them); apply's hooks either way."""

    nodes: list[Obj] | None  # `observations.slim_node`, by name
    pods: list[Obj] | None  # by namespace and name
    wrote: Callable[[Obj], None]  # `Watched.wrote`: apply's own writes, taken in at once
    owned: Callable[[], Owned | str]  # `Watched.owned`: the mirrors and Services when apply reads them
    why: str = ""  # why the nodes and pods may not be read now ("" when they are given)


def kept_pod(fleet: str, pod: Obj) -> Obj:
    """A pod as its cache keeps it: jobtree's (any fleet's) and this fleet's as apply and observe
    read them (`changes.as_listed`), any other with only what capacity needs (`slim_pod`)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if labels.get(stamp.MANAGED_BY) == stamp.MANAGER or labels.get(stamp.FLEET) == fleet:
        return changes.as_listed(pod)
    return observations.slim_pod(pod)


class Watched:
    """One cluster's nodes, pods, mirrors and Services, kept by a watch thread each until `close`."""

    def __init__(self, target: connect.Target) -> None:
        api = connect.api(target)  # its own: the pass's request counts stay the pass's
        label_keys = {target.labels.get(k, k) for k in observations.TOPOLOGY_KEYS}
        self.nodes = informer.Cache(
            api, kinds.NODE, slim=lambda n: observations.slim_node(n, label_keys), page=NODE_PAGE,
            shape=observations.NodeFields,
        )  # fmt: skip
        self.pods = informer.Cache(api, kinds.POD, slim=lambda p: kept_pod(target.fleet, p))
        mine = f"{stamp.MANAGED_BY}={stamp.MANAGER}"  # what apply lists of them: jobtree's, any fleet's
        self.mirrors = {k: informer.Cache(api, k, mine, slim=changes.as_listed) for k in MIRRORED}
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=c.run, args=(self._stop,), name=f"watch-{target.name}-{c.kind.plural}", daemon=True)
            for c in self._caches()
        ]  # fmt: skip
        for thread in self._threads:
            thread.start()

    def _caches(self) -> list[informer.Cache]:
        return [self.nodes, self.pods, *self.mirrors.values()]

    def why_not(self) -> str:
        """Why the node and pod caches may not be read now ("" when they may)."""
        return _why_not([self.nodes, self.pods])

    def owned(self) -> Owned | str:
        """The mirrors and Services as their caches hold them now (by key), or why apply must list
        them: as `why_not`, or a kind not served when last listed (its CRD installed since)."""
        caches = list(self.mirrors.values())
        why = _why_not(caches)
        if not why and not all(c.served for c in caches):
            why = (
                "its caches of "
                + ", ".join(c.kind.plural for c in caches if not c.served)
                + " are not served yet"
            )
        if why:
            return why
        return {kinds.key(o): o for c in caches for o in c.items()}

    def wrote(self, obj: Obj) -> None:
        """An object apply wrote, as the server answered: into its kind's cache (none: nothing)."""
        kind = kinds.of(obj)
        cache = self.pods if kind == kinds.POD else self.mirrors.get(kind)
        if cache is not None:
            cache.put(obj)

    def wait(self, seconds: float) -> str:
        """Wait at most `seconds` for every cache to be current; why the nodes' and pods' are not, else ""."""
        deadline = time.monotonic() + seconds
        caches = self._caches()
        while True:
            why = _why_not(caches)
            if not why or any(c.error for c in caches) or time.monotonic() >= deadline:
                return self.why_not()
            time.sleep(0.05)

    def view(self) -> View:
        """The nodes and pods when they may be read (`why_not`), with apply's hooks either way: the
        mirrors' and Services' caches are current or not on their own."""
        why = self.why_not()
        if why:
            return View(None, None, self.wrote, self.owned, why)
        pods = sorted(self.pods.items(), key=informer.key_of)
        nodes = sorted(self.nodes.items(), key=lambda n: n["metadata"]["name"])
        return View(nodes, pods, self.wrote, self.owned)

    def close(self) -> None:
        self._stop.set()
        for cache in self._caches():
            cache.close()
        for thread in self._threads:
            thread.join(JOIN)


def _why_not(caches: list[informer.Cache]) -> str:
    """Why `caches` may not be read as a snapshot now ("" when they may)."""
    failing = [f"{c.kind.plural}: {c.error}" for c in caches if c.error]
    if failing:
        return "its watch failed (" + "; ".join(failing) + ")"
    if not all(c.synced.is_set() for c in caches):
        return "its caches have not listed everything yet"
    if not all(c.current for c in caches):
        return "its watch is listing again (its resourceVersion expired)"
    return ""


def _key(target: connect.Target) -> tuple[Any, ...]:
    return (target.name, target.context, target.fleet, tuple(sorted(target.labels.items())))


class Watches:
    """Every configured cluster's `Watched`, started by a pass (`start`) and kept until `close`."""

    def __init__(self, first_wait: float = SYNC_WAIT) -> None:
        self.first_wait = first_wait
        self._by: dict[tuple[Any, ...], Watched] = {}
        self._failed: dict[tuple[Any, ...], str] = {}  # why a cluster's watch could not start this pass
        self._lock = threading.Lock()

    def start(self, targets: Iterable[connect.Target]) -> None:
        """Watch every cluster of `targets` not watched yet, stop watching the others, and wait at
        most `first_wait` seconds for the new caches' first lists. Called on the pass's own thread,
        so a signal (Ctrl-C) stops the wait."""
        targets = list(targets)
        self.retain(targets)
        fresh: list[Watched] = []
        with self._lock:
            self._failed.clear()
            for target in targets:
                if _key(target) in self._by:
                    continue
                try:
                    self._by[_key(target)] = watched = Watched(target)
                except ClusterError as err:
                    self._failed[_key(target)] = f"its watch could not start ({err})"
                    continue
                fresh.append(watched)
        deadline = time.monotonic() + self.first_wait
        for watched in fresh:
            watched.wait(max(0.0, deadline - time.monotonic()))

    def view(self, target: connect.Target) -> View | str:
        """The cluster's caches (`Watched.view`), or why it has none: its watch could not start."""
        with self._lock:
            watched = self._by.get(_key(target))
            failed = self._failed.get(_key(target), "its watch has not started")
        if watched is None:
            return failed
        return watched.view()

    def get(self, cluster: str) -> Watched | None:
        """The caches of the cluster named `cluster`, once a pass started them."""
        with self._lock:
            return next((w for k, w in self._by.items() if k[0] == cluster), None)

    def retain(self, targets: Iterable[connect.Target]) -> None:
        """Stop watching clusters no longer configured (or configured differently)."""
        wanted = {_key(t) for t in targets}
        with self._lock:
            dropped = [self._by.pop(k) for k in [k for k in self._by if k not in wanted]]
        for watched in dropped:
            watched.close()

    def close(self) -> None:
        """End every watch and join its thread."""
        self.retain(())
