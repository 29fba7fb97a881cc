"""`trust.placed`: which cluster the last state commit places each open lease on, from paths alone
for a run rendered on one cluster, and from its rendered pods, each file read once, for a run on two."""

from __future__ import annotations

from planner.reasons import OpenReason, Role
from planner.world import FleetState, Lease, Payer
from reconciler.passes import trust

T0 = 1_767_225_600


def _lease(name: str, run: str, node: str, ended: int | None = None) -> Lease:
    return Lease(
        name, run, 0, Role.ACTIVE, node, (0, 1), Payer("t", "t", "h"), T0, OpenReason.START, ended=ended
    )


def _pods(*nodes: str) -> bytes:
    docs = [
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\nspec:\n  nodeName: {n}\n"
        for i, n in enumerate(nodes)
    ]
    return "---\n".join(docs).encode()


def test_a_run_on_two_clusters_places_each_lease_where_its_pod_is_reading_each_file_once() -> None:
    blobs = {
        "rendered/east/ns/wide.yaml": "e1",
        "rendered/west/ns/wide.yaml": "w1",
        "rendered/west/ns/small.yaml": "w2",
    }
    files = {"e1": _pods("e-node-1", "e-node-2"), "w1": _pods("w-node-1")}
    reads: list[str] = []

    def read(oid: str) -> bytes:
        reads.append(oid)
        return files[oid]

    state = FleetState(
        leases=[
            _lease("l1", "ns/wide", "e-node-1"),
            _lease("l2", "ns/wide", "w-node-1"),
            _lease("l3", "ns/wide", "e-node-2"),
            _lease("l4", "ns/small", "w-node-9"),  # one cluster: placed by its path, never read
            _lease("l5", "ns/wide", "nowhere"),  # no pod on its node: placed nowhere
            _lease("l6", "ns/wide", "e-node-1", ended=T0 + 60),  # closed: not placed
        ]
    )
    where = trust.placed(state, blobs, read)
    assert {c: [x.name for x in leases] for c, leases in where.items()} == {
        "east": ["l1", "l3"],
        "west": ["l2", "l4"],
    }
    assert sorted(reads) == ["e1", "w1"]
