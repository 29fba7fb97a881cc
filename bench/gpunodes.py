"""GPU nodes as a real cluster's API server holds them (~20 KB each), created in parallel: for the 10,000-node rows.

`gpu_node(name, ...)`: `tests.support.controlplane.nodes.realistic` (the kubelet's, GPU Feature
Discovery's, Node Feature Discovery's and node-problem-detector's labels, annotations, conditions,
addresses, nodeInfo and the 50 images a kubelet reports; the same name gives the same bytes),
labelled for kwok (`kwok.x-k8s.io/node: fake`) and Ready from the start, so kwok runs its pods
without rewriting it. `create(api, nodes, workers)` POSTs them through the official client,
`workers` at a time (a Node's status is kept on create, so one request each); `create_on` does so
straight to a test control plane's API server. What it does not do: heartbeats (kwok renews no
node status here; a real kubelet would every few seconds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client, config

from tests.support.controlplane import Cluster, nodes
from tests.support.controlplane.nodes import realistic

KWOK = "kwok.x-k8s.io/node"


def gpu_node(name: str, *, cluster: str, region: str, clique: str, gpus: int = 8,
             product: str = "H100-80GB") -> dict[str, Any]:  # fmt: skip
    """One node as the API server holds it on a real GPU cluster (`tests.support.controlplane.nodes.realistic`
    of its `gpu_node`), labelled for kwok."""
    node = realistic(
        nodes.gpu_node(name, gpus, cluster=cluster, region=region, clique=clique, product=product)
    )
    node["metadata"]["labels"][KWOK] = "fake"
    return node


def fleet(domains: Iterable[Mapping[str, Any]], cluster: str) -> list[dict[str, Any]]:
    """A node per inventory block's node (`<name>-nNN`, as bench.generate and the embedded
    inventory name them), its domain its NVLink clique, all in `cluster`."""
    return [
        gpu_node(
            f"{d['name']}-n{i:02d}",
            cluster=cluster,
            region=d["region"],
            clique=d["name"],
            gpus=d["gpusPerNode"],
            product=d["flavor"],
        )  # fmt: skip
        for d in domains
        for i in range(d["nodes"])
    ]


def create(api: client.CoreV1Api, nodes: list[dict[str, Any]], workers: int = 16) -> None:
    """POST every node (status and all: the API server keeps a Node's status on create),
    `workers` requests in flight; the first failure is raised."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(lambda node: api.create_node(node, _preload_content=False), nodes):
            pass


def create_on(
    server: Cluster, kubeconfig: Path, nodes: list[dict[str, Any]], workers: int = 16
) -> client.CoreV1Api:
    """`create` as the admin straight to `server`'s API server (not through its fault proxy, whose
    request log times what jobtree sends); the client, for the caller's own reads."""
    server.plane.write_kubeconfig(kubeconfig, context="admin")
    api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig), context="admin"))
    api.api_client.configuration.connection_pool_maxsize = workers
    create(api, nodes, workers)
    return api
