"""Odds: the chance that a reservation's fair lottery (§4.6) cuts each candidate run.

Exact when the draws can be enumerated within a work budget (the usual case: a deficit is
cleared in a draw or two); otherwise estimated by replaying the real draw with forecast seeds.
Pure arithmetic over candidates; it cuts nothing and knows nothing of reservations.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from planner.lottery import H

BUDGET = 300  # draws the enumeration may weigh before it falls back to sampling
SAMPLES = 32


_Ballot = tuple[list[str], dict[str, list[tuple[str, int]]]]  # owners sorted, each one's (run, group)s


@dataclass(frozen=True, slots=True)
class Candidate:
    run: str
    group: int
    domain: str
    gpus: int


@dataclass(frozen=True, slots=True)
class Lottery:
    """What the draw needs: candidates in short domains, the deficit, and each run's floor."""

    candidates: tuple[Candidate, ...]  # sorted
    need: Mapping[str, int]  # domain -> GPUs short
    owner: Mapping[str, str]  # run -> owner
    allocated: Mapping[str, int]  # run -> GPUs it runs on now
    floor: Mapping[str, int | None]  # run -> minTotalGPUs, None for a fixed-width run


def cut_odds(lottery: Lottery, key: str) -> dict[str, float]:
    """Run -> probability that the lottery cuts it, rounded to 0.01 and never below 0.01."""
    game = _Game(lottery)
    odds = game.exact()
    if odds is None:
        odds = game.sampled(key)
    return {c.run: max(0.01, round(odds.get(c.run, 0.0), 2)) for c in lottery.candidates}


