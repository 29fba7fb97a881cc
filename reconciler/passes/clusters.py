"""The configured clusters as one pass sees them (steps 3 and 5, §7.2): observed now, or as Git last recorded them.

`Live` (reconcile): every cluster of jobtree.yaml observed through `reconciler.cluster.observe`, all
at once, with the agent's journal entries not yet Folded (`journal`, §7.5: folded first, as observed
swaps); a cluster that cannot be observed, or whose journal cannot be read, is planned against its
last observation (its `state/observed/<cluster>.yaml`), and the pass says so. Given `watches` (a
long-lived reconciler's, `reconciler.cluster.watched`), a cluster's nodes and pods are read from
its watch-fed caches; when they cannot be (not synced, the watch failing) it is listed as in a
one-shot pass, and the pass says that too (its mirrors' and Services' caches are apply's to read
or not, `sync.read_live`, either way). `Recorded` (`jobtree plan`, provenance): the
clusters as a commit's `state/observed/` holds them, with the workload outcomes its ledger recorded,
so a recomputed pass sees exactly what the pass saw. Both are the pipeline's `Cluster` and hand the
next tree what to commit (`record`). Cordons are not applied here: they are in the state commit
(`state/fleet.yaml`) and apply carries them out after the push. `cluster_for` picks the embedded
cluster when none is configured.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from planner.world import Failover, FleetState, NodeObs, WorkloadEvent
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.spec.validated import Spec
from reconciler.state import layout, nexttree
from reconciler.state import observed as observedfiles

if TYPE_CHECKING:
    from reconciler.cluster.observe import Listed
    from reconciler.cluster.watched import Watches

# one parse per observed file's bytes: the PR report builds four views of the same two trees
_decoded = functools.lru_cache(maxsize=4)(observedfiles.decode)


class Configured:
    """The clusters of jobtree.yaml as one pass observed them (the pipeline's `Cluster`)."""

    def __init__(self, names: Sequence[str], recorded: Mapping[str, bytes]) -> None:
        self.names = list(names)
        self.before = {
            c: _decoded(recorded[layout.observed_file(c)])
            for c in self.names
            if layout.observed_file(c) in recorded
        }
        self.nodes: dict[str, tuple[NodeObs, ...]] = {}
        self.events: list[tuple[str, WorkloadEvent]] = []
        self.warnings: list[str] = []  # for people, even with --quiet
        self.notes: list[str] = []  # progress lines
        self.unobserved: dict[str, str] = {}  # cluster -> why it was planned against its last observation
        self.journal: dict[str, list[Failover]] = {}  # cluster -> the agent's swaps not yet Folded
        self.listed: dict[str, Listed] = {}  # cluster -> the nodes and pods observe listed, for apply

    def failovers(self) -> tuple[Failover, ...]:
        """Every cluster's unfolded swaps, for `World.journal`, oldest first."""
        return tuple(
            sorted((f for c in self.names for f in self.journal.get(c, ())), key=lambda f: (f.at, f.entry))
        )

    def folded(self) -> dict[str, tuple[str, ...]]:
        """The journal entries this pass folds in, per cluster: marked Folded once the commit
        holding them is pushed and applied there."""
        return {c: tuple(f.entry for f in self.journal[c]) for c in self.names if self.journal.get(c)}

    def observe(self) -> tuple[tuple[NodeObs, ...], tuple[WorkloadEvent, ...]]:
        return self.merged(), tuple(ev for _, ev in self.events)

    def merged(self) -> tuple[NodeObs, ...]:
        """Every cluster's nodes; a name seen in two clusters is kept in the first (and said)."""
        seen: dict[str, str] = {}
        out: list[NodeObs] = []
        for cluster in self.names:
            for node in self.nodes.get(cluster, ()):
                if node.name in seen:
                    warning = (
                        f"jobtree: node {node.name} is in clusters {seen[node.name]} and {cluster}; a node name "
                        f"names one node, so the one in {cluster} is left out until renamed"
                    )
                    if warning not in self.warnings:
                        self.warnings.append(warning)
                    continue
                seen[node.name] = cluster
                out.append(node)
        return tuple(out)

    def apply_cordons(self, names: list[str]) -> None:
        """Nothing now: the state commit records them and apply cordons after the push (§1 step 7)."""

    def record(self, now: int) -> nexttree.Observed:
        """The files and ledger rows the state commit holds for what this pass observed."""
        files = observedfiles.files({c: self.nodes[c] for c in self.names if c in self.nodes})
        return nexttree.Observed(files, observedfiles.workload_rows(now, self.events))

    def lines(self) -> list[str]:
        """What changed since the last observation, for the commit message."""
        out = []
        for cluster in self.names:
            if cluster in self.nodes:
                out += observedfiles.changes(cluster, self.before.get(cluster, ()), self.nodes[cluster])
        return out


class Recorded(Configured):
    """The clusters as `state/observed/` holds them, with recorded workload outcomes (no credentials)."""

    def __init__(
        self,
        names: Sequence[str],
        recorded: Mapping[str, bytes],
        events: Iterable[tuple[str, WorkloadEvent]] = (),
    ) -> None:
        super().__init__(names, recorded)
        self.nodes = dict(self.before)
        self.events = [(c, ev) for c, ev in events if c in self.names]
        self.merged()  # its warnings, before the pass takes them


class Live(Configured):
    """Every configured cluster observed now; one that cannot be is planned as last recorded."""

    def __init__(
        self, spec: Spec, state: FleetState, recorded: Mapping[str, bytes], now: int,
        watches: Watches | None = None,
    ) -> None:  # fmt: skip
        super().__init__([c.name for c in spec.fleet.clusters], recorded)
        from reconciler.cluster import (  # the kubernetes client: only when configured
            connect,
            errors,
            journal,
            observe,
        )

        targets = connect.targets(spec.name, spec.fleet.clusters)
        grace = spec.fleet.failure.notReadyGraceSeconds
        open_leases = [x for x in state.leases if x.open]

        listing: dict[str, str] = {}  # cluster -> why its watch was not read (it was listed)

        def one(target: connect.Target) -> tuple[observe.Observation, list[Any]] | errors.ClusterError:
            known = {n.name for n in self.before.get(target.name, ())}
            try:
                api = connect.api(target)
                cached = watches.view(target) if watches is not None else None
                if isinstance(cached, str):
                    listing[target.name], cached = cached, None
                elif cached is not None and cached.why:  # listed, yet apply may read the mirrors' caches
                    listing[target.name] = cached.why
                entries = journal.unfolded(journal.read(api, target.fleet, target.name))
                leases = journal.after(open_leases, entries)
                return observe.observe(api, target, leases, known, now, grace, cached), entries
            except errors.ClusterError as err:  # JournalUnreadable too: a swap unread is never planned again
                return err

        if watches is not None:  # on this thread: a signal ends the first pass's wait for the first lists
            watches.start(targets)
        with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
            found = list(pool.map(one, targets))
        for name, why in sorted(listing.items()):
            self.warnings.append(f"jobtree: cluster {name}: {why}; this pass listed its nodes and pods")
        for target, result in zip(targets, found, strict=True):
            if isinstance(result, errors.ClusterError):
                self.unobserved[target.name] = str(result)
                if target.name in self.before:
                    self.nodes[target.name] = self.before[target.name]
                held = (
                    "planned with its last observation"
                    if target.name in self.before
                    else "never observed yet, so no node of it is known"
                )
                self.warnings.append(f"jobtree: cluster {target.name} not observed: {result}; {held}")
                continue
            seen, entries = result
            self.nodes[target.name] = seen.nodes
            if seen.listed is not None:
                self.listed[target.name] = seen.listed
            self.events += [(target.name, ev) for ev in seen.workload]
            self.warnings += [f"jobtree: {problem}" for problem in seen.problems]
            watched = watches is not None and target.name not in listing
            self.notes.append(
                f"observed {target.name}: {len(seen.nodes)} GPU nodes, {len(seen.workload)} workload "
                f"outcomes ({seen.reads} requests{'; nodes and pods from its watch' if watched else ''})"
            )
            if seen.missing:
                shown = ", ".join(seen.missing[:5]) + (" ..." if len(seen.missing) > 5 else "")
                self.notes.append(
                    f"{target.name}: {len(seen.missing)} pods missing, apply re-creates them: {shown}"
                )
            if entries:
                self.journal[target.name] = [journal.failover_of(e) for e in entries]
                self.notes.append(
                    f"{target.name}: folding {len(entries)} journal entries not yet Folded: "
                    + ", ".join(e["metadata"]["name"] for e in entries)
                )
        self.merged()  # its warnings, before the pass takes them


def observed_files(blobs: Mapping[str, str], read: Callable[[str], bytes]) -> dict[str, bytes]:
    """The `state/observed/` files among an owned tree's `blobs` (path -> blob id), read with `read`."""
    return {path: read(oid) for path, oid in blobs.items() if layout.observed_cluster(path) is not None}


def cluster_for(
    spec: Spec, state: FleetState, recorded: Mapping[str, bytes], now: int, live: bool,
    watches: Watches | None = None,
) -> EmbeddedCluster | Configured:  # fmt: skip
    """The cluster a pass observes: the embedded one when jobtree.yaml configures none; else the
    configured clusters, observed now (`live`; through `watches` when given) or as recorded."""
    if not spec.fleet.clusters:
        return EmbeddedCluster(spec.inventory)
    if live:
        return Live(spec, state, recorded, now, watches)
    return Recorded([c.name for c in spec.fleet.clusters], recorded)


def recorded_nodes(spec: Spec, recorded: Mapping[str, bytes]) -> dict[str, NodeObs]:
    """The nodes the recorded observations of the configured clusters hold, by name."""
    cluster = Recorded([c.name for c in spec.fleet.clusters], recorded)
    return {n.name: n for n in cluster.observe()[0]}
