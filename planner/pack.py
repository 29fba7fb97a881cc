"""Pack: where each placement group goes — pack-to-empty over fast-fabric domains, paying as it goes.

Given funding sources in cover order, places groups (then spares) all-or-nothing and names the
payer of every GPU. Binds nothing (slot numbers and names are `bind`) and cuts nobody.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import add, itemgetter, sub

from planner.accounting import LOAN, Env
from planner.topology import Node, ReachClasses, Topology

CAPACITY = "capacity"  # no domain its funding reaches holds a group (with its spares) now
GROUPING = "grouping"  # `allowCrossGroupSpread: false` and no one domain holds every group


@dataclass(slots=True)
class Source:
    """One envelope that may pay for this run, in cover order, with what it can still fund."""

    env: Env
    category: str
    room: int
    nodes: frozenset[str]
    reach: dict[str, bool] = field(default_factory=dict)  # domain -> whether `nodes` holds all of it


@dataclass(slots=True)
class Piece:
    node: str
    gpus: int
    source: Source | None  # None for fill (opportunistic) pieces


@dataclass(slots=True)
class GroupPlan:
    index: int
    domain: str
    pieces: list[Piece] = field(default_factory=list)
    spares: list[Piece] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.pieces)


@dataclass(slots=True)
class Packing:
    groups: list[GroupPlan]
    failure: str | None = None
    borrowed: int = 0


@dataclass(slots=True)
class Request:
    sizes: list[int] | None  # fixed group sizes, or None to form chunks while filling domains
    total: int
    first_index: int
    spares_per_group: int
    sources: list[Source]
    max_borrow: int | None
    single_domain: bool = False
    prefer: tuple[str, ...] = ()  # domains the run already uses
    held: dict[str, int] = field(default_factory=dict)  # free GPUs promised to reservations ahead
    fill: bool = False  # opportunistic: only spare-held slots, paid by nobody
    assign: tuple[str, ...] | None = None  # each group's domain, as a reservation's scope drew it


class _Cursor:
    """Mutable funding and capacity during one packing attempt (rolled back by discarding it).

    Free GPUs per domain are read once when the cursor opens; domains with none are dropped, so a
    nearly full fleet costs a pass over the few domains that still have room.
    """

    def __init__(self, topo: Topology, req: Request, flavor: str) -> None:
        self.topo, self.req, self.flavor = topo, req, flavor
        self.room = rooms(req.sources)
        self.borrowed = 0
        self.taken: dict[str, int] = {}  # node -> GPUs taken in this attempt
        self.taken_in: set[str] = set()  # domains this attempt has taken GPUs in
        self.full: set[str] = set()  # member domains every node of which the funding reaches
        self.held = req.held  # read only
        if req.fill:
            self.members = topo.fill_free().get(flavor, {})
            base = topo.fill_totals().get(flavor, {})
        else:
            view = topo.member_view(funded_nodes(req.sources))
            self.members = view.by_domain
            self.full = view.full
            base = topo.member_free(view)
        # only domains with GPUs nobody ahead holds: one at 0 or below is never chosen (_choose, take)
        self.free = unheld(base, self.held)
        self._probe: tuple[tuple[str, int, bool], tuple[list[Piece], list[int], int]] | None = None
        self._aside: list[tuple[str, int, list[int], int]] = []  # (domain, GPUs, rooms, borrowed) set aside

    def set_aside(self, domain: str, gpus: int) -> bool:
        """Keep room and funding for a group's spares in its domain while later groups are placed
        (False: there is none)."""
        found = self._take(domain, gpus, False) if self.domain_free(domain) >= gpus else None
        if found is None:
            return False
        _, room, borrowed = found
        self._aside.append(
            (domain, gpus, list(map(sub, self.room, room)), borrowed - self.borrowed)  # per source, in C
        )
        self.room, self.borrowed = room, borrowed
        self.free[domain] -= gpus
        self._probe = None
        return True

    def give_back(self) -> None:
        """What `set_aside` kept, free again for the spares themselves."""
        for domain, gpus, rooms, borrowed in self._aside:
            self.room = list(map(add, self.room, rooms))
            self.borrowed -= borrowed
            self.free[domain] = self.free.get(domain, 0) + gpus
        self._aside.clear()
        self._probe = None

    def avail(self, node: Node) -> int:
        base = node.fill_count() if self.req.fill else node.free
        return base - self.taken.get(node.name, 0)

    def domain_free(self, domain: str) -> int:
        return self.free.get(domain, 0)

    def total_free(self) -> int:
        return sum(self.free.values())  # never negative: `__init__` keeps positives, `take` only what it got

    def take(self, domain: str, want: int, commit: bool, partial: bool = False) -> list[Piece] | None:
        """Up to `want` GPUs in the domain, nodes by most free then name, each GPU paid in cover order.

        All `want` or None; with `partial`, as many as the funding reaching the domain pays (None:
        not one). A probe (commit=False) is remembered, so committing the same take right after is free.
        """
        if self.domain_free(domain) < (1 if partial else want):
            return None
        probe = self._probe
        if probe is not None and probe[0] == (domain, want, partial):
            pieces, room, borrowed = probe[1]
        else:
            found = self._take(domain, want, partial)
            self._probe = ((domain, want, partial), found) if found is not None else None
            if found is None:
                return None
            pieces, room, borrowed = found
        if commit:
            self._probe = None
            self.room, self.borrowed = room, borrowed
            got = 0
            for p in pieces:
                self.taken[p.node] = self.taken.get(p.node, 0) + p.gpus
                got += p.gpus
            self.taken_in.add(domain)
            self.free[domain] -= got
        return pieces

    def _take(self, domain: str, want: int, partial: bool) -> tuple[list[Piece], list[int], int] | None:
        pieces: list[Piece] = []
        room = list(self.room)
        borrowed = self.borrowed
        left = want
        taken = self.taken
        fill = self.req.fill
        if not fill and domain in self.full:
            nodes = self.topo.sorted_free(domain)
            if domain in self.taken_in:  # an earlier group of this attempt took GPUs here
                nodes = _less_taken(nodes, taken)
        else:
            nodes = [
                (a, n.name, n)
                for n in self.members.get(domain, ())
                if (a := (n.fill_count() if fill else n.free) - taken.get(n.name, 0)) > 0
            ]
            nodes.sort(key=_pack_order)
        sources = self.req.sources
        reach = domain_sources(self.topo, sources, domain) if not fill else []
        if reach:  # only sources with room now pay (rooms only fall here): picked out once, in C
            reach = list(compress(reach, positive(map(room.__getitem__, map(itemgetter(0), reach)))))
        first, last = 0, len(reach)  # reach[:first] have no room left (rooms only fall here)
        max_borrow = self.req.max_borrow
        for avail, name, node in nodes:
            if left == 0:
                break
            free = min(avail, left)
            if fill:
                if node.flavor == self.flavor:
                    pieces.append(Piece(name, free, None))
                    left -= free
                continue
            while first < last and room[reach[first][0]] <= 0:
                first += 1
            for j in range(first, last):
                if free == 0:
                    break
                i, whole = reach[j]
                src = sources[i]
                if room[i] <= 0 or (not whole and name not in src.nodes):
                    continue
                n = min(free, room[i])
                if src.category == LOAN and max_borrow is not None:
                    n = min(n, max_borrow - borrowed)
                    if n <= 0:
                        continue
                    borrowed += n
                room[i] -= n
                free -= n
                left -= n
                pieces.append(Piece(name, n, src))
        if left > 0 and not (partial and pieces):
            return None
        return pieces, room, borrowed


def positive(values: Iterable[int]) -> Iterator[bool]:
    """Whether each value is above zero, by builtins: a mask for `itertools.compress` over a long
    list (a source list's rooms), with no Python step per value."""
    return map((0).__lt__, values)


def unheld(free: dict[str, int], held: dict[str, int]) -> dict[str, int]:
    """Free GPUs per domain less what is held, domains left with none dropped, in `free`'s order.

    `free` holds positive counts only: a copy patched in the domains both name (held domains are
    mostly full, so a few) instead of a pass that looks every domain up."""
    out = dict(free)
    for d in free.keys() & held.keys():
        v = out[d] - held[d]
        if v > 0:
            out[d] = v
        else:
            del out[d]
    return out


class Unheld:
    """Free GPUs per domain less what is held, positive counts only (`unheld`'s answer), read
    through instead of copied: a scope is drawn for every waiting run and asks for a few domains,
    while the free counts and the holds span the fleet."""

    __slots__ = ("free", "held")

    def __init__(self, free: dict[str, int], held: dict[str, int]) -> None:
        self.free, self.held = free, held  # read only

    def get(self, domain: str, default: int = 0) -> int:
        f = self.free.get(domain)
        if f is None:
            return default
        v = f - self.held.get(domain, 0)
        return v if v > 0 else default

    def __contains__(self, domain: str) -> bool:
        return self.get(domain) > 0

    def __getitem__(self, domain: str) -> int:
        v = self.get(domain)
        if v <= 0:
            raise KeyError(domain)
        return v

    def __len__(self) -> int:
        """At most this many (the free counts': `in_classes` only picks its shorter walk by it)."""
        return len(self.free)

    def items(self) -> Iterator[tuple[str, int]]:
        held = self.held
        for d, f in self.free.items():
            v = f - held.get(d, 0)
            if v > 0:
                yield d, v


def _pack_order(t: tuple[int, str, Node]) -> tuple[int, str]:
    return -t[0], t[1]


def _less_taken(nodes: list[tuple[int, str, Node]], taken: dict[str, int]) -> list[tuple[int, str, Node]]:
    """(free, name, node) by most free then name, less what the attempt took: the nodes it took
    from (a few) drop out or move down, every other node keeps its place."""
    out = [t for t in nodes if t[1] not in taken]
    for a, name, node in nodes:
        if name in taken and a > taken[name]:
            insort(out, (a - taken[name], name, node), key=_pack_order)
    return out


def place(topo: Topology, req: Request, flavor: str) -> Packing:
    """All of the request's groups and spares, or a failure with the reason; nothing is changed.

    Spares are placed after every active group, in group order, each in its group's domain (§4.3);
    while the groups are placed, room and funding for the spares of the groups already placed are
    set aside in their domains, so a later group never takes them.
    """
    need = req.total + req.spares_per_group * (len(req.sizes) if req.sizes else 1)
    if not req.fill and topo.flavor_free.get(flavor, 0) < need:
        return Packing([], CAPACITY)
    smallest = min(req.sizes) if req.sizes else 1
    if not req.fill and topo.max_domain_free(flavor) < smallest + req.spares_per_group:
        return Packing([], CAPACITY)  # no domain could hold even the smallest group with its spares
    cur = _Cursor(topo, req, flavor)
    if cur.total_free() < need:  # fast refusal: not enough fundable free GPUs anywhere
        return Packing([], CAPACITY)
    return _pack(cur, req)


def _pack(cur: _Cursor, req: Request) -> Packing:
    used: list[str] = list(req.prefer)
    groups: list[GroupPlan] = []
    sizes = list(req.sizes) if req.sizes is not None else None
    spares = req.spares_per_group
    left = req.total
    index = req.first_index
    while left > 0:
        want = min(sizes.pop(0), left) if sizes else left
        if req.assign is not None:  # the scope decided each group's domain
            chosen: tuple[str, int] | None = (req.assign[len(groups)], want)
        elif req.single_domain and not groups:  # the one domain must hold (and pay for) every group
            whole = req.total + spares * (len(req.sizes) if req.sizes else 1)
            home = _choose(cur, used, whole, False, 0)
            chosen = (home[0], want) if home is not None else None
        else:
            chosen = _choose(cur, used, want, req.sizes is None, spares)
        if chosen is None:
            return Packing([], GROUPING if req.single_domain and groups else CAPACITY)
        domain, want = chosen
        if req.single_domain and groups and domain != groups[0].domain:
            return Packing([], GROUPING)
        pieces = cur.take(domain, want, commit=True)
        if pieces is None:
            return Packing([], CAPACITY)
        group = GroupPlan(index, domain, pieces)
        groups.append(group)
        if spares and not cur.set_aside(domain, spares):
            return Packing([], CAPACITY)
        if domain not in used:
            used.append(domain)
        left -= want
        index += 1
    cur.give_back()
    for g in groups if spares else ():
        taken = cur.take(g.domain, spares, commit=True)
        if taken is None:
            return Packing([], CAPACITY)
        g.spares = taken
    return Packing(groups, None, cur.borrowed)


def _choose(
    cur: _Cursor, used: Sequence[str], want: int, chunked: bool, spares: int
) -> tuple[str, int] | None:
    """Where the next group goes, and its size (§4.3): a domain the run already uses; else the
    domain whose funding is nearest in cover order, then the one with most free GPUs its funding
    reaches, ties by key — each only if it holds the group with its spares and the funding reaching
    it pays for them. A chunk (no fixed group size) is as much of `want` as such a domain holds and
    pays for, at least one GPU."""
    need = (1 if chunked else want) + spares

    def size_in(d: str) -> int:
        free = cur.domain_free(d)
        if free < need:
            return 0
        size = min(want, free - spares) if chunked else want
        pieces = cur.take(d, size + spares, commit=False, partial=chunked)
        if pieces is None:
            return 0
        return min(size, sum(p.gpus for p in pieces) - spares) if chunked else size

    for d in used:
        if (size := size_in(d)) > 0:
            return d, size
    if max(cur.free.values(), default=0) < need:
        return None
    order = _by_free(cur.free, need) if cur.req.fill else _nearest(cur, need)
    for d in order:
        if d not in used and (size := size_in(d)) > 0:
            return d, size
    return None


def _by_free(free: dict[str, int], need: int) -> Iterator[str]:
    """Domains holding `need` by most free GPUs, ties by key (fill, which no envelope pays for).
    The first found by builtins, the rest sorted only if a second one is asked for."""
    top = max(free.values(), default=0)
    if top < need:
        return
    first = min(compress(free, map(top.__eq__, free.values())))
    yield first
    yield from (d for _, d in sorted((-v, d) for d, v in free.items() if v >= need and d != first))


def _nearest(cur: _Cursor, need: int) -> Iterator[str]:
    """Domains in pack-to-empty order: walk the sources in cover order, adding up what each can pay
    in every domain it reaches; a domain's rank is the source at which that first covers the group
    (with its spares; a chunk, from its first GPU). Domains of one rank come by most free GPUs,
    then key. Lazy: a group mostly lands in a domain of the first source, so the best of a rank is
    found in C (`_most_free`) and the rest of the rank sorted only if a second one is asked for."""
    free = cur.free
    borrow_left = None if cur.req.max_borrow is None else cur.req.max_borrow - cur.borrowed
    for classes, newly in covering(cur.topo, cur.req.sources, cur.room, need, borrow_left):
        best = _most_free(classes, newly, free, need)
        if best is not None:
            yield best
            rest = [(-v, d) for d, v in in_classes(classes, newly, free) if v >= need and d != best]
            yield from (d for _, d in sorted(rest))


def _most_free(classes: ReachClasses, newly: list[int], free: dict[str, int], need: int) -> str | None:
    """The domain of these classes with the most free GPUs, at least `need`, then the least key;
    from whichever is shorter, like `in_classes`: the domains with free GPUs (a full fleet has
    few), or the classes' domains, looked up and compared by builtins (a class spans a cluster)."""
    if len(free) <= sum(len(classes.domains[c]) for c in newly):
        chosen, class_of = set(newly), classes.class_of
        fits = [(-v, d) for d, v in free.items() if v >= need and class_of.get(d) in chosen]
        return min(fits)[1] if fits else None
    best: tuple[int, str] | None = None
    for c in newly:
        domains = classes.domains[c]
        counts = list(map(free.get, domains, repeat(0)))
        top = max(counts, default=0)
        if top >= need:
            found = (-top, min(compress(domains, map(top.__eq__, counts))))
            if best is None or found < best:
                best = found
    return best[1] if best is not None else None


def in_classes(
    classes: ReachClasses, newly: list[int], free: dict[str, int] | Unheld
) -> Iterator[tuple[str, int]]:
    """(domain, free GPUs) of the domains with any free in these classes: from whichever is shorter,
    the free counts or the classes' domains (either walk yields the same pairs)."""
    size = sum(len(classes.domains[c]) for c in newly)
    if len(free) <= size:
        chosen, class_of = set(newly), classes.class_of
        yield from ((d, v) for d, v in free.items() if class_of.get(d) in chosen)
    else:
        for c in newly:
            yield from ((d, free[d]) for d in classes.domains[c] if d in free)


def covering(
    topo: Topology, sources: Sequence[Source], rooms: Sequence[int], target: int, borrow: int | None
) -> Iterator[tuple[ReachClasses, list[int]]]:
    """Walk the sources in cover order, adding up what each pays (`rooms`; loans within `borrow`,
    None: no limit) in every domain it reaches: at each source, the domains (as `ReachClasses`,
    whose domains are reached by the same sources) where that first covers `target`. Counted per
    class, so a long list of sources over many domains costs sources × classes, not × domains."""
    reaches, at = reach_index(topo, sources)
    classes = topo.reach_classes(reaches)
    n = len(classes.domains)
    own, loans, done = [0] * n, [0] * n, [False] * n
    for i, src in enumerate(sources):
        room = rooms[i]
        if room <= 0:
            continue
        loan = src.category == LOAN
        if loan and borrow is not None and borrow <= 0:
            continue  # nothing it pays would count
        newly = []
        for c in classes.within[at[i]]:
            if done[c]:
                continue
            if loan:
                loans[c] += room
            else:
                own[c] += room
            if own[c] + (loans[c] if borrow is None else min(loans[c], borrow)) >= target:
                done[c] = True
                newly.append(c)
        if newly:
            yield classes, newly


def reach_index(topo: Topology, sources: Sequence[Source]) -> tuple[list[dict[str, bool]], list[int]]:
    """The distinct reaches of the sources, and each source's position among them (cached on a
    SourceList's DomainIndex: node sets never change within a pass)."""
    index: DomainIndex | None = getattr(sources, "by_domain", None)
    if index is not None and index.reaches is not None:
        return index.reaches
    reach_of = [src.reach or topo.coverage(src.nodes) for src in sources]  # `_reach`, inline
    numbered: dict[int, int] = {}  # id of a reach -> its position among the distinct ones
    at = [numbered.setdefault(r, len(numbered)) for r in map(id, reach_of)]
    reaches = list({id(r): r for r in reach_of}.values())  # in the order first seen, as numbered
    if index is not None:
        index.reaches = (reaches, at)
    return reaches, at


def domain_sources(topo: Topology, sources: Sequence[Source], domain: str) -> list[tuple[int, bool]]:
    """Positions of the sources that reach nodes of `domain`, in cover order, each with whether it
    reaches every node there. Cached on a SourceList (its node sets never change within a pass)."""
    index: DomainIndex | None = getattr(sources, "by_domain", None)
    if index is not None:
        return index.positions(topo, sources, domain)
    return [
        (i, whole) for i, src in enumerate(sources) if (whole := _reach(topo, src).get(domain)) is not None
    ]


class Indexed(list[Source]):
    """Sources with the `DomainIndex` of their node sets, which whoever builds the same list again
    keeps (`cover.with_windows`), and their rooms in order (`rooms`)."""

    def __init__(self, items: Iterable[Source], by_domain: DomainIndex, rooms: list[int]) -> None:
        super().__init__(items)
        self.by_domain = by_domain
        self.rooms = rooms


class DomainIndex:
    """`domain_sources` of one candidate list, per domain, worked out over its distinct node sets
    (a long list shares a few selectors) instead of over every source."""

    def __init__(self) -> None:
        self.hits: dict[str, list[tuple[int, bool]]] = {}
        self.reaches: tuple[list[dict[str, bool]], list[int]] | None = None  # see reach_index
        self.every: tuple[frozenset[str], ...] | None = None  # see every_nodes
        self._by_nodes: list[tuple[dict[str, bool], list[int]]] | None = None  # (reach, positions)

    def positions(self, topo: Topology, sources: Sequence[Source], domain: str) -> list[tuple[int, bool]]:
        hit = self.hits.get(domain)
        if hit is None:  # each node set's positions ascend: paired and merged by builtins
            parts = [
                zip(at, repeat(whole))
                for reach, at in self._node_sets(topo, sources)
                if (whole := reach.get(domain)) is not None
            ]
            hit = self.hits[domain] = (
                list(parts[0]) if len(parts) == 1 else sorted(chain.from_iterable(parts))
            )
        return hit

    def _node_sets(
        self, topo: Topology, sources: Sequence[Source]
    ) -> list[tuple[dict[str, bool], list[int]]]:
        if self._by_nodes is None:
            groups: dict[frozenset[str], tuple[dict[str, bool], list[int]]] = {}
            for i, src in enumerate(sources):
                group = groups.get(src.nodes)
                if group is None:
                    group = groups[src.nodes] = (_reach(topo, src), [])
                group[1].append(i)
            self._by_nodes = list(groups.values())
        return self._by_nodes


def _reach(topo: Topology, src: Source) -> dict[str, bool]:
    return src.reach or topo.coverage(src.nodes)


def rooms(sources: Sequence[Source]) -> list[int]:
    """What each source can still fund, in cover order: a copy the caller may change (a SourceList
    keeps the list current as its rooms move, so this is one copy, not a pass over the sources)."""
    kept: list[int] | None = getattr(sources, "rooms", None)
    return list(kept) if kept is not None else [s.room for s in sources]


def funded_nodes(sources: Sequence[Source]) -> tuple[frozenset[str], ...]:
    """The node sets of the sources that can still pay (cached on a SourceList)."""
    cached = getattr(sources, "nodesets", None)
    if isinstance(cached, tuple):
        return cached
    return tuple(s.nodes for s in sources if s.room > 0)


def every_nodes(sources: Sequence[Source]) -> tuple[frozenset[str], ...]:
    """The node sets of every source, with room or not (cached on a SourceList's DomainIndex)."""
    index: DomainIndex | None = getattr(sources, "by_domain", None)
    if index is not None and index.every is not None:
        return index.every
    out = tuple(s.nodes for s in sources)
    if index is not None:
        index.every = out
    return out


def group_sizes(total: int, group: int | None) -> list[int] | None:
    if group is None:
        return None
    full, rest = divmod(total, group)
    return [group] * full + ([rest] if rest else [])
