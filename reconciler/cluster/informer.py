"""Caches of one kind of a cluster, kept current by list-then-watch (client-go's informers, small): the agent's and the long-lived reconciler's.

One `Cache` per kind: a consistent list, then a watch from its resourceVersion; a watch that ends
(server timeout, dropped connection) resumes from the last version seen, one that is too old (410)
lists again. Each object is cut down on arrival to what its reader reads (`slim`: no managedFields,
images or full status, §7.6; `shape`: a list page decoded into those fields alone), and a list
updates the cache page by page in place, so a relist of 10,000 nodes never holds two copies of
them. Every change is handed to `on_change(kind, type, obj)` (the object as kept) as it arrives,
so the agent reacts to a fence within one event, not one poll. A reader's own writes go in at
once (`put`, `drop`), ahead of their watch events, so a decision never reads a state it already
changed; an event older than what is kept (a resourceVersion lower than the kept object's: the
old pod's deletion arriving after its successor was put) changes nothing, nor does a write's answer
older than an event already kept (another writer's change just after it). `current` says whether
the cache may be read as a snapshot: listed whole, no relist half done, its watch not failing.
`close` ends the watch stream it is reading, so a stopped `run` returns at once. Decides
nothing; writes nothing to the cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from reconciler.cluster import changes, kinds
from reconciler.cluster.api import Api
from reconciler.cluster.errors import ClusterError, Gone, NotFound

Obj = dict[str, Any]
OnChange = Callable[[kinds.Kind, str, Obj], None]
Slim = Callable[[Obj], Obj]
WATCH_SECONDS = 300  # a watch's own timeout: the server ends it, we resume from the last version
PAGE = 500  # objects per list page, as kubectl asks (nodes: fewer, they are large)


def key_of(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def unmanaged(obj: Obj) -> Obj:
    """The default cut: the object without its managedFields (the server's bookkeeping, often
    half an object) and without the last-applied annotation."""
    annotations = (changes.as_listed(obj).get("metadata") or {}).get("annotations") or {}
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return obj


class Cache:
    """Objects of one kind matching `selector`, by (namespace, name), each as `slim` keeps it."""

    def __init__(self, api: Api, kind: kinds.Kind, selector: str = "", on_change: OnChange | None = None,
                 slim: Slim = unmanaged, page: int = PAGE, shape: Any = None) -> None:  # fmt: skip
        self.api, self.kind, self.selector, self.on_change, self.slim = api, kind, selector, on_change, slim
        self.page = page  # objects per list page: a page is held whole while it is cut down
        self.shape = shape  # the fields `slim` reads, decoded alone from a list page (`Api.pages`)
        self.objects: dict[tuple[str, str], Obj] = {}
        self.synced = threading.Event()
        self.error = ""  # the last failure, for /readyz
        self._version = ""
        self._relisting = False
        self._lock = threading.Lock()
        self._stream: Callable[[], None] | None = None  # ends the watch being read (`close`)
        self._closed = False

    # ------------------------------------------------------------------------------- reading

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self.objects.values())

    def get(self, name: str, namespace: str = "") -> Obj | None:
        with self._lock:
            return self.objects.get((namespace, name))

    def pick(self, names: Iterable[str], namespace: str = "") -> list[Obj]:
        """The objects named `names` that are kept (one lock for all, not one per name)."""
        with self._lock:
            return [o for o in (self.objects.get((namespace, n)) for n in names) if o is not None]

    def __len__(self) -> int:
        return len(self.objects)

    @property
    def served(self) -> bool:
        """Whether the last list found its kind served (a kind whose CRD is not installed lists
        empty, with no version to watch from, and is tried again after a pause)."""
        return bool(self._version)

    @property
    def current(self) -> bool:
        """Whether the cache is a snapshot to act on: listed whole once, no relist half way through
        (old and new objects side by side), and its watch not failing (`error`)."""
        return self.synced.is_set() and not self._relisting and not self.error

    # ------------------------------------------------------------------------ own writes

    def put(self, obj: Obj) -> None:
        """A reader's own write, as the server answered it; never over a newer one kept (an event the
        watch brought between the write and this call: another writer's change after it)."""
        kept = self.slim(obj)
        with self._lock:
            if not _older(kept, self.objects.get(key_of(kept))):
                self.objects[key_of(kept)] = kept

    def drop(self, name: str, namespace: str = "") -> None:
        with self._lock:
            self.objects.pop((namespace, name), None)

    # ------------------------------------------------------------------------------ syncing

    def relist(self) -> None:
        """A fresh consistent list, page by page into the cache in place; what changed since the
        last one is reported as events (objects no longer listed as DELETED, at the end)."""
        listed: set[tuple[str, str]] = set()
        self._relisting = True  # left set when the list fails: a relist half done is no snapshot
        version = self._listed(listed)
        with self._lock:
            gone = [self.objects.pop(k) for k in [k for k in self.objects if k not in listed]]
            self._version = version
            self._relisting = False
        for obj in gone:
            self._tell("DELETED", obj)
        self.synced.set()

    def _listed(self, listed: set[tuple[str, str]]) -> str:
        version = ""
        for _ in range(3):
            try:
                version = self._list_into(listed)
                break
            except NotFound:  # the kind is not served (its CRD is not installed yet): nothing of it
                break
            except Gone:  # the list's snapshot expired mid-way: again from the start
                listed.clear()
        else:
            raise Gone(f"{self.api.cluster}: listing {self.kind.plural} kept expiring mid-way", code=410)
        return version

    def _list_into(self, listed: set[tuple[str, str]]) -> str:
        for page in self.api.pages(self.kind, self.selector or None, limit=self.page, shape=self.shape):
            if page.version is not None:
                return page.version
            for raw in page.items:
                obj = self.slim(raw)
                key = key_of(obj)
                listed.add(key)
                with self._lock:
                    old = self.objects.get(key)
                    self.objects[key] = obj
                if old is None or _version_of(old) != _version_of(obj):
                    self._tell("ADDED" if old is None else "MODIFIED", obj)
            page.items.clear()
        return ""

    def watch_once(self, seconds: int = WATCH_SECONDS) -> None:
        """Follow one watch stream until it ends; list again when it expired or was never started."""
        if not self._version:
            self.relist()
            if not self._version:
                return
        try:
            for event in self.api.watch(self.kind, self.selector, self._version, seconds, self._reading):
                kind, raw = event.get("type"), event.get("object") or {}
                version = _version_of(raw)
                if kind == "BOOKMARK":
                    self._version = version or self._version
                    continue
                obj = self.slim(raw)
                with self._lock:
                    self._version = version or self._version
                    if _older(obj, self.objects.get(key_of(obj))):
                        continue  # what is kept is newer (put by its reader): this event is behind it
                    if kind == "DELETED":
                        self.objects.pop(key_of(obj), None)
                    else:
                        self.objects[key_of(obj)] = obj
                self._tell(str(kind), obj)
        except Gone:
            self.relist()
        finally:
            self._stream = None

    def _reading(self, end: Callable[[], None]) -> None:
        """The watch stream now read (the watch works again: no error), and how to end it (`close`)."""
        self._stream, self.error = end, ""
        if self._closed:
            end()

    def close(self) -> None:
        """End the watch being read, and any started after (`run` returns once its `stop` is set)."""
        self._closed = True
        end = self._stream
        if end is not None:
            end()

    def run(self, stop: threading.Event, beat: Callable[[], None] = lambda: None) -> None:
        """List, then watch until `stop`; a failure is kept in `error` and retried after a pause, as
        is a kind not served yet (its CRD not installed: an empty list, and nothing to watch)."""
        pause = 0.2
        while not stop.is_set():
            beat()
            try:
                self.watch_once()
                self.error = ""
                if self._version:
                    pause = 0.2
                    continue
            except ClusterError as err:
                self.error = str(err)
            stop.wait(pause)
            pause = min(pause * 2, 10.0)

    def _tell(self, kind: str, obj: Obj) -> None:
        obj.setdefault("apiVersion", self.kind.api_version)
        obj.setdefault("kind", self.kind.kind)
        if self.on_change is not None:
            self.on_change(self.kind, kind, obj)


def _version_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _older(event: Obj, kept: Obj | None) -> bool:
    """Whether an event's object is older than the one kept: both resourceVersions are the integers
    kube-apiserver gives (etcd's revisions; compared as apimachinery's `CompareResourceVersion`
    does) and the event's is lower. Anything else is taken in, as an informer takes every event."""
    if kept is None:
        return False
    have, seen = _version_of(kept), _version_of(event)
    return have.isdigit() and seen.isdigit() and int(seen) < int(have)


def wait_synced(caches: list[Cache], stop: threading.Event, timeout: float) -> bool:
    """Whether every cache listed once within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    for cache in caches:
        while not cache.synced.wait(0.05):
            if stop.is_set() or time.monotonic() > deadline:
                return False
    return True
