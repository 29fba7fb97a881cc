"""The apply benchmark (`python -m bench.apply`) runs end to end on a small fleet, and its rows judge what it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from bench import apply as bench_apply
from tests.support import REPO


def test_a_small_fleet_is_applied_then_a_second_apply_writes_nothing_and_one_changed_run_writes_little() -> (
    None
):
    done = subprocess.run(
        [sys.executable, "-m", "bench.apply", "--scale", "0.005", "--repeat", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["first"]["writes"] > 0 and result["pods"] > 0
    assert result["again"]["writes"] == 0
    changed = result["changed"]
    assert 0 < changed["writes"] <= 2 * changed["changed"]
    assert changed["changed"] < result["first"]["changed"] / 4  # a few objects, not the fleet


def test_the_rows_judge_writes_per_changed_object_and_a_second_apply_that_writes() -> None:
    def step(writes: int, changed: int) -> dict[str, object]:
        per = round(writes / changed, 2) if changed else None
        return {"seconds": 1.0, "range": [1.0, 1.0], "writes": writes, "reads": 9, "changed": changed,
                "writesPerChanged": per}  # fmt: skip

    result = {
        "gpus": 10_000, "runs": 500, "clusters": 8, "rounds": 1, "changedRun": "t/r1",
        "first": step(100, 60), "again": step(3, 0), "changed": step(30, 10), "deleted": step(50, 10),
    }  # fmt: skip
    verdicts = {row["name"]: row["verdict"] for row in bench_apply.rows(result)}
    assert verdicts == {
        "apply, first (empty clusters)": "measured (no target)",
        "apply, again (same commit)": "MISSES target",
        "reconcile --apply, one run changed": "MISSES target",
        "reconcile --apply, one run deleted": "MISSES target",
    }


def test_the_run_changed_then_deleted_is_not_the_only_one_on_its_cluster(tmp_path: Path) -> None:
    """Deleting a cluster's only run prunes all its pods, which the mass-prune guard holds; the bench
    measures an ordinary deletion instead: a run with at most a quarter of the pods where it runs."""

    def rendered(cluster: str, run: str, pods: int) -> None:
        path = tmp_path / "rendered" / cluster / "t" / f"{run}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        docs = [{"kind": "Service"}] + [
            {"kind": "Pod", "metadata": {"name": f"{run}-{i}"}} for i in range(pods)
        ]
        path.write_text(yaml.safe_dump_all(docs))

    rendered("alone", "a-lonely", 2)  # first by name, but every pod on its cluster
    rendered("busy", "a-lonely", 1)
    rendered("busy", "b-wide", 3)  # 3 of 6 pods on busy: more than a quarter
    for run in ("c-small", "d-small"):
        rendered("busy", run, 1)
    assert bench_apply.a_running_run(tmp_path) == ("t/c-small", tmp_path / "runs" / "t" / "c-small.yaml")
