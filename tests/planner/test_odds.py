"""Conflict-set odds: exact enumeration and sampled replays agree with the lottery they forecast."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from planner import odds
from planner.lottery import draw
from planner.odds import Candidate, Lottery


def naive_ends(lot: Lottery, pool: frozenset[int], run: str, group: int) -> list[int]:
    c = lot.candidates
    mine = [i for i in pool if (c[i].run, c[i].group) == (run, group)]
    floor = lot.floor[run]
    if floor is not None:
        gone = sum(x.gpus for i, x in enumerate(c) if x.run == run and i not in pool)
        if lot.allocated[run] - gone - sum(c[i].gpus for i in mine) >= floor:
            return mine
    return [i for i in pool if c[i].run == run]


def naive_left(lot: Lottery, pool: frozenset[int]) -> dict[str, int]:
    gone = [x for i, x in enumerate(lot.candidates) if i not in pool]
    return {d: v - sum(x.gpus for x in gone if x.domain == d) for d, v in lot.need.items()}


def naive_exact(lot: Lottery, pool: frozenset[int]) -> dict[str, float]:
    """Owner uniformly at random, then one of its groups uniformly, until the deficit is met."""
    if not pool or all(v <= 0 for v in naive_left(lot, pool).values()):
        return {}
    groups: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for i in pool:
        groups[lot.owner[lot.candidates[i].run]].add((lot.candidates[i].run, lot.candidates[i].group))
    out: dict[str, float] = defaultdict(float)
    for mine in groups.values():
        for run, group in mine:
            p = 1 / (len(groups) * len(mine))
            rest = naive_exact(lot, pool - set(naive_ends(lot, pool, run, group)))
            out[run] += p
            for other, q in rest.items():
                if other != run:
                    out[other] += p * q
    return out


def naive_sampled(lot: Lottery, key: str) -> dict[str, float]:
    """The published draw replayed with the forecast seeds, candidate lists rebuilt every draw."""
    hits: dict[str, int] = defaultdict(int)
    c = lot.candidates
    for s in range(odds.SAMPLES):
        pool, cut, k = frozenset(range(len(c))), set(), 0
        while pool and any(v > 0 for v in naive_left(lot, pool).values()):
            run, group = draw(
                f"forecast|{key}|{s}", k, [(lot.owner[c[i].run], c[i].run, c[i].group) for i in pool]
            )
            pool = pool - set(naive_ends(lot, pool, run, group))
            cut.add(run)
            k += 1
        for run in cut:
            hits[run] += 1
    return {run: n / odds.SAMPLES for run, n in hits.items()}


@st.composite
def lotteries(draw_: st.DrawFn) -> Lottery:
    runs = draw_(st.integers(1, 5))
    cands, owner, allocated, floor = [], {}, {}, {}
    for r in range(runs):
        run = f"t/r{r}"
        owner[run] = f"org:o{draw_(st.integers(0, 2))}"
        groups = draw_(st.integers(1, 3))
        for g in range(groups):
            cands.append(Candidate(run, g, draw_(st.sampled_from(["a", "b"])), 8))
        allocated[run] = 8 * groups
        floor[run] = draw_(st.sampled_from([None, 8, 16]))
    need = {d: draw_(st.integers(1, 24)) for d in sorted({c.domain for c in cands})}
    return Lottery(
        tuple(sorted(cands, key=lambda c: (c.run, c.group, c.domain))), need, owner, allocated, floor
    )


@settings(max_examples=60, deadline=None)
@given(lotteries())
def test_exact_odds_equal_a_plain_enumeration_of_the_draws(lot: Lottery) -> None:
    game = odds._Game(lot)
    exact = game.exact()
    if exact is None:
        return  # over the work budget: the sampled test covers it
    expect = naive_exact(lot, frozenset(range(len(lot.candidates))))
    assert {r: round(p, 9) for r, p in exact.items() if p} == {r: round(p, 9) for r, p in expect.items() if p}


@settings(max_examples=40, deadline=None)
@given(lotteries(), st.sampled_from(["t/x", "u/y"]))
def test_sampled_odds_are_replays_of_the_published_draw(lot: Lottery, key: str) -> None:
    assert odds._Game(lot).sampled(key) == naive_sampled(lot, key)


def test_symmetric_runs_get_equal_odds() -> None:
    cands = tuple(Candidate(f"t/r{i}", 0, "a", 8) for i in range(4))
    lot = Lottery(cands, {"a": 8}, {c.run: f"org:o{i}" for i, c in enumerate(cands)}, {c.run: 8 for c in cands},
                  {c.run: None for c in cands})  # fmt: skip
    assert odds.cut_odds(lot, "t/new") == {f"t/r{i}": 0.25 for i in range(4)}
