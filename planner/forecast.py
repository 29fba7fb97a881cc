"""Forecast: where a waiting run would go (its scope), how short it is there, and what it holds.

Draws intended slices by the pack rules over capacity (§4.5 "scope"), the deficit in them, whether
any fleet the run's funding reaches could hold it at all, and the holds of funded reservations.
When it can start and whom it may cut are `outlook`'s; it cuts and starts nothing itself.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from planner.accounting import LOAN
from planner.pack import Source, Unheld, covering, domain_sources, every_nodes, funded_nodes, in_classes
from planner.topology import Members, ReachClasses, Topology
from planner.world import Payer


@dataclass(slots=True)
class Scope:
    """Where a waiting run's groups would go, and what is missing there now."""

    claims: dict[str, int] = field(default_factory=dict)  # domain -> GPUs the run would claim there
    groups: list[tuple[str, int]] = field(default_factory=list)  # (domain, GPUs) per group, in order
    short: dict[str, int] = field(default_factory=dict)  # domain -> GPUs missing there now
    nodes: list[str] = field(default_factory=list)
    unplaceable: int = 0  # GPUs (groups with spares) no domain its funding reaches can hold
    unpaid: bool = False  # some group goes where capacity is but its held funding does not reach
    unpaid_gpus: int = 0  # GPUs of such groups that no funding reaching their domain pays
    view: Members | None = None  # the member nodes the scope was drawn from
    payer: Source | None = None  # the first source paying for the scope
    purse: tuple[Sequence[int], list[int]] = ((), [])  # each source's room, and what it has left

    @property
    def paid(self) -> list[int]:
        """GPUs each source pays toward the scope, in cover order (worked out when asked for)."""
        rooms, left = self.purse
        return [max(0, r) - rest for r, rest in zip(rooms, left, strict=True)]

    @property
    def deficit(self) -> int:
        return sum(self.short.values()) + self.unplaceable


def scope(
    topo: Topology,
    sources: Sequence[Source],
    rooms: Sequence[int],
    sizes: list[int] | None,
    total: int,
    spares: int,
    held: dict[str, int],
    single: bool,
    keep: tuple[str, ...] = (),
    borrow: int | None = None,
) -> Scope:
    """The pack rules over all capacity the sources can pay for (§4.5 "scope").

    `rooms`: what each source pays toward this run (the funding a reservation holds, or what a
    window will fund). Each group goes to a domain already claimed, else the domain whose funding
    is nearest in cover order (§4.3), then — to keep an intended slice where it was — the domains the
    reservation named before (`keep`, in the order it claimed them), then most available GPUs (free
    less `held`), most capacity, key. Drawn again from its own domains, a scope is the same. A group its funding cannot pay for anywhere it fits goes where capacity alone allows
    (`unpaid`); one that fits nowhere is `unplaceable`. `sizes` None: chunks formed while claiming.
    """
    if min(rooms, default=0) > 0:  # every source pays something
        view = topo.member_view(every_nodes(sources))
    elif rooms == getattr(sources, "rooms", None):  # a SourceList's own rooms: its funded node sets
        view = topo.member_view(funded_nodes(sources))
    else:
        view = topo.member_view(tuple(s.nodes for s, r in zip(sources, rooms, strict=True) if r > 0))
    if not view.cap:
        view = topo.member_view(every_nodes(sources))
    cap = view.cap
    avail = Unheld(topo.member_free(view), held)
    purse = _Purse(topo, sources, rooms, borrow)
    out = Scope(view=view)
    claimed: dict[str, int] = {}

    def room_in(d: str) -> int:
        return cap[d] - claimed.get(d, 0)

    def choose(want: int, chunk: bool) -> str | None:
        """The domain for a group of `want` GPUs (a chunk: at least one), with its spares."""
        need = (1 if chunk else want) + spares

        for d in claimed:
            if room_in(d) >= need and purse.pays(d, need):
                return d
        if single and claimed:
            return None

        def eligible(d: str) -> bool:
            return d in cap and d not in claimed and room_in(d) >= need

        near = purse.nearest(need, eligible, keep, avail, view)  # a chunk ranks by its first GPU
        if near is not None:
            return near
        fits = _first(eligible, keep, avail.items(), cap, view.by_cap)  # by the scope's order alone
        if fits is not None:
            out.unpaid = True
        return fits

    left = total
    queue = list(sizes) if sizes is not None else None
    whole = total + spares * (len(sizes) if sizes is not None else 1)
    while left > 0:
        want = min(queue.pop(0), left) if queue else left
        if single and not claimed:  # the one domain must hold every group
            d = choose(whole - spares, False)
        else:
            d = choose(want, sizes is None)
        if d is None:
            out.unplaceable += left + spares * (len(queue) + 1 if queue is not None else 1)
            break
        if sizes is None:  # a chunk: as much as the domain holds and its funding pays
            want = min(want, room_in(d) - spares, max(1, purse.payable(d) - spares))
        claimed[d] = claimed.get(d, 0) + want + spares
        out.groups.append((d, want))
        payer, paid = purse.spend(d, want + spares)
        out.unpaid_gpus += want + spares - paid
        if out.payer is None:
            out.payer = payer
        left -= want
    out.claims = claimed
    out.purse = (rooms, purse.left)
    for d, claim in claimed.items():
        short = claim - avail.get(d, 0)
        if short > 0:
            out.short[d] = short
    out.nodes = slice_nodes(topo, view, claimed)
    return out


