"""`jobtree simulate` on hostile or broken scenario files: one clear line, exit 3, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli.simulate import command
from reconciler.git import ownership
from reconciler.git import read as gitread
from reconciler.state import codec as statefiles
from schemas.common import format_time
from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import EXAMPLES, at


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
        pytest.param("spec: {start: [\n", 1, "YAML syntax error", id="unclosed bracket"),
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


def test_git_writes_each_pass_as_a_commit_at_the_virtual_clock(tmp_path: Path) -> None:
    scenario = EXAMPLES / "04-reservation-and-lottery.yaml"
    plain = CliRunner().invoke(command, [str(scenario), "--format", "json"])
    recorded = CliRunner().invoke(command, [str(scenario), "--format", "json", "--git", str(tmp_path / "h")])
    assert recorded.exit_code == 0
    assert recorded.stdout == plain.stdout  # recording changes nothing in the result
    result = json.loads(recorded.stdout)
    repo = pygit2.Repository(str(tmp_path / "h"))
    commits = list(repo.walk(repo.head.target, pygit2.enums.SortMode.REVERSE))
    passes = [c for c in commits if c.author.email == "jobtree@localhost"]  # the fleet's default author
    times = [format_time(c.author.time) for c in passes]
    assert times == sorted(set(times))  # one commit per pass, in virtual time
    assert {e["at"] for e in result["ledger"]} <= set(times)
    # the scenario changes spec files at +0 (its fleet), +5 (two budgets), +10 (j4), +30 (deletions)
    edits = [format_time(c.author.time) for c in commits if c.author.email == "scenario@localhost"]
    assert edits[:4] == [
        "2026-03-02T09:00:00Z",
        "2026-03-02T09:05:00Z",
        "2026-03-02T09:10:00Z",
        "2026-03-02T09:30:00Z",
    ]
    assert len(commits) == len(passes) + len(edits)
    for c in passes:  # a state commit as reconcile writes one: after the spec it planned, owned files only
        assert ownership.spec_commit_of(c.message) == str(c.parents[0].id)
        paths = {d.new_file.path for d in c.parents[0].tree.diff_to_tree(c.tree).deltas}
        assert paths and all(p.startswith(("state/", "rendered/")) for p in paths)
    files = gitread.read_files(repo, "main", ["state/"])
    final = statefiles.decode({p: b for p, b in files.items() if not p.startswith("state/ledger/")})
    assert sorted(x.name for x in final.leases if x.open) == sorted(
        x["metadata"]["name"] for x in result["final"]["leases"]
    )
    assert {"jobtree.yaml", "inventory/nodes.yaml"} <= set(gitread.list_blobs(repo, "main"))
    again = CliRunner().invoke(command, [str(scenario), "--git", str(tmp_path / "h")])
    assert again.exit_code == 2 and "is not empty; give --git a new or empty directory" in again.output


def test_a_simulated_history_can_be_planned_between_its_commits(tmp_path: Path) -> None:
    # its state commits are jobtree's own, so a what-if branch is planned, not refused as hand edits:
    # from the first pass (j1, j2, j3 running) to the end, the +30m deletions cut all three
    from reconciler.cli.plan import command as plan

    scenario = EXAMPLES / "04-reservation-and-lottery.yaml"
    assert CliRunner().invoke(command, [str(scenario), "--git", str(tmp_path / "h")]).exit_code == 0
    repo = pygit2.Repository(str(tmp_path / "h"))
    first = next(
        c
        for c in repo.walk(repo.head.target, pygit2.enums.SortMode.REVERSE)
        if c.author.email == "jobtree@localhost"
    )
    result = CliRunner().invoke(
        plan,
        [str(tmp_path / "h"), "--base", str(first.id), "--head", "main", "--now", "2026-03-02T10:30:00Z",
         "--format", "json", "--exit-code"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert {c["run"] for c in report["cuts"]} >= {"team-a/j1", "team-a/j3", "team-b/j2"}


def test_simulate_git_never_writes_into_a_persons_repository(tmp_path: Path) -> None:
    scenario = EXAMPLES / "01-cofunded.yaml"
    mine = pygit2.init_repository(str(tmp_path / "mine"), initial_head="master")
    (tmp_path / "mine" / "notes.txt").write_text("uncommitted work\n")
    result = CliRunner().invoke(command, [str(scenario), "--git", str(tmp_path / "mine")])
    assert result.exit_code == 2 and "is not empty" in result.output and "Traceback" not in result.output
    assert (tmp_path / "mine" / "notes.txt").read_text() == "uncommitted work\n"
    assert mine.head_is_unborn and list(mine.references) == []


def test_text_output_names_an_unknown_eta_in_words_and_counts_in_english(tmp_path: Path) -> None:
    # t/big asks more than its envelope will ever fund: reserved with no earliestStart (§4.5)
    doc = scenario(
        {"t": "org:t"}, [domain("A", 4)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(), a_run("t/big", "org:t").gpus(16).build()]),
         at(0, checkpoint="waiting")],
    )  # fmt: skip
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(command, [str(path), "--git", str(tmp_path / "history")])
    assert result.exit_code == 0, result.output
    assert (
        "reservation t/big: Pending earliestStart unknown (nothing known makes it startable)" in result.stdout
    )
    assert "None" not in result.stdout
    assert "wrote 1 pass as state commits, after 1 commit of the spec files" in result.stderr
