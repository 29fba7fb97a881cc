"""Cover: who may pay for a run — own envelopes, then family, then sponsors — and why not.

Produces funding sources in cover order and, when they fall short, the exact reason and remedy.
Places nothing (that is `pack`) and never counts physical capacity.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain, compress, repeat

from planner.accounting import FAMILY, LOAN, OWN, Book, Env
from planner.pack import DomainIndex, Indexed, Source, every_nodes, positive, rooms
from planner.reasons import FUNDING_REMEDY, Remedy, Wait, wait_text
from planner.topology import Members, Topology
from schemas.run import Run


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why a run cannot be funded now (§4.5): the binding kind, the GPUs short, every remedy that
    applies (the binding one first), and the window start that funds its full width, if one does."""

    why: Wait
    deficit: int
    remedies: tuple[Remedy, ...]
    window: int | None = None
    borrow_limit: int = 0

    @property
    def reason(self) -> str:
        return wait_text(self.why, self.deficit, window=self.window, borrow_limit=self.borrow_limit)


def borrow_cap(run: Run) -> int | None:
    """The most a run may borrow from sponsors per admission or growth step (None: no limit)."""
    return run.spec.funding.maxBorrowGPUs if run.spec.funding.allowBorrow else 0


def candidates(book: Book, run: Run) -> list[tuple[Env, str]]:
    """Every envelope that could ever pay for this run, in cover order, with its class."""
    f = run.spec.funding
    key = (run.spec.owner, run.spec.resources.gpuType, f.allowBorrow, tuple(f.sponsors))
    hit = book.cover_cache.get(key)
    if hit is None:
        hit = book.cover_cache[key] = _candidates(book, run)
    return hit


def _candidates(book: Book, run: Run) -> list[tuple[Env, str]]:
    """The owner's own and family list itself when no sponsor adds a loan to it, so every funding
    shape of the owner that borrows nothing shares one list (and `sources` one set of rooms)."""
    owner = run.spec.owner
    flavor = run.spec.resources.gpuType
    ours = _own_and_family(book, owner, flavor)
    loans: list[tuple[Env, str]] = []
    if run.spec.funding.allowBorrow:
        seen = {env.key for env, _ in ours}
        for sponsor in run.spec.funding.sponsors:
            for env in book.by_owner.get(sponsor, []):
                if env.flavor == flavor and env.key not in seen and env.lends_to(owner):
                    seen.add(env.key)
                    loans.append((env, LOAN))
    return [*ours, *loans] if loans else ours


def _own_and_family(book: Book, owner: str, flavor: str) -> list[tuple[Env, str]]:
    """The owner's envelopes, then family's shareable ones nearest first (shared by every funding shape)."""
    key = (owner, flavor)
    hit = book.family_cache.get(key)
    if hit is not None:
        return hit
    out = [(env, OWN) for env in book.by_owner.get(owner, []) if env.flavor == flavor]
    shared = _shared(book, flavor)
    relatives = book.relatives(owner)  # the whole DAG: joined by builtins, not a loop per relative
    if owner in relatives:
        relatives = [rel for rel in relatives if rel != owner]
    out += chain.from_iterable(map(shared.get, relatives, repeat(())))
    book.family_cache[key] = out
    return out


def _shared(book: Book, flavor: str) -> dict[str, list[tuple[Env, str]]]:
    """Owner -> its envelopes of this flavor that family may share, as family candidates."""
    hit = book.shared_cache.get(flavor)
    if hit is None:
        hit = book.shared_cache[flavor] = {}
        for owner, envs in book.by_owner.items():
            mine = [(env, FAMILY) for env in envs if env.flavor == flavor and env.sharing != "none"]
            if mine:
                hit[owner] = mine
    return hit


