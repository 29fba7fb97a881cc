"""`kubectl runs shrink` and `grow`: a new desiredTotalGPUs on a branch, the file otherwise byte for byte.

vit-elastic (media-vision) in the template: min 8, max 32, step 8, desired 16, running at 16 on
H100. Shrink by 8 -> desired 8: the plan cuts one 8-GPU group (Shrink). Grow by 16 -> 32: it grows
one step per pass, so the plan grows it by 8 now and says it wants 32. Grow by 24 -> 40 is past
the maximum: refused, naming 8, 16, 24 and 32.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pygit2

from tests.reconciler.cli.runs.test_submit import NOW, fleet, pristine, remote
from tests.support.fleets import runs

__all__ = ["fleet", "pristine"]  # fixtures: imported for pytest, used by name
PATH = "runs/media-vision/vit-elastic.yaml"


def changed_lines(before: bytes, after: bytes) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(
            before.decode().splitlines(), after.decode().splitlines(), n=0, lineterm=""
        )
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_shrink_changes_one_value_of_the_file_and_plans_the_cut(fleet: Path) -> None:
    before = (fleet / "work" / PATH).read_bytes()
    shown = runs("shrink", "vit-elastic", "--by", "8", "--now", NOW, repo=fleet / "work")
    assert shown.code == 0, shown.err
    # asked for, not a cut: the plan says so
    assert (
        "shrink   media-vision/vit-elastic: 8 GPUs given back (this change lowers desiredTotalGPUs)"
        in shown.out
    )
    assert "cut      media-vision/vit-elastic" not in shown.out
    pushed = remote(fleet).references["refs/heads/runs/media-vision/vit-elastic"].peel(pygit2.Commit)
    after = pushed.tree[PATH].data
    assert changed_lines(before, after) == ["-    desiredTotalGPUs: 16", "+    desiredTotalGPUs: 8"]
    assert pushed.message.startswith("runs: shrink media-vision/vit-elastic to 8 GPUs")


def test_grow_asks_for_more_and_the_plan_grows_it_a_step(fleet: Path) -> None:
    doc = runs(
        "grow",
        "media-vision/vit-elastic",
        "--by",
        "16",
        "--now",
        NOW,
        "--format",
        "json",
        repo=fleet / "work",
    ).json()
    grew = doc["plan"]["starts"][0]
    assert (grew["run"], grew["gpus"], grew["reason"]) == ("media-vision/vit-elastic", 8, "Grow")
    assert doc["plan"]["widths"] == [
        {"run": "media-vision/vit-elastic", "pending": "Grow to 32", "before": None}
    ]


def test_widths_outside_the_range_or_off_the_step_are_refused_naming_the_ones_it_may_take(
    fleet: Path,
) -> None:
    past = runs("grow", "vit-elastic", "--by", "24", repo=fleet / "work")
    assert past.code == 2 and "40 GPUs is not a width it may take" in past.err and "8, 16, 24, 32" in past.err
    assert runs("shrink", "vit-elastic", "--by", "12", repo=fleet / "work").code == 2  # 4: off the step
    assert runs("shrink", "vit-elastic", "--by", "16", repo=fleet / "work").code == 2  # 0: below the minimum
    assert runs("shrink", "vit-elastic", "--by", "0", repo=fleet / "work").code == 2
    fixed = runs("shrink", "pretrain-64", "--by", "8", repo=fleet / "work")
    assert fixed.code == 2 and "not malleable" in fixed.err
    assert [r for r in remote(fleet).references if "runs/" in r] == []


def test_the_branch_a_merged_pull_request_left_is_reused(fleet: Path) -> None:
    assert runs("shrink", "vit-elastic", "--by", "8", "--now", NOW, repo=fleet / "work").code == 0
    bare = remote(fleet)
    merged = bare.references["refs/heads/runs/media-vision/vit-elastic"].target
    bare.references["refs/heads/main"].set_target(merged)  # the pull request merged (fast-forward)
    work = pygit2.Repository(str(fleet / "work"))
    work.remotes["origin"].fetch(["+refs/heads/main:refs/remotes/origin/main"])
    shown = runs("grow", "vit-elastic", "--by", "8", "--now", NOW, repo=fleet / "work")
    assert shown.code == 0, shown.err
    again = bare.references["refs/heads/runs/media-vision/vit-elastic"].peel(pygit2.Commit)
    assert again.parents[0].id == merged  # on top of the merged change, from desired 8 back to 16
    assert b"desiredTotalGPUs: 16" in again.tree[PATH].data
