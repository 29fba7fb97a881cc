"""`jobtree plan` on real repositories: what a pull request would change, in text, JSON and Markdown.

The small fleet: one domain A of 2 nodes × 8 H100 (16 GPUs); team t owns envelope `now` (16 GPUs,
always open) and envelope `later` (16 GPUs, window from 10:00). At 09:00 the base is reconciled:
t/r1 (16 GPUs) starts on `now`; t/r2 (16 GPUs) cannot be funded until `later` opens, so it is
reserved window-aligned for 10:00:10 (window start + 10 s, later than 09:00 + the 15m notice).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pygit2
import pytest
from click.testing import CliRunner

from reconciler.cli.plan import command
from reconciler.git import read as gitread
from reconciler.passes.reconcile import reconcile_once
from reconciler.report import compare as prdiff
from reconciler.report import render as planreport
from schemas.common import parse_time
from tests.conftest import Golden
from tests.support.git import write_tree

T0 = parse_time("2026-03-02T09:00:00Z")
NOW = "2026-03-02T09:05:00Z"
HUMAN = pygit2.Signature("Ada", "ada@example.com", T0 - 3600, 0)


FLEET = b"""apiVersion: rq.davidlangworthy.io/v1
kind: FleetConfig
metadata: {name: fleet}
spec:
  tenants:
    - {namespace: t, owner: "org:t"}
  git:
    author: {name: jobtree, email: jobtree@fleet.example}
"""
INVENTORY = b"""domains:
  - {name: A, region: west, cluster: c1, flavor: H100-80GB, nodes: 2, gpusPerNode: 8}
"""


def budget(later_start: str = "2026-03-02T10:00:00Z", now_gpus: int = 16) -> bytes:
    return f"""apiVersion: rq.davidlangworthy.io/v1
kind: Budget
metadata: {{name: t}}
spec:
  owner: "org:t"
  envelopes:
    - {{name: now, flavor: H100-80GB, concurrency: {now_gpus}}}
    - {{name: later, flavor: H100-80GB, concurrency: 16, start: "{later_start}"}}
""".encode()


def run(name: str, gpus: int = 16) -> bytes:
    return f"""apiVersion: rq.davidlangworthy.io/v1
kind: Run
metadata: {{name: {name}, namespace: t}}
spec:
  owner: "org:t"
  resources: {{gpuType: H100-80GB, totalGPUs: {gpus}}}
  locality: {{groupGPUs: 8}}
  template: {{image: "busybox:1", command: ["true"]}}
