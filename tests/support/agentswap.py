"""A failure swap carried out as the in-cluster agent carries one out (§7.4), without the agent: a builder for tests.

`swap(fleet, "east", "n1", at)` reads the world the agent would have (the fleet's last state commit,
the cluster's nodes as observed at `at`), asks `planner.failover.decide` for the swap, and makes it
so on the cluster in the agent's order: the JournalEntry in state Intent, the pods on the spare's
GPUs deleted, the replacement pods created (rendered by `planner.manifests`, stamped as apply
stamps them), the failed node's pods deleted with no grace period, the node cordoned, the Lease
mirrors of the closed leases deleted and those of the opened ones created, the entry marked
Applied. `out_of_service` taints a node as an operator fencing it does.
"""

from __future__ import annotations

from typing import Any

from planner import failover, manifests, records
from planner.world import Lease, World
from reconciler.cluster import connect, journal, kinds, mirrors, observe, stamp
from reconciler.cluster.api import Api
from reconciler.git import read as gitread
from reconciler.spec import commit as speccache
from reconciler.state import memo as passmemo
from tests.support.clusterfleet import ClusterFleet

Obj = dict[str, Any]
OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}


def target_api(fleet: ClusterFleet, cluster: str) -> tuple[connect.Target, Api]:
    head = gitread.resolve(fleet.repo, "refs/heads/main")
    spec, _, _ = speccache.read_spec(fleet.repo, head)
    target = next(t for t in connect.targets(spec.name, spec.fleet.clusters) if t.name == cluster)
    return target, connect.api(target)


def out_of_service(fleet: ClusterFleet, cluster: str, node: str) -> None:
    """Taint `node` `node.kubernetes.io/out-of-service`: fenced (§4.8)."""
    _, api = target_api(fleet, cluster)
    api.merge_patch(kinds.NODE, node, {"spec": {"taints": [OUT_OF_SERVICE]}})


def swap(fleet: ClusterFleet, cluster: str, node: str, at: int) -> Obj:
    """The agent's swap for the fenced `node` at `at` on `cluster`; the JournalEntry as created."""
    head = gitread.resolve(fleet.repo, "refs/heads/main")
    spec, _, _ = speccache.read_spec(fleet.repo, head)
    state = passmemo.read(fleet.repo, head).state()
    target, api = target_api(fleet, cluster)
    open_leases = [x for x in state.leases if x.open]
    known = [n["metadata"]["name"] for n in api.list_all(kinds.NODE)[0]]
    seen = observe.observe(api, target, open_leases, known, at, None)
    world = World(
        at, records.settings_of(spec.fleet), tuple(spec.budgets), tuple(spec.runs), seen.nodes, state
    )
    fenced = [journal.Fenced(node, "OutOfService")]
    done = failover.decide(world, journal.entry_id(cluster, fenced, at))
    closed = {name for name, _ in done.closed}
    after = [x for x in open_leases if x.name not in closed] + list(done.opened)
    specs = {f"{r.metadata.namespace}/{r.metadata.name}": r for r in spec.runs}
    where = {n.name: cluster for n in seen.nodes}
    before_pods = _pods(open_leases, specs, where)
    after_pods = _pods(after, specs, where)
    deletes = [
        (p["metadata"]["namespace"], name, p["spec"]["nodeName"])
        for name, p in sorted(before_pods.items())
        if name not in after_pods
    ]
    deletes.sort(key=lambda d: d[2] == node)  # the spare's pods first, the failed node's last
    creates = [
        stamp.stamped(p, target.fleet)[0] for name, p in sorted(after_pods.items()) if name not in before_pods
    ]
    namespaces = {x.name: x.run.split("/", 1)[0] for x in state.leases}
    entry = journal.entry(done, cluster, target.fleet, fenced, namespaces, deletes, creates)
    made = api.create(kinds.JOURNAL, entry)
    for ns, name, on in deletes:
        if on != node:
            api.delete(kinds.POD, name, ns)
    for pod in creates:
        api.apply(kinds.POD, pod)
    for ns, name, on in deletes:
        if on == node:
            api.delete(kinds.POD, name, ns, grace=0)
    for name in done.cordon:
        api.merge_patch(kinds.NODE, name, {"spec": {"unschedulable": True}})
    for name in sorted(closed):
        api.delete(kinds.LEASE, name, namespaces[name])
    for lease in done.opened:
        body, status = stamp.stamped(mirrors.recorded(records.lease_obj(lease)), target.fleet)
        api.apply(kinds.LEASE, body)
        meta = {"name": body["metadata"]["name"], "namespace": body["metadata"]["namespace"]}
        api.apply(
            kinds.LEASE,
            {"apiVersion": body["apiVersion"], "kind": "Lease", "metadata": meta, "status": status},
            "status",
        )
    journal.mark(api, entry["metadata"]["name"], journal.APPLIED, at)
    return made


def _pods(leases: list[Lease], specs: dict[str, Any], where: dict[str, str]) -> dict[str, Obj]:
    """Pod name -> pod, as `planner.manifests` renders the open `leases`."""
    rendered = manifests.render(leases, specs, where)
    return {m["metadata"]["name"]: m for m in rendered.values() if m["kind"] == "Pod"}
