"""One test's view of a running control plane: its own fault proxy, the test's hand on objects, a kubelet stand-in, the cleanup.

`Cluster(plane, name)` is what a cluster test gets: a kubeconfig context named `name` for the
admin or for one of `deploy/`'s ServiceAccounts (`IDENTITIES`: the reconcile CronJob's and the
agent's, with the roles `deploy/base/rbac-*.yaml` give them), through a `FaultProxy` of its own
(`faults`, `requests`, `partition`). The test's own hand (`seed`, `get`, `list`, `delete`, and
`kubelet`: pod phases and node readiness written as a kubelet writes them) goes to the API
server directly as the admin, so it is neither logged nor faulted. `reset()` puts the cluster back
as `baseline()` found it: what a test created is deleted (namespaces finalized, since no
namespace controller runs), jobtree's published CRDs restored.
"""

from __future__ import annotations

import contextlib
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from reconciler.cluster import mirrors, stamp
from tests.support import REPO
from tests.support.controlplane.faults import FaultPlan
from tests.support.controlplane.plane import ControlPlane, Credentials, HTTPError, merge_kubeconfigs
from tests.support.controlplane.proxy import FaultProxy
from tests.support.controlplane.requestlog import RequestLog

Obj = dict[str, Any]
KWOK = "kwok.x-k8s.io/node"  # the label of kwok's nodes: Ready, their pods run and end
SYSTEM = "jobtree-system"
IDENTITIES = {"reconcile": "jobtree-reconcile", "agent": "jobtree-agent"}  # deploy/base/serviceaccounts.yaml
GROUP = "rq.davidlangworthy.io"

# (apiVersion, kind) -> (plural, namespaced): what tests touch
KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Node"): ("nodes", False),
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "Pod"): ("pods", True),
    ("v1", "Service"): ("services", True),
    ("v1", "Event"): ("events", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("coordination.k8s.io/v1", "Lease"): ("leases", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): ("customresourcedefinitions", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("priorityclasses", False),
    (f"{GROUP}/v1", "Run"): ("runs", True),
    (f"{GROUP}/v1", "Reservation"): ("reservations", True),
    (f"{GROUP}/v1", "Lease"): ("gpuleases", True),
    (f"{GROUP}/v1", "Budget"): ("budgets", False),
    (f"{GROUP}/v1", "FleetConfig"): ("fleetconfigs", False),
    (f"{GROUP}/v1", "JournalEntry"): ("journalentries", False),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): ("validatingadmissionpolicies", False),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): (
        "validatingadmissionpolicybindings",
        False,
    ),
}
# namespaced collections a test may fill, emptied by reset (pods first); KEPT: also those of deploy/
EMPTIED = [k for k, (_, namespaced) in KINDS.items() if namespaced and k[0] != "rbac.authorization.k8s.io/v1"
           and k[1] not in ("ServiceAccount", "Secret")]  # fmt: skip
KEPT = [k for k, (_, namespaced) in KINDS.items() if namespaced and k not in EMPTIED]
CLUSTER_SCOPED_OWN = [
    *((f"{GROUP}/v1", k) for k in ("Budget", "FleetConfig", "JournalEntry")),
    *(
        ("admissionregistration.k8s.io/v1", k)
        for k in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy")
    ),
]  # what a test may have made cluster-wide, deleted by reset


def path(api_version: str, kind: str, name: str | None = None, namespace: str | None = None) -> str:
    plural, namespaced = KINDS[(api_version, kind)]
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    where = f"/namespaces/{namespace}" if namespaced and namespace else ""
    return f"{root}{where}/{plural}" + (f"/{name}" if name else "")


class NotFoundError(LookupError):
    pass