""".encode()


BASE_FILES = {
    "jobtree.yaml": FLEET,
    "inventory/nodes.yaml": INVENTORY,
    "budgets/t.yaml": budget(),
    "runs/t/r1.yaml": run("r1"),
    "runs/t/r2.yaml": run("r2"),
}


def commit(
    repo: pygit2.Repository,
    files: dict[str, bytes],
    message: str,
    branch: str = "main",
    who: pygit2.Signature = HUMAN,
    delete: tuple[str, ...] = (),
) -> str:
    ref = repo.references.get(f"refs/heads/{branch}")
    parent = ref.peel(pygit2.Commit) if ref is not None else None
    current = gitread.read_files(repo, str(parent.id)) if parent is not None else {}
    tree = write_tree(repo, {p: b for p, b in {**current, **files}.items() if p not in delete})
    parents = [parent.id] if parent is not None else []
    return str(repo.create_commit(f"refs/heads/{branch}", who, who, message, tree, parents))


@pytest.fixture
def fleet(tmp_path: Path) -> pygit2.Repository:
    """The base fleet, reconciled at 09:00, with branch `pr` at the same commit."""
    repo = pygit2.init_repository(str(tmp_path / "fleet"), bare=True, initial_head="main")
    commit(repo, BASE_FILES, "the fleet\n")
    assert reconcile_once(tmp_path / "fleet", now=T0).commit is not None
    repo.references.create("refs/heads/pr", repo.references["refs/heads/main"].target)
    return repo


def plan(repo: pygit2.Repository, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(command, [repo.path, "--base", "main", "--head", "pr", "--now", NOW, *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def changes(repo: pygit2.Repository) -> dict[str, Any]:
    """The JSON report of a change that changes something: `--exit-code` exits 1."""
    code, out = plan(repo, "--format", "json", "--exit-code")
    assert code == 1, out
    report: dict[str, Any] = json.loads(out)
    return report


def test_a_pull_request_adding_a_run_that_fits_shows_it_starting_and_who_pays(
    fleet: pygit2.Repository,
) -> None:
    # a third 8-GPU run: nothing is free in A (r1 holds all 16), so it cannot start; widen A instead
    commit(fleet, {"inventory/nodes.yaml": INVENTORY.replace(b"nodes: 2", b"nodes: 3"),
                   "budgets/t.yaml": budget(now_gpus=24), "runs/t/small.yaml": run("small", 8)}, "small\n", "pr")  # fmt: skip
    report = changes(fleet)
    assert report["version"] == 4
    want_start = {
        "run": "t/small", "gpus": 8, "domains": ["A"], "reason": "Start",
        "payers": [{"payer": "org:t (t/now, own)", "owner": "org:t", "budget": "t", "envelope": "now", "funding": "own", "gpus": 8}],
    }  # fmt: skip
    assert report["starts"] == [want_start]
    assert [b["envelope"] for b in report["budgets"]] == ["t/now"]
    assert report["budgets"][0]["after"]["active"] == 24


def test_a_pull_request_adding_a_run_that_cannot_start_shows_its_reservation(
    fleet: pygit2.Repository,
) -> None:
    commit(fleet, {"runs/t/big.yaml": run("big", 16)}, "big\n", "pr")
    code, out = plan(fleet, "--format", "json")
    assert code == 0  # no --exit-code: success
    report = json.loads(out)
    (reserved,) = report["reserved"]
    # `now` is full (r1); the funding that exists soonest is the `later` window: 10:00 + 10 s,
    # later than 09:05 + the 15m notice (the forecast looks at funding, not at r2's place in line)
    assert reserved["run"] == "t/big"
    assert reserved["earliestStart"] == "2026-03-02T10:00:10Z"
    assert reserved["confidence"] == "window-aligned"
    assert reserved["deficitGPUs"] == 16
    assert reserved["reason"] == "budget window opens at 2026-03-02T10:00:00Z"
    assert report["starts"] == [] and report["cuts"] == []


def test_moving_a_budget_window_reports_how_it_delays_another_run(fleet: pygit2.Repository) -> None:
    commit(fleet, {"budgets/t.yaml": budget(later_start="2026-03-02T12:00:00Z")}, "later window\n", "pr")
    code, out = plan(fleet, "--exit-code")
    assert code == 1
    assert "eta      delays t/r2 by 2h" in out
    code, out = plan(fleet, "--format", "json")
    (eta,) = json.loads(out)["eta"]
    assert eta == {
        "run": "t/r2", "from": "2026-03-02T10:00:10Z", "to": "2026-03-02T12:00:10Z", "seconds": 7200,
        "text": "delays t/r2 by 2h",
    }  # fmt: skip


def test_a_pull_request_that_changes_no_decision_exits_zero_with_exit_code(fleet: pygit2.Repository) -> None:
    commit(fleet, {"README.md": b"# notes\n"}, "docs\n", "pr")
    code, out = plan(fleet, "--exit-code")
    assert code == 0 and out.rstrip().endswith("no change")
    code, out = plan(fleet, "--format", "markdown", "--exit-code")
    assert code == 0 and "No change" in out and out.startswith("<!-- jobtree-plan -->")


def test_hand_edited_state_is_refused_naming_the_file(fleet: pygit2.Repository) -> None:
    commit(fleet, {"state/leases/t/r1.yaml": b"kind: Lease\n"}, "fix a lease by hand\n", "pr")
    code, out = plan(fleet)
    assert code == 3
    assert "state/leases/t/r1.yaml" in out and "written only by jobtree" in out


def test_a_hand_edit_the_branch_puts_back_merges_nothing_and_is_not_refused(fleet: pygit2.Repository) -> None:
    lease = gitread.read_file(fleet, "main", "state/leases/t/r1.yaml")
    assert lease is not None
    edit = commit(fleet, {"state/leases/t/r1.yaml": b"kind: Lease\n"}, "fix a lease by hand\n", "pr")
    code, out = plan(fleet, "--exit-code")
    assert code == 3 and f"git checkout {str(fleet.references['refs/heads/main'].target)[:12]} --" in out
    commit(fleet, {"state/leases/t/r1.yaml": lease}, f"Revert {edit[:12]}\n", "pr")
    code, out = plan(fleet, "--exit-code")
    assert code == 0 and out.rstrip().endswith("no change"), out


def test_state_commits_made_by_reconciling_the_pull_request_branch_itself_are_accepted(
    fleet: pygit2.Repository, tmp_path: Path
) -> None:
    # `jobtree reconcile --branch pr` commits off main: plan recomputes the pass each one claims to be
    # and, as its files are exactly jobtree's, takes it as the reconciler's own
    spec_only = commit(fleet, {"runs/t/r3.yaml": run("r3", 8)}, "r3\n", "pr")
    made = reconcile_once(tmp_path / "fleet", now=T0 + 60, branch="pr").commit
    assert made is not None and made == str(fleet.references["refs/heads/pr"].target)
    code, out = plan(fleet, "--format", "json")
    assert code == 0, out
    # the report is about the spec change only, the same as for the branch before it was reconciled
    want = json.loads(
        CliRunner()
        .invoke(
            command, [fleet.path, "--base", "main", "--head", spec_only, "--now", NOW, "--format", "json"]
        )
        .output
    )
    report = json.loads(out)
    assert report["head"] == made
    assert {**report, "head": spec_only} == want
    assert [r["run"] for r in report["reserved"]] == ["t/r3"]


def test_a_reconciled_branch_whose_state_clashes_with_newer_state_on_the_base_still_plans(
    fleet: pygit2.Repository, tmp_path: Path
) -> None:
    # the branch carries jobtree's state for its own pass; main moves on and jobtree commits newer
    # state there: both changed state/fleet.yaml and the ledger, which is not the change's conflict
    commit(fleet, {"runs/t/r3.yaml": run("r3", 8)}, "r3\n", "pr")
    assert reconcile_once(tmp_path / "fleet", now=T0 + 60, branch="pr").commit is not None
    commit(fleet, {"budgets/t.yaml": budget(later_start="2026-03-02T09:30:00Z")}, "earlier window\n")
    assert reconcile_once(tmp_path / "fleet", now=T0 + 120).commit is not None
    report = changes(fleet)
    assert report["merged"] is not None and [r["run"] for r in report["reserved"]] == ["t/r3"]


def test_an_unknown_base_revision_is_a_usage_error_naming_it(fleet: pygit2.Repository) -> None:
    result = CliRunner().invoke(command, [fleet.path, "--base", "no-such-branch", "--now", NOW])
    assert result.exit_code == 2 and "no-such-branch" in result.output and "Traceback" not in result.output


def test_a_base_naming_a_folder_of_a_commit_is_told_it_is_not_a_commit(fleet: pygit2.Repository) -> None:
    result = CliRunner().invoke(command, [fleet.path, "--base", "main:runs", "--now", NOW])
    assert result.exit_code == 2 and "'main:runs'" in result.output
    assert "names a tree, not a commit: give a branch, tag or commit" in result.output


def test_invalid_head_files_are_listed_and_exit_three(fleet: pygit2.Repository) -> None:
    commit(
        fleet,
        {"runs/t/broken.yaml": b"kind: Run\nmetadata: {name: broken, namespace: t}\nspec: [\n"},
        "x\n",
        "pr",
    )
    code, out = plan(fleet, "--format", "markdown")
    assert code == 3
    assert "runs/t/broken.yaml:" in out and "Invalid files" in out


def test_a_problem_already_on_the_base_branch_is_listed_but_fails_only_the_change_that_made_it(
    fleet: pygit2.Repository,
) -> None:
    broken = {"runs/t/broken.yaml": b"kind: Run\nmetadata: {name: broken, namespace: t}\nspec: [\n"}
    commit(fleet, broken, "broken run on main\n")  # pushed to main directly, past the check
    fleet.references["refs/heads/pr"].set_target(fleet.references["refs/heads/main"].target)
    commit(fleet, {"runs/t/r3.yaml": run("r3", 8)}, "r3\n", "pr")  # an unrelated, valid change
    code, out = plan(fleet, "--format", "markdown", "--exit-code")
    assert code == 1, out  # its changes, not exit 3: the broken file is not this change's
    assert "1 problem already on the base branch" in out and "Invalid files" not in out
    code, out = plan(fleet, "--format", "json")
    report = json.loads(out)
    assert report["diagnostics"] == [] and [d.split(":")[0] for d in report["diagnosticsOnBase"]] == [
        "runs/t/broken.yaml"
    ]
    code, out = plan(fleet)
    assert "invalid, already on the base branch: runs/t/broken.yaml:" in out
    # the change under review comes first; what the base already has wrong follows it
    lines = out.splitlines()
    base_line = next(
        i for i, line in enumerate(lines) if line.startswith("invalid, already on the base branch")
    )
    assert base_line > next(i for i, line in enumerate(lines) if "t/r3" in line)
    code, out = plan(fleet, "--format", "markdown")
    assert out.index("already on the base branch") > out.index("`t/r3`")
    commit(fleet, {"runs/t/also-broken.yaml": broken["runs/t/broken.yaml"]}, "another\n", "pr")
    code, out = plan(fleet, "--exit-code")
    assert code == 3 and "invalid: runs/t/also-broken.yaml:" in out


def test_a_change_that_breaks_the_inventory_shows_no_cuts_and_fails_saying_reconcile_would_stall(
    fleet: pygit2.Repository,
) -> None:
    commit(fleet, {"inventory/nodes.yaml": INVENTORY + b"  - {oops: [\n"}, "break\n", "pr")
    code, out = plan(fleet, "--format", "json", "--exit-code")
    report = json.loads(out)
    assert code == 3
    # reconcile would plan nothing (not stop every run for want of nodes), so nothing changes
    assert not report["changes"] and report["cuts"] == []
    assert report["stalled"] == [
        "inventory/nodes.yaml does not validate at head: reconcile plans nothing there until fixed"
    ]
    assert report["diagnostics"][0].startswith("inventory/nodes.yaml:")
    code, out = plan(fleet, "--format", "markdown")
    assert (
        "**inventory/nodes.yaml does not validate at head: reconcile plans nothing there until fixed.**"
        in out
    )


def test_a_change_that_deletes_the_inventory_fails_though_no_file_is_invalid(
    fleet: pygit2.Repository,
) -> None:
    commit(fleet, {}, "drop the inventory\n", "pr", delete=("inventory/nodes.yaml",))
    code, out = plan(fleet, "--format", "json", "--exit-code")
    report = json.loads(out)
    assert code == 3 and not report["changes"]  # no fake cuts: reconcile would stop instead
    (line,) = report["diagnostics"]
    assert line.startswith(
        "inventory/nodes.yaml:1:1: JT060 inventory/nodes.yaml is missing or lists no node while"
    )
    assert line.endswith("open: after merge reconcile would plan nothing")


def test_a_change_that_fixes_a_broken_inventory_on_the_base_shows_what_reconcile_then_does(
    fleet: pygit2.Repository,
) -> None:
    commit(fleet, {"inventory/nodes.yaml": INVENTORY + b"  - {oops: [\n"}, "broken on main\n")
    fleet.references["refs/heads/pr"].set_target(fleet.references["refs/heads/main"].target)
    code, out = plan(fleet, "--format", "json", "--exit-code")
    assert code == 0 and json.loads(out)["stalled"] == [
        "inventory/nodes.yaml does not validate at base: reconcile plans nothing there until fixed",
        "inventory/nodes.yaml does not validate at head: reconcile plans nothing there until fixed",
    ]
    commit(fleet, {"inventory/nodes.yaml": INVENTORY, "runs/t/r3.yaml": run("r3", 8)}, "fix\n", "pr")
    code, out = plan(fleet, "--format", "json", "--exit-code")
    report = json.loads(out)
    assert (
        code == 1
        and report["diagnostics"] == []
        and report["stalled"]
        == ["inventory/nodes.yaml does not validate at base: reconcile plans nothing there until fixed"]
    )
    # the base plans nothing, so every decision of the first pass after the fix is this change's;
    # the running r1/r2 keep their leases: no cut
    assert report["cuts"] == [] and "t/r3" in [r["run"] for r in report["reserved"] + report["starts"]]


def test_markdown_for_a_huge_change_fits_one_comment_with_a_note(fleet: pygit2.Repository) -> None:
    many = {f"runs/t/run-{i:04d}.yaml": run(f"run-{i:04d}", 8) for i in range(1500)}
    commit(fleet, many, "many\n", "pr")
    code, out = plan(fleet, "--format", "markdown")
    assert code == 0
    assert len(out) <= 65_535
    assert "more rows did not fit in one comment" in out
    assert out.count("| `t/run-") > 100  # as much as fits is shown


def test_a_long_table_never_crowds_out_the_budget_usage_or_leaves_an_empty_table() -> None:
    usage = {"active": 8, "spare": 0, "lentOrShared": 0, "unfunded": 0, "headroom": 0}
    report = {
        "base": "a" * 40, "head": "b" * 40, "now": "2026-03-02T09:05:00Z", "changes": True,
        "starts": [
            {"run": f"t/run-{i:04d}", "gpus": 8, "domains": ["west/c1/A"], "payers": [{"payer": "org:t", "gpus": 8}]}
            for i in range(2000)
        ],
        "reserved": [], "cuts": [], "eta": [],
        "conflicts": [
            {"run": f"u/r{i}", "reservations": [{"reservation": "t/x", "probability": 0.5}]} for i in range(3000)
        ],
        "budgets": [{"envelope": f"t/e{i}", "before": None, "after": usage} for i in range(3)],
    }  # fmt: skip
    out = planreport.as_markdown(report, [])
    assert len(out) <= planreport.COMMENT_LIMIT
    assert out.count("| `t/run-") > 100 and "more rows did not fit in one comment" in out
    budgets = out.split("#### Budget usage")[1]
    assert all(f"| `t/e{i}` |" in budgets for i in range(3))
    for section in out.split("#### ")[1:]:  # every table shown has rows
        assert any(line.startswith("| `") for line in section.splitlines()), section[:80]


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_the_plan_output_matches_its_golden_file(fleet: pygit2.Repository, fmt: str, golden: Golden) -> None:
    commit(fleet, {"budgets/t.yaml": budget(later_start="2026-03-02T12:00:00Z"), "runs/t/big.yaml": run("big")},
           "window and a run\n", "pr")  # fmt: skip
    code, out = plan(fleet, "--format", fmt)
    assert code == 0
    # commit ids depend on the repository, not the plan: name them
    out = out.replace(str(fleet.references["refs/heads/main"].target), "<base>")
    out = out.replace(str(fleet.references["refs/heads/pr"].target), "<head>")
    out = out.replace(str(fleet.references["refs/heads/main"].target)[:12], "<base>")
    out = out.replace(str(fleet.references["refs/heads/pr"].target)[:12], "<head>")
    golden.check(f"plan-window-and-run.{'md' if fmt == 'markdown' else 'json'}", out)


def test_a_pull_request_deleting_a_run_shows_it_stopping_and_the_run_it_lets_start(
    fleet: pygit2.Repository,
) -> None:
    commit(fleet, {}, "drop r1\n", "pr", delete=("runs/t/r1.yaml",))
    report = changes(fleet)
    assert report["cuts"] == [{"run": "t/r1", "reason": "RunDeleted", "gpus": 16, "gpusBefore": 0}]
    # r1's 16 GPUs and its 16 of envelope `now` are free, so r2 no longer waits for the 10:00 window
    (start,) = report["starts"]
    assert (start["run"], start["gpus"], start["payers"]) == (
        "t/r2",
        16,
        [
            {
                "payer": "org:t (t/now, own)",
                "owner": "org:t",
                "budget": "t",
                "envelope": "now",
                "funding": "own",
                "gpus": 16,
            }
        ],
    )
    assert [e["text"] for e in report["eta"]] == ["t/r2 now starts at once instead of 2026-03-02T10:00:10Z"]


def test_cutting_a_budget_under_a_running_run_shows_the_unfunded_gpus(fleet: pygit2.Repository) -> None:
    commit(fleet, {"budgets/t.yaml": budget(now_gpus=8)}, "halve now\n", "pr")
    report = changes(fleet)
    assert report["cuts"] == []  # a budget change never kills work
    (usage,) = [b for b in report["budgets"] if b["envelope"] == "t/now"]
    # r1's group 0 (8 GPUs) stays funded by the 8 left; group 1 keeps running, paid by nobody
    assert (usage["before"]["active"], usage["before"]["unfunded"]) == (16, 0)
    assert (usage["after"]["active"], usage["after"]["unfunded"], usage["after"]["headroom"]) == (8, 8, 0)
    code, out = plan(fleet)
    assert (
        "budget   t/now: 16 active, 0 spare, 0 out, headroom 0 -> 8 active, 0 spare, 0 out, 8 unfunded, headroom 0"
        in out
    )


def test_a_branch_cannot_name_itself_the_reconciler_to_edit_state(fleet: pygit2.Repository) -> None:
    # the pull request rewrites jobtree.yaml's reconciler identity to its author, then "signs" a state edit
    commit(fleet, {"jobtree.yaml": FLEET.replace(b"jobtree@fleet.example", b"ada@example.com")}, "me\n", "pr")
    trailer = f"Spec-Commit: {fleet.references['refs/heads/main'].target}"
    commit(fleet, {"state/leases/t/r1.yaml": b"kind: Lease\n"}, f"jobtree: fix\n\n{trailer}\n", "pr")
    code, out = plan(fleet)
    assert code == 3
    assert "state/leases/t/r1.yaml (changed by hand in" in out


def test_a_commit_posing_as_the_reconciler_that_also_edits_a_run_is_refused(fleet: pygit2.Repository) -> None:
    bot = pygit2.Signature("jobtree", "jobtree@fleet.example", T0, 0)
    trailer = f"Spec-Commit: {fleet.references['refs/heads/main'].target}"
    files = {"state/leases/t/r1.yaml": b"kind: Lease\n", "runs/t/r3.yaml": run("r3", 8)}
    commit(fleet, files, f"jobtree: started r3\n\n{trailer}\n", "pr", who=bot)
    code, out = plan(fleet)
    assert code == 3
    assert "state/leases/t/r1.yaml (changed by hand in" in out and "runs/t/r3.yaml" not in out


def test_a_folder_that_is_not_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, [str(tmp_path), "--base", "main"])
    assert result.exit_code == 2 and "is not a Git repository" in result.output


def test_damaged_state_on_the_base_branch_is_exit_four_naming_the_file(fleet: pygit2.Repository) -> None:
    (lease_file,) = [p for p in gitread.read_files(fleet, "main", ["state/leases/"]) if p.endswith("r1.yaml")]
    # damaged in a commit that looks like jobtree's own (its author, its trailer, only state/), so
    # the state starts from it
    trailer = f"Spec-Commit: {fleet.references['refs/heads/main'].target}"
    bot = pygit2.Signature("jobtree", "jobtree@fleet.example", T0, 0)
    commit(fleet, {lease_file: b"garbage: [\n"}, f"jobtree: oops\n\n{trailer}\n", who=bot)
    fleet.references["refs/heads/pr"].set_target(fleet.references["refs/heads/main"].target)
    code, out = plan(fleet)
    assert code == 4
    assert f"cannot read {lease_file} at base" in out and "state/ on the base branch is damaged" in out


def test_state_damaged_by_hand_on_the_base_branch_is_planned_from_jobtrees_own(
    fleet: pygit2.Repository,
) -> None:
    (lease_file,) = [p for p in gitread.read_files(fleet, "main", ["state/leases/"]) if p.endswith("r1.yaml")]
    commit(fleet, {lease_file: b"garbage: [\n"}, "oops\n")  # a person's commit: reconcile writes it back
    fleet.references["refs/heads/pr"].set_target(fleet.references["refs/heads/main"].target)
    code, out = plan(fleet, "--exit-code")
    assert code == 0, out
    assert "cannot read" not in out


def test_markdown_fits_one_comment_even_when_every_invalid_file_has_a_huge_message(
    fleet: pygit2.Repository,
) -> None:
    def junk(i: int) -> bytes:  # a lending ACL entry of 5,000 characters, quoted back in its diagnostic
        return f"""apiVersion: rq.davidlangworthy.io/v1
