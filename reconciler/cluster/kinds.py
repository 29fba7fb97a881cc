"""The Kubernetes kinds jobtree reads and writes, and their REST paths: one table, spelled once.

Built-in kinds (nodes, namespaces, pods, services, CRDs) and jobtree's own (`schemas/crds/`).
Knows paths only: no requests (`api`), no decisions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schemas import API_VERSION


@dataclass(frozen=True, slots=True)
class Kind:
    api_version: str  # "v1", "apps/v1", "rq.davidlangworthy.io/v1"
    kind: str
    plural: str
    namespaced: bool
    status: bool = False  # jobtree writes its status through the /status subresource

    def collection(self, namespace: str | None = None) -> str:
        """The list path: every namespace when `namespace` is None (or the kind is cluster-scoped)."""
        root = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"

    def path(self, name: str, namespace: str | None = None, subresource: str = "") -> str:
        tail = f"/{subresource}" if subresource else ""
        return f"{self.collection(namespace if self.namespaced else None)}/{name}{tail}"


NODE = Kind("v1", "Node", "nodes", False)
NAMESPACE = Kind("v1", "Namespace", "namespaces", False)
POD = Kind("v1", "Pod", "pods", True)
SERVICE = Kind("v1", "Service", "services", True)
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False)
RUN = Kind(API_VERSION, "Run", "runs", True, status=True)
RESERVATION = Kind(API_VERSION, "Reservation", "reservations", True, status=True)
BUDGET = Kind(API_VERSION, "Budget", "budgets", False, status=True)
LEASE = Kind(API_VERSION, "Lease", "gpuleases", True, status=True)
FLEET = Kind(API_VERSION, "FleetConfig", "fleetconfigs", False, status=True)
# the agent's swaps (§7.4): not in Git, so never pruned by apply; reconcile marks them Folded
JOURNAL = Kind(API_VERSION, "JournalEntry", "journalentries", False, status=True)
COORDINATION_LEASE = Kind("coordination.k8s.io/v1", "Lease", "leases", True)  # the agent's leader election
EVENT = Kind("v1", "Event", "events", True)  # the agent's word on a Run it swapped (never pruned: not OWNED)

MIRRORS = (FLEET, BUDGET, RUN, RESERVATION, LEASE)  # the record, mirrored (§7.3), in apply order
RENDERED = (SERVICE, POD)  # what rendered/<cluster>/ holds, in apply order
OWNED = (*MIRRORS, *RENDERED)  # every kind jobtree prunes by the fleet label
_BY_KIND = {(k.api_version, k.kind): k for k in (NODE, NAMESPACE, CRD, JOURNAL, COORDINATION_LEASE, *OWNED)}


def of(obj: dict[str, Any]) -> Kind:
    """The kind of a manifest; KeyError for one jobtree never applies."""
    return _BY_KIND[(obj.get("apiVersion", ""), obj.get("kind", ""))]


Key = tuple[str, str, str]  # (kind, namespace or "", name)


def key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace") or "", meta["name"])


def named(k: Key) -> str:
    """`Pod t/r-g0-n1`, `Budget vision`: a key for people."""
    kind, namespace, name = k
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
