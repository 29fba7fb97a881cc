"""Apply one commit to one cluster (step 7 of a pass, §7.3): read what is live, send what `changes` says, in order.

What is live: jobtree's CRDs, the namespaces, the nodes and every object a fleet's jobtree applied,
listed now; in a `reconcile --apply` pass the nodes and pods are the ones its observation listed
(`observe.Listed`: the snapshot the pass planned from, not listed twice), the window since then is
the pass's own plan and commit, and what changed in it is the next pass's, as a change made just
after any list is (in a long-lived reconciler they come from its watch-fed caches, `watched`, and
the pods it writes go into them at once). A deletion names the uid it listed as its precondition: an object deleted and
made again under its name since is never deleted by mistake (the 409 is named; no pod is created
where its old self could not be deleted). The mirrors and Services are listed from the API
server's watch cache (for custom resources several times sooner than etcd read page by page), as
new at least as the namespaces' list that starts the read (`resourceVersionMatch=NotOlderThan`):
every write made before apply began reading is in it, as in a list read from etcd. Those lists
are sent at once, a kind each; a long-lived reconciler reads them from its caches instead when
they are current (`Listed.owned`; why a lagging one costs at most a write sent twice or a pass
late: `watched`), and every object a write was answered with goes into them at once.

Order: the CRDs (then wait until established), the tenant namespaces, the mirrors, then the
deletions (prunes, and pods to replace), then `rendered/<cluster>/`, the cordons, and last the
FleetConfig's status naming the commit, written only when everything before it was. The agent's
journal is read right after what is live, just before comparing (not the copy a pass read at its
start): what an unfolded entry protects is left alone (`changes.compare`'s `guarded`), and a
journal that cannot be read stops the cluster before anything is sent (§7.5). A pod waits
for the pods deleted on its node (their GPUs) and for its own old self: a deleted pod holds its
GPUs until it has terminated, and a pod started beside it would be refused by the kubelet. Writes
of one step go out at most `Target.workers` at a time, each retried with backoff (`retry`), each on
its own (§7.6): an object the server refuses (422, 403, ...) is named with the server's message,
and every other object, the prunes and the cordons still go; only the commit's mark waits for a
pass with no error, and the next pass, comparing again, finishes the job. Pruning more than a share
of the cluster's running pods at once is held back unless allowed (`massprune`). A dry run sends the same
writes with `dryRun=All` (`api.rehearsing`), so the server's own validation answers, and stores nothing;
it does not wait for anything. Returns an `Applied`; raises nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from reconciler.cluster import changes, journal, kinds, massprune, mirrors, observations, stamp
from reconciler.cluster.api import Api, rehearsing
from reconciler.cluster.changes import Change, Changes, Live, Record
from reconciler.cluster.connect import Target
from reconciler.cluster.errors import ClusterError, Unreachable
from reconciler.cluster.observe import Listed

Obj = dict[str, Any]

SETTLE = 60.0  # seconds to wait for deleted pods to terminate, and for new CRDs to be established


@dataclass(slots=True)
class Applied:
    """What applying one commit did to one cluster (or, in a dry run, would do)."""

    cluster: str
    commit: str
    dry_run: bool = False
    done: list[str] = field(default_factory=list)  # "create Pod t/r-g0-n1", in the order sent
    held: list[str] = field(default_factory=list)  # pods not created yet, and why
    conflicts: list[str] = field(default_factory=list)  # objects another fleet's label claims
    guarded: list[str] = field(default_factory=list)  # writes held back for an unfolded journal entry
    newer: list[str] = field(default_factory=list)  # CRDs left alone: the cluster's are newer
    restored: list[str] = field(
        default_factory=list
    )  # objects edited in the cluster, put back as Git holds them
    errors: list[str] = field(default_factory=list)
    unreachable: bool = False
    refused: bool = False  # nothing sent: the journal could not be read (a swap must not be undone)
    folded: list[str] = field(default_factory=list)  # journal entries marked Folded, and deleted, after
    entries: list[Obj] = field(default_factory=list)  # the journal as read before the writes (for the fold)
    listed: str = ""  # why its mirrors and Services were listed, not read from the pass's caches
    unchanged: int = 0
    reads: int = 0
    writes: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def untouched(self) -> bool:
        """Nothing was sent: the cluster could not be reached, or its journal not read."""
        return self.unreachable or self.refused

    def count(self, action: str) -> int:
        return sum(1 for line in self.done if line.startswith(f"{action} "))

    def __str__(self) -> str:
        if self.untouched:
            return f"{self.cluster}: not applied: {self.errors[0] if self.errors else 'unreachable'}"
        verb = "would apply" if self.dry_run else "applied"
        counts = ", ".join(
            f"{n} {a}" for a in (changes.CREATE, changes.CHANGE, changes.STATUS, changes.REPLACE,
                                  changes.PRUNE, changes.CORDON) if (n := self.count(a))
        )  # fmt: skip
        what = f"{counts}" if counts else "nothing to change"
        tail = f"; {len(self.held)} pods held" if self.held else ""
        tail += f"; {len(self.guarded)} held back for the journal" if self.guarded else ""
        tail += f"; {len(self.errors)} errors" if self.errors else ""
        return (
            f"{self.cluster}: {verb} {self.commit[:12]}: {what} ({self.unchanged} unchanged; "
            f"{self.reads} reads, {self.writes} writes){tail}"
        )


def read_live(api: Api, crd_names: Iterable[str], listed: Listed | None = None) -> tuple[Live, str]:
    """Jobtree's CRDs (each read by name: the reconcile role may touch no other), the namespaces,
    the nodes, and every object any fleet's jobtree applied; the nodes and pods as `listed` holds
    them when given (what this pass observed: not listed again), and the mirrors and Services from
    its caches when it has them and they are current. With why they were listed though the pass
    has caches ("" when read from them, or when it has none)."""
    crds = [c for c in (api.get(kinds.CRD, name) for name in sorted(crd_names)) if c is not None]
    spaces, version = api.list_all(kinds.NAMESPACE, keep=lambda n: n["metadata"]["name"])
    if listed is not None:
        nodes = listed.nodes
    else:
        slim, _ = api.list_all(
            kinds.NODE, keep=lambda n: observations.slim_node(n, ()), shape=observations.NodeFields
        )
        nodes = {n["metadata"]["name"]: n for n in slim}
    crd_names = {c["metadata"]["name"] for c in crds}
    served = [
        kind
        for kind in kinds.OWNED
        if kind.api_version == "v1" or f"{kind.plural}.{kind.api_version.split('/')[0]}" in crd_names
    ]  # a kind whose CRD is not there yet: nothing of it can exist
    owned = listed.owned() if listed is not None and listed.owned is not None else ""
    if isinstance(owned, str):  # no caches, or not current (`owned` says why): listed
        fetched = [kind for kind in served if not (kind == kinds.POD and listed is not None)]
        objects = _list_owned(api, fetched, version)
    else:
        kept = {k.kind for k in served}
        objects = {key: o for key, o in owned.items() if key[0] in kept}
    if listed is not None:  # pods are always served (v1)
        objects.update(listed.pods)
    why = owned if isinstance(owned, str) else ""
    return Live({c["metadata"]["name"]: c for c in crds}, frozenset(spaces), nodes, objects), why


def _list_owned(api: Api, fetched: list[kinds.Kind], version: str) -> dict[kinds.Key, Obj]:
    """Every object of `fetched` any fleet's jobtree applied, each kind's list sent at once; all but
    pods from the watch cache, as new as the namespaces' list (`version`) at least."""
    with ThreadPoolExecutor(max_workers=max(1, len(fetched))) as pool:
        found = pool.map(
            lambda kind: api.list_all(
                kind, f"{stamp.MANAGED_BY}={stamp.MANAGER}", keep=changes.as_listed,
                since=version if kind != kinds.POD else None,
            )[0],
            fetched,
        )  # fmt: skip
        return {kinds.key(o): o for items in found for o in items}


