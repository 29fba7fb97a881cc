"""GPU nodes as a cluster's kubelets and NVIDIA GPU Feature Discovery publish them (test support only).

`gpu_node(name, gpus, ...)`: a Node with GFD-style labels (`nvidia.com/gpu.product`,
`nvidia.com/gpu.count`, `nvidia.com/gpu.clique` for its NVLink domain,
`topology.kubernetes.io/region`) and the platform team's own `cluster` label, `nvidia.com/gpu` in
capacity and allocatable, Ready. `realistic(node)`: the same node as a production cluster serves
it, about 20 KB of JSON once the server has added its managedFields: Node Feature Discovery's CPU
and kernel labels and GFD's driver, CUDA and deployment labels, NFD's annotations, every
allocatable resource, node-problem-detector's conditions, and the 50 container images the kubelet
reports (what makes a real Node heavy: the scale benchmark's nodes). `from_inventory(path)`: one
per node an `inventory/nodes.yaml` lists (the template fleet's, say), its topology in those
labels. `TOPOLOGY_LABELS` is the `topologyLabels` mapping a jobtree.yaml gives to read them.
"""

from __future__ import annotations

import hashlib
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


_CPU_FLAGS = (
    "ADX AESNI AMXBF16 AMXINT8 AMXTILE AVX AVX2 AVX512BF16 AVX512BITALG AVX512BW AVX512CD AVX512DQ "
    "AVX512F AVX512FP16 AVX512IFMA AVX512VBMI AVX512VBMI2 AVX512VL AVX512VNNI AVX512VPOPCNTDQ AVXVNNI "
    "CMPXCHG8 FMA3 FSRM FXSR FXSROPT GFNI HYPERVISOR IBPB LAHF MOVBE MOVDIR64B MOVDIRI OSXSAVE "
    "SERIALIZE SHA SPEC_CTRL_SSBD STIBP SYSCALL SYSEE TSXLDTRK VAES VMX VPCLMULQDQ WAITPKG X87 XGETBV1 "
    "XSAVE XSAVEC XSAVEOPT XSAVES"
).split()
_IMAGES = (
    "nvcr.io/nvidia/k8s/dcgm-exporter", "nvcr.io/nvidia/k8s-device-plugin", "nvcr.io/nvidia/gpu-feature-discovery",
    "nvcr.io/nvidia/cloud-native/gpu-operator-validator", "nvcr.io/nvidia/driver", "nvcr.io/nvidia/k8s/container-toolkit",
    "registry.k8s.io/nfd/node-feature-discovery", "registry.k8s.io/kube-proxy", "quay.io/cilium/cilium",
    "registry.k8s.io/pause", "quay.io/prometheus/node-exporter", "docker.io/fluent/fluent-bit",
    "nvcr.io/nvidia/pytorch", "nvcr.io/nvidia/nemo", "nvcr.io/nvidia/tritonserver", "ghcr.io/acme/llm-pretrain",
    "ghcr.io/acme/moe-train", "ghcr.io/acme/vit-train", "ghcr.io/acme/whisper-train", "ghcr.io/acme/sys-train",
    "registry.k8s.io/sig-storage/csi-node-driver-registrar", "registry.k8s.io/sig-storage/livenessprobe",
    "docker.io/rocm/k8s-device-plugin", "mellanox/k8s-rdma-shared-dev-plugin", "ghcr.io/k8snetworkplumbingwg/multus-cni",
)  # fmt: skip


