"""A fleet repository driven against real control planes, as a platform engineer sets one up: a builder for tests.

`ClusterFleet(tmp_path, {"east": server})` writes a kubeconfig with one context per cluster (the
reconcile CronJob's ServiceAccount token of deploy/, through each test's fault proxy; and points
`KUBECONFIG` at it: the caller passes pytest's `monkeypatch`), a bare remote and a clone whose
jobtree.yaml names each cluster's context in `clusters`. Nodes are seeded as a cluster's kubelets
and GPU Feature Discovery would publish them (`nodes`), a pass is `reconcile_once` on the clone
(`reconcile`), and `apply` is the verb's pass alone. Every object stays readable by the test's own
hand (`server.get`, `server.list`) and from the clone (`file`).
`a_fleet(...)` is the small fleet the node and agent tests share (`sixteen` its 16-GPU runs,
`api` the official client on it, `OUT_OF_SERVICE` the taint that fences a node).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pygit2
import pytest
import yaml
from kubernetes import client, config

from reconciler.cluster import retry
from reconciler.git import read as gitread
from reconciler.passes import apply as applying
from reconciler.passes.reconcile import Outcome, reconcile_once
from schemas.common import parse_time
from tests.support.builders import a_budget, a_run
from tests.support.controlplane import Cluster, write_kubeconfig
from tests.support.controlplane.cluster import KWOK
from tests.support.git import HUMAN, write_tree

API = "rq.davidlangworthy.io/v1"
T0 = parse_time("2026-03-02T09:00:00Z")
FAST = retry.Backoff(attempts=6, base=0.01, cap=0.05, longest=2.0)  # tests wait for no backoff
AGENT_KUBECONFIG = (
    "JOBTREE_TEST_AGENT_KUBECONFIG"  # the kubeconfig whose contexts are the agent's ServiceAccount
)


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
    """A GPU node as Kubernetes shows it: the default topology labels, GPU capacity and allocatable,
    Ready (a node not Ready has no kubelet: kwok leaves it alone)."""
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
        "status": {
            "capacity": {"nvidia.com/gpu": str(gpus)},
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [condition],
        },
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


class ClusterFleet:
    """A clone of a fleet repository whose jobtree.yaml drives the given test servers."""

    def __init__(
        self,
        tmp_path: Path,
        servers: Mapping[str, Cluster],
        monkeypatch: pytest.MonkeyPatch,
        files: Mapping[str, bytes],
        identity: str | None = "reconcile",
    ) -> None:
        self.servers = dict(servers)
        self.kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", self.servers, identity)
        monkeypatch.setenv("KUBECONFIG", str(self.kubeconfig))
        # the agent's own identity (deploy/'s jobtree-agent), for tests.support.agents
        self.agent_kubeconfig = write_kubeconfig(tmp_path / "agent-kubeconfig", self.servers, "agent")
        monkeypatch.setenv(AGENT_KUBECONFIG, str(self.agent_kubeconfig))
        # a person with kubectl and cluster-admin: drains, taints, deletes a node or a pod
        self.admin_kubeconfig = write_kubeconfig(tmp_path / "admin-kubeconfig", self.servers, None)
        bare = pygit2.init_repository(str(tmp_path / "fleet.git"), bare=True, initial_head="main")
        bare.create_commit("refs/heads/main", HUMAN, HUMAN, "the fleet\n", write_tree(bare, dict(files)), [])
        self.path = tmp_path / "work"
        self.repo = pygit2.clone_repository(
            str(tmp_path / "fleet.git"), str(self.path), checkout_branch="main"
        )

    def reconcile(
        self, now: int, *, apply: bool = True, push: bool = True, allow_mass_prune: bool = False
    ) -> Outcome:
        return reconcile_once(self.path, now=now, push=push, apply=apply, allow_mass_prune=allow_mass_prune)

    def apply(
        self, *, dry_run: bool = False, only: str | None = None, settle: float = 5.0
    ) -> applying.ApplyOutcome:
        return applying.apply_commit(
            self.repo, "refs/heads/main", only=only, dry_run=dry_run, settle=settle, policy=FAST
        )

    def change(self, files: Mapping[str, bytes | None], message: str = "a person's change\n") -> str:
        """A person's commit on main (None deletes a file), as a merged pull request; pushed."""
        head = self.repo.references["refs/heads/main"].peel(pygit2.Commit)
        have = gitread.read_files(self.repo, str(head.id))
        for path, data in files.items():
            if data is None:
                have.pop(path, None)
            else:
                have[path] = data
        tree = write_tree(self.repo, have)
        oid = self.repo.create_commit("refs/heads/main", HUMAN, HUMAN, message, tree, [head.id])
        self.repo.checkout("refs/heads/main", strategy=pygit2.GIT_CHECKOUT_FORCE)
        self.repo.remotes["origin"].push(["+refs/heads/main:refs/heads/main"])
        return str(oid)

    def file(self, path: str) -> Any:
        """The YAML documents of a file at main (a list; empty when there is no such file)."""
        data = gitread.read_file(self.repo, "refs/heads/main", path)
        return list(yaml.safe_load_all(data)) if data is not None else []

    def rendered(self, cluster: str) -> dict[tuple[str, str, str], dict[str, Any]]:
        """Every pod and Service `rendered/<cluster>/` holds at main, by (kind, namespace, name)."""
        out = {}
        for data in gitread.read_files(self.repo, "refs/heads/main", [f"rendered/{cluster}/"]).values():
            for doc in yaml.safe_load_all(data):
                if doc:
                    out[(doc["kind"], doc["metadata"]["namespace"], doc["metadata"]["name"])] = doc
        return out

    def ledger(self, day: str) -> list[dict[str, Any]]:
        """The ledger rows of one day (`YYYY-MM-DD`) at main."""
        data = gitread.read_file(self.repo, "refs/heads/main", f"state/ledger/{day}.jsonl") or b""
        return [json.loads(line) for line in data.splitlines()]

    def status(self, run: str) -> dict[str, Any]:
        """A run's status as the state commit at main holds it."""
        docs = self.file(f"state/status/runs/{run}.yaml")
        return dict(docs[0]["status"]) if docs else {}

    def leases(self, run: str) -> list[dict[str, Any]]:
        """Every Lease of a run at main (open and closed)."""
        return [d for d in self.file(f"state/leases/{run}.yaml") if d]


