"""Accounting: envelopes, the family graph, and funding classes re-derived from leases every pass.

Each envelope funds, up to its concurrency: sponsor loans already made, then its owner's claims,
then family claims, each group in ranking order. Claims past that are unfunded: still running,
charged to nobody. Decides no placement and ends nothing; it only classifies and meters.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from planner.reasons import Role
from planner.world import Lease
from schemas.budget import Budget

GroupKey = tuple[str, int]  # (run "ns/name", group index)
OWN, FAMILY, LOAN = "own", "family", "loan"
# a category as users read it: the Lease label `rq.davidlangworthy.io/funding`, the views' words
SOURCE_WORDS = {OWN: "own", FAMILY: "family", LOAN: "sponsor"}


@dataclass(frozen=True, slots=True)
class Env:
    key: str  # "budget/envelope"
    budget: str
    name: str
    owner: str
    flavor: str
    selector: dict[str, str]
    concurrency: int
    max_hours: float | None
    start: int | None
    end: int | None
    sharing: str
    lend_allow: bool
    lend_to: tuple[str, ...]
    lend_max: int | None
    lend_hours: float | None
    caps: tuple[tuple[str, int, tuple[str, ...]], ...]  # (cap name, maxConcurrency, envelope keys)

    def open_at(self, now: int) -> bool:
        return (self.start is None or self.start <= now) and (self.end is None or now < self.end)

    def lends_to(self, owner: str) -> bool:
        return self.lend_allow and any(admits(p, owner) for p in self.lend_to)


def admits(pattern: str, owner: str) -> bool:
    """Lending ACL: exact owner, `prefix*`, or `*`."""
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return owner.startswith(pattern[:-1])
    return pattern == owner


def envelopes(budgets: Iterable[Budget]) -> dict[str, Env]:
    out: dict[str, Env] = {}
    for b in sorted(budgets, key=lambda b: b.metadata.name):
        caps = tuple(
            (c.name, c.maxConcurrency, tuple(f"{b.metadata.name}/{e}" for e in c.envelopes))
            for c in b.spec.aggregateCaps
        )
        for e in b.spec.envelopes:
            key = f"{b.metadata.name}/{e.name}"
            lend = e.lending
            out[key] = Env(
                key, b.metadata.name, e.name, b.spec.owner, e.flavor, dict(e.selector), e.concurrency, e.maxGPUHours,
                e.start, e.end, e.sharing, bool(lend and lend.allow), tuple(lend.to) if lend else (),
                lend.maxConcurrency if lend else None, lend.maxGPUHours if lend else None,
                tuple(c for c in caps if key in c[2]),
            )  # fmt: skip
    return out


def family_order(budgets: Iterable[Budget]) -> Callable[[str], list[str]]:
    """Relatives of an owner: parents, then siblings, then the rest of the DAG nearest first."""
    parents: dict[str, set[str]] = defaultdict(set)
    children: dict[str, set[str]] = defaultdict(set)
    for b in budgets:
        for p in b.spec.parents:
            parents[b.spec.owner].add(p)
            children[p].add(b.spec.owner)
    cache: dict[str, list[str]] = {}
    # each owner's parents and children: a level of the walk below is the union of its owners' sets
    adjacent = {o: parents.get(o, set()) | children.get(o, set()) for o in parents.keys() | children.keys()}
    nobody: frozenset[str] = frozenset()

    def order(owner: str) -> list[str]:
        if owner in cache:
            return cache[owner]
        first = sorted(parents[owner])
        siblings = sorted({s for p in first for s in children[p]} - {owner} - set(first))
        seen = {owner, *first, *siblings}
        rest: list[str] = []  # the rest by distance, then name: one breadth-first level at a time
        reached, level = {owner}, {owner}
        while level:
            level = set().union(*map(adjacent.get, level, repeat(nobody))) - reached
            reached |= level
            rest += sorted(level - seen)
        cache[owner] = first + siblings + rest
        return cache[owner]

    return order


class Book:
    """Funded GPUs per envelope by class, kept current as a pass admits, grows and cuts."""

    def __init__(self, envs: dict[str, Env], relatives: Callable[[str], list[str]], now: int) -> None:
        self.envs = envs
        self.relatives = relatives
        self.now = now
        self.by_owner: dict[str, list[Env]] = defaultdict(list)
        for env in sorted(envs.values(), key=lambda e: e.key):  # each owner's envelopes by key
            self.by_owner[env.owner].append(env)
        self.funded: dict[str, dict[str, int]] = {k: {OWN: 0, FAMILY: 0, LOAN: 0} for k in envs}
        # GPUs of every open claim per envelope and class, funded or not: what room is measured against
        self.claimed: dict[str, dict[str, int]] = {k: {OWN: 0, FAMILY: 0, LOAN: 0} for k in envs}
        # family GPUs held for reservations in line, until the envelope's next settle: the owner's
        # runs behind them may not recall these as they recall family claims
        self.held_family: dict[str, int] = defaultdict(int)
        self.consumed: dict[str, float] = {k: 0.0 for k in envs}  # GPU-hours, spares at the spare rate
        self.lent_hours: dict[str, float] = {k: 0.0 for k in envs}
        self.unfunded: set[GroupKey] = set()
        self.frozen: set[str] = set()
        self._kin: dict[str, frozenset[str]] = {}  # owner -> its relatives, as a set
        self.lease_index: dict[str, list[Lease]] = defaultdict(list)  # envelope -> leases paid from it
        self.indexed = 0  # how many of the pass's leases `lease_index` holds
        self.cover_cache: dict[object, list[tuple[Env, str]]] = {}
        self.family_cache: dict[tuple[str, str], list[tuple[Env, str]]] = {}  # (owner, flavor): own+family
        self.shared_cache: dict[str, dict[str, list[tuple[Env, str]]]] = {}  # flavor -> owner -> shareable
        self.source_objs: dict[tuple[str, str, float], tuple[int, int, Any]] = {}  # cover's shared Sources
        self.window_cache: dict[int, tuple[Any, tuple[list[int], int]]] = {}  # cover's future windows
        self.window_sources_cache: dict[tuple[int, int], tuple[Any, Any, Any]] = {}  # cover.with_windows
        self.window_parts_cache: dict[tuple[int, int, float], tuple[Any, Any]] = {}  # cover._at_window
        self.caps_cache: dict[int, tuple[Any, Any]] = {}  # cover.reach_caps, per candidate list
        self.view_caps_cache: dict[int, tuple[Any, Any]] = {}  # cover.reach_caps, per member view
        self.sources_cache: dict[object, Any] = {}  # cover.sources' rooms, refreshed from `changes`
        self.epoch = 0  # bumped when every claim is re-derived: all cached rooms are stale
        self.changes: list[str] = []  # envelopes whose claims changed within this epoch, in order
        # envelope -> its last position in `changes`, least recent first: what changed since a
        # position, each envelope once, read from the end (`changed_since`)
        self.last_change: dict[str, int] = {}
        self.touched: dict[str, int] = defaultdict(int)  # envelope -> changes to its claims so far
        self._rooms: dict[tuple[str, str, float], tuple[int, int, int]] = {}
        self.claims: dict[str, list[Claim]] = {}  # open claims per envelope, as of the last classify
        self.blocked: dict[str, set[GroupKey]] = {}  # groups each envelope leaves unfunded
        self.orphaned: set[GroupKey] = set()  # groups paid by an envelope that no longer exists
        self.seen = 0  # how many leases the last classify read (later ones were appended since)
        self.closures_at = -1  # the pass's closure count at the last classify (set by the caller)
        self.closed_seen = 0  # how much of the pass's closed-lease log the last classify saw

    def category(self, run_owner: str, env: Env) -> str:
        if env.owner == run_owner:
            return OWN
        if env.sharing != "none":
            kin = self._kin.get(run_owner)
            if kin is None:
                kin = self._kin[run_owner] = frozenset(self.relatives(run_owner))
            if env.owner in kin:
                return FAMILY
        return LOAN

    def used(self, key: str) -> int:
        f = self.claimed[key]
        return f[OWN] + f[FAMILY] + f[LOAN]

    def capacity(self, env: Env) -> int:
        """Concurrency in force now: zero outside the window or once the GPU-hour cap is spent."""
        if env.key in self.frozen:
            return env.concurrency
        if not env.open_at(self.now):
            return 0
        if env.max_hours is not None and self.consumed[env.key] >= env.max_hours:
            return 0
        return env.concurrency

    def headroom(self, env: Env, category: str, lookahead_hours: float) -> int:
        """GPUs this envelope can still fund for a new claim of this class.

        Measured against every open claim, funded or not: a claim left unfunded (its envelope
        shrank, or the owner recalled family capacity) still ranks ahead of a new one, so its GPUs
        are no room for others. Room therefore only shrinks as claims open, and reads the same
        mid-pass as after a full classify: the next pass finds no room this one did not.
        """
        f = self.claimed[env.key]
        cap = self.capacity(env)
        if category == OWN:  # family claims are recallable by the owner (held ones are not)
            room = cap - f[LOAN] - f[OWN] - self.held_family.get(env.key, 0)
        else:
            room = cap - f[OWN] - f[FAMILY] - f[LOAN]
        if env.max_hours is not None and lookahead_hours > 0:
            room = min(room, int((env.max_hours - self.consumed[env.key]) // lookahead_hours))
        if category == LOAN:
            if env.lend_max is not None:
                room = min(room, env.lend_max - f[LOAN])
            if env.lend_hours is not None and lookahead_hours > 0:
                room = min(room, int((env.lend_hours - self.lent_hours[env.key]) // lookahead_hours))
        for _, cap_max, keys in env.caps:
            room = min(room, cap_max - sum(self.used(k) for k in keys if k in self.claimed))
        return max(0, room)

    def add(self, env_key: str, category: str, gpus: int) -> None:
        self.funded[env_key][category] += gpus
        self.claimed[env_key][category] += gpus
        self.changed(env_key)

    def changed(self, env_key: str) -> None:
        """The envelope's claims changed: every room remembered for it is stale."""
        self.last_change.pop(env_key, None)
        self.last_change[env_key] = len(self.changes)
        self.changes.append(env_key)
        self.touched[env_key] += 1

    def changed_since(self, seen: int) -> Iterator[str]:
        """Each envelope in `changes[seen:]` once, most recently changed first."""
        for env_key, at in reversed(self.last_change.items()):
            if at < seen:
                return
            yield env_key

    def hold(self, env_key: str, category: str, gpus: int) -> None:
        """Funding kept for a reservation in line: a claim until the envelope is settled again."""
        if category == FAMILY:
            self.held_family[env_key] += gpus
        self.add(env_key, category, gpus)

    def room_memo(self) -> tuple[dict[tuple[str, str, float], tuple[int, int, int]], dict[str, int], int]:
        """`room`'s memo, for a caller reading many rooms in one loop: (envelope, class, lookahead)
        -> (epoch, changes to the envelope's claims, room), current when both match `touched` and
        `epoch` here. Read only; an envelope under aggregate caps is never remembered (`room`)."""
        return self._rooms, self.touched, self.epoch

    def room(self, env: Env, category: str, lookahead_hours: float) -> int:
        """`headroom`, remembered until this envelope's claims change (or every claim is re-derived)."""
        if env.caps:
            return self.headroom(env, category, lookahead_hours)
        key = (env.key, category, lookahead_hours)
        hit = self._rooms.get(key)
        mark = self.touched[env.key]
        if hit is not None and hit[0] == self.epoch and hit[1] == mark:
            return hit[2]
        room = self.headroom(env, category, lookahead_hours)
        self._rooms[key] = (self.epoch, mark, room)
        return room


