"""`jobtree validate` on broken and hostile files: each is one clear `path:line:col` line, exit 3, and
the valid objects around it are neither reported nor lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from reconciler.cli import main
from schemas.fleetcheck import check_fleet
from tests.support.corpus import fleet_files, materialize

RUN = """apiVersion: rq.davidlangworthy.io/v1
kind: Run
metadata:
  name: {name}
  namespace: team-b
spec:
  owner: org:team-b
  resources: {{gpuType: H100-80GB, totalGPUs: 8}}
"""


def validate(root: Path, *args: str) -> Result:
    result = CliRunner().invoke(main, ["validate", str(root), *args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def with_file(tmp_path: Path, rel: str, data: bytes) -> Path:
    """The seeds fleet (valid) plus one more file."""
    root = materialize("seeds", tmp_path)
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(data)
    return root


def objects(result: Result) -> dict[tuple[str, str | None], dict[str, Any]]:
    doc = json.loads(result.stdout)
    return {(o["path"], o["name"]): o for o in doc["objects"]}


def only_problem(result: Result) -> str:
    assert result.exit_code == 3, result.output
    (line,) = result.stdout.splitlines()
    return line


def test_a_broken_document_in_a_multi_document_file_costs_only_itself(tmp_path: Path) -> None:
    broken = RUN.format(name="b").replace("totalGPUs: 8}", "totalGPUs: [8}")
    text = "---\n".join([RUN.format(name="a"), broken, RUN.format(name="c")])
    root = with_file(tmp_path, "runs/team-b/batch.yaml", text.encode())
    result = validate(root, "--format", "json")
    assert result.exit_code == 3
    got = objects(result)
    # a: lines 1-8; `---` on 9; b: lines 10-17 with the unclosed [ on line 17; `---` on 18; c from 19
    assert got[("runs/team-b/batch.yaml", "a")]["verdict"] == "valid"
    assert got[("runs/team-b/batch.yaml", "c")]["verdict"] == "valid"
    assert got[("runs/team-b/batch.yaml", "c")]["line"] == 19
    bad = got[("runs/team-b/batch.yaml", "b")]
    assert (bad["verdict"], bad["line"]) == ("invalid", 10)
    ((diag),) = bad["diagnostics"]
    assert (diag["line"], diag["code"]) == (17, "JT001")
    assert all(o["verdict"] == "valid" for k, o in got.items() if k[1] != "b")


def test_running_work_of_a_run_whose_yaml_broke_is_left_alone_not_taken_for_deleted() -> None:
    broken = RUN.format(name="trainer").replace("spec:", "spec: [")
    fleet = check_fleet({"runs/team-b/not-the-name.yaml": broken.encode()})
    assert "Run team-b/trainer" in fleet.rejected


def test_a_tab_used_for_indentation_is_named_as_such(tmp_path: Path) -> None:
    root = with_file(
        tmp_path, "runs/team-b/tab.yaml", RUN.format(name="t").replace("  owner", "\towner").encode()
    )
    line = only_problem(validate(root))
    assert line.startswith("runs/team-b/tab.yaml:7:1: JT001 ")
    assert "tab" in line and "spaces" in line


@pytest.mark.parametrize(
    ("data", "want_prefix", "want_words"),
    [
        pytest.param(
            RUN.format(name="caf\xe9").encode("latin-1"),
            "4:12",
            "not UTF-8",
            id="Latin-1 text names its byte",
        ),
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "1:1", "not UTF-8", id="an image"),
        pytest.param(b"kind: Run\nspec: \x00\x01\x02\n", "2:7", "control character U+0000", id="NUL bytes"),
        pytest.param(RUN.format(name="u").encode("utf-16"), "1:1", "UTF-16", id="UTF-16 text"),
    ],
)
def test_a_file_that_is_not_utf8_text_is_one_diagnostic_at_the_first_bad_byte(
    tmp_path: Path, data: bytes, want_prefix: str, want_words: str
) -> None:
    root = with_file(tmp_path, "runs/team-b/odd.yaml", data)
    line = only_problem(validate(root))
    assert line.startswith(f"runs/team-b/odd.yaml:{want_prefix}: JT001 ")
    assert want_words in line and "UTF-8" in line


@pytest.mark.parametrize(
    "data", [b"", b"# just a comment\n", b"---\n---\n"], ids=["empty", "comment", "dashes"]
)
def test_a_spec_file_with_no_object_is_reported_not_silently_accepted(tmp_path: Path, data: bytes) -> None:
    root = with_file(tmp_path, "runs/team-b/empty.yaml", data)
    line = only_problem(validate(root))
    assert line.startswith("runs/team-b/empty.yaml:1:1: JT002 ")
    assert "holds no object" in line and "delete the file" in line


def test_an_empty_jobtree_yaml_is_itself_reported(tmp_path: Path) -> None:
    root = with_file(tmp_path, "jobtree.yaml", b"")
    result = validate(root)
    assert result.exit_code == 3
    assert any(
        line.startswith("jobtree.yaml:1:1: JT002 jobtree.yaml holds no FleetConfig")
        for line in result.stdout.splitlines()
    )


def test_a_file_over_the_size_limit_is_reported_and_its_neighbours_still_validated(tmp_path: Path) -> None:
    huge = (RUN.format(name="huge") + "# padding\n" * 900_000).encode()  # ~9 MB, past the 8 MiB limit
    root = with_file(tmp_path, "runs/team-b/huge.yaml", huge)
    result = validate(root, "--format", "json")
    assert result.exit_code == 3
    got = objects(result)
    (diag,) = got[("runs/team-b/huge.yaml", "huge")]["diagnostics"]
    assert (diag["line"], diag["code"]) == (1, "JT002") and "larger than 8 MiB" in diag["message"]
    assert got[("runs/team-b/j2.yaml", "j2")]["verdict"] == "valid"


def test_a_duplicate_key_names_both_lines(tmp_path: Path) -> None:
    text = RUN.format(name="d") + "  owner: org:team-a\n"  # line 9 repeats line 7
    root = with_file(tmp_path, "runs/team-b/dup.yaml", text.encode())
    line = only_problem(validate(root))
    assert (
        line
        == "runs/team-b/dup.yaml:9:3: JT011 duplicate key 'owner' (first set at line 7); keep one of them"
    )


@pytest.mark.parametrize(
    ("edit", "want"),
    [
        pytest.param(
            ("totalGPUs: 8", 'totalGPUs: "8"'),
            "8:35: JT010 spec.resources.totalGPUs is the text '8'; remove the quotes so it is a whole number",
            id="a quoted number",
        ),
        pytest.param(
            ("  owner: org:team-b", "  owner: org:team-b\n  funding: {sponsors: org:x}"),
            "8:13: JT010 spec.funding.sponsors is the text 'org:x'; set a list: [a, b], or one '- item' per line",
            id="a scalar where a list belongs",
        ),
    ],
)
def test_a_wrong_field_says_what_to_write_instead(tmp_path: Path, edit: tuple[str, str], want: str) -> None:
    root = with_file(tmp_path, "runs/team-b/w.yaml", RUN.format(name="w").replace(*edit).encode())
    assert only_problem(validate(root)) == f"runs/team-b/w.yaml:{want}"


def test_a_misspelt_field_suggests_the_right_name_and_the_missing_one_points_at_its_parent(
    tmp_path: Path,
) -> None:
    root = with_file(
        tmp_path, "runs/team-b/w.yaml", RUN.format(name="w").replace("  owner:", "  ownr:").encode()
    )
    result = validate(root)
    assert result.exit_code == 3
    assert result.stdout.splitlines() == [
        "runs/team-b/w.yaml:6:1: JT010 spec.owner is required; add it",
        "runs/team-b/w.yaml:7:3: JT010 unknown field spec.ownr; did you mean owner? rename it (or remove it)",
    ]


def test_hostile_yaml_is_refused_with_a_line_and_nothing_else_is_lost(tmp_path: Path) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}' if i > 1 else '*a'] * 10)}]\n" for i in range(1, 8)
    )
    deep = "a: " + "[" * 5000 + "]" * 5000 + "\n"
    root = materialize("seeds", tmp_path)
    (root / "runs" / "team-b" / "bomb.yaml").write_text(bomb)
    (root / "runs" / "team-b" / "deep.yaml").write_text(deep)
    result = validate(root)
    assert result.exit_code == 3
    lines = sorted(result.stdout.splitlines())
    assert len(lines) == 2
    assert lines[0].startswith("runs/team-b/bomb.yaml:") and "repeat more than 100000 values" in lines[0]
    assert lines[1].startswith("runs/team-b/deep.yaml:1:") and "nests deeper than 64" in lines[1]


def test_the_seed_fleet_stays_valid_beside_every_broken_file_above(tmp_path: Path) -> None:
    """The seeds themselves never pick up a diagnostic from a broken neighbour."""
    root = with_file(tmp_path, "runs/team-b/junk.yaml", b"\x00\x01")
    (root / "budgets" / "empty.yaml").write_bytes(b"")
    fleet = check_fleet(fleet_files(root))
    assert {d.path for d in fleet.diagnostics} == {"runs/team-b/junk.yaml", "budgets/empty.yaml"}
    assert {r.metadata.name for r in fleet.runs} == {
        "train-128-cofunded",
        "j2",
        "resnet-small",
        "train-64-with-spares",
    }


def test_an_absurd_gpu_count_is_refused_at_its_line_before_anything_tries_to_split_it(tmp_path: Path) -> None:
    text = RUN.format(name="huge").replace("totalGPUs: 8}", "totalGPUs: 1000000000000}")
    root = with_file(tmp_path, "runs/team-b/huge.yaml", (text + "  locality: {groupGPUs: 1}\n").encode())
    line = only_problem(validate(root))
    assert (
        line
        == "runs/team-b/huge.yaml:8:35: JT010 spec.resources.totalGPUs is 1000000000000; set 1000000 or less"
    )


def test_an_inventory_of_a_trillion_nodes_is_refused_without_listing_them(tmp_path: Path) -> None:
    inventory = b"domains:\n  - {name: A, region: r, cluster: c, flavor: H100-80GB, nodes: 1000000000000, gpusPerNode: 8}\n"
    root = with_file(tmp_path, "inventory/nodes.yaml", inventory)
    line = only_problem(validate(root))
    assert line == "inventory/nodes.yaml:2:57: JT060 domains[0].nodes is 1000000000000; set 100000 or less"


def test_many_large_domain_blocks_are_refused_once_past_a_million_nodes(tmp_path: Path) -> None:
    blocks = "".join(
        f"  - {{name: B{i}, region: r, cluster: c, flavor: H100-80GB, nodes: 100000, gpusPerNode: 8}}\n"
        for i in range(11)
    )
    root = with_file(tmp_path, "inventory/nodes.yaml", f"domains:\n{blocks}".encode())
    line = only_problem(validate(root))
    assert line.startswith(
        "inventory/nodes.yaml:1:1: JT060 the inventory describes 1100000 nodes, more than 1000000"
    )


def test_a_number_in_exponent_form_is_a_number_as_in_yaml_1_2(tmp_path: Path) -> None:
    budget = b"""apiVersion: rq.davidlangworthy.io/v1
