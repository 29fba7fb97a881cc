"""A run's source list keeps the positions of its sources with room across the line's refreshes.

`cover.SourceList.nonzero` (what a funded reservation's funding is read from) is carried from one
refresh of a list to the next while no room moves to or from zero; a stale one would fund a
reservation from an envelope with nothing left, or skip one that has room. Checked on every list
the line reads in generated scenarios that start, hold, cut and requeue runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from planner import cover
from planner.pack import Source
from tests.planner.generated import play_checked, scenario_of


@pytest.mark.parametrize("seed", range(6))
def test_every_source_list_read_in_a_pass_names_exactly_its_sources_with_room(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = cover.sources
    checked: list[int] = []
    stale: list[str] = []

    def sources(*args: Any) -> list[Source]:
        out = read(*args)
        assert isinstance(out, cover.SourceList)  # every list the line reads carries its positions
        with_room = [i for i, src in enumerate(out) if src.room != 0]
        if out.nonzero != with_room:
            stale.append(f"{out.nonzero} != {with_room}")
        checked.append(len(out))
        return out

    monkeypatch.setattr(cover, "sources", sources)
    seen = play_checked(scenario_of(seed))
    assert seen.problems == []
    assert stale == []
    assert len(checked) > 20  # the line read many lists, refreshed as rooms moved