@dataclass(frozen=True, slots=True)
class Reading:
    """What is live, being read for `sync` by `api` (`reading`), with its request counts before."""

    api: Api
    reads: int
    writes: int
    live: Future[tuple[Live, str]]  # and why its mirrors were listed though cached (`read_live`)
    wrote: Callable[[Obj], None] | None = None  # where the objects written go at once (`Listed.wrote`)


def reading(pool: Executor, api: Api, crd_names: Iterable[str], listed: Listed | None = None) -> Reading:
    """`read_live` started in `pool`, for `sync(early=)`: the servers answer while the caller builds
    the record (`crd_names`: the record's CRDs)."""
    counts = api.counts
    future = pool.submit(read_live, api, list(crd_names), listed)
    return Reading(api, counts.reads, counts.writes, future, listed.wrote if listed is not None else None)


def sync(
    api: Api, target: Target, record: Record, dry_run: bool = False, settle: float = SETTLE,
    prune_share: float | None = massprune.SHARE, early: Reading | None = None,
) -> Applied:  # fmt: skip
    """Make `target` hold `record` (see the module docstring); `settle`: the longest wait for pods to
    terminate and CRDs to be established; `prune_share`: see `massprune.hold` (None: no limit);
    `early`: what is live, being read already (`reading`, by this `api`, of the record's CRDs; with
    the nodes and pods the pass observed, when it did); else it is read here."""
    out = Applied(target.name, record.commit, dry_run)
    reads, writes = (
        (early.reads, early.writes) if early is not None else (api.counts.reads, api.counts.writes)
    )
    try:
        crd_names = (c["metadata"]["name"] for c in record.crds)
        live, out.listed = early.live.result() if early is not None else read_live(api, crd_names)
        out.entries = _journal(api, target)
        guarded = _guarded(out.entries)
        plan = changes.compare(record, target.fleet, live, guarded)
        out.held, out.conflicts, out.unchanged = list(plan.held), list(plan.conflicts), plan.unchanged
        mass = massprune.hold(plan, target.name, target.fleet, live, prune_share)
        if mass is not None:
            out.errors.append(mass[0])
            out.held.append(mass[1])
        out.newer = list(plan.newer)
        out.guarded = list(plan.guarded)
        with ThreadPoolExecutor(max_workers=max(1, target.workers)) as pool:
            if dry_run:
                _rehearse(rehearsing(api), plan, pool.map, out)
            else:
                _send(api, target, plan, pool.map, out, settle, early.wrote if early is not None else None)
    except Unreachable as err:
        out.unreachable = True
        out.errors.append(str(err))
    except journal.JournalUnreadable as err:
        out.refused = True
        out.errors.append(str(err))
    except ClusterError as err:
        out.errors.append(str(err))
    out.reads, out.writes = api.counts.reads - reads, api.counts.writes - writes
    return out