def sources(book: Book, topo: Topology, run: Run, lookahead_hours: float) -> SourceList:
    """Funding sources in cover order with their room now (possibly none) and the nodes they admit.

    Cached per candidate list (funding shapes with the same candidates share it); between passes
    of the line only envelopes whose claims changed since (`book.changes`) are recomputed, so a
    long line costs O(changes), not O(runs × envelopes).
    """
    cands = candidates(book, run)
    key = (id(cands), lookahead_hours)
    hit: _Cached | None = book.sources_cache.get(key)
    if hit is None or hit.epoch != book.epoch:
        if hit is None:
            shape = (
                DomainIndex(),
                {env.key: i for i, (env, _) in enumerate(cands)},
                [i for i, (env, _) in enumerate(cands) if env.caps],
            )
        else:  # node sets never change in a pass: the last list's per-domain index and shape hold
            shape = (hit.out.by_domain, hit.index, hit.capped)
        out = SourceList(_sources(book, topo, cands, lookahead_hours), None, shape[0])
        book.sources_cache[key] = _Cached(book.epoch, len(book.changes), out, shape[1], shape[2], cands)
        return out
    if hit.seen == len(book.changes) and not hit.capped:
        return hit.out
    if len(book.changes) - hit.seen > len(hit.index):  # many changes since: look at every source
        dirty = set(range(len(hit.out)))
    else:
        index = hit.index
        dirty = {index[k] for k in book.changed_since(hit.seen) if k in index} | set(hit.capped)
    hit.seen = len(book.changes)
    rooms = _moved(book, hit.out, dirty, lookahead_hours)
    if not rooms:
        return hit.out
    items = list(hit.out)
    kept = list(hit.out.rooms)
    own, loans, crossed, zeroed = hit.out.own, hit.out.loans, False, False
    paid_own, paid_loans = hit.out.paying
    for i, room in rooms.items():
        src = items[i]
        if src.category == LOAN:
            loans += room - src.room
            paid_loans += max(0, room) - max(0, src.room)
        else:
            own += room - src.room
            paid_own += max(0, room) - max(0, src.room)
        crossed = crossed or (room > 0) != (src.room > 0)
        zeroed = zeroed or (room == 0) != (src.room == 0)
        items[i] = Source(src.env, src.category, room, src.nodes, src.reach)
        kept[i] = room
    hit.out = SourceList(
        items,
        (own, loans, None if crossed else hit.out.nodesets),
        hit.out.by_domain,
        kept,
        (paid_own, paid_loans),
        None if zeroed else hit.out._nonzero,
    )
    return hit.out


def _moved(book: Book, srcs: SourceList, dirty: Iterable[int], lookahead_hours: float) -> dict[int, int]:
    """Position -> room now, of the `dirty` positions whose room moved. One loop with the book's
    room memo read inline: a long list is refreshed by many envelopes changed since it was read,
    most of them with their room already worked out for another list."""
    was = srcs.rooms
    memo, touched, epoch = book.room_memo()
    moved: dict[int, int] = {}
    for i in dirty:
        src = srcs[i]
        if not src.nodes:  # no nodes: no room, ever
            continue
        env, category = src.env, src.category
        hit = None if env.caps else memo.get((env.key, category, lookahead_hours))
        if hit is not None and hit[0] == epoch and hit[1] == touched[env.key]:
            room = hit[2]
        else:
            room = book.room(env, category, lookahead_hours)
        if room != was[i]:
            moved[i] = room
    return moved


def _sources(
    book: Book, topo: Topology, cands: list[tuple[Env, str]], lookahead_hours: float
) -> list[Source]:
    """`_source` of every candidate, its remembered Sources looked up inline (most are remembered)."""
    objs, epoch, touched = book.source_objs, book.epoch, book.touched
    out: list[Source] = []
    for env, cat in cands:
        hit = objs.get((env.key, cat, lookahead_hours))
        if hit is not None and hit[0] == epoch and hit[1] == touched[env.key] and not env.caps:
            out.append(hit[2])
        else:
            out.append(_source(book, topo, env, cat, lookahead_hours))
    return out