@dataclass(frozen=True, slots=True)
class Claim:
    env: str
    category: str
    rank: tuple[object, ...]
    group: GroupKey
    gpus: int


def classify(
    book: Book,
    leases: Sequence[Lease],
    owner_of: Callable[[str], str],
    rank_of: Callable[[str], tuple[object, ...]],
) -> None:
    """Re-derive funded/unfunded for every open claim; sets `book.funded` and `book.unfunded`.

    Also keeps each envelope's claims and the groups it leaves unfunded (`book.claims`,
    `book.blocked`), so `unfunded_with` can answer "what if this run claimed too" per envelope.
    """
    per_env, orphaned = claims_of(book, leases, owner_of, rank_of)
    book.unfunded |= orphaned
    book.orphaned = orphaned
    book.funded = {k: {OWN: 0, FAMILY: 0, LOAN: 0} for k in book.envs}
    book.claimed = {k: _claimed(per_env.get(k, ())) for k in book.envs}
    book.held_family.clear()
    book.epoch += 1
    book.changes = []
    book.last_change = {}
    book.claims = per_env
    book.seen = len(leases)
    book.blocked = {}
    for env_key, env_claims in per_env.items():
        funded, blocked = settle(book, env_key, env_claims)
        book.funded[env_key] = funded
        book.blocked[env_key] = blocked
        book.unfunded |= blocked


