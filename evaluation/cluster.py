"""The baselines' fleet: nodes in fabric domains, GPUs in use, nodes down; and where a gang job fits.

Placement is the same for every baseline, so they differ only in whom they start: each placement
group stays in one fabric domain (as Jobtree's groups do), the domain chosen best-fit (the fullest
that still holds the group, Slurm's topology plugin and Kueue's topology-aware scheduling both
prefer it), and within it one node best-fit when the group fits a node, else the emptiest nodes
first. All-or-nothing. Decides nothing about order or preemption (`policies`).
"""

from __future__ import annotations

from collections.abc import Mapping

from evaluation.trace import Domain, Job

Placement = tuple[tuple[str, int], ...]  # (node, GPUs) pairs


class Cluster:
    def __init__(self, domains: tuple[Domain, ...]) -> None:
        self.size: dict[str, int] = {}
        self.domain: dict[str, str] = {}
        self.nodes: dict[str, list[str]] = {}
        for d in domains:
            self.nodes[d.name] = d.node_names()
            for n in self.nodes[d.name]:
                self.size[n] = d.gpus_per_node
                self.domain[n] = d.name
        self.used: dict[str, int] = dict.fromkeys(self.size, 0)
        self.down: set[str] = set()

    @property
    def gpus(self) -> int:
        return sum(self.size.values())

    def free(self) -> dict[str, int]:
        """GPUs free on each node now (a node that is down has none)."""
        return {n: 0 if n in self.down else s - self.used[n] for n, s in self.size.items()}

    def take(self, placement: Placement) -> None:
        for node, gpus in placement:
            self.used[node] += gpus

    def release(self, placement: Placement) -> None:
        for node, gpus in placement:
            self.used[node] -= gpus

    def place(self, job: Job, free: Mapping[str, int] | None = None) -> Placement | None:
        """Where `job` fits on `free` (default: now), or None; every group or nothing."""
        left = dict(self.free() if free is None else free)
        out: list[tuple[str, int]] = []
        for size in job.groups:
            got = self._group(size, left)
            if got is None:
                return None
            for node, gpus in got:
                left[node] -= gpus
            out += got
        return tuple(out)

    def _group(self, size: int, left: dict[str, int]) -> list[tuple[str, int]] | None:
        by_domain = {d: sum(left[n] for n in nodes) for d, nodes in self.nodes.items()}
        fitting = sorted((free, d) for d, free in by_domain.items() if free >= size)
        for _, d in fitting:
            nodes = self.nodes[d]
            whole = sorted((left[n], n) for n in nodes if left[n] >= size)
            if whole:
                return [(whole[0][1], size)]
            got: list[tuple[str, int]] = []
            need = size
            for free, n in sorted(((left[n], n) for n in nodes if left[n] > 0), key=lambda x: (-x[0], x[1])):
                take = min(free, need)
                got.append((n, take))
                need -= take
                if need == 0:
                    return got
        return None
