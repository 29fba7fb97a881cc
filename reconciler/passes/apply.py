"""Apply a commit to the configured clusters (step 7 of a pass, §7.3): `reconcile --apply` after its push, and `jobtree apply`.

Reads everything from one commit, never the work tree: the spec (validated, for the Run and Budget
mirrors and the fleet's settings), `state/` (statuses, reservations, leases, jobtree's cordons) and
`rendered/<cluster>/`. Per configured cluster it builds the `Record` that commit holds for it (the
published CRDs, the tenant namespaces, the mirrors, the rendered pods and Services) and hands it to
`reconciler.cluster.sync`, all clusters at once (what each holds is read while the records are
built: `sync.reading`): one that cannot be reached (or whose journal
cannot be read) leaves the others applied and is named in the outcome, and so is every object a
cluster refused (the rest of that cluster still applied). A commit rendering pods for a cluster
jobtree.yaml does not name is refused whole (`ApplyRefused`: a renamed cluster's pods would be
pruned), and a cluster losing most of its running pods at once is held (`reconciler.cluster.massprune`). With a `Fold` (a reconcile pass that
pushed), each cluster the commit was applied to then has the journal entries the pass folded in
marked Folded, and Folded ones past retention deleted (`reconciler.cluster.folding`): the pushed
commit holds those swaps, so a refused neighbour does not keep them unfolded. Returns an
`ApplyOutcome`; prints nothing, writes no Git.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from reconciler.cluster import (
    changes,
    connect,
    errors,
    folding,
    massprune,
    mirrors,
    observe,
    retry,
    sync,
)
from reconciler.git import read as gitread
from reconciler.spec import commit as speccache
from reconciler.spec.validated import Spec
from reconciler.state import filedocs, layout, observed
from schemas.layout import FLEET_FILE

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Fold:
    """What a pushed pass folded in: the journal entries per cluster, and the pass's instant."""

    entries: Mapping[str, Sequence[str]]
    now: int


class ApplyRefused(Exception):
    """Nothing can be applied from this commit (jobtree.yaml invalid, an unknown --cluster); the
    message says why and what to do."""


class NoCluster(ApplyRefused):
    """jobtree.yaml configures no cluster: the embedded cluster has nothing to apply."""


class UnknownCluster(ApplyRefused):
    """The cluster asked for is not one jobtree.yaml configures."""


@dataclass(slots=True)
class ApplyOutcome:
    """What applying one commit did, per cluster (`reconciler.cluster.sync.Applied`)."""

    commit: str
    clusters: list[sync.Applied] = field(default_factory=list)  # in jobtree.yaml's order
    dry_run: bool = False

    @property
    def failed(self) -> list[str]:
        """Clusters not applied in full, each with why (for people)."""
        out = []
        for applied in self.clusters:
            if applied.untouched:
                out.append(f"cluster {applied.cluster} not applied: {applied.errors[0]}")
            elif applied.errors:
                shown = "".join(f"\n  {error}" for error in applied.errors)
                out.append(
                    f"cluster {applied.cluster} applied in part ({len(applied.errors)} errors):{shown}"
                )
        return out

    def lines(self, detail: bool = False) -> list[str]:
        """One line per cluster; with `detail`, every change, held pod and conflict under it."""
        out = []
        for applied in self.clusters:
            out.append(str(applied))
            if applied.listed:  # a long-lived reconciler whose caches could not be read this pass
                out.append(f"  {applied.listed}; this pass listed its mirrors and Services")
            if detail:
                out += [f"  {line}" for line in applied.done]
            out += [f"  held: {line}" for line in applied.held]
            out += [f"  held back: {line}" for line in applied.guarded]
            out += [f"  conflict: {line}" for line in applied.conflicts]
            out += [
                f"  restored: {line} (edited in the cluster; change it in Git)" for line in applied.restored
            ]
            out += [f"  left alone: {line}" for line in applied.newer]
            out += [f"  journal: {line}" for line in applied.folded]
        return out