def _source(book: Book, topo: Topology, env: Env, category: str, lookahead_hours: float) -> Source:
    """An envelope whose selector matches no node of its flavor can pay for nothing: no room.

    One Source per (envelope, class) is shared by every funding shape until the envelope's claims
    change (under an aggregate cap its room also moves with its siblings': never shared)."""
    ck = (env.key, category, lookahead_hours)
    mark = book.touched[env.key]
    hit = book.source_objs.get(ck)
    if hit is not None and hit[0] == book.epoch and hit[1] == mark and not env.caps:
        src: Source = hit[2]
        return src
    src = _new_source(book, topo, env, category, lookahead_hours)
    book.source_objs[ck] = (book.epoch, mark, src)
    return src


def _new_source(book: Book, topo: Topology, env: Env, category: str, lookahead_hours: float) -> Source:
    nodes = _env_nodes(topo, env)
    room = book.room(env, category, lookahead_hours) if nodes else 0
    return Source(env, category, room, nodes, topo.coverage(nodes))


class SourceList(list[Source]):
    """Sources with their fundable totals counted once (the line asks for them thousands of times)."""

    own: int
    loans: int
    nodesets: tuple[frozenset[str], ...]  # node sets of the sources with room
    by_domain: DomainIndex  # pack's per-domain source positions (node sets only)
    rooms: list[int]  # each source's room, in order (pack copies it for every attempt)
    paying: tuple[int, int]  # what the sources with room pay: own and family, loans

    def __init__(
        self,
        items: Iterable[Source],
        totals: tuple[int, int, tuple[frozenset[str], ...] | None] | None = None,
        by_domain: DomainIndex | None = None,
        rooms: list[int] | None = None,
        paying: tuple[int, int] | None = None,
        nonzero: list[int] | None = None,
    ) -> None:
        super().__init__(items)
        self._nonzero = nonzero
        self.by_domain = by_domain if by_domain is not None else DomainIndex()
        self.rooms = rooms if rooms is not None else [s.room for s in self]
        if paying is None:
            paying = (
                sum(r for s, r in zip(self, self.rooms, strict=True) if r > 0 and s.category != LOAN),
                sum(r for s, r in zip(self, self.rooms, strict=True) if r > 0 and s.category == LOAN),
            )
        self.paying = paying
        if totals is None:
            own = loans = 0
            with_room = []
            for s in self:
                if s.room > 0:
                    with_room.append(s.nodes)
                    if s.category == LOAN:
                        loans += s.room
                    else:
                        own += s.room
                elif s.room < 0:  # an overdrawn envelope counts against its class
                    if s.category == LOAN:
                        loans += s.room
                    else:
                        own += s.room
            self.own, self.loans, self.nodesets = own, loans, tuple(with_room)
            return
        self.own, self.loans, nodesets = totals
        if nodesets is None:  # picked out of every source's node set by room, in C: the list is long
            nodesets = tuple(compress(every_nodes(self), positive(self.rooms)))
        self.nodesets = nodesets

    @property
    def nonzero(self) -> list[int]:
        """Positions of the sources whose room is not zero, in order: the only ones that fund or,
        overdrawn, count (most of a long family list has nothing left; worked out once per list)."""
        if self._nonzero is None:
            self._nonzero = list(compress(range(len(self.rooms)), self.rooms))
        return self._nonzero


@dataclass(slots=True)
class _Cached:
    epoch: int
    seen: int  # how much of book.changes the rooms reflect
    out: SourceList
    index: dict[str, int]  # envelope key -> position in `out`
    capped: list[int]  # envelopes under aggregate caps: their room depends on siblings' claims
    cands: list[tuple[Env, str]]  # the candidates these are the sources of (keeps their id unique)