class Admin:
    """The test's own hand on a control plane: plain REST as the admin, never through a proxy."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def call(self, method: str, where: str, body: Any = None, content_type: str = "application/json") -> Any:
        deadline = time.monotonic() + 30
        while True:
            try:
                return self.plane.request(method, where, body, content_type)
            except HTTPError as err:
                if err.code == 404:
                    raise NotFoundError(where) from None
                if err.code in (429, 503) and time.monotonic() < deadline:  # a CRD's storage starting
                    time.sleep(0.1)
                    continue
                raise RuntimeError(f"{method} {where}: {err}") from None

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        try:
            found: Obj = self.call("GET", path(api_version, kind, name, namespace))
        except NotFoundError:
            return None
        return found

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, selector: str = ""
    ) -> list[Obj]:
        query = f"?labelSelector={urllib.parse.quote(selector)}" if selector else ""
        try:
            items = self.call("GET", path(api_version, kind, None, namespace) + query).get("items") or []
        except NotFoundError:  # a CRD's kind not served (yet)
            return []
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None, grace: int | None = None
    ) -> bool:
        query = f"?gracePeriodSeconds={grace}" if grace is not None else ""
        try:
            self.call("DELETE", path(api_version, kind, name, namespace) + query)
        except NotFoundError:
            return False
        return True

    def patch(self, api_version: str, kind: str, name: str, patch: Obj, namespace: str | None = None,
              subresource: str = "", strategic: bool = False) -> Obj:  # fmt: skip
        kind_type = "application/strategic-merge-patch+json" if strategic else "application/merge-patch+json"
        where = path(api_version, kind, name, namespace) + (f"/{subresource}" if subresource else "")
        out: Obj = self.call("PATCH", where, patch, kind_type)
        return out

    def seed(self, *manifests: Obj) -> None:
        """Create each object as the admin, its status written after it as its controller would
        (a node's by its kubelet: nodes that are Ready are kwok's, so their pods run)."""
        for manifest in manifests:
            obj = yaml.safe_load(yaml.safe_dump(manifest))  # a copy
            api_version, kind = obj["apiVersion"], obj["kind"]
            meta = obj["metadata"]
            namespace = meta.get("namespace")
            if namespace:
                self.ensure_namespace(namespace)
            status = obj.pop("status", None)
            if kind == "Node":
                status = _node_status(status or {})
            self.call("POST", path(api_version, kind, None, namespace), obj)
            if kind == "CustomResourceDefinition":
                self.established(meta["name"])
            elif status:
                self.patch(api_version, kind, meta["name"], {"status": status}, namespace, "status")
            if kind == "Node" and _ready(status or {}):  # kwok's once its status says Ready, as written
                self.patch("v1", "Node", meta["name"], {"metadata": {"labels": {KWOK: "fake"}}})

    def ensure_namespace(self, name: str) -> None:
        if self.get("v1", "Namespace", name) is None:
            try:
                self.call(
                    "POST",
                    "/api/v1/namespaces",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                )
            except RuntimeError as err:
                if "AlreadyExists" not in str(err):
                    raise

    def established(self, crd: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            live = self.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd) or {}
            conditions = (live.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                return
            time.sleep(0.05)
        raise AssertionError(f"CRD {crd} not established in {timeout} s")


def _node_status(status: Obj) -> Obj:
    """A node's status as its kubelet reports it: allocatable beside capacity (the same when not
    given), a Ready condition."""
    out = dict(status)
    capacity = dict(out.get("capacity") or {})
    out["capacity"] = capacity
    out.setdefault("allocatable", dict(capacity))
    if not out.get("conditions"):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        out["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": now, "lastHeartbeatTime": now,
                              "reason": "KubeletReady", "message": "kubelet is posting ready status"}]  # fmt: skip
    return out


def _ready(status: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


class Kubelet:
    """What a node's kubelet writes, written by the test: pod phases, node readiness, the end of a
    pod's termination (on a node kwok does not run: a node that is not Ready)."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    def set_phase(self, namespace: str, name: str, phase: str, *, reason: str = "", exit_code: int | None = None,
                  conditions: Iterable[Obj] = ()) -> None:  # fmt: skip
        self.wait_started(namespace, name)
        status: Obj = {"phase": phase}
        if reason:
            status["reason"] = reason
        if conditions:
            status["conditions"] = list(conditions)
        if exit_code is not None:
            pod = self.admin.get("v1", "Pod", name, namespace) or {}
            status["containerStatuses"] = [
                {"name": c["name"], "image": c["image"], "imageID": "", "ready": False, "restartCount": 0,
                 "state": {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}}}
                for c in (pod.get("spec") or {}).get("containers") or []
            ]  # fmt: skip
        self.admin.patch("v1", "Pod", name, {"status": status}, namespace, "status", strategic=True)

    def wait_started(self, namespace: str, name: str, timeout: float = 30.0) -> None:
        """Wait until kwok has started the pod, where kwok runs its node (phase no longer Pending): a
        kubelet writes a pod's end after its start, and a snapshot taken before kwok's late write of
        Running differs from the pod a moment later."""
        deadline = time.monotonic() + timeout
        while True:
            pod = self.admin.get("v1", "Pod", name, namespace) or {}
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or (pod.get("status") or {}).get("phase", "Pending") != "Pending":
                return
            labels = ((self.admin.get("v1", "Node", node) or {}).get("metadata") or {}).get("labels") or {}
            if labels.get(KWOK) != "fake":
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"kwok did not start pod {namespace}/{name} on {node} in {timeout} s")
            time.sleep(0.02)

    def set_node_ready(self, node: str, ready: bool, *, reason: str = "") -> None:
        """The node's kubelet stops (NotReady: kwok lets go of it) or comes back (Ready: kwok's again)."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if not ready:
            self.admin.patch("v1", "Node", node, {"metadata": {"labels": {KWOK: None}}})
        condition = {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": now,
                     "lastHeartbeatTime": now, "reason": reason or ("KubeletReady" if ready else "KubeletNotReady"),
                     "message": "kubelet is posting ready status" if ready else "Kubelet stopped posting node status."}  # fmt: skip
        self.admin.patch(
            "v1", "Node", node, {"status": {"conditions": [condition]}}, None, "status", strategic=True
        )
        if ready:
            self.admin.patch("v1", "Node", node, {"metadata": {"labels": {KWOK: "fake"}}})

    def hold(self, node: str) -> None:
        """The node's kubelet stays up but is slow: kwok lets go of it, so a pod deleted there
        lingers (Terminating) until `finish_termination`."""
        self.admin.patch("v1", "Node", node, {"metadata": {"labels": {KWOK: None}}})

    def terminating_pods(self) -> list[tuple[str, str]]:
        return [
            (p["metadata"]["namespace"], p["metadata"]["name"])
            for p in self.admin.list("v1", "Pod")
            if p["metadata"].get("deletionTimestamp")
        ]

    def finish_termination(self, namespace: str, name: str) -> None:
        """The containers stopped: the kubelet removes the pod (a delete with no grace period)."""
        self.admin.delete("v1", "Pod", name, namespace, grace=0)


class Cluster(Admin):
    """One test's cluster: the plane, a fault proxy of its own, kubeconfigs onto it (module docstring)."""

    def __init__(self, plane: ControlPlane, name: str = "east") -> None:
        super().__init__(plane)
        self.name = name
        self.proxy = FaultProxy("127.0.0.1", plane.port, plane.ssl_context()).start()
        self.kubelet = Kubelet(self)
        self._tokens: dict[str, Credentials] = {}

    @property
    def faults(self) -> FaultPlan:
        return self.proxy.faults

    @property
    def requests(self) -> RequestLog:
        return self.proxy.requests

    def close(self) -> None:
        self.proxy.stop()

    def stop(self) -> None:
        """The cluster stops answering: nobody listens at its address any more."""
        self.proxy.stop()

    def credentials(self, identity: str | None) -> Credentials | None:
        """The admin (None), or a token of one of deploy/'s ServiceAccounts ('reconcile', 'agent')."""
        if identity is None:
            return None
        if identity not in self._tokens:
            account = IDENTITIES[identity]
            answer = self.call(
                "POST", f"/api/v1/namespaces/{SYSTEM}/serviceaccounts/{account}/token",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 86400}},
            )  # fmt: skip
            self._tokens[identity] = Credentials(account, answer["status"]["token"])
        return self._tokens[identity]

    def kubeconfig_doc(self, identity: str | None = "reconcile", context: str | None = None) -> Obj:
        """A context for `identity`; the agent's in its own namespace (where its leader Lease is)."""
        namespace = SYSTEM if identity == "agent" else None
        return self.plane.kubeconfig(
            context or self.name, self.credentials(identity), self.proxy.url, namespace
        )

    def write_kubeconfig(
        self, where: Path, identity: str | None = "reconcile", context: str | None = None
    ) -> Path:
        return merge_kubeconfigs(where, [self.kubeconfig_doc(identity, context)])


