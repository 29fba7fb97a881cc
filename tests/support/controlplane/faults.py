"""Fault injection: fail, delay, drop or cut requests that match (method, path glob, watch or not).

Consulted by the fault proxy (`proxy`) before it forwards each request to the API server. Deterministic by construction: a
fault fires on matching requests by count (`skip` the first n, then every `every`-th, `times`
in all); chance is opt-in and seeded (`probability`, `seed`). Effects: a canned Status (409, 429
with `Retry-After`, 500, ... with the real reasons), a delay before serving, closing the
connection without an answer or after the answer's headers, and ending a watch after n events (abruptly, or cleanly as a
server-side timeout would).
"""

from __future__ import annotations

import fnmatch
import random
import threading
from dataclasses import dataclass, field


@dataclass(slots=True)
class Fault:
    """One rule. Build with `respond`, `delay`, `disconnect` or `drop_watch`; tune with the fields."""

    method: str | None = None
    path: str = "*"
    watch: bool | None = None
    times: int | None = 1
    skip: int = 0
    every: int = 1
    probability: float | None = None
    seed: int = 0
    code: int | None = None
    message: str = ""
    retry_after: int | None = None
    delay: float = 0.0
    disconnect: bool = False
    drop_after_events: int | None = None
    clean_close: bool = False
    seen: int = 0
    fired: int = 0
    _chance: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        self._chance = random.Random(self.seed)
        if self.method:
            self.method = self.method.upper()

    @classmethod
    def respond(
        cls,
        code: int,
        *,
        method: str | None = None,
        path: str = "*",
        times: int | None = 1,
        retry_after: int | None = None,
        message: str = "",
        skip: int = 0,
        watch: bool | None = None,
    ) -> Fault:
        """Answer matching requests with a Status of `code` instead of serving them."""
        return cls(method, path, watch, times, skip, code=code, retry_after=retry_after, message=message)

    @classmethod
    def slow(
        cls,
        seconds: float,
        *,
        method: str | None = None,
        path: str = "*",
        times: int | None = 1,
        skip: int = 0,
    ) -> Fault:
        """Serve matching requests normally, after `seconds`."""
        return cls(method, path, None, times, skip, delay=seconds)

    @classmethod
    def disconnect_request(
        cls, *, method: str | None = None, path: str = "*", times: int | None = 1, skip: int = 0
    ) -> Fault:
        """Close the connection without answering (the client sees a broken connection)."""
        return cls(method, path, None, times, skip, disconnect=True)

    @classmethod
    def cut_answer(
        cls, *, method: str | None = None, path: str = "*", times: int | None = 1, skip: int = 0
    ) -> Fault:
        """Serve matching requests, send the answer's status and headers, then cut the connection
        before its body (the server did the request; the client cannot read what it answered)."""
        return cls(method, path, False, times, skip, drop_after_events=0)

    @classmethod
    def drop_watch(
        cls, after_events: int, *, path: str = "*", times: int | None = 1, clean: bool = False, skip: int = 0
    ) -> Fault:
        """End matching watches after `after_events` events: cut the connection, or end it cleanly."""
        return cls("GET", path, True, times, skip, drop_after_events=after_events, clean_close=clean)

    def _matches(self, method: str, path: str, is_watch: bool) -> bool:
        if self.method and self.method != method:
            return False
        if self.watch is not None and self.watch != is_watch:
            return False
        return fnmatch.fnmatchcase(path, self.path)

    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times


class FaultPlan:
    """The faults armed on one server, tried in the order they were added."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, *faults: Fault) -> Fault:
        with self._lock:
            self._faults.extend(faults)
        return faults[-1]

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def armed(self) -> list[Fault]:
        """Faults that can still fire."""
        with self._lock:
            return [f for f in self._faults if not f.exhausted()]

    def take(self, method: str, path: str, is_watch: bool) -> Fault | None:
        """The fault this request triggers, if any (counting it as seen and fired)."""
        with self._lock:
            for fault in self._faults:
                if fault.exhausted() or not fault._matches(method, path, is_watch):
                    continue
                fault.seen += 1
                if fault.seen <= fault.skip or (fault.seen - fault.skip - 1) % max(1, fault.every):
                    continue
                if fault.probability is not None and fault._chance.random() >= fault.probability:
                    continue
                fault.fired += 1
                return fault
        return None