def reach_caps(book: Book, topo: Topology, run: Run) -> Reach:
    """GPUs per domain on the nodes any envelope that could pay for this run selects, failed nodes
    left out (a cordoned or not-ready node comes back): the fleet its funding reaches, however full
    (remembered per candidate list for the pass)."""
    cands = candidates(book, run)
    hit = book.caps_cache.get(id(cands))
    if hit is None or hit[0] is not cands:
        sets = [_env_nodes(topo, env) for env, _ in cands]
        view = topo.member_view(tuple(sets))  # capacity that exists: cordoned nodes come back
        hit = book.caps_cache[id(cands)] = (cands, _view_reach(book, topo, view))
    reach: Reach = hit[1]
    return reach


def _view_reach(book: Book, topo: Topology, view: Members) -> Reach:
    """The GPUs present per domain of a member view (remembered per view: many candidate lists
    select the same nodes)."""
    hit = book.view_caps_cache.get(id(view))
    if hit is None or hit[0] is not view:
        caps = {
            d: total
            for d, ns in view.by_domain.items()
            if (
                total := topo.domain_present[d] if d in view.full else sum(n.gpus for n in ns if not n.fenced)
            )
        }
        hit = book.view_caps_cache[id(view)] = (view, Reach(caps, sorted(caps.values(), reverse=True)))
    reach: Reach = hit[1]
    return reach


@dataclass(frozen=True, slots=True)
class Reach:
    """The domains a run's funding reaches, with their GPUs (and those, largest first)."""

    caps: dict[str, int]
    largest: list[int]


def fundable(srcs: list[Source], max_borrow: int | None) -> int:
    if isinstance(srcs, SourceList):
        own, loans = srcs.own, srcs.loans
    else:
        own = sum(s.room for s in srcs if s.category != LOAN)
        loans = sum(s.room for s in srcs if s.category == LOAN)
    if max_borrow is not None:
        loans = min(loans, max_borrow)
    return own + loans


def shortfall(
    book: Book, topo: Topology, run: Run, need: int, srcs: SourceList, lookahead_hours: float
) -> Shortfall | None:
    """None when `need` GPUs are fundable now; otherwise what binds (§4.5): a sponsor's refusal,
    then the borrow limit, then a window that funds the full width when it opens, then headroom."""
    max_borrow = borrow_cap(run)
    have = fundable(srcs, max_borrow)
    if have >= need:
        return None
    unlimited = fundable(srcs, None)
    short_anyway = unlimited < need  # even without the borrow limit
    borrow_binds = max_borrow is not None and unlimited > have
    refused = (
        short_anyway
        and run.spec.funding.allowBorrow
        and any(
            not any(
                env.lends_to(run.spec.owner) and env.flavor == run.spec.resources.gpuType
                for env in book.by_owner.get(s, [])
            )
            for s in run.spec.funding.sponsors
        )
    )
    window = _funding_window(book, topo, run, srcs, need, max_borrow, lookahead_hours)
    applies = {
        Wait.BORROW_LIMIT: borrow_binds,
        Wait.SPONSOR_REFUSED: refused,
        Wait.HEADROOM: short_anyway,
        Wait.WINDOW: window is not None,
    }
    if refused:
        why = Wait.SPONSOR_REFUSED
    elif borrow_binds:
        why = Wait.BORROW_LIMIT
    elif window is not None:
        why = Wait.WINDOW
    else:
        why = Wait.HEADROOM
    rest = tuple(FUNDING_REMEDY[k] for k, on in applies.items() if on and k is not why)
    return Shortfall(why, need - have, (FUNDING_REMEDY[why], *rest), window, max_borrow or 0)