def reclassify(
    book: Book,
    leases: Sequence[Lease],
    owner_of: Callable[[str], str],
    rank_of: Callable[[str], tuple[object, ...]],
    touched: set[str],
) -> None:
    """`classify` for the touched envelopes only (those whose leases opened or closed since).

    Every other envelope's claims are as the last classify left them, and `settle` reads nothing
    but an envelope's own claims, so this gives classify's answer; their funding (with anything
    added to it since, such as held reservations' funding) is kept as it is.
    """
    index = book.lease_index  # the pass's leases only ever grow: index the new ones
    for lease in leases[book.indexed :]:
        env_key = lease.payer.env_key
        if lease.role != Role.BORROWED and env_key is not None:
            index[env_key].append(lease)
    book.indexed = len(leases)
    mine = [x for k in touched if k in book.envs for x in index.get(k, ()) if x.open]
    orphaned = {(x.run, x.group) for k in index if k not in book.envs for x in index[k] if x.open}
    per_env, gone = claims_of(book, mine, owner_of, rank_of)
    orphaned |= gone
    for env_key in sorted(touched):
        if env_key not in book.envs:
            continue
        env_claims = per_env.get(env_key, [])
        funded, blocked = settle(book, env_key, env_claims)
        book.funded[env_key] = funded
        book.claimed[env_key] = _claimed(env_claims)
        book.held_family.pop(env_key, None)
        book.blocked[env_key] = blocked
        if env_claims:
            book.claims[env_key] = env_claims
        else:
            book.claims.pop(env_key, None)
        book.changed(env_key)
    book.orphaned = orphaned
    book.unfunded = set(orphaned).union(*book.blocked.values())
    book.seen = len(leases)


