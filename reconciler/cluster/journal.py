"""The journal (§7.4, §7.5): the agent's swaps as JournalEntry objects, and what each means to the other plane.

An entry is written in state `Intent` before the agent touches anything, holds the swap's whole
effect (`planner.world.Failover` plus the pods deleted and created), moves to `Applied` when every
step is done, and to `Folded` once a reconcile has committed it to Git and applied that commit;
a Folded entry is deleted after the fleet's retention. Here: the entry as an object and back
(`entry`, `failover_of`), the entries of one fleet (`read`, raising `JournalUnreadable` for one
that cannot be understood), what apply must not touch while an entry is unfolded (`protected`),
and the state moves (`mark`). Decides nothing: the swap is `planner.failover`'s, the steps the
agent's, the fold the reconcile pass's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from planner import records
from planner.reasons import Closure, Phase
from planner.world import Failover, Lease, StatusChange
from reconciler.cluster import kinds, stamp
from reconciler.cluster.api import Api
from reconciler.cluster.errors import PermanentClusterError
from schemas import API_VERSION, GROUP
from schemas.journal import JournalEntry

INTENT, APPLIED, FOLDED = "Intent", "Applied", "Folded"
CLUSTER_LABEL = f"{GROUP}/cluster"
Obj = dict[str, Any]


class JournalUnreadable(PermanentClusterError):
    """An entry that does not read as a JournalEntry: nothing may be applied until it is understood."""


@dataclass(frozen=True, slots=True)
class Fenced:
    node: str
    cause: str  # Deleted, OutOfService, NotReady, Gone


def entry_id(cluster: str, fenced: Sequence[Fenced], at: int) -> str:
    """The stable id of the swap for these fenced nodes at `at` on `cluster`: `swap-<node>-<digest>`."""
    names = sorted(f.node for f in fenced)
    text = f"{cluster}|{','.join(names)}|{at}"
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    head = "".join(c if c.isalnum() or c in "-." else "-" for c in names[0].lower())[:40].strip("-.")
    return f"swap-{head}-{digest}" if head else f"swap-{digest}"


def entry(
    failover: Failover,
    cluster: str,
    fleet: str,
    fenced: Sequence[Fenced],
    namespaces: Mapping[str, str],
    deletes: Iterable[tuple[str, str, str, int]],
    creates: Iterable[Obj],
) -> Obj:
    """The JournalEntry of `failover` (state Intent): `namespaces` maps each closed lease to its
    namespace, `deletes` are pods as (namespace, name, node, GPUs they hold), `creates` the pod
    manifests to create, stamped as apply stamps them."""
    closed = [
        {"name": name, "namespace": namespaces[name], "closure": str(closure)}
        for name, closure in failover.closed
    ]
    opened = []
    for lease in failover.opened:
        doc = records.lease_obj(lease)
        opened.append({"name": lease.name, "namespace": lease.namespace, "spec": doc["spec"]})
    return {
        "apiVersion": API_VERSION,
        "kind": "JournalEntry",
        "metadata": {
            "name": failover.entry,
            "labels": {stamp.MANAGED_BY: stamp.MANAGER, stamp.FLEET: fleet, CLUSTER_LABEL: cluster},
        },
        "spec": {
            "cluster": cluster,
            "at": records.time_text(failover.at),
            "fenced": [{"node": f.node, "cause": f.cause} for f in fenced],
            "closed": closed,
            "opened": opened,
            "cordon": list(failover.cordon),
            "status": [
                {"run": c.run, "phase": str(c.phase), "message": c.message, "cause": c.cause}
                for c in failover.status
            ],
            "pods": {
                "delete": [
                    {"namespace": ns, "name": n, "node": node, "gpus": gpus} for ns, n, node, gpus in deletes
                ],
                "create": list(creates),
            },
        },
    }


def failover_of(obj: Obj) -> Failover:
    """The swap an entry holds, as the planner folds it (`World.journal`)."""
    spec = obj["spec"]
    opened = []
    for item in spec.get("opened") or []:
        doc = {"metadata": {"name": item["name"], "namespace": item["namespace"]}, "spec": item["spec"]}
        opened.append(records.lease_from(doc))
    return Failover(
        obj["metadata"]["name"],
        records.instant(spec["at"]),
        tuple((c["name"], Closure(c["closure"])) for c in spec.get("closed") or []),
        tuple(opened),
        tuple(spec.get("cordon") or ()),
        tuple(
            StatusChange(c["run"], Phase(c["phase"]), c["message"], c.get("cause", ""))
            for c in spec.get("status") or []
        ),
    )


def state_of(obj: Obj) -> str:
    """Intent until the agent says otherwise (a create drops the status: it is a subresource)."""
    return str((obj.get("status") or {}).get("state") or INTENT)


def read(api: Api, fleet: str, cluster: str | None = None) -> list[Obj]:
    """Every entry of `fleet` (on `cluster`, when given), oldest first; `JournalUnreadable` names an
    entry that is not a JournalEntry jobtree can act on. A cluster without the CRD has none."""
    items = listed(api, fleet, cluster)
    for item in items:
        check(item, api.cluster)
    return items


def listed(api: Api, fleet: str, cluster: str | None = None) -> list[Obj]:
    """Every entry of `fleet` (on `cluster`, when given) as listed, unchecked, oldest first."""
    if not api.serves(kinds.JOURNAL):
        return []
    selector = stamp.selector(fleet)
    if cluster is not None:
        selector += f",{CLUSTER_LABEL}={cluster}"
    items, _ = api.list_all(kinds.JOURNAL, selector)
    return sorted(items, key=lambda o: (str(o["spec"]["at"]), o["metadata"]["name"]))


def check(obj: Obj, cluster: str) -> None:
    """Raise `JournalUnreadable` unless `obj` reads as a JournalEntry whose facts parse."""
    name = (obj.get("metadata") or {}).get("name", "?")
    body = {k: v for k, v in obj.items() if k in ("apiVersion", "kind", "spec", "status")}
    meta = obj.get("metadata") or {}
    body["metadata"] = {"name": name, "labels": meta.get("labels") or {}}
    try:
        JournalEntry.model_validate(body, strict=False)
        failover_of(obj)
    except (ValidationError, KeyError, ValueError, TypeError) as err:
        first = str(err).splitlines()[:3]
        raise JournalUnreadable(
            f"{cluster}: journal entry {name} cannot be read ({' '.join(first)[:300]}); fix or delete it "
            f"(kubectl get journalentries {name} -o yaml) before the next pass applies anything"
        ) from None


def unfolded(entries: Iterable[Obj]) -> list[Obj]:
    return [e for e in entries if state_of(e) != FOLDED]


def after(leases: Iterable[Lease], entries: Iterable[Obj]) -> list[Lease]:
    """The open `leases` as the unfolded `entries` left them (their closes and opens): what a pass
    observing before the fold must expect pods for, so the fillers a swap reclaimed are not taken
    for disrupted pods, nor its replacements for strangers."""
    closed: set[str] = set()
    opened: list[Lease] = []
    for entry in unfolded(entries):
        done = failover_of(entry)
        closed |= {name for name, _ in done.closed}
        opened += done.opened
    known = {x.name for x in leases}
    return [x for x in leases if x.name not in closed] + [x for x in opened if x.name not in known | closed]


def protected(entry: Obj) -> set[kinds.Key]:
    """Objects apply must neither write nor delete while `entry` is not Folded: the pods the agent
    created and deleted, and the Lease mirrors it opened and closed."""
    if state_of(entry) == FOLDED:
        return set()
    spec = entry["spec"]
    pods = spec.get("pods") or {}
    keys: set[kinds.Key] = {("Pod", ref["namespace"], ref["name"]) for ref in pods.get("delete") or []}
    keys |= {kinds.key(pod) for pod in pods.get("create") or []}
    keys |= {
        ("Lease", item["namespace"], item["name"])
        for item in [*(spec.get("closed") or []), *(spec.get("opened") or [])]
    }
    return keys


def mark(api: Api, name: str, state: str, at: int, commit: str | None = None) -> Obj:
    """Move entry `name` to `state` (Applied at `at`; Folded at `at` by `commit`)."""
    status: Obj = {"state": state}
    if state == APPLIED:
        status["applied"] = records.time_text(at)
    if state == FOLDED:
        status["folded"] = records.time_text(at)
        if commit:
            status["foldedBy"] = commit
    body = {"apiVersion": API_VERSION, "kind": "JournalEntry", "metadata": {"name": name}, "status": status}
    return api.apply(kinds.JOURNAL, body, "status")
