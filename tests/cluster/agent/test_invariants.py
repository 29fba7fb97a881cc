"""The §4.9 invariants hold on the cluster after every swap the agent makes, over random failure sequences.

A fleet of 6 nodes × 8 GPUs in one fabric domain: `r1` (16 GPUs, groups of 8, 8 spare GPUs per
group), `f1` (opportunistic, 8 GPUs: it fills a spare), `r2` (malleable 8–16, groups of 8) and
`r3` (8 GPUs, checkpointed, no spare). Hypothesis draws up to four failures (a node tainted out of
service or deleted, in any order, repeats included); after each, the agent acts once on what its
caches list, and the cluster must show: no GPU slot under two open Active leases; a Borrowed lease
only on a Spare lease's slot; every open Active or Borrowed lease covered by exactly one live pod
of its run, group and node, naming it; every pod's GPUs the sum of the leases it names, all open;
no pod and no open lease on a failed node; no node's pods asking more GPUs than it has.
"""

from __future__ import annotations

import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.agents import Clock, act_once, an_agent
from tests.support.builders import a_run
from tests.support.clusterfleet import API, OUT_OF_SERVICE, T0, a_fleet, api, sixteen
from tests.support.controlplane import Cluster
from tests.support.controlplane.fixtures import Running

NODES = [f"n{i}" for i in range(1, 7)]
failures = st.lists(
    st.tuples(st.sampled_from(NODES), st.sampled_from(["taint", "delete"])), min_size=1, max_size=4
)


def check(server: Cluster) -> None:
    nodes = {n["metadata"]["name"]: n for n in server.list("v1", "Node")}
    failed = {
        name for name, n in nodes.items()
        if any(t.get("key") == OUT_OF_SERVICE["key"] for t in (n.get("spec") or {}).get("taints") or [])
    } | (set(NODES) - set(nodes))  # fmt: skip
    leases = {x["metadata"]["name"]: x for x in server.list(API, "Lease", "t")}
    slots: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    for x in leases.values():
        for slot in x["spec"]["slice"]["nodes"]:
            node = slot.split("#")[0]
            assert node not in failed, f"open lease {x['metadata']['name']} on failed node {node}"
            slots[x["spec"]["slice"]["role"]][(node, slot)] += 1
    assert all(n == 1 for n in slots["Active"].values()), "a slot under two Active leases"
    assert set(slots["Borrowed"]) <= set(slots["Spare"]), "a fill lease off a spare's slots"
    live = [p for p in server.list("v1", "Pod", "t") if not p["metadata"].get("deletionTimestamp")]
    covered: Counter[str] = Counter()
    per_node: Counter[str] = Counter()
    for pod in live:
        node = pod["spec"]["nodeName"]
        assert node not in failed, f"pod {pod['metadata']['name']} on failed node {node}"
        names = pod["metadata"]["annotations"]["rq.davidlangworthy.io/leases"].split(",")
        assert all(n in leases for n in names), f"pod {pod['metadata']['name']} names a closed lease"
        gpus = int(
            ((pod["spec"]["containers"][0].get("resources") or {}).get("limits") or {}).get(
                "nvidia.com/gpu", 0
            )
        )
        if pod["metadata"]["labels"]["rq.davidlangworthy.io/role"] != "Spare":
            assert gpus == sum(len(leases[n]["spec"]["slice"]["nodes"]) for n in names)
        per_node[node] += gpus
        labels = pod["metadata"]["labels"]
        for name in names:
            x = leases[name]
            assert (x["spec"]["runRef"]["name"], str(x["spec"]["group"]), x["spec"]["slice"]["nodes"][0].split("#")[0]) == (
                labels["rq.davidlangworthy.io/run"], labels["rq.davidlangworthy.io/group-index"], node)  # fmt: skip
            covered[name] += 1
    for name, x in leases.items():
        if x["spec"]["slice"]["role"] in ("Active", "Borrowed"):
            assert covered[name] == 1, f"lease {name} covered by {covered[name]} pods"
    for node, gpus in per_node.items():
        assert gpus <= int(nodes[node]["status"]["capacity"]["nvidia.com/gpu"]), f"{node} over-committed"


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(failures)
def test_random_failures_leave_the_cluster_consistent_after_every_swap(
    control_plane: Running, sequence: list[tuple[str, str]]
) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        control_plane.cluster("east") as server,
        pytest.MonkeyPatch.context() as mp,
    ):
        runs: dict[str, Any] = {
            "r1": sixteen("r1", spares=8),
            "f1": a_run("t/f1", "org:t").gpus(8).groups(8).opportunistic().build(),
            "r2": a_run("t/r2", "org:t").gpus(16).groups(8).malleable(8, 16, 8, desired=16).build(),
            "r3": a_run("t/r3", "org:t").gpus(8).groups(8).checkpointed().build(),
        }
        fleet = a_fleet(server, Path(tmp), mp, 6, **runs)
        fleet.reconcile(T0)
        check(server)
        core = api(fleet)
        for step, (node, how) in enumerate(sequence):
            if server.get("v1", "Node", node) is None:
                continue
            held = any(
                x["spec"]["slice"]["nodes"][0].startswith(f"{node}#") for x in server.list(API, "Lease", "t")
            )
            if how == "taint":
                core.patch_node(node, {"spec": {"taints": [OUT_OF_SERVICE]}})
            else:
                core.delete_node(node)
            agent = an_agent(clock=Clock(T0 + 60 * (step + 1)))
            act_once(agent)
            check(server)
            if held:
                fenced = {f["node"] for e in server.list(API, "JournalEntry") for f in e["spec"]["fenced"]}
                assert node in fenced, f"{node} held leases and failed, but no swap names it"
