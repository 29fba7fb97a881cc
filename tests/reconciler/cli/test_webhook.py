"""The push webhook over a real local HTTP socket: signatures, branches, coalescing, health, limits."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest
from click.testing import CliRunner

from reconciler.cli import webhook
from tests.support.git import bare_remote, lock_held_elsewhere, template_files

SECRET = b"s3cret"


class Recorder:
    """A reconcile stand-in: counts runs, can be held open, and tracks overlap."""

    def __init__(self) -> None:
        self.runs = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.active = 0
        self.max_active = 0
        self.fail_next = False
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            self.runs += 1
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        self.started.set()
        try:
            assert self.release.wait(10), "test never released the reconcile"
            if self.fail_next:
                self.fail_next = False
                raise RuntimeError("remote unreachable")
            return f"run {self.runs}"
        finally:
            with self._lock:
                self.active -= 1


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def server(recorder: Recorder) -> Iterator[webhook.WebhookServer]:
    srv = webhook.WebhookServer(
        recorder, SECRET, branch="main", port=0, max_body=4096, clock=lambda: 1_767_600_000
    )
    srv.start()
    try:
        yield srv
    finally:
        recorder.release.set()
        srv.shutdown()


def call(
    srv: webhook.WebhookServer,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    host, port = srv.httpd.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=5)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


def deliver(
    srv: webhook.WebhookServer,
    event: str,
    payload: dict[str, Any],
    sign: Callable[[bytes], str | None] = lambda body: webhook.signature_for(SECRET, body),
) -> tuple[int, dict[str, Any]]:
    body = json.dumps(payload).encode()
    headers = {"X-GitHub-Event": event, "Content-Type": "application/json"}
    signature = sign(body)
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    return call(srv, "POST", "/webhook", body, headers)


PUSH_MAIN = {"ref": "refs/heads/main", "after": "b" * 40}


def test_a_signed_push_to_the_branch_runs_one_reconcile(server, recorder) -> None:
    assert deliver(server, "push", PUSH_MAIN) == (202, {"queued": True, "after": "b" * 40})
    assert server.queue.wait_idle(5)
    assert recorder.runs == 1


@pytest.mark.parametrize(
    "sign",
    [
        pytest.param(lambda body: None, id="a push without a signature is refused and nothing runs"),
        pytest.param(
            lambda body: webhook.signature_for(b"other secret", body),
            id="a push signed with another secret is refused",
        ),
        pytest.param(lambda body: "sha256=" + "0" * 64, id="a push with a forged signature is refused"),
        pytest.param(
            lambda body: webhook.signature_for(SECRET, body + b" "),
            id="a signature over a different body is refused",
        ),
    ],
)
def test_bad_signatures_get_401_and_nothing_runs(server, recorder, sign) -> None:
    status, reply = deliver(server, "push", PUSH_MAIN, sign)
    assert status == 401 and "nothing was run" in reply["error"]
    assert server.queue.wait_idle(5)
    assert recorder.runs == 0


def test_ping_is_answered_with_pong(server, recorder) -> None:
    assert deliver(server, "ping", {"zen": "Keep it logically awesome."}) == (200, {"message": "pong"})
    assert recorder.runs == 0


def test_pushes_to_other_branches_and_other_events_are_ignored_with_a_reason(server, recorder) -> None:
    status, reply = deliver(server, "push", {"ref": "refs/heads/feature"})
    assert status == 202 and "not 'refs/heads/main'" in reply["ignored"]
    status, reply = deliver(server, "pull_request", {"action": "opened"})
    assert status == 202 and "only push and ping" in reply["ignored"]
    assert server.queue.wait_idle(5)
    assert recorder.runs == 0


def test_a_burst_of_ten_pushes_during_a_slow_reconcile_runs_exactly_one_more(server, recorder) -> None:
    recorder.release.clear()
    assert deliver(server, "push", PUSH_MAIN)[0] == 202
    assert recorder.started.wait(5)
    for _ in range(9):
        assert deliver(server, "push", PUSH_MAIN)[0] == 202
    assert call(server, "GET", "/healthz")[1]["pending"] is True
    recorder.release.set()
    assert server.queue.wait_idle(5)
    assert recorder.runs == 2 and recorder.max_active == 1


def test_concurrent_deliveries_never_overlap_reconciles(server, recorder) -> None:
    threads = [threading.Thread(target=deliver, args=(server, "push", PUSH_MAIN)) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert server.queue.wait_idle(5)
    assert 1 <= recorder.runs <= 10 and recorder.max_active == 1


def test_health_reports_the_last_run_and_a_failure_does_not_stop_the_worker(server, recorder) -> None:
    assert call(server, "GET", "/healthz") == (
        200,
        {
            "status": "ok",
            "branch": "main",
            "lastRunAt": None,
            "lastResult": None,
            "lastError": None,
            "pending": False,
            "running": False,
            "runs": 0,
        },
    )
    recorder.fail_next = True
    deliver(server, "push", PUSH_MAIN)
    assert server.queue.wait_idle(5)
    health = call(server, "GET", "/healthz")[1]
    assert health["lastError"] == "RuntimeError: remote unreachable" and health["lastResult"] == "error"
    assert health["status"] == "failing"  # the server is up (200), its pushes go nowhere: a monitor sees it
    assert health["lastRunAt"] == "2026-01-05T08:00:00Z"
    deliver(server, "push", PUSH_MAIN)
    assert server.queue.wait_idle(5)
    health = call(server, "GET", "/healthz")[1]
    assert health["lastError"] is None and health["lastResult"] == "run 2" and health["runs"] == 2
    assert health["status"] == "ok"


def test_an_oversized_body_gets_413_without_being_read(server, recorder) -> None:
    host, port = server.httpd.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=5) as sock:
        sock.sendall(
            b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\nContent-Length: 10000000\r\n\r\n"
        )
        chunks = []
        while chunk := sock.recv(4096):  # the server closes after answering
            chunks.append(chunk)
        reply = b"".join(chunks).decode()
    assert reply.startswith("HTTP/1.1 413") and "exceeds 4096" in reply
    assert recorder.runs == 0


def test_malformed_json_with_a_valid_signature_gets_400(server, recorder) -> None:
    body = b"{not json"
    headers = {"X-GitHub-Event": "push", "X-Hub-Signature-256": webhook.signature_for(SECRET, body)}
    status, reply = call(server, "POST", "/webhook", body, headers)
    assert status == 400 and "malformed payload" in reply["error"]
    assert recorder.runs == 0


def test_form_encoded_deliveries_are_understood(server, recorder) -> None:
    from urllib.parse import urlencode

    body = urlencode({"payload": json.dumps(PUSH_MAIN)}).encode()
    headers = {
        "X-GitHub-Event": "push",
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Hub-Signature-256": webhook.signature_for(SECRET, body),
    }
    assert call(server, "POST", "/webhook", body, headers)[0] == 202
    assert server.queue.wait_idle(5)
    assert recorder.runs == 1


def test_wrong_methods_get_405_and_unknown_paths_404(server) -> None:
    assert call(server, "GET", "/webhook")[0] == 405
    assert call(server, "POST", "/healthz", b"{}")[0] == 405
    assert call(server, "OPTIONS", "/webhook") == (405, {"error": "OPTIONS not allowed on /webhook"})
    assert call(server, "GET", "/nope")[0] == 404


def test_the_command_refuses_to_start_without_a_secret() -> None:
    result = CliRunner().invoke(webhook.command, ["--port", "0"], env={"JOBTREE_WEBHOOK_SECRET": ""})
    assert result.exit_code == 2 and "$JOBTREE_WEBHOOK_SECRET" in result.output
    result = CliRunner().invoke(webhook.command, ["--secret-env", "HOOK_KEY"], env={"HOOK_KEY": ""})
    assert result.exit_code == 2 and "$HOOK_KEY" in result.output


def test_the_server_refuses_an_empty_secret() -> None:
    with pytest.raises(ValueError, match="secret is required"):
        webhook.WebhookServer(lambda: None, b"", port=0)


def test_a_signed_push_to_the_configured_branch_reconciles_the_clone_and_pushes_its_state(
    tmp_path: Path,
) -> None:
    # jobtree.yaml names `fleet` as the branch: the webhook (no --branch) listens for it, as
    # `reconcile` would reconcile it, and a push to `main` runs nothing
    files = template_files()
    files["jobtree.yaml"] = files["jobtree.yaml"].replace(b"    branch: main\n", b"    branch: fleet\n")
    assert b"    branch: fleet\n" in files["jobtree.yaml"]
    remote = bare_remote(tmp_path, files)
    served = pygit2.Repository(str(remote))
    served.references.create("refs/heads/fleet", served.references["refs/heads/main"].target)
    spec = str(served.references["refs/heads/fleet"].target)
    pygit2.clone_repository(str(remote), str(tmp_path / "work"), checkout_branch="fleet")
    reconcile, branch = webhook._reconcile_for(str(tmp_path / "work"), apply=False, branch=None)
    assert branch == "fleet"
    srv = webhook.WebhookServer(reconcile, SECRET, branch=branch, port=0)
    srv.start()
    try:
        assert deliver(srv, "push", PUSH_MAIN)[0] == 202  # another branch: ignored
        assert deliver(srv, "push", {"ref": "refs/heads/fleet", "after": spec}) == (
            202,
            {"queued": True, "after": spec},
        )
        assert srv.queue.wait_idle(60)
        status, health = call(srv, "GET", "/healthz")
    finally:
        srv.shutdown()
    assert status == 200 and health["runs"] == 1 and health["branch"] == "fleet", health
    head = served.references["refs/heads/fleet"].peel(pygit2.Commit)
    assert head.message.rstrip().endswith(f"Spec-Commit: {spec}")  # the pass pushed its state commit
    assert "started 5 runs (152 GPUs)" in head.message
    assert str(served.references["refs/heads/main"].target) == spec  # the other branch is untouched


def test_the_command_names_a_folder_that_is_not_a_repository(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        webhook.command, [str(tmp_path), "--port", "0"], env={"JOBTREE_WEBHOOK_SECRET": "x"}
    )
    assert result.exit_code == 2 and "is not a Git repository" in result.output


def raw_request(srv: webhook.WebhookServer, data: bytes) -> str:
    """Send bytes as they are (headers no client library would send) and read one whole reply."""
    host, port = srv.httpd.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=5) as sock:
        sock.sendall(data)
        reply = b""
        while b"\r\n\r\n" not in reply and (chunk := sock.recv(4096)):
            reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length and (chunk := sock.recv(4096)):
            body += chunk
    return (head + b"\r\n\r\n" + body).decode("latin-1")


def test_a_signature_header_that_is_not_ascii_gets_401_not_a_dropped_connection(server, recorder) -> None:
    body = json.dumps(PUSH_MAIN).encode()
    request = (
        b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\n"
        b"X-Hub-Signature-256: sha256=\xff\xfe\r\nContent-Length: %d\r\n\r\n" % len(body)
    ) + body
    reply = raw_request(server, request)
    assert reply.startswith("HTTP/1.1 401") and "nothing was run" in reply
    assert server.queue.wait_idle(5)
    assert recorder.runs == 0


def test_json_nested_beyond_the_parser_gets_400_with_a_valid_signature(server, recorder) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    server.max_body = len(body)
    headers = {"X-GitHub-Event": "push", "X-Hub-Signature-256": webhook.signature_for(SECRET, body)}
    status, reply = call(server, "POST", "/webhook", body, headers)
    assert (status, reply) == (400, {"error": "malformed payload: nested too deeply"})
    assert recorder.runs == 0


def test_two_different_content_lengths_are_refused_before_the_body_is_read(server, recorder) -> None:
    body = json.dumps(PUSH_MAIN).encode()
    request = (
        b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\n"
        b"X-Hub-Signature-256: %s\r\nContent-Length: %d\r\nContent-Length: 5\r\n\r\n"
        % (webhook.signature_for(SECRET, body).encode(), len(body))
    ) + body
    reply = raw_request(server, request)
    assert reply.startswith("HTTP/1.1 400") and "conflicting Content-Length" in reply
    assert recorder.runs == 0


def test_a_bug_while_handling_a_request_is_a_500_and_the_server_keeps_serving(
    server, recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> webhook.Reply:
        raise KeyError("boom")

    monkeypatch.setattr(server, "receive", broken)
    status, reply = deliver(server, "push", PUSH_MAIN)
    assert (status, reply) == (500, {"error": "internal error; nothing was run"})
    monkeypatch.undo()
    assert deliver(server, "push", PUSH_MAIN)[0] == 202
    assert server.queue.wait_idle(5) and recorder.runs == 1


@pytest.mark.parametrize("length", [b"+10", b"1_0", b" 10x", b"-1", b"\xd9\xa1\xd9\xa0"])
def test_a_content_length_that_is_not_plain_digits_gets_400(server, recorder, length: bytes) -> None:
    request = (
        b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: ping\r\nContent-Length: %s\r\n\r\n{}" % length
    )
    reply = raw_request(server, request)
    assert reply.startswith("HTTP/1.1 400") and "bad Content-Length" in reply
    assert recorder.runs == 0


def test_a_body_shorter_than_announced_gets_408_after_the_read_timeout(recorder) -> None:
    srv = webhook.WebhookServer(recorder, SECRET, port=0, read_timeout=0.5)
    srv.start()
    try:
        request = b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\nContent-Length: 100\r\n\r\n{"
        reply = raw_request(srv, request)
        assert reply.startswith("HTTP/1.1 408") and "not received within 0.5 s; nothing was run" in reply
        assert call(srv, "GET", "/healthz")[0] == 200  # and it keeps serving
    finally:
        srv.shutdown()
    assert recorder.runs == 0


def test_a_client_that_resets_the_connection_is_one_log_line_not_a_traceback(
    server, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    host, port = server.httpd.server_address[:2]
    for partial in (b"", b"POST /webhook HTTP/1.1\r\nContent-Length: 50\r\n\r\n{"):
        sock = socket.create_connection((str(host), int(port)))
        sock.sendall(partial)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
        sock.close()
    assert call(server, "GET", "/healthz")[0] == 200
    deadline = time.monotonic() + 5  # the handler threads see the resets in their own time
    while (
        caplog.text.count("client went away") + caplog.text.count("ended early") < 1
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    time.sleep(0.2)
    assert "Traceback" not in capfd.readouterr().err and "Traceback" not in caplog.text
    assert "client went away" in caplog.text or "ended early" in caplog.text


def test_head_answers_like_get_without_a_body_on_a_connection_that_stays_usable(server) -> None:
    host, port = server.httpd.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=5)
    try:
        for path, status in (("/healthz", 200), ("/nowhere", 404), ("/webhook", 405)):
            conn.request("HEAD", path)
            resp = conn.getresponse()
            assert resp.status == status and resp.read() == b"", path
            assert resp.getheader("Content-Type") == "application/json"
        conn.request("GET", "/healthz")  # the same connection: no stray body bytes before this reply
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["status"] == "ok"
    finally:
        conn.close()


def test_the_server_listens_on_an_ipv6_address(recorder) -> None:
    srv = webhook.WebhookServer(recorder, SECRET, host="::1", port=0)
    srv.start()
    try:
        port = srv.httpd.server_address[1]
        assert srv.url == f"http://[::1]:{port}"
        conn = http.client.HTTPConnection("::1", port, timeout=5)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        srv.shutdown()


def test_a_form_body_without_a_payload_field_gets_400_saying_so(server, recorder) -> None:
    body = b"other=1"
    headers = {
        "X-GitHub-Event": "push",
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Hub-Signature-256": webhook.signature_for(SECRET, body),
    }
    assert call(server, "POST", "/webhook", body, headers) == (
        400,
        {"error": "malformed payload: a form body needs a payload= field"},
    )
    assert recorder.runs == 0


def test_the_command_refuses_a_repository_with_no_remote_to_push_to(tmp_path: Path) -> None:
    pygit2.init_repository(str(tmp_path / "fleet.git"), bare=True, initial_head="main")
    result = CliRunner().invoke(
        webhook.command, [str(tmp_path / "fleet.git"), "--port", "0"], env={"JOBTREE_WEBHOOK_SECRET": "x"}
    )
    assert (
        result.exit_code == 2
        and "has no remote 'origin': every pass the webhook runs pushes there" in result.output
    )


def test_a_push_waits_for_another_process_holding_the_clone_instead_of_failing(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, template_files())
    pygit2.clone_repository(str(remote), str(tmp_path / "work"), checkout_branch="main")
    one_pass, _ = webhook._reconcile_for(str(tmp_path / "work"), apply=False, branch=None)
    # a scheduled `reconcile` of the same clone, in a process of its own, holds its writer lock
    with lock_held_elsewhere(tmp_path / "work", 2.0):
        outcome = one_pass()  # LockBusy at first: waits, then reconciles and pushes
    assert "pushed" in str(outcome)
    assert (
        pygit2.Repository(str(remote)).references["refs/heads/main"].peel(pygit2.Commit).author.name
        == "jobtree"
    )


@pytest.mark.parametrize(
    ("value", "want_secret"), [("s3cret\n", b"s3cret"), ("s3cret\r\n", b"s3cret"), ("  \n", b"")]
)
def test_a_secret_mounted_from_a_file_loses_its_line_break_and_blank_is_none(
    value: str, want_secret: bytes
) -> None:
    assert webhook.secret_of(value) == want_secret