def _journal(api: Api, target: Target) -> list[Obj]:
    """The journal as read now; `JournalUnreadable` when an entry cannot be read or the list fails."""
    try:
        return journal.read(api, target.fleet, target.name)
    except (journal.JournalUnreadable, Unreachable):
        raise
    except ClusterError as err:
        raise journal.JournalUnreadable(
            f"{target.name}: the journal (JournalEntry objects) could not be listed ({err}); nothing "
            "applied, so that no swap the agent made is undone: the next pass retries"
        ) from None


def _guarded(entries: list[Obj]) -> dict[kinds.Key, str]:
    """What the journal's unfolded entries protect: key -> the entry (the oldest entry names a key
    two protect)."""
    out: dict[kinds.Key, str] = {}
    for entry in journal.unfolded(entries):
        for key in sorted(journal.protected(entry)):
            out.setdefault(key, entry["metadata"]["name"])
    return out


Mapper = Callable[[Callable[[Change], ClusterError | None], Sequence[Change]], Iterable[ClusterError | None]]


def _step(api: Api, items: Sequence[Change], pool_map: Mapper, out: Applied,
          said: Callable[[Change], bool] = lambda c: True, failed: set[kinds.Key] | None = None,
          wrote: Callable[[Obj], None] | None = None) -> bool:  # fmt: skip
    """Send `items` (each on its own); every failure named in `out.errors` (and its key added to
    `failed`); each pod the server answers a write of with handed to `wrote`. True when none failed."""
    ok = True
    for change, error in zip(items, pool_map(lambda c: _attempt(api, c, wrote), items), strict=True):
        if error is not None:
            out.errors.append(f"{change}: {error}")
            ok = False
            if failed is not None:
                failed.add(change.key)
        elif said(change):
            out.done.append(str(change))
            if change.drifted:
                out.restored.append(kinds.named(change.key))
                _said_restored(api, change, out.commit)
    return ok