def claims_of(
    book: Book,
    leases: Iterable[Lease],
    owner_of: Callable[[str], str],
    rank_of: Callable[[str], tuple[object, ...]],
) -> tuple[dict[str, list[Claim]], set[GroupKey]]:
    """Open claims per envelope (GPUs summed per group and class), and groups whose envelope is gone."""
    claims: dict[tuple[str, str, tuple[object, ...], GroupKey], int] = defaultdict(int)
    orphaned: set[GroupKey] = set()
    runs: dict[str, tuple[str, tuple[object, ...]]] = {}  # run -> (owner, rank), asked once per run
    for lease in leases:
        env_key = lease.payer.env_key
        if not lease.open or lease.role == Role.BORROWED or env_key is None:
            continue
        group = (lease.run, lease.group)
        env = book.envs.get(env_key)
        if env is None:  # the envelope is gone: nobody funds this claim
            orphaned.add(group)
            continue
        owner_rank = runs.get(lease.run)
        if owner_rank is None:
            owner_rank = runs[lease.run] = (owner_of(lease.run), rank_of(lease.run))
        cat = book.category(owner_rank[0], env)
        claims[(env_key, cat, owner_rank[1], group)] += lease.gpus
    per_env: dict[str, list[Claim]] = defaultdict(list)
    for (env_key, cat, rank, group), gpus in claims.items():
        per_env[env_key].append(Claim(env_key, cat, rank, group, gpus))
    return dict(per_env), orphaned


