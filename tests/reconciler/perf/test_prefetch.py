"""A big file parsed in a child process reads exactly as parsing it here, bad documents included."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from reconciler.cli.simulate import command
from reconciler.perf import prefetch
from schemas import yamldoc, yamlguard
from tests.support.scenarios import EXAMPLES as SCENARIOS

MIXED = b"""kind: Run
metadata: {name: a}
spec: {owner: "org:t", resources: {totalGPUs: 8}}
---
kind: Run
metadata: [name: b
---
kind: Budget
metadata:
  name: c
  name: d
"""


def test_a_forked_read_equals_a_read_here(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_bytes(MIXED)
    here_docs, here_bad = yamldoc.parse_all(MIXED, str(path), positions=False)
    monkeypatch.setattr(prefetch, "BIG", 0)  # fork even for this small file
    reading = prefetch.start(str(path))
    assert reading.pid is not None, "the file was handed to a child"
    docs, bad = reading.result()
    assert [d.data for d in docs] == [d.data for d in here_docs]
    assert [dict(d.positions) for d in docs] == [dict(d.positions) for d in here_docs]
    assert [(b.index, b.line, b.error.line, b.error.col, b.error.message, b.error.code) for b in bad] == [
        (b.index, b.line, b.error.line, b.error.col, b.error.message, b.error.code) for b in here_bad
    ]
    assert len(bad) == 2, "the unclosed bracket and the duplicate key, each on its own"


def test_a_yaml_error_survives_pickling_with_its_place_and_code() -> None:
    err = yamlguard.YamlError(3, 7, "duplicate key 'name'", "JT003")
    back = pickle.loads(pickle.dumps(err))
    assert (back.line, back.col, back.message, back.code) == (3, 7, "duplicate key 'name'", "JT003")


def test_simulate_prints_the_same_json_however_the_file_was_read(monkeypatch: Any) -> None:
    scenario = str(SCENARIOS / "01-cofunded.yaml")
    here = CliRunner().invoke(command, [scenario, "--format", "json"])
    monkeypatch.setattr(prefetch, "BIG", 0)
    forked = CliRunner().invoke(command, [scenario, "--format", "json"])
    assert here.exit_code == forked.exit_code == 0, (here.output, forked.output)
    assert forked.stdout_bytes == here.stdout_bytes
    assert json.loads(forked.stdout_bytes)["checkpoints"], "the scenario's checkpoints are in the output"