def _send(
    api: Api, target: Target, plan: Changes, pool_map: Mapper, out: Applied, settle: float,
    wrote: Callable[[Obj], None] | None = None,
) -> None:  # fmt: skip
    ok = _step(api, plan.crds, pool_map, out)
    if plan.crds:
        try:
            _established(api, [c.desired.body for c in plan.crds if c.desired is not None], settle)
        except ClusterError as err:
            out.errors.append(str(err))
            ok = False
    ok = _step(api, plan.namespaces, pool_map, out) & ok
    ok = _step(api, plan.mirrors, pool_map, out, wrote=wrote) & ok
    # deletions before creations: a deleted pod holds its GPUs (and its name) until it has terminated
    replaced = [
        Change(changes.PRUNE, c.kind, c.key, c.desired, c.live)
        for c in plan.rendered
        if c.action == changes.REPLACE
    ]
    kept: set[kinds.Key] = set()  # deletions that failed: nothing to wait for, no pod to put in their place
    ok = _step(api, [*plan.prune, *replaced], pool_map, out, lambda c: c.desired is None, kept) & ok
    deleted = [c for c in (*plan.prune, *replaced) if c.key not in kept]
    waiting = _wait_gone(api, target.fleet, _blocking(deleted, plan.rendered), settle)
    creations = []
    for change in plan.rendered:
        if change.key in kept and change.action == changes.REPLACE:
            continue  # its old self is still there (named in the errors): the next pass compares again
        blocked = [k for k, node in waiting.items() if k == change.key or (node and node == change.node)]
        if blocked and change.action in (changes.CREATE, changes.REPLACE):
            out.held.append(f"{kinds.named(change.key)} waits for {kinds.named(blocked[0])} to terminate")
        else:
            creations.append(change)
    ok = _step(api, creations, pool_map, out, wrote=wrote) & ok
    ok = _step(api, plan.cordons, pool_map, out) & ok
    if ok and plan.commit is not None and not out.held:
        _step(api, [plan.commit], pool_map, out, wrote=wrote)


RESTORED = "RestoredFromGit"


def _said_restored(api: Api, change: Change, commit: str) -> None:
    """An Event on a Run mirror edited by hand, now put back: the Run is changed in Git. Best
    effort: the mirror is restored whether or not the Event is accepted."""
    if change.kind != kinds.RUN or change.live is None:
        return
    _, namespace, name = change.key
    meta = change.live.get("metadata") or {}
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    message = (
        f"Run {namespace}/{name} was changed in the cluster; jobtree put it back as Git holds it "
        f"(commit {commit[:12]}). Change the Run in Git instead (edit runs/{namespace}/{name}.yaml, "
        f"or `kubectl runs shrink {name} -n {namespace} --by N` to change its width)."
    )
    body = mirrors.run_event(
        namespace, name, {"generateName": f"{name}."}, RESTORED, message, True, "jobtree-reconcile", at,
        str(meta.get("uid") or ""),
    )  # fmt: skip
    try:
        api.create(kinds.EVENT, body)
    except ClusterError:
        pass


def _rehearse(api: Api, plan: Changes, pool_map: Mapper, out: Applied) -> None:
    """A dry run: every write of `plan` sent with dryRun=All, waiting for nothing. What the server
    cannot judge before an earlier write is stored is listed unsent: an object in a namespace, or of
    a kind, the pass would create first, and the status of an object it would create; a replaced
    pod is its deletion alone (its new spec would be refused as a change to a running pod's)."""
    new_kinds = {c.desired.body["spec"]["names"]["kind"] for c in plan.crds
                 if c.desired is not None and c.action == changes.CREATE}  # fmt: skip
    new_spaces = {c.key[2] for c in plan.namespaces}
    created = {c.key for c in plan.all() if c.action == changes.CREATE}
    sent = [
        Change(changes.PRUNE, c.kind, c.key, c.desired, c.live) if c.action == changes.REPLACE else c
        for c in plan.all()
        if not (c.kind.api_version != "v1" and c.kind.kind in new_kinds)
        and c.key[1] not in new_spaces
        and not (c.action == changes.STATUS and c.key in created)
    ]
    for change, error in zip(sent, pool_map(lambda c: _attempt(api, c), sent), strict=True):
        if error is not None:
            out.errors.append(f"{change}: {error}")
    out.done = [str(c) for c in plan.all()]


