"""After a pushed state commit is applied to a cluster (§7.5): the journal entries it folded in marked Folded, old ones deleted.

The last write of a reconcile pass to one cluster: each entry the pass folded in that is not Folded
yet moves to `Folded`, naming the commit that holds it; an entry Folded `retention` seconds ago or
more (the fleet's `reservations.retention`, the planner's rule for closed leases) is deleted. A
pass that stopped before this step (a crash after the push) folds the entry again, which changes
nothing in Git, and marks it then. Decides nothing about the swap (`planner.failover`), reads no
Git; raises what the writes raise.
"""

from __future__ import annotations

from collections.abc import Iterable

from planner import records
from reconciler.cluster import journal, kinds
from reconciler.cluster.api import Api


def settle(
    api: Api, entries: list[journal.Obj], folded: Iterable[str], commit: str, now: int, retention: int
) -> list[str]:
    """Of the cluster's journal `entries` (as apply read them, before its writes: only reconcile
    moves an entry to Folded), mark the ones `folded` Folded by `commit` at `now`, and delete those
    Folded `retention` seconds ago or more; one line per write, for people."""
    by_name = {e["metadata"]["name"]: e for e in entries}
    out = []
    for name in sorted(set(folded)):
        entry = by_name.get(name)
        if entry is None or journal.state_of(entry) == journal.FOLDED:
            continue
        journal.mark(api, name, journal.FOLDED, now, commit)
        out.append(f"fold JournalEntry {name} (held by {commit[:12]})")
    for entry in entries:
        since = folded_at(entry)
        if journal.state_of(entry) == journal.FOLDED and since is not None and now - since >= retention:
            name = entry["metadata"]["name"]
            api.delete(kinds.JOURNAL, name)
            out.append(f"delete JournalEntry {name} (Folded {records.time_text(since)}, past retention)")
    return out


def folded_at(entry: journal.Obj) -> int | None:
    """When an entry was marked Folded (its swap's instant when the status does not say)."""
    status = entry.get("status") or {}
    when = status.get("folded") or (entry.get("spec") or {}).get("at")
    return records.instant(when) if when else None