def _funding_window(
    book: Book,
    topo: Topology,
    run: Run,
    srcs: SourceList,
    need: int,
    max_borrow: int | None,
    lookahead_hours: float,
) -> int | None:
    """The first future window opening at which the run is fully funded, counting what that instant
    really funds: envelopes open now that are still open then (their room now), plus every window
    opened by then that can pay for some GPU (its selector matches a node of its flavor), with its
    whole concurrency within its GPU-hour cap and lending caps."""
    cands = candidates(book, run)
    hit = book.window_cache.get(id(cands))
    if hit is None or hit[0] is not cands:
        later = [
            env
            for env, _ in cands
            if env.start is not None and env.start > book.now and _env_nodes(topo, env)
        ]
        starts = sorted({env.start for env in later if env.start is not None})
        hit = book.window_cache[id(cands)] = (cands, (starts, sum(env.concurrency for env in later)))
    starts, opening = hit[1]
    if not starts or fundable(srcs, None) + opening < need:
        return None  # not even every window opened at once would fund it
    assert len(srcs) == len(cands)  # the run's sources: one per candidate, in its order
    now_own, now_loans = srcs.paying
    for start in starts:
        own, loans, left_out = _at_window(book, topo, cands, start, lookahead_hours)
        own += now_own
        loans += now_loans
        for i in left_out:  # open now but not then, or not open now: their room now does not count
            room = srcs[i].room
            if room > 0:
                if cands[i][1] == LOAN:
                    loans -= room
                else:
                    own -= room
        if own + (loans if max_borrow is None else min(loans, max_borrow)) >= need:
            return start
    return None


def _at_window(
    book: Book, topo: Topology, cands: list[tuple[Env, str]], start: int, lookahead_hours: float
) -> tuple[int, int, list[int]]:
    """What the windows of the candidates not open now fund once open at `start` (own and family,
    loans: each its whole concurrency within its GPU-hour cap and lending cap, if its selector
    matches a node of its flavor), and the positions of the candidates whose room now does not
    count then (closed by then, or not open now). Remembered per candidate list for the pass."""
    key = (id(cands), start, lookahead_hours)
    hit = book.window_parts_cache.get(key)
    if hit is not None and hit[0] is cands:
        parts: tuple[int, int, list[int]] = hit[1]
        return parts
    own = loans = 0
    left_out: list[int] = []
    for i, (env, cat) in enumerate(cands):
        opened, open_now = env.open_at(start), env.open_at(book.now)
        if not (opened and open_now):
            left_out.append(i)
        if not opened or open_now or not _env_nodes(topo, env):
            continue  # a window whose selector matches no node funds nothing when it opens
        room = env.concurrency
        if env.max_hours is not None and lookahead_hours > 0:
            room = min(room, int(env.max_hours // lookahead_hours))
        if cat == LOAN and env.lend_max is not None:
            room = min(room, env.lend_max)
        if cat == LOAN:
            loans += room
        else:
            own += room
    book.window_parts_cache[key] = (cands, (own, loans, left_out))
    return own, loans, left_out


def _env_nodes(topo: Topology, env: Env) -> frozenset[str]:
    """The nodes an envelope can pay for (remembered per envelope for the pass)."""
    nodes = topo.env_nodes.get(env.key)
    if nodes is None:
        nodes = topo.env_nodes[env.key] = topo.matching(env.flavor, env.selector)
    return nodes


def with_windows(book: Book, topo: Topology, run: Run, srcs: list[Source], until: int) -> list[Source]:
    """The run's sources, then its own and family envelopes whose window opens after now and by
    `until`, with their whole concurrency: what will pay once the window it waits for is open.

    The window sources and the per-domain index of the whole list are remembered per candidate
    list and window for the pass: they depend on node sets and windows only, fixed by the
    candidates (`srcs` are the run's `sources`, one per candidate)."""
    cands = candidates(book, run)
    hit = book.window_sources_cache.get((id(cands), until))
    if hit is None or hit[0] is not cands:
        found: list[Source] = []
        for env, cat in cands:
            start = env.start
            if start is None or not book.now < start <= until or cat == LOAN:
                continue
            nodes = _env_nodes(topo, env)
            if nodes:
                found.append(Source(env, cat, env.concurrency, nodes, topo.coverage(nodes)))
        hit = book.window_sources_cache[(id(cands), until)] = (cands, found, DomainIndex())
    found, index = hit[1], hit[2]
    return Indexed([*srcs, *found], index, [*rooms(srcs), *(s.room for s in found)])
