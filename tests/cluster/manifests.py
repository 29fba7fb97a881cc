"""Builders for the manifests cluster tests send, and a reader for the Status a refusal carries."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.rest import ApiException

GROUP = "rq.davidlangworthy.io"


def status_of(failure: ApiException) -> dict[str, Any]:
    """The Status body of a refused request."""
    body: dict[str, Any] = json.loads(failure.body)
    return body


def a_pod(name: str, node: str = "node-1", image: str = "busybox:1.36", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": image}]},
    }


def a_run(name: str, namespace: str = "default", gpus: int = 8, owner: str = "org:team") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Run",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"owner": owner, "resources": {"gpuType": "H100-80GB", "totalGPUs": gpus}},
    }


def a_config_map(name: str, data: dict[str, str], **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", **({"labels": dict(labels)} if labels else {})},
        "data": data,
    }


def a_node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels)},
        "status": {"capacity": {"nvidia.com/gpu": "8"}},
    }