def prune_limit(allow_mass_prune: bool, prune_share: float | None) -> float | None:
    """The share of a cluster's running pods one pass may prune (`massprune.hold`) for the options
    `--allow-mass-prune` (None: no limit) and `--prune-share` (None: the default)."""
    if allow_mass_prune:
        return None
    return massprune.SHARE if prune_share is None else prune_share


def apply_commit(
    repo: gitread.Repository,
    rev: str,
    *,
    only: str | None = None,
    dry_run: bool = False,
    settle: float = sync.SETTLE,
    policy: retry.Backoff | None = None,
    say: Callable[[str], None] = lambda _: None,
    fold: Fold | None = None,
    prune_share: float | None = massprune.SHARE,
    listed: Mapping[str, observe.Listed] | None = None,
) -> ApplyOutcome:
    """Apply the commit `rev` to every configured cluster (`only`: to that one); raises `ApplyRefused`.
    `policy`: the retry backoff; `settle`: the longest wait for pods to terminate; `fold`: the
    journal entries `rev` holds folded in, marked Folded where it was applied without error;
    `prune_share`: the largest share of a cluster's running pods pruned at once (None: any,
    `--allow-mass-prune`; `prune_limit`); `listed`: per cluster, the nodes and pods the pass
    applying observed (`observe.Listed`), compared with instead of listing them again."""
    commit = gitread.resolve(repo, rev)
    sha = str(commit.id)
    spec, _, _ = speccache.read_spec(repo, commit)
    if any(d.path == FLEET_FILE for d in spec.diagnostics):
        raise ApplyRefused(
            f"jobtree.yaml does not validate at {sha[:12]}: nothing applied (which fleet owns what cannot be "
            "told); fix it (jobtree validate) and reconcile"
        )
    names = [c.name for c in spec.fleet.clusters]
    if not names:
        raise NoCluster(
            "jobtree.yaml configures no cluster: the embedded cluster has nothing to apply; add `clusters` "
            "(name, context) to drive Kubernetes"
        )
    if only is not None and only not in names:
        raise UnknownCluster(f"no cluster {only!r} in jobtree.yaml (it configures {', '.join(names)})")
    folders = {layout.rendered_cluster(path) for path in gitread.list_blobs(repo, sha, [layout.RENDERED])}
    stranded = sorted(f for f in folders if f is not None and f not in names)
    if stranded:
        raise ApplyRefused(
            f"{sha[:12]} renders pods for cluster{'s' * (len(stranded) > 1)} {', '.join(stranded)} "
            f"(rendered/{stranded[0]}/), which jobtree.yaml does not name (it names {', '.join(names)}): nothing "
            "applied, as a renamed or misspelled cluster would have its pods pruned; name the cluster as its "
            "nodes' cluster label does (to retire a cluster, end or move its runs while it is still named)"
        )
    targets = [t for t in connect.targets(spec.name, spec.fleet.clusters, policy) if only in (None, t.name)]
    crds = tuple(mirrors.definitions())
    with ThreadPoolExecutor(max_workers=max(1, len(targets))) as early:
        # what each cluster holds is read while the records are built: the reads wait on its server
        reads = {t.name: _reading(early, t, crds, (listed or {}).get(t.name)) for t in targets}
        records = records_of(repo, sha, spec, crds)

    def one(target: connect.Target) -> sync.Applied:
        read = reads[target.name]
        if isinstance(read, errors.ClusterError):
            return sync.Applied(target.name, sha, dry_run, errors=[str(read)], unreachable=True)
        api = read.api
        applied = sync.sync(api, target, records[target.name], dry_run, settle, prune_share, early=read)
        if fold is not None and not dry_run and not applied.untouched:
            try:
                applied.folded = folding.settle(
                    api, applied.entries, fold.entries.get(target.name, ()), sha, fold.now,
                    spec.fleet.reservations.retention,
                )  # fmt: skip
            except errors.ClusterError as err:  # the next pass folds again (no change) and marks them
                applied.errors.append(f"{err}; the journal entries stay unfolded until the next pass")
        return applied

    say(f"applying {sha[:12]} to {', '.join(t.name for t in targets)}{' (dry run)' if dry_run else ''}")
    with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
        done = list(pool.map(one, targets))
    return ApplyOutcome(sha, done, dry_run)


