"""A fleet repository driven against test API servers, as a platform engineer sets one up: a builder for tests.

`ClusterFleet(tmp_path, {"east": server})` writes a kubeconfig with one context per server (and
points `KUBECONFIG` at it: the caller passes pytest's `monkeypatch`), a bare remote and a clone
whose jobtree.yaml names each server's context in `clusters`. Nodes are seeded into a server as a
cluster's kubelets and GPU Feature Discovery would publish them (`nodes`), a pass is
`reconcile_once` on the clone (`reconcile`), and `apply` is the verb's pass alone. Every object
stays readable from the server (`server.get`, `server.list`) and from the clone (`file`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from reconciler.cluster import retry
from schemas.common import parse_time

API = "rq.davidlangworthy.io/v1"
T0 = parse_time("2026-03-02T09:00:00Z")
FAST = retry.Backoff(attempts=6, base=0.01, cap=0.05, longest=2.0)  # tests wait for no backoff


def node(
    name: str,
    gpus: int = 8,
    *,
    domain: str = "A",
    region: str = "us-east",
    flavor: str = "H100-80GB",
    cluster: str | None = None,
    labels: Mapping[str, str] | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    """A GPU node as Kubernetes shows it: the default topology labels, GPU capacity, Ready."""
    have = {"region": region, "fabric.domain": domain, "gpu.flavor": flavor}
    if cluster is not None:
        have["cluster"] = cluster
    if labels is not None:
        have = dict(labels)
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "lastTransitionTime": "2026-03-02T08:00:00Z",
        "lastHeartbeatTime": "2026-03-02T08:59:00Z",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": have},
        "status": {"capacity": {"nvidia.com/gpu": str(gpus)}, "conditions": [condition]},
    }


def fleet_config(
    tenants: Mapping[str, str], clusters: list[dict[str, Any]], name: str = "acme", **spec: Any
) -> bytes:
    doc = {
        "apiVersion": API,
        "kind": "FleetConfig",
        "metadata": {"name": name},
        "spec": {
            "tenants": [{"namespace": ns, "owner": owner} for ns, owner in sorted(tenants.items())],
            "clusters": clusters,
            "git": {"branch": "main", "author": {"name": "jobtree", "email": "jobtree@acme.example"}},
            **spec,
        },
    }
    return yaml.safe_dump(doc, sort_keys=False).encode()


def manifest(doc: dict[str, Any]) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False).encode()
