"""The fleet-repo template a platform team copies is valid, and every example run starts as its comment says."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from reconciler.cli import demo
from reconciler.passes import simulation

TEMPLATE_DIR = demo.TEMPLATE
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    return demo.read_tree(TEMPLATE_DIR)


@pytest.fixture(scope="module")
def played(files: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> dict:
    path = tmp_path_factory.mktemp("template") / "template.scenario.yaml"
    path.write_text(yaml.safe_dump(demo.scenario(files, START), sort_keys=False))
    loaded, raw, errors = simulation.load_scenario(str(path))
    assert errors == [] and loaded is not None
    return simulation.Simulation(loaded, raw).play()


def test_every_template_file_is_valid_with_no_diagnostics(files: dict[str, bytes]) -> None:
    assert [str(d) for d in demo.diagnostics(files)] == []


def test_every_yaml_file_in_the_template_parses_to_mappings(files: dict[str, bytes]) -> None:
    # a file of comments alone, a stray scalar or a broken document would each fail here
    for path, text in files.items():
        if path.endswith((".yaml", ".yml")):
            docs = list(yaml.safe_load_all(text))
            assert docs and all(isinstance(doc, dict) and doc for doc in docs), path


def test_every_run_and_budget_file_says_what_it_demonstrates(files: dict[str, bytes]) -> None:
    for path, text in files.items():
        if path.startswith(("runs/", "budgets/")):
            assert text.startswith(b"# "), f"{path} should open with a comment saying what it shows"


def test_all_five_example_runs_start_and_leave_free_capacity(played: dict) -> None:
    runs = played["checkpoints"]["admitted"]["runs"]
    want_runs = {
        "media-audio/whisper-finetune",
        "media-vision/vit-elastic",
        "rai-llm/pretrain-64",
        "rai-sys/moe-spares",
        "rai-sys/train-cofunded",
    }
    assert set(runs) == want_runs
    assert {k: v["phase"] for k, v in runs.items()} == dict.fromkeys(want_runs, "Running")
    assert played["checkpoints"]["admitted"]["reservations"] == {}
    slots = [slot for lease in played["final"]["leases"] for slot in lease["spec"]["slice"]["nodes"]]
    want_held_gb200, want_held_h100 = 64 + 40 + 32, 8 + 16  # of 144 and 64: room for new work
    assert sum(not s.startswith("h100") for s in slots) == want_held_gb200
    assert sum(s.startswith("h100") for s in slots) == want_held_h100


def test_malleable_run_stays_at_its_desired_width(played: dict) -> None:
    # admitted at totalGPUs 16, which is also desiredTotalGPUs: nothing to grow on later passes
    status = played["final"]["runs"]["media-vision/vit-elastic"]
    assert status["width"]["allocated"] == status["width"]["desired"] == 16
    assert status["message"] == "bound 16 GPUs"


def test_cofunded_run_borrows_from_family_and_its_sponsor(played: dict) -> None:
    funding = played["checkpoints"]["admitted"]["runs"]["rai-sys/train-cofunded"]["funding"]
    # 8 of its own, 8 from its parent (family), 16 from its sponsor: maxBorrowGPUs 16 caps only that
    assert (funding["ownedGPUs"], funding["familyGPUs"], funding["sponsoredGPUs"]) == (8, 8, 16)
    assert funding["borrowedGPUs"] == 24  # every GPU another owner pays for
    assert funding["family"] == [{"owner": "org:acme:rai", "gpus": 8}]
    assert funding["sponsors"] == [{"owner": "org:acme:media:vision", "gpus": 16}]


def test_demo_exits_zero_on_the_template(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main() == 0
    assert "template is valid" in capsys.readouterr().out


def test_demo_exits_three_when_a_run_spends_another_teams_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "fleet"
    bad.mkdir()
    for path, text in demo.read_tree(TEMPLATE_DIR).items():
        (bad / path).parent.mkdir(parents=True, exist_ok=True)
        (bad / path).write_bytes(text)
    run = bad / "runs/rai-sys/moe-spares.yaml"
    run.write_text(run.read_text().replace('owner: "org:acme:rai:sys"', 'owner: "org:acme:rai:llm"'))
    monkeypatch.setattr(demo, "TEMPLATE", bad)
    assert demo.main() == 3
    assert "runs/rai-sys/moe-spares.yaml:" in capsys.readouterr().out


# --- the organisation, the inventory and CODEOWNERS ----------------------------------------------


def test_the_organisation_is_a_root_two_divisions_four_teams_and_one_lending_envelope(
    files: dict[str, bytes],
) -> None:
    budgets = [yaml.safe_load(t)["spec"] for p, t in files.items() if p.startswith("budgets/")]
    parents = {b["owner"]: b.get("parents", []) for b in budgets}
    roots = [o for o, ps in parents.items() if not ps]
    divisions = [o for o, ps in parents.items() if ps and all(p in roots for p in ps)]
    teams = [o for o, ps in parents.items() if ps and all(p in divisions for p in ps)]
    assert (len(roots), len(divisions), len(teams)) == (1, 2, 4)
    lending = [e for b in budgets for e in b.get("envelopes", []) if (e.get("lending") or {}).get("allow")]
    assert len(lending) == 1


def test_the_inventory_has_nvl72_domains_and_an_8x8_h100_domain(files: dict[str, bytes]) -> None:
    blocks = yaml.safe_load(files["inventory/nodes.yaml"])["domains"]
    shapes = sorted((b["flavor"], b["nodes"], b["gpusPerNode"]) for b in blocks)
    assert shapes == [("GB200", 18, 4), ("GB200", 18, 4), ("H100-80GB", 8, 8)]


def test_the_committed_codeowners_is_what_jobtree_codeowners_renders(files: dict[str, bytes]) -> None:
    from click.testing import CliRunner

    from reconciler.cli import main

    result = CliRunner().invoke(main, ["codeowners", str(TEMPLATE_DIR)])
    assert result.exit_code == 0
    assert (TEMPLATE_DIR / ".github" / "CODEOWNERS").read_text() == result.stdout


# --- the workflows: GitHub Actions shape, documented action inputs, commands that exist ---------

WORKFLOWS = TEMPLATE_DIR / ".github" / "workflows"
# Inputs documented in each action's action.yml (the major versions the workflows pin).
ACTION_INPUTS = {
    "actions/checkout@v4": {
        "repository", "ref", "token", "ssh-key", "ssh-known-hosts", "ssh-strict", "ssh-user",
        "persist-credentials", "path", "clean", "filter", "sparse-checkout", "sparse-checkout-cone-mode",
        "fetch-depth", "fetch-tags", "show-progress", "lfs", "submodules", "set-safe-directory",
        "github-server-url",
    },
    "actions/setup-python@v5": {
        "python-version", "python-version-file", "cache", "architecture", "check-latest", "token",
        "cache-dependency-path", "update-environment", "allow-prereleases",
    },
    "actions/cache/restore@v4": {
        "path", "key", "restore-keys", "enableCrossOsArchive", "fail-on-cache-miss", "lookup-only",
    },
    "actions/cache/save@v4": {"path", "key", "upload-chunk-size", "enableCrossOsArchive"},
    "actions/upload-artifact@v4": {
        "name", "path", "if-no-files-found", "retention-days", "compression-level", "overwrite",
        "include-hidden-files",
    },
    "actions/github-script@v7": {
        "script", "github-token", "debug", "user-agent", "previews", "result-encoding", "retries",
        "retry-exempt-status-codes",
    },
}  # fmt: skip


def workflow(name: str) -> dict:
    from schemas.yamldoc import parse

    (doc,) = parse((WORKFLOWS / name).read_bytes(), name)  # YAML 1.2: `on` stays a key, not true
    return dict(doc.data)


def jobtree_commands(flow: dict) -> list[list[str]]:
    """Each `jobtree ...` invocation in the workflow's run steps, as argv (shell variables filled in)."""
    import re
    import shlex

    out = []
    for job in flow["jobs"].values():
        for step in job["steps"]:
            for line in str(step.get("run", "")).splitlines():
                line = line.strip()
                if line.startswith("jobtree "):
                    line = re.split(r"\s(?:\d?>|\||;|&&)", line)[0]
                    out.append(shlex.split(re.sub(r"\$\{?(\w+)\}?", r"\1", line))[1:])
    return out


