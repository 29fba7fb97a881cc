"""Push trigger in front of the pipeline: verifies GitHub webhooks and queues one reconcile; it never plans or writes Git.

`POST /webhook` accepts GitHub `ping` and `push` events signed with `X-Hub-Signature-256`
(HMAC-SHA256 of the raw body, compared in constant time; missing or wrong -> 401 and nothing runs).
Only pushes to the configured branch are acted on. A burst of pushes coalesces: a pending flag and
one worker thread, so N pushes arriving during a reconcile cause exactly one more, and reconciles
never overlap. `GET /healthz` reports the last run. Scheduled passes are `jobtree reconcile
--interval`, not this server.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import click

from reconciler.cli import exitcodes

LOG = logging.getLogger("jobtree.webhook")
MAX_BODY = 5 * 1024 * 1024  # GitHub caps payloads at 25 MB; push payloads this large are not sane
SIGNATURE_HEADER = "X-Hub-Signature-256"


def _rfc3339(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def signature_for(secret: bytes, body: bytes) -> str:
    """The `X-Hub-Signature-256` value GitHub sends for `body`."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def secret_of(value: str) -> bytes:
    """The webhook secret as set in the environment, without the line break a secret mounted from a
    file ends in (GitHub never signs with it); empty when nothing but whitespace is set."""
    value = value.rstrip("\r\n")
    return value.encode() if value.strip() else b""


def signature_ok(secret: bytes, body: bytes, header: str | None) -> bool:
    """Constant-time check; a header that is not even ASCII is simply wrong (never an exception)."""
    if header is None:
        return False
    given = header.strip().encode("latin-1", errors="replace")  # http.server decodes headers as Latin-1
    return hmac.compare_digest(signature_for(secret, body).encode(), given)


class ReconcileQueue:
    """Coalesces reconcile requests into one worker: at most one running and one pending."""

    def __init__(self, reconcile: Callable[[], object], clock: Callable[[], float] = time.time) -> None:
        self._reconcile = reconcile
        self._clock = clock
        self._cond = threading.Condition()
        self._pending = False
        self._running = False
        self._stopping = False
        self.runs = 0
        self.last_run_at: float | None = None
        self.last_result: str | None = None
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._loop, name="jobtree-reconcile", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self) -> None:
        with self._cond:
            self._pending = True
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                self._pending, self._running = False, True
            started = self._clock()
            result, error = None, None
            try:
                result = str(self._reconcile())
            except Exception as err:  # the worker must survive; the next push retries
                error = f"{type(err).__name__}: {err}"
                LOG.error("reconcile failed (%s); the next push or scheduled pass retries", error)
                LOG.debug("reconcile failure detail", exc_info=True)
            with self._cond:
                self._running = False
                self.runs += 1
                self.last_run_at = started
                self.last_result = "error" if error else result
                self.last_error = error
                self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing is running or pending; False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def snapshot(self) -> dict[str, Any]:
        with self._cond:
            return {
                "lastRunAt": _rfc3339(self.last_run_at),
                "lastResult": self.last_result,
                "lastError": self.last_error,
                "pending": self._pending,
                "running": self._running,
                "runs": self.runs,
            }


Reply = tuple[int, dict[str, Any]]