def _attempt(api: Api, change: Change, wrote: Callable[[Obj], None] | None = None) -> ClusterError | None:
    """Send one change (retried inside `api`); the error that stopped it, or None. An object the
    server answered with (created or changed) is handed to `wrote`: a deletion never is (a pod
    holds its GPUs until it is gone, which the cache hears from the server)."""
    try:
        answer = _write(api, change)
    except ClusterError as err:
        return err
    if wrote is not None and answer is not None:
        wrote(answer)
    return None


def _write(api: Api, change: Change) -> Obj | None:
    """Send one change; the object the server answered an apply with (None for other writes)."""
    kind, (_, namespace, name) = change.kind, change.key
    answer = None
    if change.action == changes.PRUNE:  # the object as listed, never one made again under its name since
        uid = str(((change.live or {}).get("metadata") or {}).get("uid") or "")
        api.delete(kind, name, namespace or None, grace=0 if change.now else None, uid=uid or None)
    elif change.action == changes.CORDON:
        api.merge_patch(kinds.NODE, name, {"spec": {"unschedulable": True}})
    elif change.desired is not None:
        body, status = change.desired.body, change.desired.status
        if change.action != changes.STATUS:
            answer = api.apply(kind, body)
        created = change.action == changes.CREATE
        if status is not None and (change.action == changes.STATUS or (created and not api.dry_run)):
            answer = api.apply(kind, stamp.status_body(body, status), "status")
    return answer


def _blocking(deleted: Sequence[Change], rendered: Sequence[Change]) -> dict[kinds.Key, str]:
    """Deleted pods a creation waits for, with their node: a pod replaced (its name), or one on a
    node where a pod is created (its GPUs are not free until it has terminated)."""
    created = [c for c in rendered if c.kind == kinds.POD and c.action in (changes.CREATE, changes.REPLACE)]
    names, nodes = {c.key for c in created}, {c.node for c in created}
    return {c.key: c.node for c in deleted if c.kind == kinds.POD and (c.key in names or c.node in nodes)}


def _wait_gone(api: Api, fleet: str, pods: dict[kinds.Key, str], settle: float) -> dict[kinds.Key, str]:
    """Wait (at most `settle` seconds) until the `pods` are gone; the ones still there. A dropped
    or expired watch is followed by a fresh list, so a lost event costs time, never a wrong answer."""
    remaining = dict(pods)
    deadline = time.monotonic() + settle
    while remaining and time.monotonic() < deadline:
        listed, version = api.list_all(kinds.POD, stamp.selector(fleet), keep=kinds.key)
        present = set(listed)
        remaining = {k: v for k, v in remaining.items() if k in present}
        if not remaining:
            break
        seconds = max(1, int(min(30.0, deadline - time.monotonic())))
        try:
            for event in api.watch(kinds.POD, stamp.selector(fleet), version, seconds):
                meta = (event.get("object") or {}).get("metadata") or {}
                if event.get("type") == "DELETED":
                    remaining.pop(("Pod", meta.get("namespace") or "", meta.get("name") or ""), None)
                if not remaining:
                    break
        except ClusterError:
            time.sleep(0.2)  # a watch that could not start, or expired: list again
    return remaining


def _established(api: Api, crds: list[dict[str, Any]], settle: float) -> None:
    """Wait (at most `settle` seconds) until the `crds` serve their kinds: the Established condition,
    or (a server that does not report it) their kind answering a list."""
    deadline = time.monotonic() + settle
    pause = 0.05
    for crd in crds:
        name = crd["metadata"]["name"]
        while True:
            live = api.get(kinds.CRD, name) or {}
            conditions = (live.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                break
            if api.serves(_served_kind(crd)):
                break
            if time.monotonic() >= deadline:
                raise ClusterError(f"{api.cluster}: CRD {name} is not established after {settle:g} s")
            time.sleep(pause)
            pause = min(1.0, pause * 2)


def _served_kind(crd: dict[str, Any]) -> kinds.Kind:
    spec = crd["spec"]
    version = next(v["name"] for v in spec["versions"] if v.get("served"))
    names = spec["names"]
    return kinds.Kind(
        f"{spec['group']}/{version}", names["kind"], names["plural"], spec["scope"] == "Namespaced"
    )
