"""Invariants of §4.9, checked after every plan: tests fail on any, and the reconciler won't write one.

Reads a finished plan; repairs nothing.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from planner.accounting import Book
from planner.manifests import pod_gpus
from planner.reasons import Role
from planner.world import Lease


def check(leases: list[Lease], book: Book, runs: set[str]) -> list[str]:
    """Slots, fills, payers and envelope caps of the open leases."""
    problems: list[str] = []
    holder: dict[tuple[str, int], str] = {}  # slot -> the Active or Spare lease holding it
    doubled: dict[tuple[str, int], list[str]] = {}
    fills: dict[tuple[str, int], int] = defaultdict(int)
    spare_slots: set[tuple[str, int]] = set()
    for lease in leases:
        if not lease.open:
            continue
        slots = [(lease.node, s) for s in lease.slots]
        if lease.role == Role.BORROWED:
            for slot in slots:
                fills[slot] += 1
        else:
            for slot in slots:
                if slot in holder:
                    doubled.setdefault(slot, [holder[slot]]).append(lease.name)
                else:
                    holder[slot] = lease.name
            if lease.role == Role.SPARE:
                spare_slots.update(slots)
        if lease.run not in runs:
            problems.append(f"open lease {lease.name} has no run {lease.run}")
        if not lease.payer.owner:
            problems.append(f"open lease {lease.name} has no payer")
    for (node, s), names in sorted(doubled.items()):
        problems.append(f"slot {node}#{s} held by {len(names)} leases: {', '.join(sorted(names))}")
    for (node, s), n in sorted(fills.items()):
        if n > 1 or (node, s) not in spare_slots:
            problems.append(f"fill lease on {node}#{s} does not overlay exactly one spare")
    for key, env in book.envs.items():
        f = book.funded[key]
        if f["own"] + f["family"] + f["loan"] > max(book.capacity(env), 0):
            problems.append(
                f"envelope {key} funds {f['own'] + f['family'] + f['loan']} GPUs over its concurrency {book.capacity(env)}"
            )
        if env.lend_max is not None and f["loan"] > env.lend_max:
            problems.append(f"envelope {key} lends {f['loan']} GPUs over its lending cap {env.lend_max}")
    return problems


def check_pods(leases: list[Lease], pods: dict[str, dict[str, Any]]) -> list[str]:
    """Every open Active or Borrowed lease is served by exactly one pod requesting its GPUs."""
    problems: list[str] = []
    covered: dict[tuple[str, int, str, str], int] = defaultdict(int)
    for lease in leases:
        if lease.open and lease.role in (Role.ACTIVE, Role.BORROWED):
            covered[(lease.run, lease.group, lease.node, lease.role)] += lease.gpus
    seen: dict[tuple[str, int, str, str], int] = defaultdict(int)
    for path, pod in pods.items():
        if pod.get("kind") != "Pod":
            continue
        labels = pod["metadata"]["labels"]
        role = labels["rq.davidlangworthy.io/role"]
        if role == Role.SPARE:
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
