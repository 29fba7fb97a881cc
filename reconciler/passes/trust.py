"""Whether a pass may believe the configured clusters (§7.1, §7.2): a cluster the record holds work on is never taken as empty because nobody looked.

The last state commit places every open lease on a cluster: the cluster whose
`state/observed/<cluster>.yaml` holds its node, else the one whose `rendered/<cluster>/` holds its
run's pods (an embedded fleet adopting `clusters`). A pass plans nothing (exit 3, what runs keeps
running) while work is placed on a cluster `jobtree.yaml` does not name (a rename, a one-letter
typo: its pods would be re-rendered elsewhere and pruned), on a configured cluster never observed
(no credentials in CI, a context that is not in the kubeconfig), or on one observed for the first
time that lists none of the nodes the record places there (a context naming another cluster).
`placed` reads paths, and parses a rendered file only for a run placed on two clusters, once. Plans
nothing and talks to no cluster: the clusters are `passes.clusters`', the refusal the caller's.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from planner.world import FleetState, Lease, NodeObs
from reconciler.passes.clusters import Configured
from reconciler.spec.validated import Spec
from reconciler.state import codec, layout
from reconciler.state import observed as observedfiles
from schemas import messages

Placed = dict[str, list[Lease]]  # cluster -> the open leases the last state commit places there


def placed(state: FleetState, blobs: Mapping[str, str], read: Callable[[str], bytes]) -> Placed:
    """The open leases of `state` by the cluster the commit whose owned files are `blobs` (path ->
    blob id, read with `read`) places them on; a lease no file places is left out."""
    leases = [x for x in state.leases if x.open]
    if not leases:
        return {}
    where: dict[str, str] = {}  # node -> cluster, from the observed files
    observed = sorted(
        (c, oid) for path, oid in blobs.items() if (c := layout.observed_cluster(path)) is not None
    )
    for name, oid in observed:
        for node in _nodes(read(oid)):
            if node.labels.get("cluster") == name or node.name not in where:
                where[node.name] = name
    runs: dict[str, dict[str, str]] = defaultdict(dict)  # run -> cluster -> its rendered file's blob id
    for path, oid in blobs.items():
        cluster, run = layout.rendered_cluster(path), layout.rendered_run(path)
        if cluster is not None and run is not None:
            runs[run][cluster] = oid
    out: Placed = defaultdict(list)
    spread: dict[str, dict[str, str]] = {}  # run on two clusters or more -> node -> cluster, read once
    for lease in leases:
        cluster = where.get(lease.node)
        files = runs.get(lease.run, {})
        if cluster is None and len(files) == 1:
            cluster = next(iter(files))
        elif cluster is None and files:
            if lease.run not in spread:
                spread[lease.run] = _pods_on(files, read)
            cluster = spread[lease.run].get(lease.node)
        if cluster is not None:
            out[cluster].append(lease)
    return dict(sorted(out.items()))


def _pods_on(files: Mapping[str, str], read: Callable[[str], bytes]) -> dict[str, str]:
    """node -> the cluster whose rendered file of the run (cluster -> blob id) has a pod on it (the
    first cluster by name when two do)."""
    out: dict[str, str] = {}
    for cluster, oid in sorted(files.items()):
        for doc in codec.documents(read(oid)):
            node = ((doc or {}).get("spec") or {}).get("nodeName")
            if isinstance(node, str):
                out.setdefault(node, cluster)
    return out


@functools.lru_cache(maxsize=16)
def _nodes(data: bytes) -> tuple[NodeObs, ...]:
    return observedfiles.decode(data)


def unknown(spec: Spec, where: Placed) -> list[str]:
    """Why work placed on clusters `clusters` does not name is not believed gone, one line per
    cluster (a fleet with `clusters` only: the embedded cluster's folders are its inventory's)."""
    names = {c.name for c in spec.fleet.clusters}
    if not names:
        return []
    return [
        f"no cluster {name} is named (jobtree.yaml names {messages.listed(sorted(names))}), yet the last state "
        f"commit has {_work(leases)} there ({layout.RENDERED}{name}/): a renamed or misspelled cluster would "
        "have its pods rendered elsewhere and pruned. Name the cluster as its nodes' cluster label does; to "
        "retire a cluster, end or move its runs while it is still configured"
        for name, leases in where.items()
        if name not in names
    ]


def doubted(cluster: Configured, where: Placed) -> list[str]:
    """Why the configured clusters `cluster` observed (or recorded) are not believed, one line per
    cluster: work is placed on it and it was never observed, or it was observed for the first time
    and lists none of the nodes holding that work."""
    out = []
    for name in cluster.names:
        leases = where.get(name)
        if not leases:
            continue
        nodes = sorted({x.node for x in leases})
        if name not in cluster.nodes:
            why = "" if name in cluster.unobserved else f" (there is no {layout.observed_file(name)})"
            out.append(
                f"cluster {name} was never observed{why}, yet the last state commit has {_work(leases)} on it: "
                "planning would end them all as failed. Give the pass the cluster's credentials (KUBECONFIG and "
                "the context jobtree.yaml names) and run it again"
            )
        elif name not in cluster.before and not {n.name for n in cluster.nodes[name]} & set(nodes):
            out.append(
                f"cluster {name}, observed for the first time, lists none of the {len(nodes)} nodes where the last "
                f"state commit has {_work(leases)} ({messages.listed(nodes)}): is its context the right "
                "cluster? Point the context at the cluster those nodes are in and run the pass again"
            )
    return out


def _work(leases: Sequence[Lease]) -> str:
    runs = len({x.run for x in leases})
    return f"{len(leases)} open lease{'s' * (len(leases) != 1)} of {runs} run{'s' * (runs != 1)}"
