"""The agent bench's arithmetic: which swap is its p99, how its rows judge the targets, which groups it fails."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import yaml

from bench import agent

RESULT = {"gpus": 10_000, "nodes": 1_250, "runs": 150, "pods": 1_200, "failures": 200, "agentRssMB": 93.0,
          "agentRssIdleMB": 90.0, "idleCpuPercent": 0.4, "idleSeconds": 30.0, "swapsCounted": 200.0,
          "startCpuSeconds": 1.5, "swapCpuSeconds": 6.0,
          "p50": 30.0, "p99": 45.0, "max": 50.0, "roundTrip": 31.0, "roundTripRange": [30.5, 31.2],
          "folded": 200, "foldSeconds": 1.5, "loadBefore": [3.0, 2.0, 1.0], "loadAfter": [4.0, 2.0, 1.0]}  # fmt: skip


def test_p99_is_the_nearest_rank_of_the_swaps_and_p50_their_median() -> None:
    # 200 swaps of 1..200 ms: the 198th smallest is the p99 (two swaps above it), the median 100.5 ms
    figures = agent.percentiles([ms / 1000 for ms in range(200, 0, -1)])
    assert figures == {"p50": 100.5, "p99": 198.0, "max": 200.0}
    assert agent.percentiles([0.004])["p99"] == 4.0  # one swap is every percentile


def test_the_rows_meet_the_target_only_when_both_p50_and_p99_do() -> None:
    assert agent.rows(RESULT)[0]["verdict"] == "meets target"
    assert agent.rows({**RESULT, "p50": 101.0})[0]["verdict"] == "MISSES target"
    assert agent.rows({**RESULT, "p99": 501.0})[0]["verdict"] == "MISSES target"
    assert agent.rows(RESULT)[-1]["wall"] == "31.00 s (30.50–31.20)"
    assert "load average 3.0 before, 4.0 after" in agent.rows(RESULT)[0]["note"]


def test_idle_row_judges_cpu_everywhere_and_memory_at_ten_thousand_nodes() -> None:
    def idle(result: dict[str, Any]) -> dict[str, str]:
        return next(r for r in agent.rows(result) if "idle" in r["name"])

    assert idle(RESULT)["verdict"] == "meets target"
    assert idle({**RESULT, "idleCpuPercent": 2.5})["verdict"] == "MISSES target"
    assert (
        idle({**RESULT, "agentRssMB": 400.0})["verdict"] == "meets target"
    )  # no memory target below 10k nodes
    big = {**RESULT, "nodes": 10_000}
    assert idle(big)["name"].startswith("10k nodes: ") and "256 MiB" in idle(big)["target"]
    assert idle({**big, "agentRssMB": 256.0})["verdict"] == "meets target"  # VmHWM's kB / 1024: MiB
    assert idle({**big, "agentRssMB": 256.5})["verdict"] == "MISSES target"


def test_the_filler_row_appears_with_its_own_figures_and_no_target() -> None:
    rows = agent.rows({**RESULT, "withFiller": {"p50": 700.0, "p99": 900.0, "max": 950.0}, "fillerRuns": 300,
                       "borrowedLeases": 300})  # fmt: skip
    filler = next(r for r in rows if "filler" in r["name"])
    assert filler["wall"] == "p50 700.0 ms, p99 900.0 ms, max 950.0 ms"
    assert filler["verdict"] == "measured (no target)"
    assert rows[0]["verdict"] == "meets target"  # the target is judged without fillers


def _lease(run: str, group: int, role: str, node: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "team-0"},
            "spec": {"runRef": {"name": run}, "group": group, "slice": {"role": role, "nodes": [f"{node}#0-7"]}}}  # fmt: skip


def test_victims_are_active_nodes_of_spared_groups_split_by_a_filler_on_the_spare() -> None:
    leases = [
        _lease("a", 0, "Active", "n1"), _lease("a", 0, "Spare", "n2"), _lease("f", 0, "Borrowed", "n2"),
        _lease("a", 1, "Active", "n3"), _lease("a", 1, "Spare", "n4"),
        _lease("b", 0, "Active", "n5"),  # no spare: never a victim
        _lease("b", 1, "Active", "n6"), _lease("b", 1, "Spare", "n7"),
    ]  # fmt: skip
    assert agent.victims(leases, 2) == ["n3", "n6"]
    assert agent.victims(leases, 1, filled=True) == ["n1"]
    try:
        agent.victims(leases, 2, filled=True)
    except RuntimeError as err:
        assert "only 1 groups with a spare holding a filler" in str(err)
    else:
        raise AssertionError("two filled victims asked of one")


def test_the_fleet_scales_with_its_domains_and_fillers_are_opportunistic() -> None:
    files = agent.fleet_files(domains=200, fillers=300)
    runs = [yaml.safe_load(t) for p, t in files.items() if p.startswith("runs/")]
    assert sum(1 for r in runs if not r["spec"].get("opportunistic")) == 1_200
    fillers = [r for r in runs if r["spec"].get("opportunistic")]
    assert len(fillers) == 300 and {r["spec"]["resources"]["totalGPUs"] for r in fillers} == {8}
    budget = yaml.safe_load(files["budgets/team-0.yaml"])
    assert budget["spec"]["envelopes"][0]["concurrency"] == 80_000  # no team is short of funding at 10k nodes
    assert len(agent.nodes(2)) == 100 and agent.nodes(2)[-1]["metadata"]["name"] == "d001-n49"


def test_idle_cpu_counts_the_process_own_cpu_time() -> None:
    sleeper = subprocess.Popen(["sleep", "5"])
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert agent.idle_cpu(sleeper.pid, 0.5)[0] == 0.0
        assert agent.idle_cpu(spinner.pid, 0.5)[0] > 0.0
    finally:
        for proc in (sleeper, spinner):
            proc.kill()
            proc.wait()
