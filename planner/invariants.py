"""Invariants of §4.9, checked after every plan: tests fail on any, and the reconciler won't write one.

Reads a finished plan; repairs nothing.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from planner.accounting import Book
from planner.manifests import pod_gpus
from planner.world import Lease


def check(leases: list[Lease], book: Book, pods: dict[str, dict[str, Any]], runs: set[str]) -> list[str]:
    problems: list[str] = []
    slots: dict[tuple[str, int], list[Lease]] = defaultdict(list)
    for lease in leases:
        if not lease.open:
            continue
        for s in lease.slots:
            slots[(lease.node, s)].append(lease)
        if lease.run not in runs:
            problems.append(f"open lease {lease.name} has no run {lease.run}")
        if not lease.payer.owner:
            problems.append(f"open lease {lease.name} has no payer")
    for (node, s), holders in sorted(slots.items()):
        solid = [x for x in holders if x.role != "Borrowed"]
        fill = [x for x in holders if x.role == "Borrowed"]
        if len(solid) > 1:
            problems.append(
                f"slot {node}#{s} held by {len(solid)} leases: {', '.join(sorted(x.name for x in solid))}"
            )
        if fill and (len(fill) > 1 or not any(x.role == "Spare" for x in solid)):
            problems.append(f"fill lease on {node}#{s} does not overlay exactly one spare")
    for key, env in book.envs.items():
        f = book.funded[key]
        if f["own"] + f["family"] + f["loan"] > max(book.capacity(env), 0):
            problems.append(
                f"envelope {key} funds {f['own'] + f['family'] + f['loan']} GPUs over its concurrency {book.capacity(env)}"
            )
        if env.lend_max is not None and f["loan"] > env.lend_max:
            problems.append(f"envelope {key} lends {f['loan']} GPUs over its lending cap {env.lend_max}")
    covered: dict[tuple[str, int, str, str], int] = defaultdict(int)
    for lease in leases:
        if lease.open and lease.role in ("Active", "Borrowed"):
            covered[(lease.run, lease.group, lease.node, lease.role)] += lease.gpus
    seen: dict[tuple[str, int, str, str], int] = defaultdict(int)
    for path, pod in pods.items():
        if pod.get("kind") != "Pod":
            continue
        labels = pod["metadata"]["labels"]
        role = labels["rq.davidlangworthy.io/role"]
        if role == "Spare":
            continue
        pod_key = (
            f"{pod['metadata']['namespace']}/{labels['rq.davidlangworthy.io/run']}",
            int(labels["rq.davidlangworthy.io/group-index"]),
            pod["spec"]["nodeName"],
            role,
        )
        seen[pod_key] += 1
        if covered.get(pod_key) != pod_gpus(pod):
            problems.append(
                f"pod {path} requests {pod_gpus(pod)} GPUs but its leases hold {covered.get(pod_key, 0)}"
            )
    for lease_key in covered:
        if seen.get(lease_key) != 1:
            problems.append(
                f"leases of {lease_key[0]} group {lease_key[1]} on {lease_key[2]} are covered by "
                f"{seen.get(lease_key, 0)} pods"
            )
    return problems