def realistic(node: dict[str, Any]) -> dict[str, Any]:
    """`node` (a `gpu_node`) as a production GPU node shows it: what NFD, GFD, the kubelet and
    node-problem-detector add (see the module docstring). Deterministic per node name."""
    name = node["metadata"]["name"]
    labels = dict(node["metadata"]["labels"])
    gpus = node["status"]["capacity"]["nvidia.com/gpu"]
    labels |= {
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "p5.48xlarge",
        "beta.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/zone": "us-east-1a",
        "failure-domain.beta.kubernetes.io/zone": "us-east-1a", "node-role.kubernetes.io/gpu": "",
        **{f"feature.node.kubernetes.io/cpu-cpuid.{flag}": "true" for flag in _CPU_FLAGS},
        "feature.node.kubernetes.io/cpu-hardware_multithreading": "true",
        "feature.node.kubernetes.io/cpu-model.family": "6", "feature.node.kubernetes.io/cpu-model.id": "143",
        "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
        "feature.node.kubernetes.io/kernel-version.full": "6.8.0-1021-aws",
        "feature.node.kubernetes.io/kernel-version.major": "6", "feature.node.kubernetes.io/kernel-version.minor": "8",
        "feature.node.kubernetes.io/kernel-version.revision": "0", "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/pci-1d0f.present": "true", "feature.node.kubernetes.io/rdma.available": "true",
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        "nvidia.com/cuda.driver-version.full": "565.57.01", "nvidia.com/cuda.driver.major": "565",
        "nvidia.com/cuda.driver.minor": "57", "nvidia.com/cuda.driver.rev": "01",
        "nvidia.com/cuda.runtime-version.full": "12.7", "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "7", "nvidia.com/gfd.timestamp": "1730419200",
        "nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0", "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.machine": "p5.48xlarge", "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.mode": "compute",
        "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single", "nvidia.com/mps.capable": "false", "nvidia.com/vgpu.present": "false",
        "nvidia.com/gpu-driver-upgrade-state": "upgrade-done", "nvidia.com/gpu.present": "true",
        **{f"nvidia.com/gpu.deploy.{part}": "true" for part in (
            "container-toolkit", "dcgm", "dcgm-exporter", "device-plugin", "driver", "gpu-feature-discovery",
            "node-status-exporter", "operator-validator")},
    }  # fmt: skip
    digest = hashlib.sha256(name.encode()).hexdigest()
    amounts = {
        "cpu": "192", "ephemeral-storage": "3750000000Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
        "memory": "2097152000Ki", "nvidia.com/gpu": gpus, "pods": "110", "vpc.amazonaws.com/efa": "32",
        "rdma/rdma_shared_device_a": "63",
    }  # fmt: skip
    conditions = [
        {"type": kind, "status": "False", "reason": reason, "message": message,
         "lastHeartbeatTime": "2026-03-02T08:59:00Z", "lastTransitionTime": "2026-03-01T00:00:00Z"}
        for kind, reason, message in (
            ("KernelDeadlock", "KernelHasNoDeadlock", "kernel has no deadlock"),
            ("ReadonlyFilesystem", "FilesystemIsNotReadOnly", "Filesystem is not read-only"),
            ("FrequentKubeletRestart", "NoFrequentKubeletRestart", "kubelet is functioning properly"),
            ("FrequentContainerdRestart", "NoFrequentContainerdRestart", "containerd is functioning properly"),
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        )
    ] + [dict(c) for c in node["status"].get("conditions") or [{
        "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
        "lastHeartbeatTime": "2026-03-02T08:59:00Z", "lastTransitionTime": "2026-03-01T00:00:00Z"}]]  # fmt: skip
    images = [
        {"names": [f"{image}@sha256:{hashlib.sha256((image + str(i)).encode()).hexdigest()}", f"{image}:v{i}.{j}.0"],
         "sizeBytes": 100_000_000 + 7_919 * (i * 31 + j)}
        for i, image in enumerate(_IMAGES) for j in range(2)
    ]  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-{digest[:17]}"}}',
                "nfd.node.kubernetes.io/feature-labels": ",".join(
                    sorted(k.split("/", 1)[1] for k in labels if k.startswith("feature.node.kubernetes.io/"))
                ),
                "nfd.node.kubernetes.io/extended-resources": "",
                "nvidia.com/gpu-driver-upgrade-enabled": "true",
                "io.cilium.network.ipv4-cilium-host": f"10.{int(digest[:2], 16)}.{int(digest[2:4], 16)}.1",
            },
        },
        "spec": {
            "providerID": f"aws:///us-east-1a/i-{digest[:17]}",
            "podCIDR": f"10.{int(digest[:2], 16)}.{int(digest[2:4], 16)}.0/24",
            "podCIDRs": [f"10.{int(digest[:2], 16)}.{int(digest[2:4], 16)}.0/24"],
        },
        "status": {
            "capacity": dict(amounts),
            "allocatable": {**amounts, "cpu": "191450m", "memory": "2086000000Ki"},
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{int(digest[:2], 16)}.{int(digest[2:4], 16)}"},
                {"type": "InternalDNS", "address": f"{name}.ec2.internal"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": digest[:36],
                "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": "6.8.0-1021-aws",
                "kubeProxyVersion": "",
                "kubeletVersion": "v1.37.2",
                "machineID": digest[:32],
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.5 LTS",
                "systemUUID": digest[32:64],
            },  # fmt: skip
            "images": images,
        },
    }
