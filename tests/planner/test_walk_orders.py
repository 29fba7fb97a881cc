"""The nearest-domain walks pick, in the line of generated scenarios, what a plain sort picks.

Pack-to-empty's order (`pack._nearest`), fill's (`pack._by_free`) and a scope's nearest domain
(`forecast._best_of`) find their first domain with builtins over a class's domains, and by
capacity over one class's domains only; a wrong tie or a domain of another class would place a
group elsewhere. Each call the line makes is checked against the order worked out by sorting
every candidate domain, and each SourceList's cached node sets against its sources with room.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from planner import cover, forecast, pack
from tests.planner.generated import play_checked, scenario_of


def sorted_nearest(cur: Any, need: int) -> list[str]:
    """Pack-to-empty order by sorting: per rank, domains holding `need` by most free, then key."""
    borrow = None if cur.req.max_borrow is None else cur.req.max_borrow - cur.borrowed
    out: list[str] = []
    for classes, newly in pack.covering(cur.topo, cur.req.sources, cur.room, need, borrow):
        chosen = set(newly)
        out += [
            d
            for _, d in sorted(
                (-v, d) for d, v in cur.free.items() if classes.class_of.get(d) in chosen and v >= need
            )
        ]
    return out


def sorted_best(asked: tuple[Any, ...]) -> str | None:
    """A scope's domain of these classes by sorting: kept first, then most available, most capacity, key."""
    classes, newly, eligible, keep, avail, view = asked
    chosen = set(newly)
    ok = [d for d in view.by_cap if classes.class_of.get(d) in chosen and eligible(d)]
    for d in keep:
        if d in ok:
            return d
    ranked = sorted(ok, key=lambda d: (-avail.get(d, 0), -view.cap[d], d))
    return ranked[0] if ranked else None


def test_nearest_domains_are_the_sorted_orders(monkeypatch: pytest.MonkeyPatch) -> None:
    nearest, by_free, best_of, read = pack._nearest, pack._by_free, forecast._best_of, cover.sources
    calls: dict[str, int] = {"nearest": 0, "by_free": 0, "best_of": 0, "lists": 0}
    wrong: list[str] = []

    def checked_nearest(cur: Any, need: int) -> Iterator[str]:
        got, want = list(nearest(cur, need)), sorted_nearest(cur, need)
        calls["nearest"] += 1
        if got != want:
            wrong.append(f"pack order {got} != {want}")
        return iter(got)

    def checked_by_free(free: dict[str, int], need: int) -> Iterator[str]:
        got = list(by_free(free, need))
        calls["by_free"] += 1
        want = [d for _, d in sorted((-v, d) for d, v in free.items() if v >= need)]
        if got != want:
            wrong.append(f"fill order {got} != {want}")
        return iter(got)

    def checked_best_of(*args: Any) -> str | None:
        got = best_of(*args)
        calls["best_of"] += 1
        if got != (want := sorted_best(args)):
            wrong.append(f"scope domain {got} != {want}")
        return got

    def checked_sources(*args: Any) -> cover.SourceList:
        out = read(*args)
        calls["lists"] += 1
        if out.nodesets != tuple(s.nodes for s in out if s.room > 0):
            wrong.append("a source list's node sets with room are stale")
        return out

    monkeypatch.setattr(pack, "_nearest", checked_nearest)
    monkeypatch.setattr(pack, "_by_free", checked_by_free)
    monkeypatch.setattr(forecast, "_best_of", checked_best_of)
    monkeypatch.setattr(cover, "sources", checked_sources)
    for seed in range(8):
        seen = play_checked(scenario_of(seed))
        assert seen.problems == []
    assert wrong == []
    assert min(calls.values()) > 0 and calls["lists"] > 100, calls  # every walk was taken


def test_fill_order_breaks_ties_by_key_and_leaves_out_domains_too_small() -> None:
    free = {"b": 8, "a": 8, "c": 16, "d": 2}
    assert list(pack._by_free(free, 4)) == ["c", "a", "b"]
    assert list(pack._by_free(free, 17)) == []
