"""A swap (§7.4): the planner's failure decision on the agent's world, as a journal entry, carried out step by step.

`prepare` asks `planner.failover.decide` (the function reconcile runs: no second implementation of
§4.8) and turns its facts into a JournalEntry: the pods to delete and create are the difference
between what `planner.manifests` renders for the affected runs' open leases before and after, so
the replacement pod is byte for byte the pod the next reconcile renders for the swapped lease (same
name, same hashes: apply leaves it running). `carry_out` performs an entry's steps in order, each
one idempotent, so an entry left in `Intent` by a killed agent is finished by the next: the entry
(Intent), the fillers on the spare's GPUs deleted gracefully, each with its grace
(`fill.gracePeriodSeconds`), and waited for until gone from the API (a kubelet frees a pod's GPUs
only once its containers stopped, §7.6), the replacement pods created (a second attempt gets
AlreadyExists and changes nothing), then the spare's placeholder deleted gracefully (it holds no
GPU, so the replacement never waits for it: one request less between a fence and its
replacement), the pods on the fenced nodes deleted with no grace period (their kubelet is gone),
the fenced nodes cordoned, the Lease mirrors and run statuses updated, and the entry marked `Applied`; then, as a courtesy to
whoever runs `kubectl describe run` or `kubectl get events`, one Event per run it changed. Touches
only what the entry names; funded work elsewhere is never evicted (the decision uses only the
spare's slots and fills).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from planner import failover, manifests, records
from planner.reasons import Role
from planner.world import Failover, Lease, World, run_key
from reconciler.cluster import journal, kinds, mirrors, observations, stamp
from reconciler.cluster.api import Api
from reconciler.cluster.errors import AlreadyExists, ClusterError
from reconciler.cluster.journal import Fenced

Obj = dict[str, Any]
PodKey = tuple[str, str]  # (namespace, name)
Gone = Callable[[list[PodKey]], None]  # returns once those pods are gone from the API


@dataclass(slots=True)
class Prepared:
    """One swap ready to carry out: its entry, and for logs and metrics who moved and who could not."""

    entry: Obj
    failover: Failover
    swapped: list[tuple[str, int, str]] = field(default_factory=list)  # (run, group, to node)
    declined: list[tuple[str, int, str]] = field(default_factory=list)  # (run, group, reason)

    @property
    def id(self) -> str:
        return str(self.entry["metadata"]["name"])


def prepare(
    world: World, cluster: str, fleet: str, fenced: list[Fenced], live_pods: Iterable[Obj]
) -> Prepared | None:
    """The swap for `fenced` on `world` (None: the fence touches nothing jobtree holds)."""
    entry_id = journal.entry_id(cluster, fenced, world.now)
    decided = failover.decide(world, entry_id)
    if not decided.closed and not decided.opened and not decided.cordon:
        return None
    before = [x for x in world.state.leases if x.open]
    closed = {name for name, _ in decided.closed}
    after = [x for x in before if x.name not in closed] + list(decided.opened)
    specs = {run_key(r): r for r in world.runs}
    where = {n.name: cluster for n in world.nodes} | {x.node: cluster for x in before}
    old = _pods(manifests.render(before, specs, where), fleet)
    new = _pods(manifests.render(after, specs, where), fleet)
    down = {f.node for f in fenced}
    creates = [body for key, body in sorted(new.items()) if _differs(old.get(key), body)]
    doomed = {
        key: (_node(body), manifests.pod_gpus(body))
        for key, body in old.items()
        if _differs(new.get(key), body)
    }
    runs = {x.run for x in before}
    for pod in live_pods:  # what the cluster really runs on the fenced nodes, rendered or not
        seen = observations.pod_obs(pod)
        key = (str((pod.get("metadata") or {}).get("namespace")), seen.name if seen else "")
        if seen is not None and seen.node in down and seen.run in runs and key not in new:
            doomed[key] = (seen.node, observations.gpu_request(pod))
    namespaces = {x.name: x.namespace for x in before}
    deletes = [(ns, name, node, gpus) for (ns, name), (node, gpus) in sorted(doomed.items())]
    entry = journal.entry(decided, cluster, fleet, fenced, namespaces, deletes, creates)
    prepared = Prepared(entry, decided)
    _account(prepared, world, before, down)
    return prepared


def _account(prepared: Prepared, world: World, before: list[Lease], down: set[str]) -> None:
    """Which failed groups moved to a spare, and which could not (and why)."""
    moved = {(x.run, x.group): x.node for x in prepared.failover.opened if x.role == Role.ACTIVE}
    lost = sorted({(x.run, x.group) for x in before if x.node in down and x.role == Role.ACTIVE})
    for run, group in lost:
        if (run, group) in moved:
            prepared.swapped.append((run, group, moved[(run, group)]))
        elif run in world.frozen_runs:
            prepared.declined.append((run, group, "spec_invalid"))
        else:
            prepared.declined.append((run, group, "no_spare"))


def _pods(rendered: dict[str, Obj], fleet: str) -> dict[PodKey, Obj]:
    out: dict[PodKey, Obj] = {}
    for manifest in rendered.values():
        if manifest.get("kind") == "Pod":
            body, _ = stamp.stamped(manifest, fleet)
            out[(body["metadata"]["namespace"], body["metadata"]["name"])] = body
    return out


def _differs(have: Obj | None, want: Obj) -> bool:
    return have is None or stamp.annotation(have, stamp.SPEC_HASH) != stamp.annotation(want, stamp.SPEC_HASH)


def _node(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


# ------------------------------------------------------------------------------------ steps


def carry_out(
    api: Api, entry: Obj, fleet: str, now: int, created: Callable[[Obj], None] = lambda _: None,
    *, gone: Gone,
) -> None:  # fmt: skip
    """Every step of `entry`, in order; each is idempotent, so a repeat finishes what a killed
    agent began. `created(pod)` is told as each replacement pod exists (for the latency metric);
    `gone(refs)` returns once those pods are gone from the API (the agent's `pods_gone`)."""
    spec = entry["spec"]
    meta = entry["metadata"]
    fresh = {"apiVersion": entry["apiVersion"], "kind": entry["kind"], "spec": spec,
             "metadata": {"name": meta["name"], "labels": meta.get("labels") or {}}}  # fmt: skip
    try:
        api.create(kinds.JOURNAL, fresh)
    except AlreadyExists:
        pass  # a second attempt: the entry was written before
    down = {f["node"] for f in spec["fenced"]}
    targets = {_node(p) for p in spec["pods"]["create"]}
    deletes = spec["pods"]["delete"]
    holding = [
        ref for ref in deletes if ref["node"] in targets and ref["node"] not in down and ref.get("gpus")
    ]
    for ref in holding:  # fillers on the spare's GPUs: they must go first, gracefully
        api.delete(kinds.POD, ref["name"], ref["namespace"])
    if holding:  # a filler's GPUs are free once its kubelet stopped it and removed it (§7.6)
        gone([(ref["namespace"], ref["name"]) for ref in holding])
    for pod in spec["pods"]["create"]:
        try:
            api.create(kinds.POD, pod)
        except AlreadyExists:
            pass  # created before this attempt (its name is the rendered one: the same pod)
        created(pod)
    for ref in deletes:  # the spare's placeholder holds no GPU: it goes once the replacement is asked for
        if ref["node"] in down:
            api.delete(kinds.POD, ref["name"], ref["namespace"], grace=0)  # no kubelet will finish it
        elif ref not in holding:
            api.delete(kinds.POD, ref["name"], ref["namespace"])
    for node in spec.get("cordon") or []:
        if api.get(kinds.NODE, node) is not None:
            api.merge_patch(kinds.NODE, node, {"spec": {"unschedulable": True}})
    _leases(api, entry, fleet)
    for change in spec.get("status") or []:
        ns, name = change["run"].split("/", 1)
        patch = {"status": {"phase": change["phase"], "message": change["message"]}}
        if api.get(kinds.RUN, name, ns) is not None:
            api.merge_patch(kinds.RUN, name, patch, ns, "status")
    journal.mark(api, entry["metadata"]["name"], journal.APPLIED, now)
    _events(api, entry, fleet, now)


EVENT_REASON = "NodeFailure"
COMPONENT = "jobtree-agent"


def _events(api: Api, entry: Obj, fleet: str, now: int) -> None:
    """One core Event per run the swap changed, on its Run mirror, named after the entry so a repeat
    creates none. Best effort: the journal entry is the record, so a refused Event changes nothing."""
    at = records.time_text(now)
    entry_id = str(entry["metadata"]["name"])
    for change in entry["spec"].get("status") or []:
        namespace, run = str(change["run"]).split("/", 1)
        meta = {
            "name": f"{run}.{entry_id}"[:253],
            "labels": {stamp.MANAGED_BY: stamp.MANAGER, stamp.FLEET: fleet},
        }
        message = f"{change['message']} (journal entry {entry_id})"
        body = mirrors.run_event(
            namespace, run, meta, EVENT_REASON, message, change["phase"] != "Running", COMPONENT, at
        )
        try:
            api.create(kinds.EVENT, body)
        except ClusterError:  # AlreadyExists: a repeat of the step; anything else: the entry still stands
            pass


def _leases(api: Api, entry: Obj, fleet: str) -> None:
    """The Lease mirrors: the closed ones go (mirrors hold open leases), the opened ones are applied
    as apply would mirror them from Git, so the fold's apply finds them unchanged."""
    for item in entry["spec"].get("closed") or []:
        api.delete(kinds.LEASE, item["name"], item["namespace"])
    for lease in journal.failover_of(entry).opened:
        body, status = stamp.stamped(mirrors.recorded(records.lease_obj(lease)), fleet)
        api.apply(kinds.LEASE, body)
        if status is not None:
            api.apply(kinds.LEASE, stamp.status_body(body, status), "status")
