"""Watch: the event stream one `?watch=true` request receives, from the store's history.

Between the store and the HTTP handler, which writes each event as one chunk. Implemented: start
from the current state (no resourceVersion or "0": synthetic ADDED events first), resume after a
given resourceVersion, `sendInitialEvents` with the `k8s.io/initial-events-end` bookmark,
`allowWatchBookmarks` (every `bookmark_interval` seconds), `timeoutSeconds`, label and field
selectors with the real transitions (an object leaving the selector is DELETED, entering it is
ADDED), and `410 Expired` as an ERROR event when the start (or a slow reader) falls out of the
history window. Waiting uses the store's condition variable, never polling.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tests.support.kubeapi import selectors, status
from tests.support.kubeapi.admission import Call
from tests.support.kubeapi.resources import ResourceType
from tests.support.kubeapi.store import Change, Store, TooOld

Obj = dict[str, Any]
Output = Callable[[ResourceType, Obj], Obj]
DEFAULT_TIMEOUT = 1800.0
TRUE = ("1", "t", "T", "true", "TRUE", "True")


class Watch:
    """One watch request: checked and positioned when built, streamed when iterated."""

    def __init__(
        self, store: Store, call: Call, query: Mapping[str, str], output: Output, bookmark_interval: float
    ):
        self.store = store
        self.rt = rt = call.rt
        self.output = output
        self.bookmark_interval = bookmark_interval
        self.requirements = selectors.parse_labels(query.get("labelSelector"))
        field_selector = query.get("fieldSelector") or ""
        if call.name:
            field_selector = ",".join(filter(None, [field_selector, f"metadata.name={call.name}"]))
        self.terms = selectors.parse_fields(field_selector, rt.field_labels)
        self.namespace = call.namespace if rt.namespaced and call.namespace else None
        self.bookmarks = query.get("allowWatchBookmarks") in TRUE
        self.initial_events = query.get("sendInitialEvents") in TRUE
        if self.initial_events and (
            query.get("resourceVersionMatch") != "NotOlderThan" or not self.bookmarks
        ):
            raise status.ApiError(
                422,
                "Invalid",
                'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents requires '
                "resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true",
                status.Target(),
            )
        timeout = _number(query.get("timeoutSeconds"), "timeoutSeconds")
        self.deadline = time.monotonic() + (timeout if timeout is not None else DEFAULT_TIMEOUT)
        self.expired: TooOld | None = None
        asked = query.get("resourceVersion") or ""
        with store.lock:
            if asked in ("", "0") or self.initial_events:
                self.cursor = store.revision
                self.initial = sorted(
                    (obj for obj in store.objects(rt.storage_key, self.namespace) if self.matches(obj)),
                    key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]),
                )
            else:
                self.cursor = int(_number(asked, "resourceVersion") or 0)
                self.initial = []
                try:
                    store.changes_after(self.cursor)
                except TooOld as old:
                    self.expired = old

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self.namespace is not None and obj["metadata"].get("namespace") != self.namespace:
            return False
        return selectors.labels_match(self.requirements, obj) and selectors.fields_match(
            self.terms, obj, self.rt.field_labels
        )

    def _bookmark(self, initial_end: bool = False) -> Obj:
        meta: Obj = {"resourceVersion": str(self.cursor)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {
            "type": "BOOKMARK",
            "object": {"kind": self.rt.kind, "apiVersion": self.rt.api_version, "metadata": meta},
        }

    def __iter__(self) -> Iterator[Obj]:
        if self.expired is not None:
            yield _expired(self.expired)
            return
        for obj in self.initial:
            yield {"type": "ADDED", "object": self.output(self.rt, obj)}
        if self.initial_events:
            yield self._bookmark(initial_end=True)
        next_bookmark = time.monotonic() + self.bookmark_interval
        store = self.store
        while True:
            with store.lock:
                while not store.closed and store.revision <= self.cursor:
                    until = min(self.deadline, next_bookmark) if self.bookmarks else self.deadline
                    remaining = until - time.monotonic()
                    if remaining <= 0:
                        break
                    store.changed.wait(remaining)
                if store.closed:
                    return
                try:
                    changes = store.changes_after(self.cursor)
                except TooOld as old:
                    yield _expired(old)
                    return
                if changes:
                    self.cursor = changes[-1].revision
            for change in changes:
                if change.key == self.rt.storage_key:
                    kind = _event_type(change, self.matches)
                    if kind is not None:
                        yield {"type": kind, "object": self.output(self.rt, change.obj)}
            now = time.monotonic()
            if now >= self.deadline:
                return
            if self.bookmarks and now >= next_bookmark:
                yield self._bookmark()
                next_bookmark = now + self.bookmark_interval


def _event_type(change: Change, matches: Callable[[Obj | None], bool]) -> str | None:
    if change.type == "ADDED":
        return "ADDED" if matches(change.obj) else None
    if change.type == "DELETED":
        return "DELETED" if matches(change.old) else None
    was, now = matches(change.old), matches(change.obj)
    if was and now:
        return "MODIFIED"
    if now:
        return "ADDED"
    return "DELETED" if was else None


def _expired(old: TooOld) -> Obj:
    return {"type": "ERROR", "object": status.expired(str(old)).status()}


def _number(text: str | None, name: str) -> float | None:
    if text in (None, ""):
        return None
    try:
        return float(str(text))
    except ValueError as failure:
        raise status.bad_request(f"invalid {name}: {text!r}") from failure
