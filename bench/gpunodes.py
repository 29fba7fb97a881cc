"""GPU nodes as a real cluster's API server holds them (~20 KB each), created in parallel: for the 10,000-node rows.

`gpu_node(name, ...)`: a Node as the kubelet, NVIDIA GPU Feature Discovery, Node Feature
Discovery and the GPU operator leave it on an 8-GPU HGX H100 host: ~130 labels, their
annotations, every condition a node-problem-detector adds, addresses, nodeInfo, capacity and
allocatable beside each other and the 50 images a kubelet reports (its default
`nodeStatusMaxImages`), which are most of the bytes. Deterministic: the same name gives the same
bytes. Labelled for kwok (`kwok.x-k8s.io/node: fake`) and Ready from the start, so kwok runs its
pods without rewriting it. `create(api, nodes, workers)` POSTs them through the official client,
`workers` at a time (a Node's status is kept on create, so one request each); `create_on` does so
straight to a test control plane's API server. What it does not do:
heartbeats (kwok renews no node status here; a real kubelet would every few seconds).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client, config

from tests.support.controlplane import Cluster
from tests.support.controlplane.nodes import CLIQUE, COUNT, PRODUCT, REGION

KWOK = "kwok.x-k8s.io/node"
BOOT = "2026-11-01T00:00:00Z"
CPU_FLAGS = (
    "ADX AESNI AMXBF16 AMXINT8 AMXTILE AVX AVX2 AVX512BF16 AVX512BITALG AVX512BW AVX512CD AVX512DQ AVX512F "
    "AVX512FP16 AVX512IFMA AVX512VBMI AVX512VBMI2 AVX512VL AVX512VNNI AVX512VPOPCNTDQ AVXVNNI CETIBT CETSS "
    "CMPXCHG8 FLUSH_L1D FMA3 FSRM FXSR FXSROPT GFNI HYPERVISOR IBPB LAHF MOVBE MOVDIR64B MOVDIRI OSXSAVE "
    "PCONFIG SERIALIZE SHA SPEC_CTRL_SSBD STIBP SYSCALL SYSEE TSXLDTRK VAES VMX VPCLMULQDQ WAITPKG WBNOINVD "
    "X87 XGETBV1 XSAVE XSAVEC XSAVEOPT XSAVES"
).split()
# (repository, tag, size in bytes): what a GPU node pulls (operator, drivers, CNI, the researchers' images)
IMAGES = (
    ("nvcr.io/nvidia/pytorch", "24.05-py3", 9_876_543_210), ("nvcr.io/nvidia/pytorch", "24.08-py3", 10_123_456_789),
    ("nvcr.io/nvidia/pytorch", "24.10-py3", 10_456_789_012), ("nvcr.io/nvidia/nemo", "24.07", 17_345_678_901),
    ("nvcr.io/nvidia/tritonserver", "24.09-py3", 8_765_432_109), ("nvcr.io/nvidia/cuda", "12.4.1-devel-ubuntu22.04", 4_012_345_678),
    ("nvcr.io/nvidia/cuda", "12.6.2-base-ubuntu22.04", 123_456_789), ("nvcr.io/nvidia/driver", "550.90.07-ubuntu22.04", 1_234_567_890),
    ("nvcr.io/nvidia/k8s/dcgm-exporter", "3.3.7-3.5.0-ubuntu22.04", 345_678_901),
    ("nvcr.io/nvidia/k8s-device-plugin", "v0.16.2", 123_456_789),
    ("nvcr.io/nvidia/gpu-feature-discovery", "v0.8.2-ubi8", 98_765_432),
    ("nvcr.io/nvidia/k8s/container-toolkit", "v1.16.2-ubuntu20.04", 176_543_210),
    ("nvcr.io/nvidia/cloud-native/gpu-operator-validator", "v24.6.2", 156_789_012),
    ("nvcr.io/nvidia/cloud-native/k8s-mig-manager", "v0.8.0-ubuntu20.04", 143_210_987),
    ("nvcr.io/nvidia/cloud-native/dcgm", "3.3.7-1-ubuntu22.04", 1_543_210_987),
    ("nvcr.io/nvidia/cloud-native/k8s-driver-manager", "v0.6.10", 87_654_321),
    ("nvcr.io/nvidia/mellanox/doca-driver", "24.07-0.6.1.0-0", 876_543_210),
    ("nvcr.io/nvidia/mellanox/ib-kubernetes", "v1.1.0", 54_321_098),
    ("nvcr.io/nvidia/mellanox/k8s-rdma-shared-dev-plugin", "v1.5.1", 43_210_987),
    ("nvcr.io/nvidia/mellanox/network-operator-init-container", "v0.0.2", 32_109_876),
    ("registry.k8s.io/nfd/node-feature-discovery", "v0.16.4", 65_432_109),
    ("registry.k8s.io/kube-proxy", "v1.31.2", 29_876_543), ("registry.k8s.io/pause", "3.10", 320_368),
    ("registry.k8s.io/sig-storage/csi-node-driver-registrar", "v2.12.0", 12_345_678),
    ("registry.k8s.io/sig-storage/livenessprobe", "v2.14.0", 11_234_567),
    ("registry.k8s.io/dns/k8s-dns-node-cache", "1.23.1", 34_567_890),
    ("docker.io/calico/node", "v3.28.2", 98_765_432), ("docker.io/calico/cni", "v3.28.2", 96_543_210),
    ("docker.io/calico/pod2daemon-flexvol", "v3.28.2", 7_654_321),
    ("quay.io/prometheus/node-exporter", "v1.8.2", 12_876_543), ("quay.io/cilium/hubble-relay", "v1.16.3", 23_456_789),
    ("docker.io/fluent/fluent-bit", "3.1.9", 37_654_321), ("docker.io/grafana/promtail", "3.2.1", 87_654_320),
    ("ghcr.io/acme/llm-pretrain", "2026.11", 14_567_890_123), ("ghcr.io/acme/llm-pretrain", "2026.10", 14_456_789_012),
    ("ghcr.io/acme/moe-train", "2026.11.2", 13_345_678_901), ("ghcr.io/acme/vit-elastic", "2026.11", 9_234_567_890),
    ("ghcr.io/acme/whisper-finetune", "2026.10.3", 8_123_456_789), ("ghcr.io/acme/eval-harness", "v42", 6_012_345_678),
    ("ghcr.io/acme/data-loader", "v7.3", 2_345_678_901), ("ghcr.io/acme/checkpoint-sync", "v1.9", 456_789_012),
    ("ghcr.io/acme/nccl-tests", "2.23.4", 5_678_901_234), ("ghcr.io/acme/jupyter-gpu", "2026.09", 11_234_567_890),
    ("docker.io/rayproject/ray-ml", "2.38.0-gpu", 12_876_543_210), ("docker.io/vllm/vllm-openai", "v0.6.3", 9_876_543_201),
    ("docker.io/pytorch/pytorch", "2.5.1-cuda12.4-cudnn9-devel", 11_987_654_321),
    ("docker.io/deepspeed/deepspeed", "v0.15.3-gpu", 12_345_098_765),
    ("docker.io/huggingface/transformers-pytorch-gpu", "4.46.2", 10_987_654_321),
    ("docker.io/library/busybox", "1.37", 2_167_176), ("docker.io/library/ubuntu", "22.04", 29_534_144),
)  # fmt: skip


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def gpu_node(name: str, *, cluster: str, region: str, clique: str, gpus: int = 8,
             product: str = "H100-80GB") -> dict[str, Any]:  # fmt: skip
    """One node as the API server holds it on a real GPU cluster (module docstring); ~20 KB as JSON."""
    zone = f"{region}-{1 + int(_digest(name)[:2], 16) % 3}"
    gfd = {
        "nvidia.com/cuda.driver-version.full": "550.90.07", "nvidia.com/cuda.driver-version.major": "550",
        "nvidia.com/cuda.driver-version.minor": "90", "nvidia.com/cuda.driver-version.revision": "07",
        "nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "90", "nvidia.com/cuda.driver.rev": "07",
        "nvidia.com/cuda.runtime-version.full": "12.4", "nvidia.com/cuda.runtime-version.major": "12",
        "nvidia.com/cuda.runtime-version.minor": "4", "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "4", "nvidia.com/gfd.timestamp": "1761955200",
        "nvidia.com/gpu-driver-upgrade-state": "upgrade-done", "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0", COUNT: str(gpus), "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.machine": "PowerEdge-XE9680", "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.mode": "compute", PRODUCT: product, "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success",
        "nvidia.com/mig.strategy": "single", "nvidia.com/mps.capable": "false", "nvidia.com/gpu.present": "true",
        CLIQUE: clique, "nvidia.com/gpu.deploy.container-toolkit": "true", "nvidia.com/gpu.deploy.dcgm": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter": "true", "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.driver": "true", "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.mig-manager": "true", "nvidia.com/gpu.deploy.node-status-exporter": "true",
        "nvidia.com/gpu.deploy.operator-validator": "true",
    }  # fmt: skip
    nfd = {f"feature.node.kubernetes.io/cpu-cpuid.{flag}": "true" for flag in CPU_FLAGS}
    nfd |= {
        "feature.node.kubernetes.io/cpu-hardware_multithreading": "true",
        "feature.node.kubernetes.io/cpu-model.family": "6", "feature.node.kubernetes.io/cpu-model.id": "143",
        "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel", "feature.node.kubernetes.io/cpu-pstate.status": "active",
        "feature.node.kubernetes.io/kernel-version.full": "5.15.0-125-generic",
        "feature.node.kubernetes.io/kernel-version.major": "5", "feature.node.kubernetes.io/kernel-version.minor": "15",
        "feature.node.kubernetes.io/memory-numa": "true", "feature.node.kubernetes.io/network-sriov.capable": "true",
        "feature.node.kubernetes.io/pci-10de.present": "true", "feature.node.kubernetes.io/pci-15b3.present": "true",
        "feature.node.kubernetes.io/rdma.available": "true", "feature.node.kubernetes.io/rdma.capable": "true",
        "feature.node.kubernetes.io/storage-nonrotationaldisk": "true",
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
    }  # fmt: skip
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/instance-type": "p5.48xlarge", "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/zone": zone, "failure-domain.beta.kubernetes.io/region": region,
        REGION: region, "cluster": cluster, "node-role.kubernetes.io/gpu": "", KWOK: "fake",
        **gfd, **nfd,
    }  # fmt: skip
    ip = int(_digest(name, "ip")[:6], 16)
    address = f"10.{64 + ip % 64}.{(ip >> 6) % 256}.{(ip >> 14) % 254 + 1}"
    annotations = {
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
        "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-{_digest(name, "i")[:17]}","fsx.csi.aws.com":"i-{_digest(name, "i")[:17]}"}}',
        "nfd.node.kubernetes.io/feature-labels": ",".join(sorted(k.split("/", 1)[1] for k in nfd)),
        "nfd.node.kubernetes.io/extended-resources": "", "nfd.node.kubernetes.io/master.version": "v0.16.4",
        "nvidia.com/gpu-driver-upgrade-enabled": "true",
        "projectcalico.org/IPv4Address": f"{address}/19", "projectcalico.org/IPv4VXLANTunnelAddr": f"100.64.{ip % 256}.0",
        "alpha.kubernetes.io/provided-node-ip": address,
    }  # fmt: skip
    amounts = {
        "cpu": "192", "ephemeral-storage": "30476544Mi", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
        "memory": "2113454284Ki", "nvidia.com/gpu": str(gpus), "pods": "110", "rdma/rdma_shared_device_a": "63",
        "vpc.amazonaws.com/efa": "32",
    }  # fmt: skip
    allocatable = dict(
        amounts, cpu="191450m", memory="2050102476Ki", **{"ephemeral-storage": "28086485401654"}
    )

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {"type": kind, "status": status, "lastHeartbeatTime": BOOT, "lastTransitionTime": BOOT,
                "reason": reason, "message": message}  # fmt: skip

    conditions = [
        condition("KernelDeadlock", "False", "KernelHasNoDeadlock", "kernel has no deadlock"),
        condition("ReadonlyFilesystem", "False", "FilesystemIsNotReadOnly", "Filesystem is not read-only"),
        condition("FrequentContainerdRestart", "False", "NoFrequentContainerdRestart", "containerd is functioning properly"),
        condition("FrequentKubeletRestart", "False", "NoFrequentKubeletRestart", "kubelet is functioning properly"),
        condition("GpuXidError", "False", "NoXidError", "no GPU XID errors in the last hour"),
        condition("NetworkUnavailable", "False", "CalicoIsUp", "Calico is running on this node"),
        condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]  # fmt: skip
    images = [
        {"names": [f"{repo}@sha256:{_digest(repo, tag)}", f"{repo}:{tag}"], "sizeBytes": size}
        for repo, tag, size in IMAGES
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"podCIDR": f"100.{64 + ip % 64}.{ip % 256}.0/24", "podCIDRs": [f"100.{64 + ip % 64}.{ip % 256}.0/24"],
                 "providerID": f"aws:///{zone}/i-{_digest(name, 'i')[:17]}"},  # fmt: skip
        "status": {
            "capacity": amounts,
            "allocatable": allocatable,
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name},
                          {"type": "InternalDNS", "address": f"ip-{address.replace('.', '-')}.{region}.compute.internal"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": _digest(name, "machine")[:32], "systemUUID": _uuid(name), "bootID": _uuid(name + "/boot"),
                "kernelVersion": "5.15.0-125-generic", "osImage": "Ubuntu 22.04.5 LTS",
                "containerRuntimeVersion": "containerd://1.7.22", "kubeletVersion": "v1.31.2",
                "kubeProxyVersion": "v1.31.2", "operatingSystem": "linux", "architecture": "amd64",
            },
            "images": images,
        },
    }  # fmt: skip


def _uuid(seed: str) -> str:
    h = _digest(seed, "uuid")
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


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
