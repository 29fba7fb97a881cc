"""One test API server on a thread (`KubeApiServer`), several at once (`clusters`), and the test hooks.

The composition root: builds the store, catalog, registry and HTTP server, serves on
127.0.0.1:<free port>, and exposes what tests use from the same process: seeding, reading stored
objects, the request log, fault injection, the emulated kubelet, the history window, and a
kubeconfig. See the package docstring for what the server implements.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.support.kubeapi.admission import Call
from tests.support.kubeapi.faults import FaultPlan
from tests.support.kubeapi.handler import ApiHTTPServer, Services
from tests.support.kubeapi.kubeconfig import write_kubeconfig
from tests.support.kubeapi.kubelet import Kubelet
from tests.support.kubeapi.registry import Clock, Registry, utc_now
from tests.support.kubeapi.requestlog import RequestLog
from tests.support.kubeapi.resources import Catalog, ResourceType
from tests.support.kubeapi.store import Store, clone

Obj = dict[str, Any]
SEED_MANAGER = "kubeapi-seed"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class KubeApiServer:
    """An in-process Kubernetes API server for tests. Use as a context manager, or start()/stop()."""

    def __init__(
        self,
        name: str = "kubeapi",
        *,
        history_window: int = 10_000,
        bookmark_interval: float = 60.0,
        kubelet_emulation: bool = False,
        clock: Clock | None = None,
        seed: int = 0,
        minor_version: int = 32,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.name = name
        self.store = Store(history_window)
        self.catalog = Catalog()
        self.registry = Registry(self.store, self.catalog, clock or utc_now, seed)
        self.registry.kubelet_emulation = kubelet_emulation
        self.faults = FaultPlan()
        self.requests = RequestLog()
        self.kubelet = Kubelet(self.registry)
        self._services = Services(self.registry, self.faults, self.requests, bookmark_interval, minor_version)
        self._address = (host, port)
        self._http: ApiHTTPServer | None = None
        self._thread: threading.Thread | None = None
        for namespace in SYSTEM_NAMESPACES:
            self.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})

    # Lifecycle.

    def start(self) -> KubeApiServer:
        if self._http is not None:
            return self
        self._http = ApiHTTPServer(self._address, self._services)
        self._services.address = f"{self._address[0]}:{self._http.server_port}"
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"kubeapi-{self.name}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._http is None:
            return
        self.store.close()
        self._http.shutdown()
        self._http.cut_all_connections()
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._http = None

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._http is None:
            raise RuntimeError(f"server {self.name!r} is not running")
        return f"http://{self._services.address}"

    # Hooks for tests.

    @property
    def errors(self) -> list[str]:
        """Tracebacks of requests that failed inside the server (each also answered 500)."""
        return list(self._services.errors)

    @property
    def resource_version(self) -> int:
        """The current global revision (the newest resourceVersion)."""
        return self.store.revision

    @property
    def kubelet_emulation(self) -> bool:
        return self.registry.kubelet_emulation

    @kubelet_emulation.setter
    def kubelet_emulation(self, on: bool) -> None:
        self.registry.kubelet_emulation = on

    def set_history_window(self, size: int) -> None:
        """Retain only the last `size` changes; watches and continue tokens older than that get 410."""
        self.store.set_history_window(size)

    def _type(self, api_version: str, kind: str) -> ResourceType:
        rt = self.catalog.find_kind(api_version, kind)
        if rt is None:
            raise LookupError(f"{self.name}: no served resource for {api_version} {kind}")
        return rt

    def seed(self, *manifests: Obj) -> list[Obj]:
        """Create objects directly (no HTTP, not logged), creating their namespaces if missing.

        A `status` in a manifest is written afterwards through the status subresource, so pods and
        custom resources can be seeded in any phase. Returns the stored objects.
        """
        out = []
        for manifest in manifests:
            doc = clone(manifest)
            rt = self._type(doc.get("apiVersion", ""), doc.get("kind", ""))
            meta = doc.setdefault("metadata", {})
            namespace = meta.setdefault("namespace", "default") if rt.namespaced else ""
            if rt.namespaced and self.get("v1", "Namespace", namespace) is None:
                self.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            wanted_status = doc.pop("status", None) if rt.has_status else None
            created = self.registry.create(Call(rt, namespace, "", "", SEED_MANAGER), doc).body
            if wanted_status is not None:
                call = Call(rt, namespace, created["metadata"]["name"], "status", SEED_MANAGER)
                created = self.registry.write_as(call, _setting_status(wanted_status)).body
            out.append(clone(created))
        return out

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> Obj | None:
        """A private copy of a stored object, or None."""
        rt = self._type(api_version, kind)
        with self.store.lock:
            found = self.store.get(rt.storage_key, namespace if rt.namespaced else "", name)
            return None if found is None else clone(self.registry.output(rt, found))

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[Obj]:
        """Private copies of the stored objects of one kind, ordered by namespace and name."""
        rt = self._type(api_version, kind)
        with self.store.lock:
            found = [
                clone(self.registry.output(rt, o)) for o in self.store.objects(rt.storage_key, namespace)
            ]
        return sorted(found, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def write_kubeconfig(self, path: str | Path) -> Path:
        """A kubeconfig with one context named after this server."""
        return write_kubeconfig(path, {self.name: self})


def _setting_status(wanted: Any) -> Callable[[Obj], None]:
    def put(obj: Obj) -> None:
        obj["status"] = wanted

    return put


@contextlib.contextmanager
def clusters(
    names: Sequence[str], kubeconfig_path: str | Path, **options: Any
) -> Iterator[dict[str, KubeApiServer]]:
    """Run one server per name and write one kubeconfig with a context per server (first is current)."""
    servers = {name: KubeApiServer(name, **options) for name in names}
    try:
        for server in servers.values():
            server.start()
        write_kubeconfig(kubeconfig_path, servers)
        yield servers
    finally:
        for server in servers.values():
            server.stop()