_ORDER = {LOAN: 0, OWN: 1, FAMILY: 2}


def _claimed(env_claims: Iterable[Claim]) -> dict[str, int]:
    out = {OWN: 0, FAMILY: 0, LOAN: 0}
    for c in env_claims:
        out[c.category] += c.gpus
    return out


def settle(book: Book, env_key: str, env_claims: Iterable[Claim]) -> tuple[dict[str, int], set[GroupKey]]:
    """One envelope: loans first, then its owner, then family, each in ranking order, until full."""
    env = book.envs[env_key]
    cap = book.capacity(env)
    lend_room = cap if env.lend_max is None else min(cap, env.lend_max)
    if (
        env.lend_hours is not None
        and book.lent_hours[env_key] >= env.lend_hours
        and env_key not in book.frozen
    ):
        lend_room = 0
    funded = {OWN: 0, FAMILY: 0, LOAN: 0}
    unfunded: set[GroupKey] = set()
    used = 0
    blocked: set[str] = set()
    for c in sorted(env_claims, key=lambda c: (_ORDER[c.category], c.rank, c.group[1])):
        limit = lend_room if c.category == LOAN else cap
        if c.category not in blocked and used + c.gpus <= limit:
            used += c.gpus
            funded[c.category] += c.gpus
        else:
            blocked.add(c.category)
            unfunded.add(c.group)
    return funded, unfunded


def unfunded_with(
    book: Book,
    leases: Sequence[Lease],
    extra: Sequence[Lease],
    owner_of: Callable[[str], str],
    rank_of: Callable[[str], tuple[object, ...]],
    appended_only: bool,
) -> set[GroupKey]:
    """The unfunded groups if `extra` leases were open too, as `classify` would find them.

    `appended_only`: since the last `classify`, leases were only appended (none closed), so only
    the envelopes the new and extra leases pay from re-settle. Otherwise every envelope does. The
    book is left unchanged either way.
    """
    if not appended_only:
        per_env, orphaned = claims_of(book, [*leases, *extra], owner_of, rank_of)
        out = set(orphaned)
        for env_key, claims in per_env.items():
            out |= settle(book, env_key, claims)[1]
        return out
    more, orphaned = claims_of(book, [*leases[book.seen :], *extra], owner_of, rank_of)
    out = set(book.orphaned) | orphaned
    for env_key, blocked in book.blocked.items():
        if env_key not in more:
            out |= blocked
    for env_key, claims in more.items():
        out |= settle(book, env_key, _merge(book.claims.get(env_key, []), claims))[1]
    return out


def _merge(old: list[Claim], new: list[Claim]) -> list[Claim]:
    """Claims of one envelope with GPUs of the same (class, rank, group) summed, as classify sums them."""
    total: dict[tuple[str, tuple[object, ...], GroupKey], int] = defaultdict(int)
    for c in (*old, *new):
        total[(c.category, c.rank, c.group)] += c.gpus
    env = old[0].env if old else new[0].env
    return [Claim(env, cat, rank, group, gpus) for (cat, rank, group), gpus in total.items()]
