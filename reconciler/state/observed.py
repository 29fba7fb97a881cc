"""Observed clusters as files (steps 3 and 5 of a pass): `state/observed/<cluster>.yaml` and the ledger's workload rows.

What a pass observed of a configured cluster is committed with the decisions made from it (§7.2),
so `jobtree plan` (no credentials) plans against the last observed cluster and any state commit can
be recomputed from Git: the nodes (topology labels, GPUs, health) in `state/observed/<cluster>.yaml`,
byte-stable and holding nothing that moves without a meaningful change (no heartbeat, no
transition time of a Ready node); the workload outcomes as `Workload` rows in the ledger (with the
node and the Kubernetes reason of a pod's ending). Encodes
and decodes only: observing is `reconciler.cluster`'s, deciding the planner's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from planner import records
from planner.world import NodeObs, WorkloadEvent
from reconciler.state import codec, layout
from schemas import API_VERSION, messages

KIND = "ObservedCluster"
WORKLOAD = "Workload"  # the ledger event of a workload outcome observed from pods
# WorkloadEvent.event -> the outcome written: the pods' phase, or Disrupted (§7.6: never a run failure)
OUTCOMES = {"Succeed": "Succeeded", "Fail": "Failed", "Disrupt": "Disrupted"}
NAMED = 5  # nodes named per kind of change in a commit message line


def encode(cluster: str, nodes: Iterable[NodeObs]) -> bytes:
    """The file of one cluster's nodes, sorted by name; only what a decision depends on."""
    rows = []
    for node in sorted(nodes, key=lambda n: n.name):
        row: dict[str, Any] = {
            "name": node.name,
            "gpus": node.gpus,
            "labels": dict(sorted(node.labels.items())),
        }
        if not node.ready:
            row["ready"] = False
            if node.not_ready_since is not None:
                row["notReadySince"] = records.time_text(node.not_ready_since)
        if node.cordoned:
            row["cordoned"] = True
        if node.out_of_service:
            row["outOfService"] = True
        if node.deleted:
            row["deleted"] = True
        rows.append(row)
    doc = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": cluster}, "nodes": rows}
    return codec.dump(doc)


def decode(data: bytes) -> tuple[NodeObs, ...]:
    """The nodes a file holds, as `encode` wrote them."""
    return from_documents(codec.documents(data))


def from_documents(docs: list[Any]) -> tuple[NodeObs, ...]:
    """The nodes a file whose YAML documents are `docs` holds (`decode` of its bytes)."""
    doc = docs[0] if docs else None
    rows = doc.get("nodes") if isinstance(doc, dict) else None
    out = []
    for row in rows or []:
        since = row.get("notReadySince")
        out.append(
            NodeObs(
                str(row["name"]),
                int(row["gpus"]),
                {str(k): str(v) for k, v in (row.get("labels") or {}).items()},
                ready=bool(row.get("ready", True)),
                cordoned=bool(row.get("cordoned", False)),
                out_of_service=bool(row.get("outOfService", False)),
                deleted=bool(row.get("deleted", False)),
                not_ready_since=records.epoch(since) if since else None,
            )  # fmt: skip
        )
    return tuple(out)


def files(observed: Mapping[str, Sequence[NodeObs]]) -> dict[str, bytes]:
    """`{state/observed/<cluster>.yaml: bytes}` for every cluster's nodes."""
    return {
        layout.observed_file(cluster): encode(cluster, nodes) for cluster, nodes in sorted(observed.items())
    }


def workload_rows(at: int, events: Iterable[tuple[str, WorkloadEvent]]) -> list[tuple[int, dict[str, Any]]]:
    """Ledger rows for workload outcomes observed at `at`, each with the cluster that showed it."""
    rows = []
    for cluster, ev in events:
        row: dict[str, Any] = {
            "at": records.time_text(at),
            "event": WORKLOAD,
            "run": ev.run,
            "outcome": OUTCOMES[ev.event],
            "cluster": cluster,
        }
        if ev.group is not None:
            row["group"] = ev.group
        if ev.node:
            row["node"] = ev.node
        if ev.reason:
            # the Kubernetes reason: Evicted, OutOfnvidia.com/gpu, Error (exit code 1), ...
            row["reason"] = ev.reason
        rows.append((at, row))
    return rows


def workload_from_ledger(lines: bytes, at: int) -> list[tuple[str, WorkloadEvent]]:
    """The workload outcomes a pass at `at` wrote to a ledger day (its `Workload` rows), in order."""
    want = records.time_text(at)
    back = {phase: event for event, phase in OUTCOMES.items()}
    out = []
    for line in lines.splitlines():
        if b'"Workload"' not in line:
            continue
        row = json.loads(line)
        if row.get("event") == WORKLOAD and row.get("at") == want:
            event = WorkloadEvent(
                row["run"], back[row["outcome"]], row.get("group"), row.get("node"), row.get("reason", "")
            )
            out.append((str(row["cluster"]), event))
    return out


def changes(cluster: str, before: Sequence[NodeObs], after: Sequence[NodeObs]) -> list[str]:
    """What moved between two observations of one cluster, for the commit message."""
    was, now = {n.name: n for n in before}, {n.name: n for n in after}
    kinds: dict[str, list[str]] = {}

    def note(kind: str, name: str) -> None:
        kinds.setdefault(kind, []).append(name)

    for name in sorted(now.keys() - was.keys()):
        note("added", name)
    for name in sorted(was.keys() - now.keys()):
        note("gone", name)
    for name in sorted(was.keys() & now.keys()):
        a, b = was[name], now[name]
        if a == b:
            continue
        if a.labels != b.labels or a.gpus != b.gpus:
            note("relabelled or resized", name)
        if a.ready != b.ready:
            note("Ready" if b.ready else "NotReady", name)
        if a.cordoned != b.cordoned:
            note("cordoned" if b.cordoned else "uncordoned", name)
        if a.out_of_service != b.out_of_service:
            note("out of service" if b.out_of_service else "back in service", name)
        if a.deleted != b.deleted:
            note("being deleted", name)
    if not kinds:
        return []
    parts = []
    for kind, names in kinds.items():
        parts.append(f"{kind} {messages.listed(names, NAMED)}")
    return [f"observed {cluster}: " + "; ".join(parts)]