def rehearsed(server: Cluster, since: int) -> bool:
    """Whether every write sent to `server` after the mark `since` was a dry run (dryRun=All): the
    server checked it and stored nothing."""
    return all(
        "All" in (r.query.get("dryRun"), *r.options.get("dryRun", ())) for r in server.requests.writes(since)
    )


def pods(server: Cluster, fleet: str = "acme", settle: float = 10.0) -> list[str]:
    """Names of the pods `fleet` has on a cluster, sorted, once kwok has finished every one of them
    deleted on its nodes (a graceful delete, as apply's prune, leaves the pod listed until its
    kubelet confirms; kwok does at once, but a loaded machine may take a moment). A pod deleted on a
    node the test's kubelet plays stays listed until the test finishes it."""
    deadline = time.monotonic() + settle
    while True:
        ours = [
            p for p in server.list("v1", "Pod")
            if (p["metadata"].get("labels") or {}).get("rq.davidlangworthy.io/fleet") == fleet
        ]  # fmt: skip
        ending = {
            (p.get("spec") or {}).get("nodeName") for p in ours if p["metadata"].get("deletionTimestamp")
        }
        if ending:  # the nodes are listed only while a pod is terminating: most calls find none
            ending &= {
                n["metadata"]["name"]
                for n in server.list("v1", "Node")
                if (n["metadata"].get("labels") or {}).get(KWOK)
            }
        if not ending or time.monotonic() >= deadline:
            return sorted(p["metadata"]["name"] for p in ours)
        time.sleep(0.02)


# The fleet the node and agent tests share: tenant t (org:t), a 32-GPU H100 envelope, cluster east.
OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}


def a_fleet(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: int, **runs: dict[str, Any]
) -> ClusterFleet:
    server.seed(*(node(f"n{i}") for i in range(1, nodes + 1)))
    files = {
        "jobtree.yaml": fleet_config({"t": "org:t"}, [{"name": "east", "context": "east"}]),
        "budgets/t.yaml": manifest(a_budget("t", "org:t").envelope("h100", 32).build()),
        **{f"runs/t/{name}.yaml": manifest(doc) for name, doc in runs.items()},
    }
    return ClusterFleet(tmp_path, {"east": server}, monkeypatch, files)


def spared_fleet(server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClusterFleet:
    """Four nodes and r1: 16 GPUs in groups of 8 (on n1 and n2 once placed), 8-GPU spares (n3, n4)."""
    return a_fleet(server, tmp_path, monkeypatch, 4, r1=sixteen("r1", spares=8))


def sixteen(name: str, spares: int = 0) -> dict[str, Any]:
    run = a_run(f"t/{name}", "org:t").gpus(16).groups(8)
    return (run.spares(spares) if spares else run).build()


def api(fleet: ClusterFleet) -> client.CoreV1Api:
    """kubectl as a cluster admin on `east` (an operator's hand: taint, drain, delete)."""
    return client.CoreV1Api(config.new_client_from_config(str(fleet.admin_kubeconfig), context="east"))
