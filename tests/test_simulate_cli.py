"""`jobtree simulate` on hostile or broken scenario files: one clear line, exit 3, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.simulate import command


def run(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(command, [str(path), "--format", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("text", "want_line", "want_words"),
    [
        pytest.param(
            "a: " + "[" * 100_000 + "]" * 100_000, 1, "nests deeper than 64", id="deep flow nesting"
        ),
        # line n opens mapping number n (the top one on line 1), so the 65th opens on line 65
        pytest.param(
            "\n".join(" " * i + f"k{i}:" for i in range(200)) + " 1\n",
            65,
            "nests deeper than 64",
            id="deep block nesting",
        ),  # fmt: skip
        pytest.param("spec: {start: [\n", 2, "YAML syntax error", id="unclosed bracket"),
        pytest.param("a: 1\na: 2\n", 2, "duplicate key 'a'", id="duplicate key"),
    ],
)
def test_a_broken_scenario_file_is_one_clear_line_and_exit_three(
    tmp_path: Path, text: str, want_line: int, want_words: str
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    code, output = run(path)
    assert code == 3
    assert f"{path}:{want_line}:" in output
    assert want_words in output
    assert "Traceback" not in output


def test_a_scenario_with_a_relative_start_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "rel.yaml"
    path.write_text(
        "apiVersion: rq.davidlangworthy.io/v1\nkind: Scenario\nmetadata: {name: x}\n"
        'spec:\n  start: "+5m"\n  inventory: {domains: []}\n  steps: []\n  until: "+1m"\n'
    )
    code, output = run(path)
    assert code == 3
    assert f"{path}:5:" in output and "absolute RFC 3339" in output
