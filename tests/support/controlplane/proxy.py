"""A fault-injecting HTTP proxy in front of the real kube-apiserver (test support only).

Listens on plain HTTP on 127.0.0.1 (a kubeconfig points the client at it), forwards every request
as it came (method, path, query, headers, body: the client's own bearer token authenticates it) to
the API server over TLS, and streams the answer back (watches included). Before forwarding, the
armed `faults` decide: answer a Status instead (500, 429 with Retry-After, ...), wait first,
close the connection without an answer, or end a watch after n events. Every request is logged
(`requests`): a plain one before its answer reaches the client, a watch when its stream ends. `partition()` cuts everything until `heal()`: an agent that cannot reach its server.
It implements no part of the Kubernetes API: every answer that is not a fault is the server's.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import sys
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.support.controlplane.faults import Fault, FaultPlan
from tests.support.controlplane.requestlog import Request, RequestLog

REASONS = {
    400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 410: "Expired",
    422: "Invalid", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
    504: "Timeout",
}  # fmt: skip
SPARE_FOR = 30.0  # seconds a warmed connection waits for a write: well inside the server's 90 s idle timeout

HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
)


class FaultProxy:
    """One proxy to one API server (`upstream`: host, port, TLS context). start()/stop(), or `with`."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext) -> None:
        self.upstream = (host, port, context)
        self.faults = FaultPlan()
        self.requests = RequestLog()
        self._partitioned = threading.Event()
        self.cuts = 0  # partitions begun and stops: a request delayed across one of them never arrives
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="fault-proxy"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        self._thread = None
        self.cuts += 1
        self._server.shutdown()
        self._server.server_close()
        self._server.close_all()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def partition(self) -> None:
        """Cut every connection and answer nothing until `heal()`: the server is out of reach."""
        self._partitioned.set()
        self.cuts += 1
        self._server.close_all()

    def heal(self) -> None:
        self._partitioned.clear()

    @property
    def partitioned(self) -> bool:
        return self._partitioned.is_set()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: FaultProxy

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            self._sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._sockets.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a watch ended, a partition cut it) is not an error to print:
        socketserver's default prints a traceback to whatever `sys.stderr` is then, which may be a
        CLI test's captured output."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def close_all(self) -> None:
        """Cut every open client connection (a partition, or the proxy stopping)."""
        with self._lock:
            open_now = list(self._sockets)
        for sock in open_now:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = (
        True  # an answer is several small sends: without it each waits for a delayed ACK
    )
    server: _Server
    _upstream: http.client.HTTPSConnection | None = None
    _spare: http.client.HTTPSConnection | None = None  # opened for the next write, no request on it yet
    _spare_at = 0.0
    _connected = False  # this request's forward opened a new connection

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _do(self) -> None:
        proxy = self.server.proxy
        split = urlsplit(self.path)
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        watching = query.get("watch") in ("true", "1")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        options: dict[str, Any] = {}
        if self.command == "DELETE" and body:
            try:
                options = json.loads(body)
            except ValueError:
                pass
        entry = Request(
            method=self.command, path=split.path, query=query, options=options,
            content_type=self.headers.get("Content-Type", ""), user_agent=self.headers.get("User-Agent", ""),
            watch=watching,
        )  # fmt: skip
        if proxy.partitioned:
            self._cut(proxy, entry, "partition")
            return
        fault = proxy.faults.take(self.command, split.path, watching)
        if fault is not None and fault.delay:
            cuts = proxy.cuts
            time.sleep(fault.delay)
            if proxy.cuts != cuts:  # a partition (healed or not) or a stop cuts what was still on its way
                self._cut(proxy, entry, "partition")
                return
        if fault is not None and fault.disconnect:
            self._cut(proxy, entry, "disconnect")
            return
        if fault is not None and fault.code is not None:
            self._status(fault)
            proxy.requests.record(
                replace(entry, code=fault.code, fault=f"respond {fault.code}", at=time.monotonic())
            )
            return
        self._connected = False
        try:
            answer = self._forward(body)
            entry = replace(entry, connected=self._connected)
        except (OSError, http.client.HTTPException):
            self._cut(proxy, entry, "upstream")
            return
        slow = f"slow {fault.delay:g}" if fault is not None and fault.delay else ""
        if (
            not watching
        ):  # logged before the client has its answer: a test reading the log after the call sees it
            proxy.requests.record(replace(entry, code=answer.status, fault=slow, at=time.monotonic()))
        events = self._relay(
            answer, fault if fault is not None and fault.drop_after_events is not None else None
        )
        if watching:  # a watch is logged when its stream ends
            fired = "drop_watch" if events else slow
            proxy.requests.record(replace(entry, code=answer.status, fault=fired, at=time.monotonic()))
        elif self.command != "GET" and not self.close_connection:
            self._warm()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _do  # noqa: N815 - the stdlib's names

    def _forward(self, body: bytes | None) -> http.client.HTTPResponse:
        """The request sent on to the API server. A read may reuse this connection's kept-alive
        upstream connection (and is sent again once if that was closed meanwhile); a write goes on
        a connection that has carried no request (the spare `_warm` opened after the last write, or
        a new one) and is never sent twice, so the proxy itself never repeats a write."""
        host, port, context = self.server.proxy.upstream
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP and k.lower() != "host"}
        headers["Host"] = f"{host}:{port}"
        reads = self.command == "GET"
        if not reads:
            if self._upstream is not None:
                self._upstream.close()
            if time.monotonic() - self._spare_at >= SPARE_FOR or _closed(self._spare):
                self._close_spare()
            self._upstream, self._spare = self._spare, None
        for attempt in (1, 2):
            if self._upstream is None:
                self._upstream = http.client.HTTPSConnection(host, port, context=context, timeout=120)
                self._connected = True
            try:
                self._upstream.request(self.command, self.path, body=body, headers=headers)
                return self._upstream.getresponse()
            except (OSError, http.client.HTTPException):
                self._upstream.close()
                self._upstream = None
                if attempt == 2 or not reads:
                    raise
        raise AssertionError("unreachable")

    def _warm(self) -> None:
        """After a write's answer has gone out: open the next write's upstream connection now, so
        its TLS handshake is not inside that write's time (a client talking to the API server
        directly writes on a kept-alive connection). Kept only while well inside the server's
        idle timeout (kube-apiserver's is 90 s); a connection that fails to open is not kept."""
        self._close_spare()
        host, port, context = self.server.proxy.upstream
        spare = http.client.HTTPSConnection(host, port, context=context, timeout=120)
        try:
            spare.connect()
        except OSError:
            spare.close()
            return
        self._spare, self._spare_at = spare, time.monotonic()

    def _close_spare(self) -> None:
        if self._spare is not None:
            self._spare.close()
            self._spare = None

    def finish(self) -> None:
        super().finish()
        self._close_spare()
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None

    def _relay(self, answer: http.client.HTTPResponse, drop: Fault | None) -> bool:
        """Send the answer on, streamed; with `drop`, end a watch after its event count (cut, or a
        clean end). True when the drop fired."""
        self.send_response(answer.status, answer.reason)
        for key, value in answer.getheaders():
            if key.lower() not in HOP and key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        seen = 0
        dropped = False
        try:
            if drop is not None and drop.drop_after_events == 0:
                dropped = True
            else:
                while True:
                    line = answer.readline() if drop is not None else answer.read1(65536)
                    if not line:
                        break
                    self._chunk(line)
                    if drop is not None and line.strip():
                        seen += 1
                        if seen >= (drop.drop_after_events or 0):
                            dropped = True
                            break
            if dropped and drop is not None and not drop.clean_close:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return True
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        if dropped or answer.will_close:
            if self._upstream is not None:
                self._upstream.close()
                self._upstream = None
        return dropped

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _status(self, fault: Fault) -> None:
        code = fault.code or 500
        reason = REASONS.get(code, "InternalError")
        status = {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": fault.message or f"injected {code} by the test's fault proxy", "reason": reason,
            "code": code,
        }  # fmt: skip
        data = json.dumps(status).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if fault.retry_after is not None:
            self.send_header("Retry-After", str(fault.retry_after))
        self.end_headers()
        self.wfile.write(data)

    def _cut(self, proxy: FaultProxy, entry: Request, why: str) -> None:
        proxy.requests.record(replace(entry, code=0, fault=why, at=time.monotonic()))
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _closed(connection: http.client.HTTPSConnection | None) -> bool:
    """The server has closed `connection` while it waited for a write (or it never opened). A
    TLS 1.3 server sends session tickets after the handshake, so a readable socket is not yet a
    closed one: a non-blocking read consumes them and finds either nothing (open) or the end."""
    sock = connection.sock if connection is not None else None
    if sock is None:
        return True
    sock.setblocking(False)
    try:
        sock.recv(1)  # data or the end: either way not a connection to write on
    except (ssl.SSLWantReadError, BlockingIOError):
        return False
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(connection.timeout if connection is not None else None)
    return True