kind: Budget
metadata: {{name: junk-{i:03d}}}
spec:
  owner: "org:t"
  envelopes: [{{name: e, flavor: H100-80GB, concurrency: 1, lending: {{allow: true, to: ["a {"x" * 5000}"]}}}}]
""".encode()

    commit(fleet, {f"budgets/junk-{i:03d}.yaml": junk(i) for i in range(60)}, "junk\n", "pr")
    code, out = plan(fleet, "--format", "markdown")
    assert code == 3
    assert len(out) <= 65_535
    assert (
        "Invalid files" in out
        and "budgets/junk-000.yaml:6:" in out
        and "JT034 lending.to entry 'a xxx" in out
    )
    assert "more invalid-file lines" in out and "did not fit in one comment" in out


def test_deleting_a_budget_names_the_running_runs_it_leaves_charged_to_nobody(tmp_path: Path) -> None:
    # The template after one pass: rai-sys's 48-GPU GB200 envelope pays moe-spares (32 GPUs in two
    # groups of 16) and train-cofunded's own part (two groups of 16; media-vision lends it 16). With
    # budgets/rai-sys.yaml deleted, nothing pays moe-spares' two groups, and the loan covers one of
    # train-cofunded's: they keep running, charged to nobody (reclaimed first), and the plan says so.
    from tests.support.git import bare_remote as template_remote
    from tests.support.git import steady_files

    remote = template_remote(tmp_path, steady_files())
    assert reconcile_once(remote, now=T0).commit is not None
    fleet = pygit2.Repository(str(remote))
    fleet.references.create("refs/heads/pr", fleet.references["refs/heads/main"].target)
    commit(fleet, {}, "drop rai-sys's budget\n", "pr", delete=("budgets/rai-sys.yaml",))
    assert changes(fleet)["unfunded"] == [
        {"run": "rai-sys/moe-spares", "groupsBefore": 0, "groupsAfter": 2},
        {"run": "rai-sys/train-cofunded", "groupsBefore": 0, "groupsAfter": 1},
    ]
    code, out = plan(fleet)
    assert "unfunded rai-sys/moe-spares: 0 -> 2 groups charged to nobody" in out
    code, out = plan(fleet, "--format", "markdown")
    assert "| `rai-sys/train-cofunded` | 0 | 1 |" in out


def _start_small_on_main(fleet: pygit2.Repository) -> None:
    """After `pr` left main: main widens A by a node and adds t/small (8 GPUs), which starts at 09:01."""
    bigger = {
        "inventory/nodes.yaml": INVENTORY.replace(b"nodes: 2", b"nodes: 3"),
        "budgets/t.yaml": budget(now_gpus=24),
    }
    commit(fleet, {**bigger, "runs/t/small.yaml": run("small", 8)}, "small\n")
    done = reconcile_once(fleet.path, now=T0 + 60)
    assert done.commit is not None and "t/small +8 GPUs" in done.summary


def test_a_branch_that_has_not_merged_the_base_is_planned_as_its_merge_not_as_deleting_newer_runs(
    fleet: pygit2.Repository,
) -> None:
    _start_small_on_main(fleet)
    commit(fleet, {"README.md": b"# notes\n"}, "docs\n", "pr")  # pr never saw t/small
    code, out = plan(fleet, "--exit-code")
    # merging pr adds a README next to t/small: nothing moves (planning pr's own tree cut t/small)
    assert code == 0 and out.rstrip().endswith("no change"), out
    assert "planned as the merge of both" in out
    code, out = plan(fleet, "--format", "json")
    merged = fleet[json.loads(out)["merged"]].peel(pygit2.Commit)
    main, pr = (fleet.references[f"refs/heads/{b}"].target for b in ("main", "pr"))
    assert [p.id for p in merged.parents] == [main, pr]
    assert "runs/t/small.yaml" in gitread.read_files(fleet, str(merged.id), ["runs/"])


def test_a_head_the_base_already_contains_changes_nothing(fleet: pygit2.Repository) -> None:
    _start_small_on_main(fleet)  # pr is now an ancestor of main
    code, out = plan(fleet, "--format", "json", "--exit-code")
    report = json.loads(out)
    assert code == 0 and report["changes"] is False and report["merged"] is None


def test_a_head_that_conflicts_with_the_base_is_exit_four_naming_the_file(fleet: pygit2.Repository) -> None:
    commit(fleet, {"runs/t/r2.yaml": run("r2", 8)}, "r2 smaller on main\n")
    commit(fleet, {"runs/t/r2.yaml": run("r2", 24)}, "r2 bigger on pr\n", "pr")
    code, out = plan(fleet)
    assert code == 4
    assert "does not merge cleanly" in out and "runs/t/r2.yaml" in out and "rebase" in out


def test_a_shallow_clone_without_the_fork_point_is_told_to_fetch_history(
    fleet: pygit2.Repository, tmp_path: Path
) -> None:
    commit(fleet, {"runs/t/small.yaml": run("small", 8)}, "small\n", "pr")
    clone = tmp_path / "shallow"
    git = ["git", "-c", "protocol.file.allow=always"]
    subprocess.run([*git, "clone", "-q", "--depth", "1", "--no-single-branch", f"file://{fleet.path}", str(clone)], check=True)  # fmt: skip
    result = CliRunner().invoke(
        command, [str(clone), "--base", "origin/main", "--head", "origin/pr", "--now", NOW]
    )
    assert result.exit_code == 4
    assert (
        "shares no history" in result.output
        and "shallow" in result.output
        and "fetch-depth: 0" in result.output
    )
    assert "changed by hand" not in result.output  # not mistaken for hand edits


def test_a_new_image_for_a_running_run_shows_its_pods_rendered_anew_and_the_commit_says_so(
    fleet: pygit2.Repository,
) -> None:
    commit(
        fleet, {"runs/t/r1.yaml": run("r1").replace(b"busybox:1", b"busybox:2")}, "r1 on busybox:2\n", "pr"
    )
    code, out = plan(fleet, "--exit-code")
    # r1 runs 16 GPUs as 2 groups of 8, one pod each; no GPU, reservation or budget moves
    assert code == 1
    assert "update   t/r1: 2 running pods rendered anew (image changed)" in out
    report = json.loads(plan(fleet, "--format", "json")[1])
    assert report["updated"] == [{"run": "t/r1", "pods": 2, "changed": ["image"]}]
    markdown = plan(fleet, "--format", "markdown")[1]
    assert "#### Running pods rendered anew" in markdown and "| `t/r1` | 2 | image |" in markdown
    assert report["starts"] == report["cuts"] == report["budgets"] == []
    # merged, reconcile commits the new pods and its message names the run
    fleet.references["refs/heads/main"].set_target(fleet.references["refs/heads/pr"].target)
    done = reconcile_once(fleet.path, now=parse_time(NOW))
    assert done.commit is not None
    message = fleet[done.commit].peel(pygit2.Commit).message
    assert "rendered pods anew for t/r1 (no GPU moved)" in message
    assert "t/r1 pods rendered anew" in message and "no decision changed" not in message
    pods = gitread.read_files(fleet, done.commit, ["rendered/"])
    (r1,) = [b for p, b in pods.items() if p.endswith("/t/r1.yaml")]
    assert r1.count(b"busybox:2") == 2 and b"busybox:1" not in r1


def test_a_now_before_the_bases_last_pass_is_a_usage_error_exit_two(fleet: pygit2.Repository) -> None:
    commit(fleet, {"runs/t/small.yaml": run("small", 8)}, "small\n", "pr")
    result = CliRunner().invoke(
        command, [fleet.path, "--base", "main", "--head", "pr", "--now", "2026-03-02T08:00:00Z"]
    )
    assert result.exit_code == 2
    assert (
        "--now 2026-03-02T08:00:00Z is before the base's last pass (asOf 2026-03-02T09:00:00Z"
        in result.output
    )


def test_an_output_file_that_cannot_be_written_is_exit_four_after_the_report(
    fleet: pygit2.Repository, tmp_path: Path
) -> None:
    commit(fleet, {"runs/t/big.yaml": run("big")}, "big\n", "pr")
    code, out = plan(fleet, "--output", str(tmp_path / "no-such-dir" / "plan.md"))
    assert code == 4
    assert "reserve  t/big" in out  # the report is still shown
    assert (
        "cannot write --output" in out and "no-such-dir/plan.md" in out and "No such file or directory" in out
    )


def test_a_head_with_no_history_in_common_is_exit_four_saying_the_branches_are_unrelated(
    fleet: pygit2.Repository,
) -> None:
    orphan = fleet.create_commit(None, HUMAN, HUMAN, "unrelated\n", write_tree(fleet, BASE_FILES), [])
    fleet.references["refs/heads/pr"].set_target(orphan)
    code, out = plan(fleet)
    assert code == 4 and "shares no history with the base" in out
    assert "the branches are unrelated; rebase the change onto the base" in out and "shallow" not in out


def test_deleting_a_reserved_run_is_a_change_naming_the_reservation_and_the_conflict_set_it_leaves(
    fleet: pygit2.Repository,
) -> None:
    # at 09:05 r2 waits for the 10:00 window with r1 (all 16 GPUs of A) certain to be drawn: deleting
    # r2 moves no GPU, yet merging it drops a reservation and r1's conflict-set warning
    commit(fleet, {}, "drop r2\n", "pr", delete=("runs/t/r2.yaml",))
    report = changes(fleet)
    assert [e["text"] for e in report["eta"]] == [
        "t/r2 no longer waits in a reservation (was due 2026-03-02T10:00:10Z): removed from the fleet"
    ]
    assert report["conflicts"] == [
        {"run": "t/r1", "reservations": [], "before": [{"reservation": "t/r2", "probability": 1.0}]}
    ]
    code, out = plan(fleet, "--format", "markdown")
    assert "| `t/r1` | none (was t/r2 (1.0)) |" in out


def test_a_change_that_prevents_a_cut_shows_the_cut_no_longer_made(fleet: pygit2.Repository) -> None:
    # at 10:00:10 the base activates r2's reservation, and its lottery cuts r1 (the only run in A);
    # without r2, r1 keeps its 16 GPUs and no longer waits to be re-admitted
    commit(fleet, {}, "drop r2\n", "pr", delete=("runs/t/r2.yaml",))
    result = CliRunner().invoke(
        command,
        [fleet.path, "--base", "main", "--head", "pr", "--now", "2026-03-02T10:00:10Z", "--format", "json"],
    )
    report = json.loads(result.output)
    (cut,) = report["cuts"]
    assert (cut["run"], cut["gpus"], cut["gpusBefore"]) == ("t/r1", 0, 16)
    assert cut["reason"].startswith("RandomPreempt(0x")
    assert "t/r2 no longer starts now (removed from the fleet)" in [e["text"] for e in report["eta"]]


def test_a_reservation_that_now_waits_for_another_reason_is_listed_with_what_it_said_before(
    fleet: pygit2.Repository,
) -> None:
    # the `later` window opens at 08:00 instead of 10:00: r2 is funded now and waits only for r1's
    # GPUs, so it is exposed to a lottery where it waited for money before
    commit(fleet, {"budgets/t.yaml": budget(later_start="2026-03-02T08:00:00Z")}, "open later\n", "pr")
    (reserved,) = changes(fleet)["reserved"]
    assert reserved["run"] == "t/r2"
    assert (reserved["reason"], reserved["confidence"]) == (
        "cluster short by 16 GPUs in scope",
        "conservative",
    )
    assert reserved["was"]["reason"] == "budget window opens at 2026-03-02T10:00:00Z"
    assert reserved["was"]["confidence"] == "window-aligned"


def test_a_forged_state_commit_is_refused_though_a_local_branch_of_the_fleets_name_points_at_it(
    fleet: pygit2.Repository,
) -> None:
    # only the remote's copy of the fleet branch vouches for jobtree's commits: anyone can move a local one
    fleet.remotes.create("origin", "https://git.example/fleet.git")
    fleet.references.create("refs/remotes/origin/main", fleet.references["refs/heads/main"].target)
    bot = pygit2.Signature("jobtree", "jobtree@fleet.example", T0, 0)
    trailer = f"Spec-Commit: {fleet.references['refs/heads/main'].target}"
    commit(
        fleet, {"state/leases/t/r1.yaml": b"kind: Lease\n"}, f"jobtree: refresh\n\n{trailer}\n", "pr", who=bot
    )
    fleet.references["refs/heads/main"].set_target(fleet.references["refs/heads/pr"].target)
    result = CliRunner().invoke(command, [fleet.path, "--base", "origin/main", "--head", "pr", "--now", NOW])
    assert result.exit_code == 3
    assert "state/leases/t/r1.yaml (changed by hand in" in result.output


def test_file_names_and_values_from_a_pull_request_cannot_break_out_of_the_comments_code_spans() -> None:
    report = {"base": "b" * 40, "head": "h" * 40, "now": NOW, "changes": False}
    hostile = "runs/t/a` @org/team [click](https://e.vil) `.yaml:1:1: JT010 totalGPUs: '|x|'"
    out = planreport.as_markdown(report, [hostile])
    assert "- `` runs/t/a` @org/team [click](https://e.vil) `.yaml:1:1: JT010 totalGPUs: '|x|' ``" in out
    assert planreport._code("a|b\nc") == "`a\\|b⏎c`"  # a table cell: the pipe escaped, no line break


@pytest.mark.parametrize(
    ("seconds", "want_text"),
    [(1200, "20m"), (7200, "2h"), (-5400, "1h 30m"), (2682030, "31d 1h 30s"), (45, "45s")],
)
def test_eta_moves_are_worded_in_days_hours_minutes_and_seconds(seconds: int, want_text: str) -> None:
    assert prdiff._duration(seconds) == want_text


def test_a_new_run_waiting_on_another_is_named_though_it_holds_no_reservation(
    fleet: pygit2.Repository,
) -> None:
    after_r2 = run("r3", 8).replace(b"  template:", b"  after: [r2]\n  template:")
    commit(fleet, {"runs/t/r3.yaml": after_r2}, "r3 after r2\n", "pr")
    (waiting,) = changes(fleet)["waiting"]
    assert waiting["run"] == "t/r3" and "r2" in waiting["why"]


def test_a_new_width_for_a_running_fixed_width_run_says_it_waits_for_the_run_to_be_re_created(
    fleet: pygit2.Repository,
) -> None:
    # r1 runs on 16 GPUs; a fixed-width run keeps the width it started with (nothing moves)
    commit(fleet, {"runs/t/r1.yaml": run("r1", 8)}, "r1 at 8\n", "pr")
    report = changes(fleet)
    assert report["widths"] == [
        {
            "run": "t/r1",
            "pending": "8 GPUs once the run is re-created (a running run keeps its width)",
            "before": None,
        }
    ]
    assert report["starts"] == [] and report["cuts"] == []


def test_hot_spares_a_starting_run_holds_are_counted_beside_its_gpus(fleet: pygit2.Repository) -> None:
    # A grows to 5 nodes (40 GPUs, r1 on 16): r2 starts at once with one hot spare per 8-GPU group
    wider = INVENTORY.replace(b"nodes: 2", b"nodes: 5")
    spared = run("r2").replace(
        b"  locality: {groupGPUs: 8}", b"  locality: {groupGPUs: 8}\n  sparesPerGroup: 1"
    )
    commit(fleet, {"inventory/nodes.yaml": wider, "budgets/t.yaml": budget(now_gpus=34), "runs/t/r2.yaml": spared},
           "spares\n", "pr")  # fmt: skip
    code, out = plan(fleet, "--format", "json")
    (start,) = json.loads(out)["starts"]
    assert (start["run"], start["gpus"], start["spareGPUs"]) == ("t/r2", 16, 2)
    code, out = plan(fleet, "--format", "markdown")
    assert "| `t/r2` | 16 (+2 spare) |" in out


def test_the_comment_links_the_bases_pictures_on_the_git_host(
    fleet: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit(fleet, {"runs/t/big.yaml": run("big")}, "a run\n", "pr")
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/fleet")
    code, out = plan(fleet, "--format", "markdown")
    base = str(fleet.references["refs/heads/main"].target)
    assert code == 0
    want = (
        f"The fleet before this change: [fleet map](https://github.example/acme/fleet/blob/{base}/state/fleet.svg)"
        f" · [reservation timeline](https://github.example/acme/fleet/blob/{base}/state/timeline.svg)"
    )
    assert want in out.splitlines()


def test_a_change_lowering_a_runs_desired_width_shows_a_shrink_asked_for_not_a_cut(
    fleet: pygit2.Repository,
) -> None:
    elastic = run("r1").replace(
        b"  locality: {groupGPUs: 8}\n",
        b"  locality: {groupGPUs: 8}\n  malleable: {minTotalGPUs: 8, maxTotalGPUs: 16, stepGPUs: 8}\n",
    )
    commit(fleet, {"runs/t/r1.yaml": elastic}, "r1 elastic\n")
    assert reconcile_once(Path(fleet.path), now=T0 + 60).commit is not None
    fleet.references["refs/heads/pr"].set_target(fleet.references["refs/heads/main"].target)
    lower = elastic.replace(b"stepGPUs: 8}", b"stepGPUs: 8, desiredTotalGPUs: 8}")
    commit(fleet, {"runs/t/r1.yaml": lower}, "r1 gives 8 back\n", "pr")
    report = changes(fleet)
    assert report["cuts"] == [
        {"run": "t/r1", "reason": "Shrink", "gpus": 8, "gpusBefore": 0, "voluntary": True}
    ]
    code, out = plan(fleet)
    assert (
        "shrink   t/r1: 8 GPUs given back (this change lowers desiredTotalGPUs)" in out and "cut " not in out
    )
    code, out = plan(fleet, "--format", "markdown")
    assert "| `t/r1` | 8 | Shrink (asked for: this change lowers desiredTotalGPUs) |" in out


def test_a_reservation_nothing_known_makes_startable_says_so_once(fleet: pygit2.Repository) -> None:
    # the `later` envelope goes: r1 holds `now` whole, so a new 16-GPU run waits for headroom no
    # known event brings: no ETA (§4.5), said once and in words, not `unknown (unknown)`
    only_now = budget().split(b"    - {name: later")[0]
    commit(fleet, {"runs/t/huge.yaml": run("huge", 16), "budgets/t.yaml": only_now}, "huge\n", "pr")
    code, out = plan(fleet)
    (reserved,) = [line for line in out.splitlines() if line.startswith("reserve  t/huge")]
    assert reserved.startswith("reserve  t/huge: ETA unknown (nothing known makes it startable), deficit 16")
    code, out = plan(fleet, "--format", "markdown")
    assert "| `t/huge` | unknown (nothing known makes it startable) | 16 |" in out


def test_adopting_the_cluster_the_inventory_describes_plans_no_cut(fleet: pygit2.Repository) -> None:
    # the template README's path: name the inventory's cluster in jobtree.yaml and delete the inventory;
    # until a pass observes c1, the plan takes its nodes to be the inventory's, so r1 and r2 keep running
    adopted = FLEET + b"  clusters:\n    - {name: c1, context: prod}\n"
    commit(fleet, {"jobtree.yaml": adopted}, "drive c1\n", "pr", delete=("inventory/nodes.yaml",))
    code, out = plan(fleet, "--format", "json", "--exit-code")
    report = json.loads(out)
    assert code == 0, out
    assert report["changes"] is False and report["cuts"] == [] and report["diagnostics"] == []


@pytest.mark.parametrize("name", ["c2", "cl"])
def test_a_cluster_named_unlike_the_one_holding_the_runs_fails_the_plan_and_cuts_nothing(
    fleet: pygit2.Repository, name: str
) -> None:
    named = FLEET + f"  clusters:\n    - {{name: {name}, context: prod}}\n".encode()
    commit(fleet, {"jobtree.yaml": named}, "drive the cluster\n", "pr", delete=("inventory/nodes.yaml",))
    code, out = plan(fleet, "--format", "json", "--exit-code")
    report = json.loads(out)
    assert code == 3 and not report["changes"]  # no fake cuts: reconcile would stop instead
    (line,) = report["diagnostics"]
    assert line.startswith(
        f"jobtree.yaml:1:1: JT081 jobtree.yaml leaves work on clusters no pass can believe: no cluster c1 is "
        f"named (jobtree.yaml names {name}), yet the last state commit has 2 open leases of 1 run there"
    )
    assert line.endswith("after merge reconcile would plan nothing")
