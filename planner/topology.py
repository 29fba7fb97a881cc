"""Topology: fast-fabric domains from node labels, node health, and free GPU slots.

Decides nothing about who pays or which run goes where; it answers "what is free, and where".
A node missing a required label is reported and left out; it never blocks the rest of the fleet.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter

from planner.reasons import Role
from planner.world import REQUIRED_LABELS, Lease, NodeObs


@dataclass(slots=True)
class Node:
    name: str
    gpus: int
    labels: dict[str, str]
    domain: str
    flavor: str
    usable: bool  # healthy and schedulable: may take new work
    fenced: bool  # failed: its leases must move or end
    used: set[int] = field(default_factory=set)  # slots held by open Active or Spare leases
    fill: set[int] = field(default_factory=set)  # slots held by open Borrowed (fill) leases
    spare: set[int] = field(default_factory=set)  # slots held by open Spare leases

    @property
    def free(self) -> int:
        return self.gpus - len(self.used) if self.usable else 0

    def free_slots(self, n: int) -> tuple[int, ...]:
        if not self.used:
            return tuple(range(n if 0 < n < self.gpus else self.gpus))  # as the loop below finds them
        out: list[int] = []
        for s in range(self.gpus):
            if s not in self.used:
                out.append(s)
                if len(out) == n:
                    break
        return tuple(out)

    def fill_count(self) -> int:
        """How many spare-held slots no fill lease overlays yet."""
        return len(self.spare - self.fill) if self.usable and self.spare else 0

    def fill_slots(self) -> list[int]:
        """Spare-held slots no fill lease overlays yet."""
        return sorted(self.spare - self.fill) if self.usable and self.spare else []


def domain_key(labels: dict[str, str]) -> str:
    return f"{labels['region']}/{labels['cluster']}/{labels['fabric.domain']}"


def is_fenced(node: NodeObs, now: int, grace: int | None) -> bool:
    """Deleted, tainted out-of-service, or NotReady past the opt-in grace. Cordon never fences."""
    if node.deleted or node.out_of_service:
        return True
    if not node.ready and grace is not None and node.not_ready_since is not None:
        return now - node.not_ready_since >= grace
    return False


@dataclass(slots=True)
class ReachClasses:
    """The domains some reaches (per-domain coverages) touch, grouped by exactly which of them
    touch each: domains of one class are paid by the same sources, so a walk over the sources in
    cover order can count per class, not per domain (cached per list of reaches)."""

    reaches: list[dict[str, bool]]  # kept alive so their ids stay unique while cached
    within: list[list[int]]  # per reach: the classes it touches
    domains: list[list[str]]  # per class: its domains
    class_of: dict[str, int]


@dataclass(slots=True)
class Members:
    """The nodes a set of envelopes can pay for, grouped by domain (cached per set of node sets)."""

    by_domain: dict[str, list[Node]]
    full: set[str]  # domains every node of which is a member
    partial: list[str]  # the other member domains, sorted
    cap: dict[str, int]  # usable member GPUs per domain
    by_cap: list[str]  # member domains by most capacity, then name
    sets: object  # keeps the node sets alive so their ids stay unique while cached
    _class_order: dict[tuple[int, int], list[str]] = field(default_factory=dict)

    def by_cap_within(self, classes: ReachClasses, c: int) -> list[str]:
        """The member domains of one reach class in `by_cap`'s order (remembered per class: the
        topology keeps its reach classes for the pass, so their ids stay unique). A walk by
        capacity over one class, not over every member domain."""
        key = (id(classes), c)
        hit = self._class_order.get(key)
        if hit is None:
            cap = self.cap
            hit = self._class_order[key] = sorted(
                (d for d in classes.domains[c] if d in cap), key=lambda d: (-cap[d], d)
            )
        return hit


class Topology:
    """Nodes by name and domain, with slot occupancy kept current as a pass binds and closes leases."""

    def __init__(
        self, nodes: Iterable[NodeObs], now: int, grace: int | None, cordoned: Iterable[str] = ()
    ) -> None:
        self.nodes: dict[str, Node] = {}
        self.problems: list[tuple[str, str]] = []  # (node, message)
        self.domains: dict[str, list[Node]] = defaultdict(list)
        jobtree_cordoned = set(cordoned)
        for obs in sorted(nodes, key=attrgetter("name")):
            if obs.gpus <= 0:
                continue
            if not all(map(obs.labels.get, REQUIRED_LABELS)):
                missing = [k for k in REQUIRED_LABELS if not obs.labels.get(k)]
                self.problems.append(
                    (
                        obs.name,
                        f"node {obs.name} lacks label {', '.join(missing)}; it is left out until labelled",
                    )
                )
                continue
            fenced = is_fenced(obs, now, grace)
            usable = not fenced and obs.ready and not obs.cordoned and obs.name not in jobtree_cordoned
            node = Node(
                obs.name,
                obs.gpus,
                dict(obs.labels),
                domain_key(obs.labels),
                obs.labels["gpu.flavor"],
                usable,
                fenced,
            )
            self.nodes[obs.name] = node
            self.domains[node.domain].append(node)
        self.domain_free: dict[str, int] = {}
        self.flavor_free: dict[str, int] = {}
        self.domain_cap = {d: sum(n.gpus for n in ns if n.usable) for d, ns in self.domains.items()}
        # GPUs of nodes that have not failed (cordoned or not ready ones come back), per domain
        self.domain_present = {d: sum(n.gpus for n in ns if not n.fenced) for d, ns in self.domains.items()}
        self._by_label: dict[str, tuple[dict[str, set[str]], set[str]]] = {}  # see _label_index
        self._match_cache: dict[tuple[str, tuple[tuple[str, str], ...]], frozenset[str]] = {}
        self.env_nodes: dict[str, frozenset[str]] = {}  # envelope key -> matching nodes (cover fills it)
        self._sorted_free: dict[str, list[tuple[int, str, Node]]] = {}
        self._by_free: dict[str, list[Node]] = {}
        self._member_free: dict[int, tuple[Members, int, dict[str, int], int]] = {}
        self._fill_free: dict[str, dict[str, list[Node]]] = {}
        self._fill_totals: dict[str, dict[str, int]] = {}
        self._fill_dirty: set[str] = set()  # domains whose spare or fill slots changed since
        self._coverage: dict[int, tuple[frozenset[str], dict[str, bool]]] = {}
        self._classes: dict[tuple[int, ...], ReachClasses] = {}
        self._members_cache: dict[frozenset[int], Members] = {}
        self.open_domains: set[str] = set()  # domains with a free GPU now
        self._views_by_tuple: dict[int, tuple[object, Members]] = {}
        self.version = 0  # bumped whenever free capacity changes
        self.changed: list[str] = []  # domains whose free capacity changed, in order (may repeat)
        self._most_free: dict[str, list[tuple[int, str]]] = {}  # flavor -> heap of (-free, domain)
        self._flavor_domains: dict[str, set[str]] = defaultdict(set)
        self._domain_flavors: dict[str, set[str]] = defaultdict(set)
        for node in self.nodes.values():
            self._flavor_domains[node.flavor].add(node.domain)
            self._domain_flavors[node.domain].add(node.flavor)

    # -- occupancy -------------------------------------------------------------------------------
    def occupy(self, lease: Lease) -> None:
        node = self.nodes.get(lease.node)
        if node is None:
            return
        target = node.fill if lease.role == Role.BORROWED else node.used
        target.update(lease.slots)
        if lease.role == Role.SPARE:
            node.spare.update(lease.slots)
        if lease.role in (Role.SPARE, Role.BORROWED):
            self._fill_dirty.add(node.domain)
        if lease.role != Role.BORROWED and node.usable:
            self._count(node, -lease.gpus)

    def release(self, lease: Lease) -> None:
        node = self.nodes.get(lease.node)
        if node is None:
            return
        target = node.fill if lease.role == Role.BORROWED else node.used
        target.difference_update(lease.slots)
        if lease.role == Role.SPARE:
            node.spare.difference_update(lease.slots)
        if lease.role in (Role.SPARE, Role.BORROWED):
            self._fill_dirty.add(node.domain)
        if lease.role != Role.BORROWED and node.usable:
            self._count(node, lease.gpus)

    def flavor_domains(self, flavor: str) -> set[str]:
        """Domains with at least one node of this flavor."""
        return self._flavor_domains.get(flavor, set())

    def max_domain_free(self, flavor: str) -> int:
        """The most free GPUs any one domain with this flavor has (an upper bound for one group).

        Kept as a heap of (-free, domain) per flavor: every change pushes the domain's new count,
        and entries no longer current are dropped when they reach the top."""
        heap = self._most_free.get(flavor)
        free = self.domain_free
        if heap is None:
            doms = self._flavor_domains.get(flavor, set())
            heap = [(-free[d], d) for d in self.open_domains if d in doms]
            heapq.heapify(heap)
            self._most_free[flavor] = heap
        while heap and free.get(heap[0][1], 0) != -heap[0][0]:
            heapq.heappop(heap)
        return -heap[0][0] if heap else 0

    def _count(self, node: Node, delta: int) -> None:
        self.version += 1
        self.changed.append(node.domain)
        self._sorted_free.pop(node.domain, None)
        self._by_free.pop(node.domain, None)
        free = self.domain_free[node.domain] = self.domain_free.get(node.domain, 0) + delta
        self.flavor_free[node.flavor] = self.flavor_free.get(node.flavor, 0) + delta
        if free > 0:
            self.open_domains.add(node.domain)
            for flavor in self._domain_flavors[node.domain]:
                heap = self._most_free.get(flavor)
                if heap is not None:
                    heapq.heappush(heap, (-free, node.domain))
        else:
            self.open_domains.discard(node.domain)

    def sorted_free(self, domain: str) -> list[tuple[int, str, Node]]:
        """Usable nodes of a domain with free GPUs as (free, name, node), most free then name first.

        Remembered until a lease opens or closes in the domain (pack asks for it many times).
        """
        hit = self._sorted_free.get(domain)
        if hit is None:  # a domain's nodes are listed by name, and the sort keeps ties in that order
            hit = [
                (free, n.name, n)
                for n in self.domains.get(domain, ())
                if n.usable and (free := n.gpus - len(n.used)) > 0  # Node.free, inlined
            ]
            hit.sort(key=itemgetter(0), reverse=True)
            self._sorted_free[domain] = hit
        return hit

    def by_free(self, domain: str) -> list[Node]:
        """Usable nodes of a domain, most free GPUs first, then by name (remembered like sorted_free)."""
        hit = self._by_free.get(domain)
        if hit is None:
            hit = sorted(
                (n for n in self.domains.get(domain, ()) if n.usable), key=lambda n: (-n.free, n.name)
            )
            self._by_free[domain] = hit
        return hit

    def coverage(self, names: frozenset[str]) -> dict[str, bool]:
        """Domains a node set touches, each with whether the set holds every node of it."""
        hit = self._coverage.get(id(names))
        if hit is not None and hit[0] is names:
            return hit[1]
        counts: dict[str, int] = defaultdict(int)
        for name in names:
            node = self.nodes.get(name)
            if node is not None:
                counts[node.domain] += 1
        out = {d: c == len(self.domains[d]) for d, c in sorted(counts.items())}
        self._coverage[id(names)] = (names, out)
        return out

    def reach_classes(self, reaches: list[dict[str, bool]]) -> ReachClasses:
        """`ReachClasses` of distinct reaches, in the order given."""
        key = tuple(map(id, reaches))
        hit = self._classes.get(key)
        if hit is not None and all(a is b for a, b in zip(hit.reaches, reaches, strict=True)):
            return hit
        mask: dict[str, int] = defaultdict(int)
        for j, reach in enumerate(reaches):
            for d in reach:
                mask[d] |= 1 << j
        numbered: dict[int, int] = {}
        domains: list[list[str]] = []
        class_of: dict[str, int] = {}
        for d, m in mask.items():
            c = numbered.get(m)
            if c is None:
                c = numbered[m] = len(domains)
                domains.append([])
            domains[c].append(d)
            class_of[d] = c
        within = [[c for m, c in numbered.items() if m >> j & 1] for j in range(len(reaches))]
        hit = self._classes[key] = ReachClasses(list(reaches), within, domains, class_of)
        return hit

    def fill_free(self) -> dict[str, dict[str, list[Node]]]:
        """flavor -> domain -> usable nodes with spare-held slots no fill overlays yet, by name.

        Kept current per domain: only domains whose Spare or Borrowed leases changed are redone."""
        self._refresh_fill()
        return self._fill_free

    def fill_totals(self) -> dict[str, dict[str, int]]:
        """flavor -> domain -> spare-held GPUs no fill overlays yet (the fill_free nodes' counts)."""
        self._refresh_fill()
        return self._fill_totals

    def _refresh_fill(self) -> None:
        for d in sorted(self._fill_dirty):
            for flavor in {n.flavor for n in self.domains.get(d, ())}:
                nodes = [n for n in self.domains[d] if n.flavor == flavor and n.fill_count()]
                by, totals = self._fill_free.setdefault(flavor, {}), self._fill_totals.setdefault(flavor, {})
                if nodes:
                    by[d], totals[d] = nodes, sum(n.fill_count() for n in nodes)
                else:
                    by.pop(d, None)
                    totals.pop(d, None)
        self._fill_dirty.clear()

    def recount(self) -> None:
        self._sorted_free = {}
        self._by_free = {}
        self._most_free = {}
        self.domain_free = {d: sum(n.free for n in nodes) for d, nodes in self.domains.items()}
        self.open_domains = {d for d, free in self.domain_free.items() if free > 0}
        self.version += 1
        self.changed.extend(sorted(self.domains))
        self.flavor_free = {}
        for n in self.nodes.values():
            self.flavor_free[n.flavor] = self.flavor_free.get(n.flavor, 0) + n.free

    # -- matching --------------------------------------------------------------------------------
    def matching(self, flavor: str, selector: dict[str, str]) -> frozenset[str]:
        """Names of nodes of this flavor whose labels satisfy the selector (`*` = any value)."""
        key = (flavor, tuple(sorted(selector.items())))
        hit = self._match_cache.get(key)
        if hit is not None:
            return hit
        names = set(self._label_index("gpu.flavor")[0].get(flavor, ()))
        for k, v in sorted(selector.items()):
            by_value, labelled = self._label_index(k)
            names &= labelled if v == "*" else by_value.get(v, set())
            if not names:
                break
        out = frozenset(names)
        self._match_cache[key] = out
        return out

    def _label_index(self, key: str) -> tuple[dict[str, set[str]], set[str]]:
        """Names of the nodes with each value of a label, and of every node with the label at all.

        Built per label the first time a selector names it (selectors name a few of a node's labels)."""
        hit = self._by_label.get(key)
        if hit is None:
            by_value: dict[str, set[str]] = defaultdict(set)
            labelled: set[str] = set()
            for name, node in self.nodes.items():
                v = node.labels.get(key)
                if v is not None:
                    by_value[v].add(name)
                    labelled.add(name)
            hit = self._by_label[key] = (by_value, labelled)
        return hit

    def member_view(self, sets: tuple[frozenset[str], ...]) -> Members:
        same = self._views_by_tuple.get(id(sets))
        if same is not None and same[0] is sets:
            return same[1]
        key = frozenset(map(id, sets))
        hit = self._members_cache.get(key)
        if hit is None:
            # from each set's per-domain coverage (cached): whole domains are taken as they are, only
            # domains some set covers in part are filtered node by node
            full: set[str] = set()
            touching: dict[str, list[frozenset[str]]] = defaultdict(list)
            for names in set(sets):
                for d, whole in self.coverage(names).items():
                    if whole:
                        full.add(d)
                    else:
                        touching[d].append(names)
            by_domain: dict[str, list[Node]] = {d: self.domains[d] for d in full}  # shared, read only
            for d, parts in touching.items():
                if d not in full:
                    by_domain[d] = [n for n in self.domains[d] if any(n.name in part for part in parts)]
                    if len(by_domain[d]) == len(self.domains[d]):
                        full.add(d)  # whole between them
            by_domain = {d: by_domain[d] for d in sorted(by_domain, key=lambda d: by_domain[d][0].name)}
            partial = sorted(d for d in by_domain if d not in full)
            cap = {
                d: self.domain_cap[d] if d in full else sum(n.gpus for n in ns if n.usable)
                for d, ns in by_domain.items()
            }
            by_cap = sorted(cap, key=lambda d: (-cap[d], d))
            hit = Members(by_domain, full, partial, cap, by_cap, sets)
            self._members_cache[key] = hit
        self._views_by_tuple[id(sets)] = (sets, hit)
        return hit

    def member_free(self, view: Members) -> dict[str, int]:
        """Free GPUs per member domain that has any (whole domains from the running count).

        The same view is asked for again and again between two changes of occupancy: remembered
        per view until the next change (callers must not mutate the result)."""
        hit = self._member_free.get(id(view))
        if hit is not None and hit[0] is view:
            if hit[1] == self.version:
                return hit[2]
            moved = set(self.changed[hit[3] :])
            if len(moved) * 4 < len(view.by_domain):  # a few domains changed: patch a copy
                out = dict(hit[2])
                for d in moved:
                    if d not in view.by_domain:
                        continue
                    if d in view.full:
                        v = self.domain_free.get(d, 0)
                    else:
                        v = sum(n.free for n in view.by_domain[d])
                    if v > 0:
                        out[d] = v
                    else:
                        out.pop(d, None)
                self._member_free[id(view)] = (view, self.version, out, len(self.changed))
                return out
        out = self._member_free_now(view)
        self._member_free[id(view)] = (view, self.version, out, len(self.changed))
        return out

    def _member_free_now(self, view: Members) -> dict[str, int]:
        free = self.domain_free
        if len(view.full) < len(self.open_domains):
            out = {d: free[d] for d in view.full if free.get(d, 0) > 0}
        else:
            out = {d: free[d] for d in self.open_domains if d in view.full}
        for d in view.partial:
            v = sum(n.free for n in view.by_domain[d])
            if v > 0:
                out[d] = v
        return out
