"""`jobtree validate` and `jobtree codeowners` as users run them: output formats, exit codes, --rev, no tracebacks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.cli import main
from tests.conftest import GOLDEN as GOLDEN_DIR
from tests.conftest import Golden
from tests.support import REPO
from tests.support.corpus import materialize

GOLDEN = GOLDEN_DIR / "validate-broken.github.txt"


def jobtree(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_a_valid_fleet_exits_zero_with_nothing_on_stdout(tmp_path: Path) -> None:
    result = jobtree("validate", str(materialize("seeds", tmp_path)))
    assert (result.exit_code, result.stdout) == (0, "")
    assert "fleet valid" in result.stderr


def test_an_invalid_fleet_exits_three_with_one_path_line_col_code_message_per_problem(tmp_path: Path) -> None:
    result = jobtree("validate", str(materialize("broken", tmp_path)))
    assert result.exit_code == 3
    lines = result.stdout.splitlines()
    want = "runs/team-a/wrong-owner.yaml:8:3: JT021 namespace team-a belongs to org:team-a, not org:team-b; "
    assert any(line.startswith(f"{want}set spec.owner: org:team-a") for line in lines)
    for line in lines:
        path, lineno, col, rest = line.split(":", 3)
        assert path.endswith(".yaml") and lineno.isdigit() and col.isdigit() and rest[1:3] == "JT"
    assert "problems" in result.stderr


def test_the_template_fleet_is_valid() -> None:
    template = REPO / "fleet-repo-template"
    assert jobtree("validate", str(template)).exit_code == 0


def test_json_lists_every_object_with_its_verdict(tmp_path: Path) -> None:
    result = jobtree("validate", str(materialize("broken", tmp_path)), "--format", "json")
    doc = json.loads(result.stdout)
    assert doc["version"] == 1 and doc["valid"] is False
    verdicts = {(o["kind"], o["namespace"], o["name"]): o["verdict"] for o in doc["objects"]}
    assert verdicts[("Run", "team-a", "ok")] == "valid"
    assert verdicts[("Run", "team-a", "wrong-owner")] == "invalid"
    assert verdicts[("Budget", None, "loop-a")] == "invalid"
    owner = next(o for o in doc["objects"] if o["name"] == "wrong-owner")
    assert (owner["path"], owner["line"], owner["diagnostics"][0]["code"]) == (
        "runs/team-a/wrong-owner.yaml",
        2,
        "JT021",
    )
    assert len(doc["diagnostics"]) == sum(len(o["diagnostics"]) for o in doc["objects"])


def test_github_format_matches_the_golden_annotations(tmp_path: Path, golden: Golden) -> None:
    result = jobtree("validate", str(materialize("broken", tmp_path)), "--format", "github")
    assert result.exit_code == 3
    golden.check("validate-broken.github.txt", result.stdout)


def test_github_annotations_escape_percent_commas_and_colons() -> None:
    from reconciler.cli.validate import github_line
    from schemas.diagnostics import Diagnostic

    line = github_line(Diagnostic("runs/a,b:c.yaml", 3, 4, "JT010", "50% bad, next: x"))
    assert line == "::error file=runs/a%2Cb%3Ac.yaml,line=3,col=4,title=JT010::50%25 bad, next: x"


def test_a_diagnostic_is_always_one_line_even_when_it_quotes_a_multiline_value() -> None:
    from reconciler.cli.validate import github_line
    from schemas.diagnostics import Diagnostic

    d = Diagnostic("runs/a/b.yaml", 3, 4, "JT010", "kind 'a\nb' does not belong here;\r\n expected Run")
    assert str(d) == "runs/a/b.yaml:3:4: JT010 kind 'a b' does not belong here; expected Run"
    assert "\n" not in github_line(d) and "%0A" not in github_line(d)


def test_a_missing_repository_folder_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "is not a directory" in result.stderr


def _commit_fleet(root: Path) -> pygit2.Repository:
    repo = pygit2.init_repository(str(root))
    index = repo.index
    index.add_all()
    index.write()
    sig = pygit2.Signature("t", "t@example.com", 1767225600, 0)
    repo.create_commit("HEAD", sig, sig, "fleet", index.write_tree(), [])
    return repo


def test_rev_reads_the_committed_files_not_the_working_tree(tmp_path: Path) -> None:
    root = materialize("seeds", tmp_path)
    _commit_fleet(root)
    (root / "runs" / "team-b" / "j2.yaml").write_text("kind: [broken\n")
    assert jobtree("validate", str(root)).exit_code == 3
    assert jobtree("validate", str(root), "--rev", "HEAD").exit_code == 0


def test_rev_reads_a_fleet_kept_in_a_subfolder_of_a_repository(tmp_path: Path) -> None:
    materialize("broken", tmp_path)
    _commit_fleet(tmp_path)
    result = jobtree("validate", str(tmp_path / "broken"), "--rev", "HEAD", "--format", "github")
    assert result.stdout == GOLDEN.read_text()


def test_an_unknown_revision_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    root = materialize("seeds", tmp_path)
    _commit_fleet(root)
    result = CliRunner().invoke(main, ["validate", str(root), "--rev", "no-such-branch"])
    assert result.exit_code == 2
    assert "no-such-branch" in result.stderr


def test_rev_outside_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    root = materialize("seeds", tmp_path)
    result = CliRunner().invoke(main, ["validate", str(root), "--rev", "HEAD"])
    assert result.exit_code == 2
    assert "not inside a Git repository" in result.stderr


def test_the_installed_console_script_validates_a_fleet(tmp_path: Path) -> None:
    script = shutil.which("jobtree", path=str(Path(sys.executable).parent))
    assert script is not None
    proc = subprocess.run(
        [script, "validate", str(materialize("broken", tmp_path))], capture_output=True, text=True
    )
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert proc.stdout.count("\n") == GOLDEN.read_text().count("\n")


def test_codeowners_gives_the_platform_everything_and_each_team_its_runs_folder(tmp_path: Path) -> None:
    result = jobtree("codeowners", str(materialize("broken", tmp_path)))
    assert result.exit_code == 0
    want_lines = ["* @example/platform", "/runs/team-a/ @example/team-a", "/runs/team-b/ @example/team-b"]
    assert result.stdout.splitlines()[1:] == want_lines


def test_codeowners_write_puts_the_file_where_github_reads_it(tmp_path: Path) -> None:
    root = materialize("seeds", tmp_path)
    assert jobtree("codeowners", str(root), "--write").exit_code == 0
    assert (root / ".github" / "CODEOWNERS").read_text().splitlines()[1:] == [
        "* @example/platform",
        "/runs/example/ @example/sys",
        "/runs/rai-sys/ @example/rai-sys",
    ]


def test_codeowners_refuses_a_broken_jobtree_yaml(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["codeowners", str(materialize("bad-config", tmp_path))])
    assert result.exit_code == 3
    assert "fix jobtree.yaml first" in result.stderr


# --- arbitrary input: validate reports, it never raises --------------------------------------

JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
MANIFESTISH = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["rq.davidlangworthy.io/v1", "v1"]),
        "kind": st.sampled_from(["Run", "Budget", "FleetConfig", "Lease", "Other"]),
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from(["a", "b", "Bad"]), "namespace": st.sampled_from(["ns", "x"])}
        ),
        "spec": JSONISH,
    }
)
PATHS = st.sampled_from(
    ["jobtree.yaml", "budgets/a.yaml", "runs/ns/a.yaml", "runs/x/b.yml", "inventory/nodes.yaml", "README.md"]
)
CONTENT = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    JSONISH.map(lambda d: yaml.safe_dump(d).encode()),
    st.lists(MANIFESTISH, max_size=3).map(lambda ds: yaml.safe_dump_all(ds).encode()),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(PATHS, CONTENT, max_size=5))
def test_validate_never_raises_on_arbitrary_files_it_only_reports(files: dict[str, bytes]) -> None:
    from reconciler.cli.validate import render_github, render_json, render_text
    from schemas.fleetcheck import check_fleet

    fleet = check_fleet(files)
    for render in (render_text, render_github, render_json):
        render(fleet)
    assert fleet.valid == (not fleet.diagnostics)
    assert all(d.line >= 1 and d.col >= 1 for d in fleet.diagnostics)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.dictionaries(PATHS, CONTENT, max_size=4))
def test_the_validate_command_exits_zero_or_three_on_arbitrary_files(
    tmp_path: Path, files: dict[str, bytes]
) -> None:
    root = tmp_path / "fleet"
    shutil.rmtree(root, ignore_errors=True)
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    root.mkdir(exist_ok=True)
    result = CliRunner().invoke(main, ["validate", str(root)])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    fleet = any(
        rel == "jobtree.yaml" or rel.split("/")[0] in ("budgets", "runs", "inventory") for rel in files
    )
    assert result.exit_code in ((0, 3) if fleet else (2,))  # a folder that is no fleet at all: said so


def test_a_folder_that_is_no_fleet_is_said_to_be_none_not_reported_file_by_file(tmp_path: Path) -> None:
    # the Jobtree repository itself (examples, the template) is no fleet: one line, not a problem a file
    checkout = tmp_path / "jobtree"
    shutil.copytree(REPO / "fleet-repo-template", checkout / "fleet-repo-template")
    shutil.copytree(REPO / "examples", checkout / "examples")
    result = CliRunner().invoke(main, ["validate", str(checkout)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip() == (
        f"jobtree validate: {checkout} has no jobtree.yaml (and no budgets/, runs/ or inventory/): it is not "
        "a fleet repository; did you mean jobtree validate fleet-repo-template?"
    )


def test_a_fleet_that_lost_its_jobtree_yaml_is_still_validated(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    shutil.copytree(REPO / "fleet-repo-template", fleet)
    (fleet / "jobtree.yaml").unlink()
    result = CliRunner().invoke(main, ["validate", str(fleet)])
    assert result.exit_code == 3 and "JT020 jobtree.yaml is missing" in result.stdout


@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_every_format_is_byte_stable_across_runs(fmt: str, tmp_path: Path) -> None:
    root = str(materialize("broken", tmp_path))
    assert (
        jobtree("validate", root, "--format", fmt).stdout == jobtree("validate", root, "--format", fmt).stdout
    )
