"""`state/observed/<cluster>.yaml` and the ledger's workload rows: what a pass observed, committed so Git alone replays it."""

from __future__ import annotations

import json
from typing import Any

from planner.world import NodeObs, WorkloadEvent
from reconciler.state import observed
from schemas.common import parse_time

T0 = parse_time("2026-03-02T09:00:00Z")
LABELS = {"region": "us-east", "cluster": "east", "fabric.domain": "A", "gpu.flavor": "H100-80GB"}


def a_node(name: str, **health: Any) -> NodeObs:
    return NodeObs(name, 8, dict(LABELS), **health)


def test_a_cluster_file_reads_back_as_the_nodes_it_was_written_from() -> None:
    nodes = [
        a_node("n2", cordoned=True),
        a_node("n1", ready=False, not_ready_since=T0 - 600),
        a_node("n3", out_of_service=True),
        a_node("n4", deleted=True),
    ]
    assert observed.decode(observed.encode("east", nodes)) == tuple(sorted(nodes, key=lambda n: n.name))


def test_a_healthy_node_is_its_name_gpus_and_labels_only_so_heartbeats_never_change_the_file() -> None:
    text = observed.encode("east", [a_node("n1")]).decode()
    assert text == (
        "apiVersion: rq.davidlangworthy.io/v1\nkind: ObservedCluster\nmetadata:\n  name: east\nnodes:\n"
        "- gpus: 8\n  labels:\n    cluster: east\n    fabric.domain: A\n    gpu.flavor: H100-80GB\n"
        "    region: us-east\n  name: n1\n"
    )


def test_the_commit_message_says_which_nodes_came_went_or_changed_health() -> None:
    before = [a_node("n1"), a_node("n2"), a_node("n3")]
    after = [a_node("n1", ready=False, not_ready_since=T0), a_node("n2", cordoned=True), a_node("n4")]
    assert observed.changes("east", before, after) == [
        "observed east: added n4; gone n3; NotReady n1; cordoned n2"
    ]
    assert observed.changes("east", before, before) == []


def test_workload_rows_name_the_cluster_and_read_back_only_at_their_own_instant() -> None:
    events = [("east", WorkloadEvent("t/r1", "Succeed", 0)), ("west", WorkloadEvent("t/r2", "Fail", 1))]
    rows = observed.workload_rows(T0, events)
    assert [row for _, row in rows] == [
        {"at": "2026-03-02T09:00:00Z", "event": "Workload", "run": "t/r1", "outcome": "Succeeded", "cluster": "east", "group": 0},
        {"at": "2026-03-02T09:00:00Z", "event": "Workload", "run": "t/r2", "outcome": "Failed", "cluster": "west", "group": 1},
    ]  # fmt: skip
    day = "".join(json.dumps(row, sort_keys=True) + "\n" for _, row in rows).encode()
    day += b'{"at": "2026-03-02T09:00:00Z", "event": "Start", "run": "t/r3"}\n'
    assert observed.workload_from_ledger(day, T0) == events
    assert observed.workload_from_ledger(day, T0 + 60) == []
