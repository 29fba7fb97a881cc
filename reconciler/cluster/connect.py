"""Which clusters a fleet drives and how to reach each one (§7.1): a `Target` per `clusters[]` entry, and its `Api`.

A context names a kubeconfig context, read from `KUBECONFIG` (a list of files, as kubectl reads
it) or `~/.kube/config`; no context means the in-cluster configuration (the service account of a
pod). Nothing is sent here: the first request tells whether the cluster answers. Loading a
configuration that cannot work (no such context, no file, no service account) is `Unreachable`,
naming what is missing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubernetes import client, config

from reconciler.cluster import retry
from reconciler.cluster.api import FIELD_MANAGER, Api
from reconciler.cluster.errors import Unreachable
from schemas.fleet import Cluster

WORKERS = 8  # writes in flight per cluster (bounded concurrency)
TIMEOUT = 30.0  # seconds one request may take
DEFAULT_KUBECONFIG = "~/.kube/config"


@dataclass(frozen=True, slots=True)
class Target:
    """One configured cluster of one fleet."""

    name: str  # clusters[].name: its nodes' cluster value and rendered/<name>/
    context: str | None  # a kubeconfig context; None: the in-cluster configuration
    fleet: str  # the FleetConfig's metadata.name: the fleet label value
    labels: Mapping[str, str] = field(default_factory=dict)  # topology key -> the node label key
    policy: retry.Backoff = retry.Backoff()
    timeout: float = TIMEOUT
    workers: int = WORKERS

    @property
    def where(self) -> str:
        return f"context {self.context}" if self.context else "the in-cluster configuration"


def targets(fleet: str, clusters: Sequence[Cluster], policy: retry.Backoff | None = None) -> list[Target]:
    """A target per configured cluster, in the order jobtree.yaml lists them."""
    return [
        Target(c.name, c.context, fleet, c.topologyLabels.keys(), policy or retry.Backoff()) for c in clusters
    ]


def _kubeconfig_paths() -> list[str]:
    """The kubeconfig files kubectl would read (`KUBECONFIG`, else the default); `ConfigException` when none exists."""
    files = os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    paths = [os.path.expanduser(p) for p in files.split(os.pathsep) if p]
    if not any(os.path.exists(p) for p in paths):
        raise config.ConfigException(
            f"no kubeconfig at {files} ({'KUBECONFIG' if 'KUBECONFIG' in os.environ else 'the default'})"
        )
    return paths


def context_namespace(context: str) -> str | None:
    """The namespace the kubeconfig context `context` names, as kubectl reads it; None when it names
    none or cannot be read (`api` says why when it is asked to connect)."""
    try:
        contexts, _ = config.list_kube_config_contexts(config_file=os.pathsep.join(_kubeconfig_paths()))
    except (config.ConfigException, OSError, ValueError, KeyError, TypeError):
        return None
    for entry in contexts or []:
        if entry.get("name") == context:
            namespace = (entry.get("context") or {}).get("namespace")
            return str(namespace) if namespace else None
    return None


def api(target: Target, manager: str = FIELD_MANAGER) -> Api:
    """The API of `target`, configured but not yet contacted, writing as field manager `manager`;
    `Unreachable` when no configuration for it can be loaded."""
    settings = type.__call__(client.Configuration)  # a fresh one, not a copy of the process default
    try:
        if target.context is None:
            config.load_incluster_config(client_configuration=settings)
        else:
            paths = _kubeconfig_paths()
            config.load_kube_config(
                config_file=os.pathsep.join(paths), context=target.context, client_configuration=settings,
                persist_config=False,
            )  # fmt: skip
    except (config.ConfigException, OSError, ValueError, KeyError, TypeError) as err:
        what = " ".join(str(err).split())[:300]
        raise Unreachable(f"{target.name}: cannot load {target.where}: {what}") from None
    # The client's token hook sets `host` again before every request, and each time the host is set
    # the environment is searched for a proxy (urllib's getproxies, every variable decoded: 8 of
    # the 28 s of CPU of a profiled 1,500-node first apply). The environment does not change while
    # jobtree runs, and the connection pool took its proxy when it was made: the proxy the
    # environment names is pinned once.
    settings.proxy = settings.proxy
    settings.connection_pool_maxsize = max(target.workers * 2, 4)
    return Api(client.ApiClient(settings), target.name, target.policy, target.timeout, manager)
