"""The researcher's verbs as kubectl users expect them: `-o json|yaml|wide|name`, help that says what is taken, clear refusals.

On the lottery example's fleet (runs a1, fill in team-a, b1 in team-b, c1, c2 in team-c; b1 waits),
and on a repository that is no fleet.
"""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli.runs import command as runs_group
from tests.support.fleets import runs

NOW = "2026-03-02T09:56:00Z"


def test_get_run_o_yaml_prints_the_run_object_with_its_status_without_a_cluster(lottery: Path) -> None:
    shown = runs("get", "b1", "-o", "yaml", repo=lottery)
    assert shown.code == 0, shown.err
    run = yaml.safe_load(shown.out)
    assert (run["apiVersion"], run["kind"], run["metadata"]) == (
        "rq.davidlangworthy.io/v1",
        "Run",
        {"name": "b1", "namespace": "team-b"},
    )
    assert run["spec"]["owner"] == "org:team-b" and run["spec"]["resources"]["totalGPUs"] == 32
    assert run["status"]["phase"] == "Pending" and run["status"]["funding"]["ownedGPUs"] == 0
    assert run["status"]["reservation"] == {"name": "b1", "earliestStart": "2026-03-02T10:10:00Z"}
    # more than one run (or none named): a List, as `kubectl get runs -o json` prints
    listed = json.loads(runs("get", "-n", "team-a", "-o", "json", repo=lottery).out)
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "List")
    assert [r["metadata"]["name"] for r in listed["items"]] == ["a1", "fill"]
    # --format json keeps printing the versioned RunList document
    assert runs("get", "-n", "team-a", "--format", "json", repo=lottery).json()["kind"] == "RunList"


def test_leases_o_yaml_prints_lease_objects_as_state_holds_them(lottery: Path) -> None:
    listed = yaml.safe_load(runs("leases", "b1", "-o", "yaml", repo=lottery).out)
    assert listed["kind"] == "List" and {x["kind"] for x in listed["items"]} == {"Lease"}
    assert [x["spec"]["slice"]["nodes"][0] for x in listed["items"]] == [
        "A-n03#0",
        "A-n04#0",
        "A-n05#0",
        "A-n06#0",
    ]


def test_o_name_prints_names_a_verb_takes_back(lottery: Path) -> None:
    names = runs("get", "-o", "name", repo=lottery).out.split()
    assert names == ["run/team-a/a1", "run/team-a/fill", "run/team-b/b1", "run/team-c/c1", "run/team-c/c2"]
    assert runs("plan", "b1", "-o", "name", repo=lottery).out == "run/team-b/b1\n"
    again = runs("plan", "run/team-b/b1", "--now", NOW, "-o", "json", repo=lottery).json()
    assert again["run"] == "team-b/b1"
    assert runs("leases", "b1", "-o", "name", repo=lottery).out.startswith("lease/b1-g0-")
    assert (
        runs("budgets", "usage", "-o", "name", repo=lottery).out.splitlines()[0]
        == "envelope/team-a/west-h100"
    )


def test_sponsors_name_and_widen_like_the_others(cofunded: Path) -> None:
    assert runs("sponsors", "-o", "name", repo=cofunded).out == "envelope/mm-vision/west-h100\n"
    header = runs("sponsors", "-o", "wide", repo=cofunded).out.splitlines()[0]
    assert header.split()[-2:] == ["FLAVOR", "HEADROOM"]


def test_o_wide_adds_columns_and_o_yaml_is_the_document_as_yaml(lottery: Path) -> None:
    wide = runs("get", "--now", NOW, "-o", "wide", repo=lottery).out.splitlines()
    assert wide[0].split() == [
        "NAMESPACE", "NAME", "PHASE", "GPUS", "DESIRED", "PENDING", "REASON", "ETA", "OWNER", "IN", "LINE",
        "STARTED", "MESSAGE",
    ]  # fmt: skip
    assert "org:team-b  1 of 1" in next(line for line in wide if " b1 " in line)
    assert "OPENED" in runs("leases", "b1", "-o", "wide", repo=lottery).out
    plan = yaml.safe_load(runs("plan", "b1", "--now", NOW, "-o", "yaml", repo=lottery).out)
    assert plan == runs("plan", "b1", "--now", NOW, "--format", "json", repo=lottery).json()


def test_o_and_format_asking_for_different_output_is_a_usage_error(lottery: Path) -> None:
    shown = runs("get", "-o", "yaml", "--format", "json", repo=lottery)
    assert shown.code == 2 and "-o yaml and --format json ask for different output" in shown.err
    assert runs("get", "-o", "json", "--format", "json", repo=lottery).code == 0


@pytest.mark.parametrize(("verb", "usage"), [
    (["plan"], "Usage: runs plan [OPTIONS] RUN\n"),
    (["explain"], "Usage: runs explain [OPTIONS] RUN\n"),
    (["watch"], "Usage: runs watch [OPTIONS] RUN\n"),
    (["shrink"], "Usage: runs shrink [OPTIONS] RUN\n"),
    (["get"], "Usage: runs get [OPTIONS] [RUN]...\n"),
])  # fmt: skip
def test_help_shows_one_run_where_one_is_taken(verb: list[str], usage: str) -> None:
    shown = CliRunner().invoke(runs_group, [*verb, "--help"])
    assert shown.output.startswith(usage)
    assert "docs/cli.md" not in shown.output  # the JSON is described in docs/json.md
    if verb != ["shrink"]:
        assert "docs/json.md" in shown.output


def test_a_negative_or_zero_resize_is_refused_by_what_it_is(lottery: Path) -> None:
    shown = runs("grow", "c1", "--by", "-8", repo=lottery)
    assert shown.code == 2 and "-8 is not in the range x>=1" in shown.err
    assert "is not a width it may take" not in shown.err
    assert runs("shrink", "c1", "--by", "0", repo=lottery).code == 2


def test_a_repository_that_is_no_fleet_is_said_to_be_none(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "notes"), initial_head="main")
    (tmp_path / "notes" / "todo.yaml").write_text("a: 1\n")
    repo.index.add("todo.yaml")
    repo.index.write()
    sig = pygit2.Signature("Ada", "ada@example.com")
    repo.create_commit("refs/heads/main", sig, sig, "notes\n", repo.index.write_tree(), [])
    for verb in (["get"], ["budgets", "usage"], ["plan", "x"]):
        shown = runs(*verb, repo=tmp_path / "notes")
        assert shown.code == 2, verb
        assert "has no jobtree.yaml: it is not a fleet repository" in shown.err and "No runs" not in shown.out
