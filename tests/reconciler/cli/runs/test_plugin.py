"""Installed as the kubectl plugin `kubectl-runs`, the runs verbs are the top level (`kubectl runs get`),
and `jobtree runs ...` is the same group."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    found = shutil.which(script, path=str(BIN))
    assert found is not None, f"the {script} console script is installed beside this Python"
    return subprocess.run([found, *args], capture_output=True, text=True, check=False)


def test_kubectl_runs_and_jobtree_runs_print_the_same_table(lottery: Path) -> None:
    plugin = run("kubectl-runs", "get", "-A", "--now", "2026-03-02T09:56:00Z", "--repo", str(lottery))
    verb = run("jobtree", "runs", "get", "-A", "--now", "2026-03-02T09:56:00Z", "--repo", str(lottery))
    assert plugin.returncode == verb.returncode == 0, plugin.stderr + verb.stderr
    assert plugin.stdout == verb.stdout
    assert "team-b     b1    Pending" in plugin.stdout


def test_the_plugin_names_itself_as_kubectl_runs_and_keeps_usage_errors_at_2(lottery: Path) -> None:
    helped = run("kubectl-runs", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: kubectl runs [OPTIONS] COMMAND")
    for verb in (
        "submit",
        "plan",
        "watch",
        "explain",
        "leases",
        "budgets",
        "sponsors",
        "shrink",
        "grow",
        "get",
    ):
        assert f"  {verb} " in helped.stdout
    unknown = run("kubectl-runs", "plan", "nope", "--repo", str(lottery))
    assert unknown.returncode == 2 and "no run 'nope'" in unknown.stderr and "Traceback" not in unknown.stderr