def write_kubeconfig(where: Path, clusters: dict[str, Cluster], identity: str | None = "reconcile") -> Path:
    """One kubeconfig with a context per cluster (named after it), as `identity`."""
    return merge_kubeconfigs(where, [c.kubeconfig_doc(identity, name) for name, c in clusters.items()])


# ---------------------------------------------------------------------------------- a session's plane


def install(admin: Admin) -> None:
    """What every test starts from: deploy/'s namespace, ServiceAccounts and RBAC, and jobtree's CRDs."""
    base = REPO / "deploy" / "base"
    docs = [d for f in ("namespace.yaml", "serviceaccounts.yaml", "rbac-reconcile.yaml", "rbac-agent.yaml")
            for d in yaml.safe_load_all((base / f).read_text()) if d]  # fmt: skip
    for doc in docs:
        if doc["metadata"].get("namespace") is None and KINDS[(doc["apiVersion"], doc["kind"])][1]:
            doc["metadata"]["namespace"] = SYSTEM
    admin.seed(*docs)
    admin.seed(*published_crds())


def published_crds() -> list[Obj]:
    """schemas/crds/ as jobtree's apply stamps them (so an apply finds them current)."""
    return [stamp.stamped(c, None)[0] for c in mirrors.definitions()]


class Baseline:
    """What the plane held once installed: reset deletes what a test added and restores the CRDs."""

    def __init__(self, admin: Admin) -> None:
        self.namespaces = {n["metadata"]["name"] for n in admin.list("v1", "Namespace")}
        self.nodes: set[str] = set()
        self.crds = {c["metadata"]["name"]: c for c in published_crds()}  # as install() left them

    def reset(self, admin: Admin) -> None:
        for namespace in sorted({n["metadata"]["name"] for n in admin.list("v1", "Namespace")}):
            if namespace in (SYSTEM, "default"):
                self._empty(admin, namespace, EMPTIED)
            elif namespace not in self.namespaces:
                self._empty(admin, namespace, [*EMPTIED, *KEPT])
                admin.delete("v1", "Namespace", namespace)
                live = admin.get("v1", "Namespace", namespace)
                if live is not None:  # no namespace controller runs: finalize it as the controller would
                    live["spec"] = {"finalizers": []}
                    admin.call("PUT", f"/api/v1/namespaces/{namespace}/finalize", live)
        for node in admin.list("v1", "Node"):
            if node["metadata"]["name"] not in self.nodes:
                admin.delete("v1", "Node", node["metadata"]["name"], grace=0)
        for key in CLUSTER_SCOPED_OWN:
            self._collection(admin, path(*key))
        crd = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        live = {c["metadata"]["name"]: c for c in admin.list(*crd)}
        for name, have in live.items():
            want = self.crds.get(name)
            if want is None:
                admin.delete(*crd, name)
            elif have["metadata"].get("annotations") != want["metadata"].get("annotations"):
                meta = {**want["metadata"], "resourceVersion": have["metadata"]["resourceVersion"]}
                admin.call("PUT", path(*crd, name), {**want, "metadata": meta})
        for name, want in self.crds.items():
            if name not in live:
                admin.seed(want)

    @staticmethod
    def _empty(admin: Admin, namespace: str, kinds: list[tuple[str, str]]) -> None:
        for key in kinds:
            grace = "&gracePeriodSeconds=0" if key == ("v1", "Pod") else ""
            for obj in admin.list(*key, namespace=namespace):
                if obj["metadata"].get("finalizers"):
                    admin.patch(*key, obj["metadata"]["name"], {"metadata": {"finalizers": None}}, namespace)
            Baseline._collection(
                admin, path(*key, namespace=namespace) + "?propagationPolicy=Background" + grace
            )

    @staticmethod
    def _collection(admin: Admin, where: str) -> None:
        try:
            admin.call("DELETE", where)
        except NotFoundError:  # a CRD's kind not served
            pass


@contextlib.contextmanager
def started(*names: str) -> Iterator[dict[str, Cluster]]:
    """A control plane of its own per name (deploy/'s RBAC and jobtree's CRDs installed) as that
    cluster, all stopped when the block ends: for benchmarks. Started one after another from this
    thread: their processes end with the thread that started them (`plane._die_with_parent`)."""
    planes: list[ControlPlane] = []
    try:
        for name in names:
            planes.append(ControlPlane(name).start())
            install(Admin(planes[-1]))
        clusters = {plane.name: Cluster(plane, plane.name) for plane in planes}
        try:
            yield clusters
        finally:
            for cluster in clusters.values():
                cluster.close()
    finally:
        for plane in planes:
            plane.stop()