class _Purse:
    """What each source still pays toward the scope, spent in cover order per domain it reaches."""

    def __init__(
        self, topo: Topology, sources: Sequence[Source], rooms: Sequence[int], borrow: int | None
    ) -> None:
        self.topo = topo
        self.sources = sources
        self.left = list(rooms) if min(rooms, default=0) >= 0 else [max(0, r) for r in rooms]
        self.borrow = borrow  # GPUs left to borrow from sponsors (None: no limit)
        self._reach: dict[str, list[int]] = {}

    def reach(self, domain: str) -> list[int]:
        """Positions of the sources reaching `domain` that have anything left, in cover order: one
        with nothing left pays nothing (rooms only go down), so dropping it changes no sum. `spend`
        drops those it empties from the front."""
        hit = self._reach.get(domain)
        if hit is None:
            left = self.left
            hit = self._reach[domain] = [
                i for i, _ in domain_sources(self.topo, self.sources, domain) if left[i]
            ]
        return hit

    def _share(self, i: int, loans: int) -> int:
        n = self.left[i]
        if self.sources[i].category == LOAN and self.borrow is not None:
            n = min(n, max(0, self.borrow - loans))
        return n

    def pays(self, domain: str, gpus: int) -> bool:
        paid = loans = 0
        for i in self.reach(domain):
            n = self._share(i, loans)
            if self.sources[i].category == LOAN:
                loans += n
            paid += n
            if paid >= gpus:
                return True
        return False

    def payable(self, domain: str) -> int:
        paid = loans = 0
        for i in self.reach(domain):
            n = self._share(i, loans)
            if self.sources[i].category == LOAN:
                loans += n
            paid += n
        return paid

    def spend(self, domain: str, gpus: int) -> tuple[Source | None, int]:
        """Pay up to `gpus` in the domain in cover order: the first source paying, and what was paid."""
        first = None
        asked = gpus
        reach = self.reach(domain)
        for i in reach:
            if gpus <= 0:
                break
            n = min(self._share(i, 0), gpus)
            if n <= 0:
                continue
            self.left[i] -= n
            gpus -= n
            if self.sources[i].category == LOAN and self.borrow is not None:
                self.borrow -= n
            if first is None:
                first = self.sources[i]
        emptied = 0
        while emptied < len(reach) and not self.left[reach[emptied]]:
            emptied += 1
        del reach[:emptied]
        return first, asked - gpus

    def nearest(
        self,
        target: int,
        eligible: Callable[[str], bool],
        keep: Sequence[str],
        avail: Unheld,
        view: Members,
    ) -> str | None:
        """The eligible domain of the best rank (the source at which what the sources pay there first
        covers `target` GPUs), then by the scope's order: a domain it keeps (`keep`, in order), most
        available GPUs (`avail`: positive counts only), most capacity (`view.by_cap`'s order), key."""
        for classes, newly in covering(self.topo, self.sources, self.left, target, self.borrow):
            d = _best_of(classes, newly, eligible, keep, avail, view)
            if d is not None:
                return d
        return None