class _Game:
    """The lottery's states: which candidates are still in the pool, and the deficit left."""

    def __init__(self, lottery: Lottery) -> None:
        self.lottery = lottery
        cands = lottery.candidates
        self.of_group: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.of_run: dict[str, list[int]] = defaultdict(list)
        for i, c in enumerate(cands):
            self.of_group[(c.run, c.group)].append(i)
            self.of_run[c.run].append(i)
        self.domains = {d: j for j, d in enumerate(sorted(lottery.need))}  # position in `left`
        self.weights = [(self.domains.get(c.domain), c.gpus) for c in cands]  # (position or None, GPUs)
        self.sizes = [c.gpus for c in cands]
        # the same pools as bit masks (bit i: candidate i), where no iteration order is involved
        self.group_bits = {k: _mask(idx) for k, idx in self.of_group.items()}
        self.run_bits = {run: _mask(idx) for run, idx in self.of_run.items()}

    def ends_mask(self, pool: int, run: str, group: int) -> int:
        """Candidates a draw of (run, group) ends: the group, or the whole run below its floor."""
        mine = self.group_bits[(run, group)] & pool
        floor = self.lottery.floor.get(run)
        if floor is not None:
            gone = self.run_bits[run] & ~pool
            if self.lottery.allocated[run] - self.gpus(gone) - self.gpus(mine) >= floor:
                return mine
        return self.run_bits[run] & pool

    def gpus(self, mask: int) -> int:
        sizes = self.sizes
        return sum(sizes[i] for i in _members(mask))

    def choices(self, pool: int) -> list[tuple[float, str, int]]:
        """(probability, run, group) of the next draw: owner uniform, then that owner's group."""
        owners, groups_of = self._ballot(_members(pool))
        out = []
        for o in owners:
            mine = groups_of[o]
            p = 1 / (len(owners) * len(mine))
            out += [(p, run, group) for run, group in mine]
        return out

    def left_after(self, left: tuple[int, ...], ended: list[int]) -> tuple[int, ...]:
        out = list(left)
        weights = self.weights
        for i in ended:
            j, gpus = weights[i]
            if j is not None:
                out[j] -= gpus
        return tuple(out)

    def draws_to_weigh(self, limit: int) -> int:
        """How many draws `exact` weighs, counted until past `limit`: the choices of every pool it
        reaches with a deficit left (each pool is solved once, so the order is immaterial).

        Counted on bit masks without the arithmetic, so a lottery too large to enumerate is told
        apart far more cheaply than by running into the budget: a pool's draws count as soon as
        the pool is reached, before any of them is followed."""
        groups = list(self.group_bits.values())

        def draws(pool: int, left: tuple[int, ...]) -> int:  # a pool's choices, if it is drawn from
            return sum(1 for bits in groups if bits & pool) if pool and max(left, default=0) > 0 else 0

        start = (1 << len(self.lottery.candidates)) - 1
        seen = {start}
        todo = [(start, tuple(self.lottery.need[d] for d in sorted(self.lottery.need)))]
        work = draws(*todo[0])
        while todo:
            pool, left = todo.pop()
            if not pool or max(left, default=0) <= 0:
                continue
            for (run, group), bits in self.group_bits.items():
                if not bits & pool:
                    continue
                ended = self.ends_mask(pool, run, group)
                rest = pool & ~ended
                if rest not in seen:
                    seen.add(rest)
                    after = self.left_after(left, _members(ended))
                    work += draws(rest, after)
                    if work > limit:
                        return work
                    todo.append((rest, after))
        return work

    def exact(self) -> dict[str, float] | None:
        """Every draw weighed, or None for a lottery past `BUDGET` draws (`draws_to_weigh` counts
        exactly the draws `solve` weighs, so `solve` itself never runs out)."""
        if self.draws_to_weigh(BUDGET) > BUDGET:
            return None
        memo: dict[int, dict[str, float]] = {}

        def solve(pool: int, left: tuple[int, ...]) -> dict[str, float]:
            hit = memo.get(pool)
            if hit is not None:
                return hit
            out: dict[str, float] = defaultdict(float)
            if pool and any(v > 0 for v in left):
                for p, run, group in self.choices(pool):
                    ended = self.ends_mask(pool, run, group)
                    rest = pool & ~ended
                    after = memo.get(rest)
                    if after is None:
                        after = solve(rest, self.left_after(left, _members(ended)))
                    out[run] += p
                    for other, q in after.items():
                        if other != run:
                            out[other] += p * q
            memo[pool] = dict(out)
            return memo[pool]

        start = tuple(self.lottery.need[d] for d in sorted(self.lottery.need))
        return solve((1 << len(self.lottery.candidates)) - 1, start)

    def sampled(self, key: str) -> dict[str, float]:
        """Replay the real draw with SAMPLES forecast seeds; the share of replays that cut each run.

        Each draw is `lottery.draw`'s arithmetic over the pool's owners and groups, which are
        worked out once per pool (replays keep meeting the same pools), and only when a replay
        draws from it. A pick among one owner or one group needs no hash: anything modulo 1 is 0."""
        hits: dict[str, int] = defaultdict(int)
        start = tuple(self.lottery.need[d] for d in sorted(self.lottery.need))
        everyone = (1 << len(self.lottery.candidates)) - 1
        ballots = {everyone: self._ballot(range(len(self.lottery.candidates)))}
        drawn_from: dict[int, tuple[_Ballot, str, int]] = {}  # pool -> the ballot and draw it came from
        moves: dict[tuple[int, str, int], tuple[int, tuple[int, ...]]] = {}
        for s in range(SAMPLES):
            seed = f"forecast|{key}|{s}"
            pool, left = everyone, start
            cut: set[str] = set()
            k = 0
            while pool and max(left, default=0) > 0:
                ballot = ballots.get(pool)
                if ballot is None:
                    ballot = ballots[pool] = self._without(*drawn_from.pop(pool))
                owners, groups_of = ballot
                mine = groups_of[owners[H(f"{seed}|{k}|owner") % len(owners) if len(owners) > 1 else 0]]
                run, group = mine[H(f"{seed}|{k}|group") % len(mine) if len(mine) > 1 else 0]
                move = moves.get((pool, run, group))
                if move is None:  # the pool decides what is left (everything else has ended)
                    ended = self.ends_mask(pool, run, group)
                    after = pool & ~ended
                    move = moves[(pool, run, group)] = (after, self.left_after(left, _members(ended)))
                    if after not in ballots and after not in drawn_from:
                        drawn_from[after] = (ballot, run, ended)
                pool, left = move
                cut.add(run)
                k += 1
            for run in cut:
                hits[run] += 1
        return {run: n / SAMPLES for run, n in hits.items()}

    def _without(self, ballot: _Ballot, run: str, ended: int) -> _Ballot:
        """The draw's view once `ended` (candidates of `run`) left the pool: one owner's list changes."""
        owners, groups_of = ballot
        cands = self.lottery.candidates
        gone = {(cands[i].run, cands[i].group) for i in _members(ended)}
        owner = self.lottery.owner[run]
        kept = [g for g in groups_of[owner] if g not in gone]
        groups = dict(groups_of)
        if kept:
            groups[owner] = kept
            return owners, groups
        del groups[owner]
        return [o for o in owners if o != owner], groups

    def _ballot(self, pool: Iterable[int]) -> _Ballot:
        """`lottery.draw`'s view of a pool: owners sorted, and each owner's (run, group)s sorted."""
        cands, owner = self.lottery.candidates, self.lottery.owner
        groups: dict[str, set[tuple[str, int]]] = defaultdict(set)
        for i in pool:
            groups[owner[cands[i].run]].add((cands[i].run, cands[i].group))
        return sorted(groups), {o: sorted(g) for o, g in groups.items()}


def _mask(positions: list[int]) -> int:
    return sum(1 << i for i in positions)


def _members(mask: int) -> list[int]:
    """Positions of the set bits of a mask."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
