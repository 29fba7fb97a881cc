"""The nodes a set of envelopes can pay for, by domain, equal a node-by-node count (any overlap)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.topology import Topology
from planner.world import Lease, NodeObs, Payer


def fleet(sizes: list[int], down: set[int]) -> list[NodeObs]:
    out, i = [], 0
    for d, size in enumerate(sizes):
        for k in range(size):
            labels = {"region": "r", "cluster": "c", "fabric.domain": f"d{d}", "gpu.flavor": "H100"}
            out.append(NodeObs(f"n{d}-{k:02d}", 8, labels, cordoned=i in down))
            i += 1
    return out


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=5),
    st.sets(st.integers(0, 25)),
    st.lists(st.sets(st.integers(0, 25)), max_size=4),
)
def test_member_view_equals_counting_node_by_node(
    sizes: list[int], down: set[int], picks: list[set[int]]
) -> None:
    nodes = fleet(sizes, down)
    topo = Topology(nodes, 0, None)
    sets = tuple(frozenset(nodes[i].name for i in pick if i < len(nodes)) for pick in picks)
    view = topo.member_view(sets)
    names = sorted(set().union(*sets)) if sets else []
    expect: dict[str, list[str]] = {}
    for name in names:
        expect.setdefault(topo.nodes[name].domain, []).append(name)
    assert {d: [n.name for n in ns] for d, ns in view.by_domain.items()} == expect
    assert list(view.by_domain) == list(expect), "domains in the order of their first node's name"
    assert view.full == {d for d, ns in expect.items() if len(ns) == len(topo.domains[d])}
    assert view.partial == sorted(set(expect) - view.full)
    assert view.cap == {
        d: sum(topo.nodes[n].gpus for n in ns if topo.nodes[n].usable) for d, ns in expect.items()
    }
    assert view.by_cap == sorted(expect, key=lambda d: (-view.cap[d], d))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(1, 2), min_size=5, max_size=8),  # many small domains: few change per lease
    st.lists(st.sets(st.integers(0, 15), min_size=8), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 15), st.integers(4, 8), st.booleans()), max_size=30),
)
def test_free_gpus_per_member_domain_stay_exact_as_leases_open_and_close(
    sizes: list[int], picks: list[set[int]], steps: list[tuple[int, int, bool]]
) -> None:
    nodes = fleet(sizes, set())
    topo = Topology(nodes, 0, None)
    topo.recount()
    sets = tuple(frozenset(nodes[i].name for i in pick if i < len(nodes)) for pick in picks)
    view = topo.member_view(sets)
    held: list[Lease] = []
    for i, gpus, close in steps:
        if close and held:
            topo.release(held.pop(0))
        else:
            node = topo.nodes[nodes[i % len(nodes)].name]
            if node.free >= gpus:
                lease = Lease(
                    "l", "t/r", 0, "Active", node.name, node.free_slots(gpus), Payer("o"), 0, "Start"
                )
                topo.occupy(lease)
                held.append(lease)
        free = topo.member_free(view)  # patched from the domains that changed since the last ask
        expect = {
            d: sum(n.free for n in ns) for d, ns in view.by_domain.items() if sum(n.free for n in ns) > 0
        }
        assert free == expect