def _reading(
    pool: ThreadPoolExecutor, target: connect.Target, crds: Sequence[Obj], seen: observe.Listed | None
) -> sync.Reading | errors.ClusterError:
    """What `target` holds, being read in `pool` (`sync.reading`); the error when it has no API."""
    try:
        api = connect.api(target)
    except errors.ClusterError as err:
        return err
    return sync.reading(pool, api, (c["metadata"]["name"] for c in crds), seen)


# the owned files apply reads (never the ledger, which only grows, nor the pictures)
MIRRORED = (
    layout.RUN_STATUS, layout.BUDGET_STATUS, layout.RESERVATIONS, layout.LEASES, layout.FLEET,
    layout.OBSERVED, layout.RENDERED,
)  # fmt: skip


def records_of(
    repo: gitread.Repository, sha: str, spec: Spec, crds: tuple[Obj, ...]
) -> dict[str, changes.Record]:
    """What the commit `sha` holds for each configured cluster (`crds`: `mirrors.definitions()`)."""
    docs = filedocs.documents(repo, sha, MIRRORED)
    run_status = {
        _stem(p, layout.RUN_STATUS): d[0] for p, d in docs.items() if p.startswith(layout.RUN_STATUS) and d
    }
    budget_status = {
        _stem(p, layout.BUDGET_STATUS): d[0]
        for p, d in docs.items()
        if p.startswith(layout.BUDGET_STATUS) and d
    }
    reservations = [d[0] for p, d in sorted(docs.items()) if p.startswith(layout.RESERVATIONS) and d]
    leases = {
        _stem(p, layout.LEASES): [o for o in d if o] for p, d in docs.items() if p.startswith(layout.LEASES)
    }
    fleet_doc = (docs.get(layout.FLEET) or [None])[0] or {}
    cordoned = tuple(fleet_doc.get("cordoned") or ())
    rendered: dict[str, list[Obj]] = defaultdict(list)
    placed: dict[str, set[str]] = defaultdict(set)
    for path, found in sorted(docs.items()):
        folder = layout.rendered_cluster(path)
        if folder is not None:
            rendered[folder] += [d for d in found if isinstance(d, dict)]
            run = layout.rendered_run(path)
            if run is not None:
                placed[folder].add(run)
    common = [
        *(mirrors.budget(b, budget_status.get(b.metadata.name)) for b in spec.budgets),
        *(mirrors.run(r, run_status.get(f"{r.metadata.namespace}/{r.metadata.name}")) for r in spec.runs),
        *(mirrors.recorded(r) for r in reservations),
    ]
    kept = frozenset(_kept(spec.rejected))
    namespaces = tuple(sorted({t.namespace for t in spec.fleet.tenants}))
    out = {}
    for name in (c.name for c in spec.fleet.clusters):
        nodes = _observed_nodes(docs.get(layout.observed_file(name)))
        here = [
            mirrors.recorded(x)
            for run in sorted(placed[name])
            for x in leases.get(run, [])
            if mirrors.is_open_lease(x)
        ]
        out[name] = changes.Record(
            sha, mirrors.fleet(spec.name, spec.fleet, name, sha), crds, namespaces, (*common, *here),
            tuple(rendered[name]), kept,
            tuple(n for n in cordoned if nodes is None or n in nodes),
        )  # fmt: skip
    return out


def _stem(path: str, prefix: str) -> str:
    return path[len(prefix) :].removesuffix(".yaml")


def _observed_nodes(found: list[Any] | None) -> set[str] | None:
    return None if found is None else {n.name for n in observed.from_documents(found)}


def _kept(rejected: dict[str, str]) -> Sequence[tuple[str, str, str]]:
    """Mirrors of objects whose file is invalid now: their last mirror stays as it is (not pruned)."""
    out = []
    for key in rejected:
        kind, _, name = key.partition(" ")
        if kind == "Run" and "/" in name:
            namespace, _, run = name.partition("/")
            out.append(("Run", namespace, run))
        elif kind == "Budget":
            out.append(("Budget", "", name))
    return out
