"""GPU nodes as a cluster's kubelets and NVIDIA GPU Feature Discovery publish them (test support only).

`gpu_node(name, gpus, ...)`: a Node with GFD-style labels (`nvidia.com/gpu.product`,
`nvidia.com/gpu.count`, `nvidia.com/gpu.clique` for its NVLink domain,
`topology.kubernetes.io/region`) and the platform team's own `cluster` label, `nvidia.com/gpu` in
capacity and allocatable, Ready. `from_inventory(path)`: one per node an `inventory/nodes.yaml`
lists (the template fleet's, say), its topology in those labels. `TOPOLOGY_LABELS` is the
`topologyLabels` mapping a jobtree.yaml gives to read them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from reconciler.passes.embedded import nodes_from_inventory
from schemas.fleet import Inventory

PRODUCT, COUNT, CLIQUE = "nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.clique"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = {"region": REGION, "fabric.domain": CLIQUE, "gpu.flavor": PRODUCT, "cluster": "cluster"}


def gpu_node(name: str, gpus: int = 8, *, cluster: str = "local", region: str = "us-east",
             clique: str = "clique-a", product: str = "H100-80GB") -> dict[str, Any]:  # fmt: skip
    amounts = {"nvidia.com/gpu": str(gpus), "cpu": "96", "memory": "1Ti", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                REGION: region,
                PRODUCT: product,
                COUNT: str(gpus),
                CLIQUE: clique,
                "cluster": cluster,
            },  # fmt: skip
        },
        "status": {"capacity": dict(amounts), "allocatable": dict(amounts)},
    }


def numbered(count: int, cluster: str = "local", per_clique: int = 4) -> list[dict[str, Any]]:
    """`count` 8-GPU H100 nodes `gpu-000`, `gpu-001`, ..., `per_clique` to an NVLink domain."""
    return [
        gpu_node(f"gpu-{i:03d}", cluster=cluster, clique=f"clique-{i // per_clique}") for i in range(count)
    ]


def from_inventory(path: Path) -> list[dict[str, Any]]:
    """The nodes an inventory/nodes.yaml lists, as GFD would label them."""
    inventory = Inventory.model_validate(yaml.safe_load(path.read_text()))
    out = []
    for name, obs in sorted(nodes_from_inventory(inventory).items()):
        labels = obs.labels
        out.append(gpu_node(
            name, obs.gpus, cluster=labels.get("cluster", "local"), region=labels.get("region", ""),
            clique=labels.get("fabric.domain", ""), product=labels.get("gpu.flavor", ""),
        ))  # fmt: skip
    return out