@pytest.mark.parametrize("name", ["plan.yaml", "reconcile.yaml"])
def test_a_workflow_is_well_formed_github_actions(name: str) -> None:
    flow = workflow(name)
    assert {"name", "on", "jobs"} <= set(flow)
    for job in flow["jobs"].values():
        assert job["runs-on"] and job["steps"]
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), step
            if "uses" in step:
                assert step["uses"] in ACTION_INPUTS, (
                    f"pin {step['uses']} to a version whose inputs are known"
                )
                assert set(step.get("with", {})) <= ACTION_INPUTS[step["uses"]], step


@pytest.mark.parametrize("name", ["plan.yaml", "reconcile.yaml"])
def test_every_jobtree_command_a_workflow_runs_exists_with_those_options(name: str) -> None:
    import click

    from reconciler.cli import main

    commands = jobtree_commands(workflow(name))
    assert commands
    for argv in commands:
        ctx = click.Context(main)
        verb = main.get_command(ctx, argv[0])
        assert verb is not None, argv
        verb.make_context(argv[0], argv[1:])  # raises on an unknown option or a bad choice


def test_pull_requests_validate_with_annotations_then_plan_one_sticky_comment_and_the_summary() -> None:
    flow = workflow("plan.yaml")
    assert set(flow["on"]) == {"pull_request"}
    commands = jobtree_commands(flow)
    assert ["validate", "--format", "github"] in commands
    (plan,) = [c for c in commands if c[0] == "plan"]
    assert plan[plan.index("--format") + 1] == "markdown" and "--base" in plan
    text = (WORKFLOWS / "plan.yaml").read_text()
    assert "GITHUB_STEP_SUMMARY" in text and "updateComment" in text and "<!-- jobtree-plan -->" in text
    # the full report (every row) is kept as an artifact too, whatever the plan's exit code
    (upload,) = [s for s in flow["jobs"]["plan"]["steps"] if s.get("uses") == "actions/upload-artifact@v4"]
    assert "plan-full.md" in upload["with"]["path"] and upload["if"].startswith("always()")
    assert ["--output", "plan-full.md"] == plan[plan.index("--output") : plan.index("--output") + 2]


def test_main_pushes_a_schedule_and_dispatch_reconcile_one_at_a_time() -> None:
    flow = workflow("reconcile.yaml")
    assert flow["on"]["push"]["branches"] == ["main"]
    assert flow["on"]["push"]["paths-ignore"] == ["state/**", "rendered/**"]  # its own commits start no pass
    assert flow["on"]["schedule"] and "workflow_dispatch" in flow["on"]
    assert flow["concurrency"]["group"] and flow["concurrency"]["cancel-in-progress"] is False
    (reconcile,) = [c for c in jobtree_commands(flow) if c[0] == "reconcile"]
    assert {"--push", "--apply"} <= set(reconcile)