STOP_GRACE = 25.0  # seconds a stopping webhook waits for the running reconcile
REMOTE = "origin"  # where every pass pushes (as `reconcile --push`)


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # a burst of deliveries waits in the backlog, not in SYN retries

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request is one log line, never a traceback."""
        err = sys.exc_info()[1]
        LOG.warning("connection from %s ended early: %s: %s", client_address[0], type(err).__name__, err)


class _Server6(_Server):
    address_family = socket.AF_INET6


class WebhookServer:
    """The HTTP server plus its reconcile queue; `start()` serves in a background thread."""

    def __init__(
        self,
        reconcile: Callable[[], object],
        secret: bytes,
        branch: str = "main",
        host: str = "127.0.0.1",
        port: int = 8080,
        max_body: int = MAX_BODY,
        clock: Callable[[], float] = time.time,
        read_timeout: float = 10.0,
    ) -> None:
        if not secret:
            raise ValueError("a webhook secret is required: unsigned pushes are never accepted")
        self.secret = secret
        self.branch = branch
        self.max_body = max_body
        self.queue = ReconcileQueue(reconcile, clock)
        handler = type("WebhookHandler", (_Handler,), {"app": self, "timeout": read_timeout})
        server = _Server6 if ":" in host else _Server  # an IPv6 address such as ::1 or ::
        self.httpd = server((host, port), handler)
        self.httpd.daemon_threads = True
        self._serving: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://[{host!s}]:{port}" if ":" in str(host) else f"http://{host!s}:{port}"

    def start(self) -> None:
        self.queue.start()
        self._serving = threading.Thread(
            target=self.httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="jobtree-webhook",
            daemon=True,
        )
        self._serving.start()

    def serve_forever(self) -> None:
        self.queue.start()
        self.httpd.serve_forever()

    def shutdown(self, timeout: float = 5.0) -> None:
        if self._serving is not None:
            self.httpd.shutdown()
            self._serving.join(timeout)
        self.httpd.server_close()
        self.queue.stop(timeout)

    def health(self) -> Reply:
        """200 while the server is up (a failing remote is no reason to restart it); `status` says
        `failing` while the last pass failed, so a monitor reading it sees pushes going nowhere."""
        snapshot = self.queue.snapshot()
        status = "failing" if snapshot["lastResult"] == "error" else "ok"
        return 200, {"status": status, "branch": self.branch, **snapshot}

    def receive(self, event: str | None, signature: str | None, content_type: str, body: bytes) -> Reply:
        """Decide what one verified delivery means; nothing runs unless the signature matches."""
        if not signature_ok(self.secret, body, signature):
            return 401, {"error": f"{SIGNATURE_HEADER} missing or wrong; nothing was run"}
        try:
            if content_type.split(";")[0].strip() == "application/x-www-form-urlencoded":
                fields = parse_qs(body.decode("utf-8")).get("payload")
                if not fields:
                    return 400, {"error": "malformed payload: a form body needs a payload= field"}
                payload = json.loads(fields[0])
            else:
                payload = json.loads(body)
        except (ValueError, KeyError, IndexError, RecursionError) as err:
            reason = "nested too deeply" if isinstance(err, RecursionError) else str(err)[:200]
            return 400, {"error": f"malformed payload: {reason}"}
        if not isinstance(payload, dict):
            return 400, {"error": "malformed payload: expected a JSON object"}
        if event == "ping":
            return 200, {"message": "pong"}
        if event != "push":
            return 202, {"ignored": f"event {event!r} is not handled; only push and ping are"}
        want = f"refs/heads/{self.branch}"
        if payload.get("ref") != want:
            return 202, {"ignored": f"push to {payload.get('ref')!r}, not {want!r}"}
        if payload.get("deleted"):
            return 202, {"ignored": f"{want} was deleted; nothing to reconcile"}
        self.queue.request()
        return 202, {"queued": True, "after": payload.get("after")}


class _Handler(BaseHTTPRequestHandler):
    app: WebhookServer
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server_version = "jobtree-webhook"
    timeout = 10  # seconds per socket read: a slow or stalled client cannot hold a thread forever

    def _reply(self, status: int, payload: dict[str, Any], close: bool = False, allow: str = "") -> None:
        data = (json.dumps(payload, sort_keys=True) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if allow:
            self.send_header("Allow", allow)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":  # HEAD: GET's status and headers (its Content-Length too), no body
            self.wfile.write(data)

    def _route(self, method: str) -> None:
        allowed = {"/webhook": "POST", "/healthz": "GET"}.get(self.path.split("?")[0])
        if allowed is None:
            self._reply(404, {"error": f"no such endpoint {self.path}; try POST /webhook or GET /healthz"})
        elif method != allowed and not (method == "HEAD" and allowed == "GET"):
            self._reply(405, {"error": f"{method} not allowed on {self.path}"}, close=True, allow=allowed)
        elif method in ("GET", "HEAD"):
            self._reply(*self.app.health())
        else:
            self._webhook()

    def _route_safely(self, method: str) -> None:
        """Any bug below answers 500 and logs one line; a request never ends in a traceback."""
        try:
            self._route(method)
        except TimeoutError:  # a body slower than `timeout` per read, or shorter than announced
            LOG.warning(
                "request %s %s timed out reading its body from %s", method, self.path, self.address_string()
            )
            self._last_word(408, f"request body not received within {self.timeout} s; nothing was run")
        except ConnectionError as err:  # the client went away (reset, broken pipe): nobody to answer
            LOG.warning("request %s %s: client went away (%s)", method, self.path, type(err).__name__)
            self.close_connection = True
        except Exception as err:  # noqa: BLE001 - the server must outlive any one request
            LOG.error("request %s %s failed: %s: %s", method, self.path, type(err).__name__, err)
            self._last_word(500, "internal error; nothing was run")

    def _last_word(self, status: int, error: str) -> None:
        """An error reply that closes the connection, if the client is still there to read it."""
        try:
            self._reply(status, {"error": error}, close=True)
        except OSError:
            self.close_connection = True

    def _webhook(self) -> None:
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths:
            self._reply(411, {"error": "Content-Length required"}, close=True)
            return
        if len(set(lengths)) > 1 or self.headers.get("Transfer-Encoding"):
            self._reply(400, {"error": "conflicting Content-Length or Transfer-Encoding headers"}, close=True)
            return
        length = lengths[0]
        if not (length.isascii() and length.isdigit()):  # RFC 9110: digits only (no sign, space, `_`)
            self._reply(400, {"error": f"bad Content-Length {length!r}"}, close=True)
            return
        size = int(length)
        if size > self.app.max_body:
            self._reply(413, {"error": f"body of {size} bytes exceeds {self.app.max_body}"}, close=True)
            return
        body = self.rfile.read(size)
        status, payload = self.app.receive(
            self.headers.get("X-GitHub-Event"),
            self.headers.get(SIGNATURE_HEADER),
            self.headers.get("Content-Type", "application/json"),
            body,
        )
        self._reply(status, payload)

    def do_GET(self) -> None:  # http.server names handlers do_<METHOD>
        self._route_safely("GET")

    def do_HEAD(self) -> None:  # load-balancer probes
        self._route_safely("HEAD")

    def do_POST(self) -> None:
        self._route_safely("POST")

    def do_PUT(self) -> None:
        self._route_safely("PUT")

    def do_DELETE(self) -> None:
        self._route_safely("DELETE")

    def do_PATCH(self) -> None:
        self._route_safely("PATCH")

    def do_OPTIONS(self) -> None:
        self._route_safely("OPTIONS")

    def log_message(self, format: str, *args: Any) -> None:  # http.server names this parameter `format`
        LOG.info("%s %s", self.address_string(), format % args)


class ApplyFailed(Exception):
    """A pass committed and pushed, but a cluster was not applied in full (named in the message)."""


class _Failure(click.ClickException):
    exit_code = exitcodes.OTHER


def _reconcile_for(repo: str, apply: bool, branch: str | None) -> tuple[Callable[[], object], str]:
    """The pass a push runs (`reconcile --once --push` on `branch`), and that branch: by default
    `git.branch` of jobtree.yaml, the branch `reconcile` itself would take."""
    # the engine: imported when serving, not for --help
    from reconciler.git import errors
    from reconciler.git import lock as writerlock
    from reconciler.git import read as gitread
    from reconciler.passes import reconcile as reconciliation

    try:
        git = gitread.open_repo(repo)
    except errors.NotARepository as err:
        raise click.UsageError(str(err)) from err
    if REMOTE not in list(git.remotes.names()):
        raise click.UsageError(
            f"{repo} has no remote {REMOTE!r}: every pass the webhook runs pushes there; add it "
            f"(git remote add {REMOTE} URL) or serve a clone of the fleet's repository"
        )
    chosen = branch or reconciliation.configured_branch(git)
    kept = reconciliation.Kept()  # what each pass keeps in memory for the next push's

    def one_pass() -> object:
        # a `reconcile` of the same clone (a scheduled pass) holds its writer lock for a pass or so:
        # wait for it rather than fail this push's pass
        try:
            outcome = reconciliation.reconcile_once(
                repo, push=True, apply=apply, branch=chosen, lock_wait=writerlock.WAIT, kept=kept
            )
        except Exception as err:
            for note in getattr(err, "__notes__", ()):  # what the pass had to say before it failed
                click.echo(note, err=True)
            raise
        for warning in outcome.warnings:  # shown as `reconcile` shows them: a person's file may be among them
            click.echo(warning, err=True)
        applied = outcome.applied
        if applied is not None:
            for line in applied.lines():
                click.echo(f"apply: {line}", err=True)
            if applied.failed:  # committed and pushed, not applied everywhere: /healthz says failing
                raise ApplyFailed("; ".join(applied.failed))
        return outcome

    return one_pass, chosen


@click.command(
    "webhook",
    epilog="Scheduled passes (so reservations activate without a push) are `jobtree reconcile --interval`.",
)
@click.argument("repo", default=".", type=click.Path(exists=True, file_okay=False))
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--secret-env", default="JOBTREE_WEBHOOK_SECRET", show_default=True, metavar="NAME",
              help="Environment variable holding the GitHub webhook secret.")  # fmt: skip
@click.option(
    "--branch",
    default=None,
    help="Only pushes to this branch reconcile (default: git.branch of jobtree.yaml when the server starts).",
)
@click.option(
    "--apply/--no-apply", default=False, show_default=True, help="Apply the pushed commit to the cluster."
)
def command(repo: str, port: int, host: str, secret_env: str, branch: str | None, apply: bool) -> None:
    """Reconcile REPO on every GitHub push to BRANCH, sent to POST /webhook (HMAC-verified); health at GET /healthz."""
    secret = secret_of(os.environ.get(secret_env, ""))
    if not secret:
        raise click.UsageError(
            f"no webhook secret: set ${secret_env} to the secret configured on the GitHub webhook "
            "(unsigned pushes are never accepted)"
        )
    reconcile, branch = _reconcile_for(repo, apply, branch)
    try:
        server = WebhookServer(reconcile, secret, branch=branch, host=host, port=port)
    except OSError as err:
        raise _Failure(f"cannot listen on {host}:{port}: {err}") from err
    click.echo(f"jobtree webhook: POST {server.url}/webhook (pushes to {branch}), GET {server.url}/healthz")
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (`cli`)
        click.echo("jobtree webhook: stopping (a running reconcile may finish first)")
    finally:
        # a pass holds the clone's writer lock: let it finish (within Kubernetes' default 30 s grace)
        # rather than leave the lock behind for the next process to find
        server.shutdown(timeout=STOP_GRACE)