kind: Budget
metadata: {name: hours}
spec:
  owner: org:team-b
  envelopes: [{name: e, flavor: H100-80GB, concurrency: 8, maxGPUHours: 1.5e3}]
"""
    root = with_file(tmp_path, "budgets/hours.yaml", budget)
    assert validate(root).exit_code == 0
    assert (
        next(b for b in check_fleet(fleet_files(root)).budgets if b.metadata.name == "hours")
        .spec.envelopes[0]
        .maxGPUHours
        == 1500.0
    )


def test_a_file_of_thousands_of_documents_is_one_diagnostic_and_quick(tmp_path: Path) -> None:
    many = b"a: 1\n---\n" * 400_000 + b"b: [\n"  # a broken last document would re-read each one
    root = with_file(tmp_path, "runs/team-b/many.yaml", many)
    line = only_problem(validate(root))
    assert (
        line
        == "runs/team-b/many.yaml:1:1: JT001 the file holds more than 1000 documents; split it into one file per object"
    )


def test_a_missing_kind_says_which_kind_to_add(tmp_path: Path) -> None:
    root = with_file(tmp_path, "runs/team-b/k.yaml", RUN.format(name="k").replace("kind: Run\n", "").encode())
    line = only_problem(validate(root))
    assert (
        line
        == "runs/team-b/k.yaml:1:1: JT003 kind is missing; add `kind: Run` (with apiVersion, metadata and spec)"
    )


def test_many_small_alias_bombs_in_one_file_add_up_to_one_diagnostic(tmp_path: Path) -> None:
    # each document's aliases repeat ~10^4 values (under the file's cap); 100 of them pass it
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}' if i > 1 else '*a'] * 10)}]\n" for i in range(1, 4)
    )
    root = with_file(tmp_path, "runs/team-b/bombs.yaml", ("---\n" + bomb).encode() * 100)
    line = only_problem(validate(root))
    assert line.startswith("runs/team-b/bombs.yaml:") and "repeat more than 100000 values" in line
