"""A real Kubernetes control plane on loopback: etcd, kube-apiserver and kwok as child processes (test support only).

`ControlPlane` starts the binaries `make controlplane` built (`build.sh`, a cache folder keyed by
VERSIONS) on free 127.0.0.1 ports, with their data in a temporary folder: etcd (no fsync: the
data dies with the test run), kube-apiserver (RBAC authorization, a self-signed serving
certificate, service-account signing keys made at start, an admin token in `system:masters`) and
kwok (the kubelet stand-in: nodes labelled `kwok.x-k8s.io/node: fake` report Ready, their pods
go Running, a deleted pod is removed once its deletion is seen). It writes kubeconfigs, and stops
everything, children first, on `stop()` or when the process that started it dies.

What it deliberately does not run: kube-controller-manager and kube-scheduler. No namespace is
finalized, nothing is garbage-collected, no ServiceAccount `default` is made (the ServiceAccount
admission plugin is off for that reason), and a pod without `nodeName` stays Pending. `reset`
(the test fixture's cleanup) does the namespace finalization itself.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build.sh"
README_SENTENCE = (
    "make test needs Go >= 1.26 (besides Python >= 3.11 and make) to build the control plane the cluster "
    "tests run against; run `make controlplane` (the first build takes about 10 minutes and 3 GB)."
)
START_TIMEOUT = 60.0  # seconds: a loaded 2-core machine starts it in 5 to 10
ADMIN = "admin"


class ControlPlaneMissing(RuntimeError):
    """The binaries are not built: `make controlplane` (the message says so)."""


def versions() -> dict[str, str]:
    """VERSIONS as a dict (KUBERNETES, ETCD, KWOK)."""
    out = {}
    for line in (HERE / "VERSIONS").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            out[key.strip()] = value.strip()
    return out


def binaries() -> Path:
    """The folder holding etcd, kube-apiserver and kwok; `ControlPlaneMissing` when one is not built."""
    v = versions()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = (
        base / "jobtree" / "controlplane" / f"kubernetes-{v['KUBERNETES']}-etcd-{v['ETCD']}-kwok-{v['KWOK']}"
    )
    for name in ("etcd", "kube-apiserver", "kwok"):
        if not os.access(folder / name, os.X_OK):
            raise ControlPlaneMissing(f"{folder / name} is not built. {README_SENTENCE}")
    return folder


def core_v1_openapi() -> Path:
    """The core/v1 OpenAPI document (`api__v1_openapi.json`) of the kube-apiserver `binaries` holds,
    as its k8s.io/kubernetes module publishes it; `ControlPlaneMissing` when `make controlplane` has
    not put it there."""
    found = binaries() / "api__v1_openapi.json"
    if not found.is_file():
        raise ControlPlaneMissing(f"{found} is missing. {README_SENTENCE}")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child: SIGTERM when the thread that started it ends (Linux prctl PR_SET_PDEATHSIG: the
    parent *thread*), so a killed test run leaves no server behind; start planes from a thread that
    outlives them."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    os.setpgrp()


@dataclass(frozen=True, slots=True)
class Credentials:
    """Who a kubeconfig authenticates as: a bearer token (the admin's, or a ServiceAccount's)."""

    user: str
    token: str


class ControlPlane:
    """etcd + kube-apiserver + kwok on loopback. Use as a context manager, or start()/stop()."""

    def __init__(self, name: str = "test", *, kwok: bool = True) -> None:
        self.name = name
        self.with_kwok = kwok
        self.folder = Path(tempfile.mkdtemp(prefix=f"jobtree-controlplane-{name}-"))
        self.port = 0
        self.admin = Credentials(ADMIN, secrets.token_hex(16))
        self._procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.started_in = 0.0
        self._context: ssl.SSLContext | None = None
        self._local = threading.local()

    # ------------------------------------------------------------------------------ lifecycle

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        """The serving certificate with the CA that signed it (kube-apiserver's self-signed pair)."""
        return self.folder / "certs" / "apiserver.crt"

    def start(self) -> ControlPlane:
        began = time.monotonic()
        bins = binaries()
        for attempt in range(3):
            try:
                self._start_once(bins)
                break
            except _PortTaken:
                self._stop_children()
                if attempt == 2:
                    raise
        self.started_in = time.monotonic() - began
        return self

    def _start_once(self, bins: Path) -> None:
        etcd_port, peer_port, self.port = free_port(), free_port(), free_port()
        (self.folder / "certs").mkdir(exist_ok=True)
        logs = self.folder / "logs"
        logs.mkdir(exist_ok=True)
        key = self.folder / "service-account.key"
        if not key.exists():
            subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        (self.folder / "tokens.csv").write_text(f'{self.admin.token},{ADMIN},{ADMIN},"system:masters"\n')
        etcd_data = self.folder / "etcd"
        shutil.rmtree(etcd_data, ignore_errors=True)
        self._spawn("etcd", [
            str(bins / "etcd"), "--name", "default", "--data-dir", str(etcd_data),
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--log-level", "error", "--listen-metrics-urls", "",
        ], logs)  # fmt: skip
        self._spawn("kube-apiserver", [
            str(bins / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--cert-dir={self.folder / 'certs'}",
            "--authorization-mode=RBAC",
            f"--token-auth-file={self.folder / 'tokens.csv'}",
            "--anonymous-auth=false",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={key}", f"--service-account-signing-key-file={key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--disable-admission-plugins=ServiceAccount",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            "--v=0",
        ], logs)  # fmt: skip
        self._ready()
        if self.with_kwok:
            admin = self.write_kubeconfig(self.folder / "kwok.kubeconfig")
            self._spawn("kwok", [
                str(bins / "kwok"), f"--config={HERE / 'kwok.yaml'}", f"--kubeconfig={admin}",
                "--manage-all-nodes=false", "--manage-nodes-with-label-selector=kwok.x-k8s.io/node=fake",
                "--node-ip=10.1.0.1", "--cidr=10.2.0.0/16", "--server-address=",
            ], logs)  # fmt: skip

    def _spawn(self, name: str, argv: Sequence[str], logs: Path) -> None:
        out = (logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent, cwd=self.folder,
        )  # fmt: skip
        out.close()
        self._procs.append((name, proc))

    def _ready(self) -> None:
        """Wait until /readyz answers ok (RBAC's bootstrap roles and the CRD server included)."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            for name, proc in self._procs:
                if proc.poll() is not None:
                    log = self.log(name)
                    if "address already in use" in log:
                        raise _PortTaken(name)
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{log[-3000:]}")
            if self.ca_file.exists():
                try:
                    self.request("GET", "/readyz")
                    return
                except (OSError, HTTPError, http.client.HTTPException):
                    self._context = None  # the certificate may have been half written
                    self._local.conn = None
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the control plane did not get ready in {START_TIMEOUT:g} s:\n"
                    + self.log("kube-apiserver")[-3000:]
                )
            time.sleep(0.1)

    def log(self, name: str) -> str:
        path = self.folder / "logs" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        self._stop_children()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _stop_children(self) -> None:
        """SIGTERM to each, newest first; whatever has not ended 3 s later is killed (its data is
        thrown away: a graceful drain of the API server's watches buys nothing here)."""
        for _, proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 3.0
        for _, proc in reversed(self._procs):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()

    # ---------------------------------------------------------------------------------- access

    def ssl_context(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = ssl.create_default_context(cafile=str(self.ca_file))
        return self._context

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        """One request as the admin (the test's own hand on the cluster), on a kept-alive connection
        of this thread; the decoded answer. `HTTPError` for an error status."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.admin.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = http.client.HTTPSConnection(
                    "127.0.0.1", self.port, context=self.ssl_context(), timeout=30
                )
                self._local.conn = conn
            try:
                conn.request(method, path, body=data, headers=headers)
                answer = conn.getresponse()
                raw = answer.read()
                break
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        if answer.status >= 400:
            raise HTTPError(answer.status, raw.decode(errors="replace"))
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return raw.decode()

    def kubeconfig(
        self, context: str | None = None, who: Credentials | None = None, server: str | None = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """A kubeconfig with one context (named `context`, default the plane's name; in `namespace`
        when given) for `who` (default the admin), to `server` (default the API server itself; a
        fault proxy's URL)."""
        name = context or self.name
        who = who or self.admin
        server = server or self.url
        cluster: dict[str, Any] = {"server": server}
        if server.startswith("https://"):
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_file.read_bytes()).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": f"{name}-{who.user}", "user": {"token": who.token}}],
            "contexts": [
                {
                    "name": name,
                    "context": {
                        "cluster": name,
                        "user": f"{name}-{who.user}",
                        **({"namespace": namespace} if namespace else {}),
                    },
                }
            ],  # fmt: skip
            "current-context": name,
        }

    def write_kubeconfig(self, path: Path, **kwargs: Any) -> Path:
        path.write_text(yaml.safe_dump(self.kubeconfig(**kwargs), sort_keys=False))
        path.chmod(0o600)
        return path


def merge_kubeconfigs(path: Path, configs: Sequence[dict[str, Any]]) -> Path:
    """One kubeconfig file holding every context of `configs` (the first one current)."""
    merged: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [],
        "users": [],
        "contexts": [],
    }
    for config in configs:
        for part in ("clusters", "users", "contexts"):
            merged[part] += config[part]
    merged["current-context"] = configs[0]["current-context"] if configs else ""
    path.write_text(yaml.safe_dump(merged, sort_keys=False))
    path.chmod(0o600)
    return path


class HTTPError(Exception):
    """An error status from the API server to the admin's request."""

    def __init__(self, code: int, body: str) -> None:
        super().__init__(f"{code}: {body[:800]}")
        self.code, self.body = code, body


class _PortTaken(RuntimeError):
    """A port chosen as free was taken before the child bound it: start again on others."""
