"""The object store: one lock, one resourceVersion counter, per-kind per-namespace indexes, history.

Plays etcd's part. Every change bumps the single global revision (an object's `resourceVersion`),
and is kept in a bounded history that watches replay and consistent paginated lists roll back
through; asking for a revision older than the window is `410 Expired`, as after etcd compaction.
Stored objects are never mutated after `write`: readers may share them, writers pass fresh dicts.
It validates nothing and knows no HTTP.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

StorageKey = tuple[str, str]
Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Change:
    """One revision: what happened to which object, its new state and the state before."""

    revision: int
    key: StorageKey
    namespace: str
    name: str
    type: str  # ADDED, MODIFIED, DELETED
    obj: Obj
    old: Obj | None


class TooOld(Exception):
    """The requested revision has been compacted out of the history window."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


def clone(obj: Obj) -> Obj:
    """A private deep copy of a stored object (JSON round trip: fast, and the data is JSON anyway)."""
    out: Obj = orjson.loads(orjson.dumps(obj))
    return out


class Store:
    def __init__(self, history_window: int = 10_000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.revision = 0
        self.compacted = 0
        self.closed = False
        self._objects: dict[StorageKey, dict[str, dict[str, Obj]]] = {}
        self._history: deque[Change] = deque(maxlen=max(1, history_window))
        self._dependents: dict[str, set[tuple[StorageKey, str, str]]] = {}
        self._uids: set[str] = set()

    # Reads (callers hold `lock` when they need several reads to agree).

    def get(self, key: StorageKey, namespace: str, name: str) -> Obj | None:
        return self._objects.get(key, {}).get(namespace, {}).get(name)

    def objects(self, key: StorageKey, namespace: str | None = None) -> Iterator[Obj]:
        by_namespace = self._objects.get(key, {})
        if namespace is not None:
            yield from by_namespace.get(namespace, {}).values()
            return
        for items in by_namespace.values():
            yield from items.values()

    def namespaces_in_use(self, namespace: str) -> Iterator[tuple[StorageKey, Obj]]:
        for key, by_namespace in self._objects.items():
            for obj in by_namespace.get(namespace, {}).values():
                yield key, obj

    def has_uid(self, uid: str) -> bool:
        return uid in self._uids

    def dependents(self, owner_uid: str) -> list[tuple[StorageKey, str, str]]:
        return sorted(self._dependents.get(owner_uid, ()))

    # Writes.

    def write(self, key: StorageKey, namespace: str, name: str, obj: Obj) -> Obj:
        """Store `obj` (now owned by the store) under a new revision; ADDED or MODIFIED."""
        old = self.get(key, namespace, name)
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self._objects.setdefault(key, {}).setdefault(namespace, {})[name] = obj
        self._index_owners(key, namespace, name, old, obj)
        self._uids.add(obj["metadata"].get("uid", ""))
        self._record(Change(self.revision, key, namespace, name, "MODIFIED" if old else "ADDED", obj, old))
        return obj

    def delete(self, key: StorageKey, namespace: str, name: str, final: Obj) -> Obj:
        """Remove the object; `final` (owned by the store) is its last state, stamped with the new revision."""
        old = self._objects[key][namespace].pop(name)
        if not self._objects[key][namespace]:
            del self._objects[key][namespace]
        self.revision += 1
        final["metadata"]["resourceVersion"] = str(self.revision)
        self._index_owners(key, namespace, name, old, None)
        self._uids.discard(old["metadata"].get("uid", ""))
        self._record(Change(self.revision, key, namespace, name, "DELETED", final, old))
        return final

    def _index_owners(
        self, key: StorageKey, namespace: str, name: str, old: Obj | None, new: Obj | None
    ) -> None:
        entry = (key, namespace, name)
        for ref in _owner_uids(old):
            self._dependents.get(ref, set()).discard(entry)
        for ref in _owner_uids(new):
            self._dependents.setdefault(ref, set()).add(entry)

    def _record(self, change: Change) -> None:
        if len(self._history) == self._history.maxlen:
            self.compacted = self._history[0].revision
        self._history.append(change)
        self.changed.notify_all()

    # History.

    def set_history_window(self, size: int) -> None:
        """Keep only the last `size` changes (older revisions become 410 Expired at once)."""
        with self.lock:
            kept = list(self._history)[-size:] if size > 0 else []
            dropped = len(self._history) - len(kept)
            if dropped:
                self.compacted = self._history[dropped - 1].revision
            self._history = deque(kept, maxlen=max(1, size))
            if size <= 0:
                self.compacted = self.revision

    def oldest_available(self) -> int:
        """The oldest revision a watch may start from."""
        return self.compacted

    def changes_after(self, revision: int) -> list[Change]:
        if revision < self.compacted:
            raise TooOld(revision, self.compacted + 1)
        if revision >= self.revision:
            return []
        first = self._history[0].revision if self._history else self.revision + 1
        start = max(0, revision + 1 - first)
        return [self._history[i] for i in range(start, len(self._history))]

    def snapshot(self, key: StorageKey, namespace: str | None, revision: int) -> dict[tuple[str, str], Obj]:
        """The objects of one kind as they were at `revision` (rolled back through history)."""
        state = {
            (obj["metadata"].get("namespace", ""), obj["metadata"]["name"]): obj
            for obj in self.objects(key, namespace)
        }
        if revision >= self.revision:
            return state
        for change in reversed(self.changes_after(revision)):
            if change.key != key or (namespace is not None and change.namespace != namespace):
                continue
            ident = (change.namespace, change.name)
            if change.old is None:
                state.pop(ident, None)
            else:
                state[ident] = change.old
        return state

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.changed.notify_all()


def _owner_uids(obj: Obj | None) -> list[str]:
    if not obj:
        return []
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return [ref["uid"] for ref in refs if isinstance(ref, dict) and ref.get("uid")]
