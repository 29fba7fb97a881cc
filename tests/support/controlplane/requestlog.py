"""The request log: every HTTP request the server answered, for tests to assert on.

Appended to by the fault proxy (`proxy`) once a response is complete (for a watch, when the stream ends),
with the monotonic instant it was (`at`: benchmarks time one write to another by it).
Writes made by the test's own hand (seeding, the kubelet stand-in) do not pass the proxy and do not appear.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    content_type: str = ""
    code: int = 0
    user_agent: str = ""
    watch: bool = False
    fault: str = ""
    options: Mapping[str, object] = field(default_factory=dict)  # a DELETE's DeleteOptions (its body)
    connected: bool = False  # the proxy opened its connection to the server (TCP + TLS) inside this request
    at: float = (
        0.0  # time.monotonic() when the answer was ready (the change made, for a write; a cut: when cut)
    )

    @property
    def is_write(self) -> bool:
        return self.method in WRITE_METHODS


class RequestLog:
    def __init__(self) -> None:
        self._entries: list[Request] = []
        self._lock = threading.Lock()

    def record(self, request: Request) -> None:
        with self._lock:
            self._entries.append(request)

    def mark(self) -> int:
        """A position to read `since`: the number of requests logged so far."""
        with self._lock:
            return len(self._entries)

    def since(self, mark: int = 0) -> list[Request]:
        with self._lock:
            return list(self._entries[mark:])

    def writes(self, since: int = 0) -> list[Request]:
        return [r for r in self.since(since) if r.is_write]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __iter__(self) -> Iterator[Request]:
        return iter(self.since(0))

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
