"""State commit messages name each kind of decision a reviewer looks for: starts, swaps, cuts."""

from __future__ import annotations

from pathlib import Path

import pygit2
from click.testing import CliRunner

from reconciler.simulate import command

SHARED = Path(__file__).resolve().parents[2] / "shared" / "scenarios"


def test_a_swap_onto_a_hot_spare_is_reported_as_a_swap_not_a_start(tmp_path: Path) -> None:
    # worked example 3: at 09:05 A-n03 fails and j1's group 0 moves onto its spare on A-n16
    out = tmp_path / "history"
    result = CliRunner().invoke(command, [str(SHARED / "03-spares-fill-failure.yaml"), "--git", str(out)])
    assert result.exit_code == 0, result.output
    repo = pygit2.Repository(str(out))
    messages = [c.message for c in repo.walk(repo.head.target, pygit2.enums.SortMode.TOPOLOGICAL)]
    swap = [m for m in messages if "2026-03-02T09:05:00Z" in m.splitlines()[0]]
    assert len(swap) == 1
    assert "swapped 1 run onto hot spares" in swap[0]
    assert "alpha/j1 swapped to spare" in swap[0]
    assert "alpha/j1 +" not in swap[0]  # the swap is not counted as a start of j1