def _best_of(
    classes: ReachClasses,
    newly: list[int],
    eligible: Callable[[str], bool],
    keep: Sequence[str],
    avail: Unheld,
    view: Members,
) -> str | None:
    """The first eligible domain of these classes in the scope's order (`_Purse.nearest`); by
    capacity, only the classes' own domains are walked (`Members.by_cap_within`)."""
    chosen, class_of, cap = set(newly), classes.class_of, view.cap

    def ok(d: str) -> bool:
        return class_of.get(d) in chosen and eligible(d)

    if len(newly) == 1:
        by_cap: Iterable[str] = view.by_cap_within(classes, newly[0])
    else:
        by_cap = heapq.merge(*(view.by_cap_within(classes, c) for c in newly), key=lambda d: (-cap[d], d))
    return _first(ok, keep, in_classes(classes, newly, avail), cap, by_cap)


def _first(
    ok: Callable[[str], bool],
    keep: Sequence[str],
    available: Iterable[tuple[str, int]],
    cap: dict[str, int],
    by_cap: Iterable[str],
) -> str | None:
    """The first domain `ok` takes in the scope's order: a domain it keeps (`keep`, in order), most
    available GPUs (`available`: every domain with a positive count, or more), most capacity
    (`by_cap`'s order), key. The order's least without sorting every domain: a kept one, else one
    with GPUs available, else the first by capacity (every one left has none available)."""
    for d in keep:
        if ok(d):
            return d
    kept = set(keep)
    best: tuple[int, int, str] | None = None
    for d, v in available:
        if d not in kept and ok(d) and (best is None or (-v, -cap[d], d) < best):
            best = (-v, -cap[d], d)
    if best is not None:
        return best[2]
    for d in by_cap:  # every one left has no GPU available
        if ok(d):
            return d
    return None


def fits_empty(largest: list[int], sizes: list[int] | None, total: int, spares: int, single: bool) -> bool:
    """Whether the run's groups (with spares) fit on domains of these capacities (largest first)
    empty, largest group first (§4.5: a run that could not be placed even on an empty fleet of the
    domains its funding reaches)."""
    if not largest:
        return False
    n = len(sizes) if sizes is not None else 1
    if total + spares * n <= largest[0]:
        return True  # everything fits in the largest domain alone
    if single:
        return False
    if sizes is None:  # chunks: any split, one spare set per chunk
        left = total
        for r in largest:
            if left <= 0:
                break
            left -= max(0, r - spares)
        return left <= 0
    room = list(largest)
    for size in sorted(sizes, reverse=True):
        i = next((j for j, r in enumerate(room) if r >= size + spares), None)
        if i is None:
            return False
        room[i] -= size + spares
    return True


def grouping_blocks(
    largest: list[int], sizes: list[int] | None, total: int, spares: int, single: bool
) -> bool:
    """Some group (or, kept in one domain, the whole run) is larger than every domain, even empty."""
    biggest = largest[0] if largest else 0
    if single:
        n = len(sizes) if sizes is not None else 1
        return total + spares * n > biggest
    return sizes is not None and max(sizes, default=0) + spares > biggest


def slice_nodes(topo: Topology, view: Members, claims: dict[str, int]) -> list[str]:
    """The nodes a scope would take: per claimed domain, usable members by most free, then name."""
    nodes: list[str] = []
    for d, claim in claims.items():
        left = claim
        if d in view.full:
            members = topo.by_free(d)
        else:
            members = sorted((n for n in view.by_domain[d] if n.usable), key=lambda n: (-n.free, n.name))
        for node in members:
            if left <= 0:
                break
            nodes.append(node.name)
            left -= node.gpus
    return nodes


def hold(held: dict[str, int], sc: Scope) -> None:
    """A fully funded reservation keeps the free GPUs of its scope from runs behind it in line."""
    for d, claim in sc.claims.items():
        held[d] = held.get(d, 0) + claim - sc.short.get(d, 0)


def paying(sc: Scope) -> Payer | None:
    src = sc.payer
    return Payer(src.env.owner, src.env.budget, src.env.name) if src is not None else None
