"""Helpers for scenario tests: run `jobtree simulate` in-process and read its JSON like a user would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from reconciler.cli.simulate import command

SHARED = Path(__file__).resolve().parents[1] / "examples"
OWN = Path(__file__).resolve().parent / "scenarios"


def simulate(path: Path | str) -> dict[str, Any]:
    result = CliRunner().invoke(command, [str(path), "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.output)
    return out


def simulate_bytes(path: Path | str) -> bytes:
    return CliRunner().invoke(command, [str(path), "--format", "json"], catch_exceptions=False).stdout_bytes


def leases_of(state: dict[str, Any], run: str) -> list[dict[str, Any]]:
    ns, name = run.split("/")
    return [x for x in state["leases"] if x["spec"]["runRef"] == {"namespace": ns, "name": name}]


def nodes_of(lease: dict[str, Any]) -> set[str]:
    return {n.split("#")[0] for n in lease["spec"]["slice"]["nodes"]}


def ended(ledger: list[dict[str, Any]], run: str, at: str | None = None) -> list[dict[str, Any]]:
    return [e for e in ledger if e["event"] == "End" and e["run"] == run and (at is None or e["at"] == at)]


def started(ledger: list[dict[str, Any]], run: str, at: str | None = None) -> list[dict[str, Any]]:
    return [e for e in ledger if e["event"] == "Start" and e["run"] == run and (at is None or e["at"] == at)]
