"""What the agent (§7.4) tells its operators: Prometheus metrics, `/metrics`, `/healthz`, `/readyz`, and JSON log lines.

`Metrics` holds the agent's metric objects in the registry it is given: the agent process gives
prometheus_client's default one, which also carries its process collectors (resident memory, CPU
seconds, open files; the Python GC and version), a test a fresh one; `Health` keeps the loops' heartbeats and the readiness the core reports, and `serve` answers
the three paths over HTTP on a thread of its own. `logger` gives a logger that writes one JSON
object a line. The core counts, beats and logs; this module decides nothing about swaps, never
reads the cluster, and judges only staleness (a loop that has not beaten within its limit).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

# fence observed -> replacement pod created; the targets are p50 <= 100 ms, p99 <= 500 ms (§7.4)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)
BEAT_LIMIT = 30.0  # seconds a loop may go without beating before /healthz fails
NOT_SYNCED = "the agent's watches have not synced yet"


@dataclass(frozen=True, slots=True)
class Metrics:
    """The agent's metric objects, all in `registry`."""

    registry: CollectorRegistry
    swaps: Counter  # jobtree_agent_swaps_total{cluster}
    declined: Counter  # jobtree_agent_swaps_declined_total{cluster, reason}
    latency: Histogram  # jobtree_agent_swap_latency_seconds
    awaiting_fold: Gauge  # jobtree_agent_journal_awaiting_fold
    leader: Gauge  # jobtree_agent_leader{identity}
    intent_finished: Counter  # jobtree_agent_intent_entries_finished_total

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> Metrics:
        """The metrics, registered in `registry` (a new one when None)."""
        reg = registry if registry is not None else CollectorRegistry(auto_describe=True)
        return cls(
            reg,
            Counter("jobtree_agent_swaps", "Swaps carried out onto a hot spare.", ["cluster"], registry=reg),
            Counter(
                "jobtree_agent_swaps_declined",
                "Fences the agent did not swap, by reason (no spare, an invalid spec, ...).",
                ["cluster", "reason"],
                registry=reg,
            ),
            Histogram(
                "jobtree_agent_swap_latency_seconds",
                "Seconds from a fence observed to its replacement pod created.",
                buckets=LATENCY_BUCKETS,
                registry=reg,
            ),
            Gauge(
                "jobtree_agent_journal_awaiting_fold",
                "Journal entries not yet folded into the record by reconcile.",
                registry=reg,
            ),
            Gauge("jobtree_agent_leader", "1 while this replica leads, else 0.", ["identity"], registry=reg),
            Counter(
                "jobtree_agent_intent_entries_finished",
                "Journal entries found in Intent and finished after a restart or takeover.",
                registry=reg,
            ),
        )

    def swapped(self, cluster: str, seconds: float) -> None:
        """One swap done, `seconds` after its fence was observed."""
        self.swaps.labels(cluster=cluster).inc()
        self.latency.observe(seconds)

    def decline(self, cluster: str, reason: str) -> None:
        self.declined.labels(cluster=cluster, reason=reason).inc()

    def leading(self, identity: str, leads: bool) -> None:
        self.leader.labels(identity=identity).set(1 if leads else 0)


class Health:
    """Liveness from the loops' heartbeats, readiness from the core; served by `serve`.

    A loop that beat once must beat again within its limit (`beat(..., within=)`, else the
    default), or `/healthz` fails naming it; `forget` drops a loop that ended on purpose.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        limit: float = BEAT_LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry, self.limit, self.clock = registry, limit, clock
        self._beats: dict[str, tuple[float, float]] = {}  # loop -> (last beat, its limit)
        self._unready = NOT_SYNCED  # "" once ready
        self._lock = threading.Lock()

    def beat(self, loop: str, within: float | None = None) -> None:
        """`loop` is alive; it will beat again within `within` seconds (default: the limit)."""
        with self._lock:
            self._beats[loop] = (self.clock(), self.limit if within is None else within)

    def forget(self, loop: str) -> None:
        with self._lock:
            self._beats.pop(loop, None)

    def ready(self) -> None:
        """The agent has synced its watches: `/readyz` answers 200."""
        with self._lock:
            self._unready = ""

    def not_ready(self, why: str) -> None:
        with self._lock:
            self._unready = why or "not ready"

    def alive(self) -> tuple[bool, str]:
        """Whether every loop beat within its limit; otherwise the stale loops, named."""
        now = self.clock()
        with self._lock:
            stale = sorted(
                f"loop {loop} has not beaten for {now - last:.1f}s (limit {limit:g}s)"
                for loop, (last, limit) in self._beats.items()
                if now - last > limit
            )
        return (not stale, "; ".join(stale) or "ok")

    def readiness(self) -> tuple[bool, str]:
        with self._lock:
            why = self._unready
        return (not why, why or "ok")

    def serve(self, host: str, port: int) -> tuple[ThreadingHTTPServer, threading.Thread]:
        """Answer `/metrics`, `/healthz` and `/readyz` on `host:port` (0: any free port) from a
        daemon thread; stop with `server.shutdown()` then `server.server_close()`."""
        server = _Server((host, port), _Handler, self)
        thread = threading.Thread(target=server.serve_forever, name="agent-health", daemon=True)
        thread.start()
        return server, thread


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], health: Health
    ) -> None:
        super().__init__(address, handler)
        self.health = health


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # answers are small: without it each waits for a delayed ACK
    server: _Server

    def do_GET(self) -> None:
        health = self.server.health
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._answer(200, generate_latest(health.registry), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            ok, why = health.alive()
            self._answer(200 if ok else 500, why.encode() + b"\n")
        elif path == "/readyz":
            ok, why = health.readiness()
            self._answer(200 if ok else 503, why.encode() + b"\n")
        else:
            self._answer(404, f"no such path: {path}\n".encode())

    def _answer(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Probes and scrapes every few seconds are not worth a log line."""


# ---------------------------------------------------------------------------------------- logs

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ts (UTC, RFC 3339 with milliseconds), level, logger, msg, then the
    record's extra fields (`log.info("swapped", extra={"run": "t/r", "node": "n1"})`)."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, UTC)
        line: dict[str, Any] = {
            "ts": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in line:
                line[key] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class _JsonHandler(logging.StreamHandler[IO[str]]):
    """The handler `logger` adds (so asking again replaces it)."""


def logger(name: str, stream: IO[str] | None = None, level: int = logging.INFO) -> logging.Logger:
    """The logger `name`, writing JSON lines to `stream` (standard error by default); asking again
    for the same name replaces its handler rather than adding a second one."""
    log = logging.getLogger(name)
    for old in [h for h in log.handlers if isinstance(h, _JsonHandler)]:
        log.removeHandler(old)
    handler = _JsonHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter())
    log.addHandler(handler)
    log.setLevel(level)
    log.propagate = False
    return log
