"""A commit that would prune most of a cluster's running pods at once is held back (§7.3 prune; "configuration never kills work").

A renamed cluster, a context pointing at another cluster or a damaged `rendered/` all look like a
commit that no longer holds the pods running there. `hold` takes the prunes of running pods out of
a cluster's changes when they are more than a share of this fleet's running pods on it, and says
so as an error naming `--allow-mass-prune`. Not counted: finished pods, pods being deleted, and the
running pods of a run one of whose pods on the cluster has already finished (its workload ended
the run; the rest of its gang goes with it). Everything else in the changes still goes. Talks to
no cluster: it reads the live objects `sync` listed.
"""

from __future__ import annotations

from typing import Any

from reconciler.cluster import kinds, stamp
from reconciler.cluster.changes import Changes, Live
from reconciler.cluster.observations import FINISHED, RUN_LABEL
from schemas.messages import listed

Obj = dict[str, Any]

SHARE = 0.5  # the largest share of a cluster's running pods one pass prunes without being told to


def hold(plan: Changes, cluster: str, fleet: str, live: Live, share: float | None) -> tuple[str, str] | None:
    """Take the counted prunes out of `plan` when they are more than `share` of `fleet`'s running
    pods on `cluster` (None: no limit); returns (the error, the held line), else None."""
    if share is None:
        return None
    ours = [o for k, o in live.objects.items() if k[0] == kinds.POD.kind and stamp.fleet_of(o) == fleet]
    ended = {_run(o) for o in ours if _phase(o) in FINISHED} - {None}
    running = sum(1 for o in ours if _running(o))
    held = [
        c for c in plan.prune
        if c.kind == kinds.POD and not c.now and _running(c.live) and _run(c.live) not in ended
    ]  # fmt: skip
    if not held or len(held) <= share * running:
        return None
    kept = {c.key for c in held}
    plan.prune = [c for c in plan.prune if c.key not in kept]
    names = sorted(kinds.named(c.key) for c in held)
    return (
        f"{cluster}: this commit would prune {len(held)} of the {running} running pods of fleet {fleet} there, "
        f"more than {share:.0%} in one pass, so none of them was pruned. If the commit means it (runs ended, a "
        "cluster emptied on purpose), apply again with --allow-mass-prune; if not, look for a renamed cluster "
        "or a context pointing at the wrong cluster",
        f"{len(held)} running pods not pruned (--allow-mass-prune prunes them): {listed(names)}",
    )


def _phase(pod: Obj | None) -> str | None:
    return ((pod or {}).get("status") or {}).get("phase")


def _run(pod: Obj | None) -> tuple[str, str] | None:
    """(namespace, run) of a rendered pod, from its run label; None without one."""
    meta = (pod or {}).get("metadata") or {}
    run = (meta.get("labels") or {}).get(RUN_LABEL)
    return (str(meta.get("namespace") or ""), str(run)) if run else None


def _running(pod: Obj | None) -> bool:
    """A pod whose containers may still run: not finished, not being deleted."""
    return _phase(pod) not in FINISHED and not ((pod or {}).get("metadata") or {}).get("deletionTimestamp")
