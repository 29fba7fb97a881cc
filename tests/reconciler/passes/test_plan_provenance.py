"""`jobtree plan` refuses state/ and rendered/ edits the reconciler did not make, on real repositories.

The reconciler commits to the fleet's branch (`git.branch`, here `main`) and pushes it, so a
commit of its own in a pull request has usually been on that branch: reachable from the base or
from `main` / `origin/main`. Its author and `Spec-Commit` trailer are only a claim anyone can type.
A claimant made anywhere else (`jobtree reconcile --branch pr`) is its own only when its content
proves it: exactly the files one pass computes for its Spec-Commit, parent and author time. The
fleet is `test_prplan`'s, reconciled at 09:00.
"""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner, Result

from reconciler.cli.plan import command
from reconciler.git import read as gitread
from reconciler.passes import pr as plan_module
from reconciler.passes import provenance
from reconciler.passes.reconcile import reconcile_once
from schemas.layout import SPEC_PREFIXES
from tests.reconciler.report import test_prplan as prplan
from tests.reconciler.report.test_prplan import FLEET, NOW, T0, budget, commit, run
from tests.support import REPO
from tests.support.git import write_tree

fleet = prplan.fleet  # the same fixture: the base fleet reconciled at 09:00, branch `pr` at main

LEASE = "state/leases/t/r1.yaml"
BOT = pygit2.Signature("jobtree", "jobtree@fleet.example", T0 + 120, 0)  # the fleet's git.author


def tip(repo: pygit2.Repository, branch: str) -> str:
    return str(repo.references[f"refs/heads/{branch}"].target)


def close_r1_by_hand(repo: pygit2.Repository) -> dict[str, bytes]:
    lease = gitread.read_file(repo, "main", LEASE)
    assert lease is not None and b"closed: false" in lease
    return {LEASE: lease.replace(b"closed: false", b"closed: true", 1)}


def plan(repo: pygit2.Repository, *args: str, base: str = "main", head: str = "pr") -> Result:
    result = CliRunner().invoke(command, [repo.path, "--base", base, "--head", head, "--now", NOW, *args])
    assert "Traceback" not in result.output
    return result


def refused(result: Result, by: str, *reasons: str) -> None:
    """`plan` refused the branch: no report on stdout, r1's lease named as changed by hand in `by`,
    and every one of `reasons` given."""
    assert result.exit_code == 3
    assert result.stdout == ""  # no report that a CI job could post as "no change"
    assert f"{LEASE} (changed by hand in {by[:12]}" in result.stderr
    for reason in reasons:
        assert reason in result.stderr


def merge(repo: pygit2.Repository, branch: str | None, parents: list[str], files: dict[str, bytes]) -> str:
    """A merge commit of `parents` holding exactly `files`; moves `branch` to it (None: no branch)."""
    ref = f"refs/heads/{branch}" if branch else None
    tree, oids = write_tree(repo, files), [pygit2.Oid(hex=p) for p in parents]
    return str(repo.create_commit(ref, prplan.HUMAN, prplan.HUMAN, "merge\n", tree, oids))


def main_moves_on(repo: pygit2.Repository, tmp_path: Path) -> str:
    """Someone merges a later window for `later` into main and the reconciler commits its state there."""
    commit(repo, {"budgets/t.yaml": budget(later_start="2026-03-02T12:00:00Z")}, "later window\n")
    outcome = reconcile_once(tmp_path / "fleet", now=T0 + 60)
    assert outcome.commit is not None and outcome.commit == tip(repo, "main")
    return outcome.commit


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_a_commit_forged_as_the_reconciler_off_main_is_refused_naming_the_file_and_commit(
    fleet: pygit2.Repository, fmt: str
) -> None:
    # the fleet's author and a Spec-Commit trailer, typed by hand: `git -c user.email=... commit`
    trailer = f"Spec-Commit: {tip(fleet, 'main')}"
    forged = commit(fleet, close_r1_by_hand(fleet), f"jobtree: close r1\n\n{trailer}\n", "pr", who=BOT)
    result = plan(fleet, "--format", fmt, "--exit-code")
    refused(
        result,
        forged,
        "authored as jobtree <jobtree@fleet.example> but is not on main",
        "so its state/ and rendered/ edits are refused",
        # recomputing the pass it claims to be shows the edit: jobtree leaves r1 running at 09:02
        f"and {LEASE} differs from what jobtree computes for Spec-Commit {tip(fleet, 'main')[:12]} "
        "at 2026-03-02T09:02:00Z, so",
    )


def test_a_forged_commit_is_refused_in_a_clone_that_has_main_only_as_origin_main(
    fleet: pygit2.Repository, tmp_path: Path
) -> None:
    trailer = f"Spec-Commit: {tip(fleet, 'main')}"
    forged = commit(fleet, close_r1_by_hand(fleet), f"jobtree: close r1\n\n{trailer}\n", "pr", who=BOT)
    clone = ci_checkout(fleet, tmp_path)
    result = plan(clone, base="origin/main", head="origin/pr")
    refused(result, forged)


def ci_checkout(repo: pygit2.Repository, tmp_path: Path) -> pygit2.Repository:
    """What actions/checkout with fetch-depth 0 leaves: every branch as origin/*, no local branch."""
    clone = pygit2.clone_repository(repo.path, str(tmp_path / "ci"))
    clone.set_head(clone.head.target)  # detached, as on the pull request's merge commit
    for name in list(clone.branches.local):
        clone.branches.delete(name)
    assert clone.references.get("refs/remotes/origin/main") is not None
    return clone


def test_a_branch_that_merged_main_with_the_reconcilers_commits_is_accepted(
    fleet: pygit2.Repository, tmp_path: Path
) -> None:
    old_main = tip(fleet, "main")
    commit(fleet, {"runs/t/r3.yaml": run("r3", 8)}, "r3\n", "pr")
    reconciled = main_moves_on(fleet, tmp_path)
    files = gitread.read_files(fleet, "main") | {"runs/t/r3.yaml": run("r3", 8)}
    merge(fleet, "pr", [tip(fleet, "pr"), reconciled], files)
    assert plan(fleet).exit_code == 0
    # against the old main the reconciler's commit is in the range: it is on main, so it is its own
    result = plan(fleet, base=old_main)
    assert result.exit_code == 0, result.output
    # the same where main exists only as fetched (a CI checkout of the pull request)
    clone = ci_checkout(fleet, tmp_path)
    result = plan(clone, base=old_main, head="origin/pr")
    assert result.exit_code == 0, result.output


def test_a_branch_based_on_an_old_main_is_accepted(fleet: pygit2.Repository, tmp_path: Path) -> None:
    commit(fleet, {"runs/t/r3.yaml": run("r3", 8)}, "r3\n", "pr")
    main_moves_on(fleet, tmp_path)
    result = plan(fleet, "--format", "json")
    assert result.exit_code == 0, result.output
    # and as CI plans it: the merge of the pull request into main, against origin/main
    files = gitread.read_files(fleet, "main") | {"runs/t/r3.yaml": run("r3", 8)}
    merge(fleet, "pull-merge", [tip(fleet, "main"), tip(fleet, "pr")], files)  # refs/pull/N/merge
    clone = ci_checkout(fleet, tmp_path)
    result = plan(clone, base="origin/main", head="origin/pull-merge")
    assert result.exit_code == 0, result.output


def test_a_reconciler_commit_whose_spec_commit_is_not_its_ancestor_is_refused(
    fleet: pygit2.Repository,
) -> None:
    # even on main (pushed past review), a state commit must name the spec it was computed from
    old_main = tip(fleet, "main")
    pr_only = commit(fleet, {"runs/t/r3.yaml": run("r3", 8)}, "r3\n", "pr")
    odd = commit(fleet, close_r1_by_hand(fleet), f"jobtree: close r1\n\nSpec-Commit: {pr_only}\n", who=BOT)
    result = plan(fleet, base=old_main, head="main")
    refused(result, odd, f"Spec-Commit {pr_only[:12]} is not one of its ancestors")


def test_a_merge_of_main_that_keeps_the_old_state_is_refused_as_a_rollback(
    fleet: pygit2.Repository, tmp_path: Path
) -> None:
    # `git merge -s ours main`: the merge takes the branch's old state, undoing the reconciler's commit
    commit(fleet, {"runs/t/r3.yaml": run("r3", 8)}, "r3\n", "pr")
    reconciled = main_moves_on(fleet, tmp_path)
    rolled_back = sorted(
        p
        for p, b in gitread.read_files(fleet, "main", ["state/", "rendered/"]).items()
        if gitread.read_file(fleet, "pr", p) != b
    )
    assert rolled_back
    ours = merge(fleet, "pr", [tip(fleet, "pr"), reconciled], gitread.read_files(fleet, "pr"))
    result = plan(fleet)
    assert result.exit_code == 3
    for path in rolled_back:
        assert f"{path} (changed by hand in {ours[:12]}" in result.stderr


def test_the_plan_workflow_fetches_every_branch_so_the_reconcilers_commits_are_known() -> None:
    from schemas.yamldoc import parse

    path = REPO / "fleet-repo-template" / ".github" / "workflows" / "plan.yaml"
    (doc,) = parse(path.read_bytes(), path.name)
    (checkout,) = [
        s for s in doc.data["jobs"]["plan"]["steps"] if str(s.get("uses", "")).startswith("actions/checkout")
    ]
    # fetch-depth 0: all history of all branches (origin/main included), not one merge commit
    assert checkout["with"]["fetch-depth"] == 0
    plan_step = next(s for s in doc.data["jobs"]["plan"]["steps"] if "jobtree plan" in str(s.get("run", "")))
    assert '--base "origin/$BASE_REF"' in plan_step["run"]


# ------------------------------------------------------- reconciler commits made off main, proven by content


def reconcile_pr(repo: pygit2.Repository, tmp_path: Path, at: int = T0 + 60) -> str:
    """`jobtree reconcile --branch pr` at `at`: a genuine state commit on the pull request branch."""
    made = reconcile_once(tmp_path / "fleet", now=at, branch="pr").commit
    assert made is not None and made == tip(repo, "pr")
    return made


def amend(repo: pygit2.Repository, sha: str, files: dict[str, bytes], author_time: int | None = None) -> str:
    """`git commit --amend` on `pr`: same parent, message, author and committer, with `files` changed."""
    old = repo[sha].peel(pygit2.Commit)
    who = old.author
    if author_time is not None:
        who = pygit2.Signature(who.name, who.email, author_time, 0)
    tree = write_tree(repo, gitread.read_files(repo, sha) | files)
    new = repo.create_commit(None, who, who, old.message, tree, [old.parents[0].id])
    repo.references["refs/heads/pr"].set_target(new)
    return str(new)


def test_a_pull_request_reconciled_twice_on_its_own_branch_is_accepted_here_and_in_a_ci_checkout(
    fleet: pygit2.Repository, tmp_path: Path
) -> None:
    commit(fleet, {"runs/t/r3.yaml": run("r3", 8)}, "r3\n", "pr")
    reconcile_pr(fleet, tmp_path)
    commit(fleet, {"runs/t/r4.yaml": run("r4", 8)}, "r4\n", "pr")
    reconcile_pr(fleet, tmp_path, T0 + 120)  # computed from the state the first pass wrote
    result = plan(fleet, "--format", "json")
    assert result.exit_code == 0, result.output
    clone = ci_checkout(fleet, tmp_path)
    result = plan(clone, "--format", "json", base="origin/main", head="origin/pr")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("where", ["state/leases/", "rendered/"])
def test_a_reconciler_commit_amended_by_hand_is_refused_naming_the_file(
    fleet: pygit2.Repository, tmp_path: Path, where: str
) -> None:
    spec = commit(fleet, {"runs/t/r3.yaml": run("r3", 8)}, "r3\n", "pr")
    made = reconcile_pr(fleet, tmp_path)
    (path, data) = next(
        (p, b) for p, b in gitread.read_files(fleet, made, [where]).items() if b"r1" in p.encode()
    )
    edited = amend(fleet, made, {path: data + b"# tweaked\n"})  # author, time and trailer kept
    result = plan(fleet)
    assert result.exit_code == 3 and result.stdout == ""
    want_line = (
        f"  {path} (changed by hand in {edited[:12]}: authored as jobtree <jobtree@fleet.example> but is "
        f"not on main, and {path} differs from what jobtree computes for Spec-Commit {spec[:12]} at "
        "2026-03-02T09:01:00Z, so its state/ and rendered/ edits are refused)"
    )
    assert want_line in result.stderr.splitlines()


def test_a_reconciler_commit_redated_is_refused(fleet: pygit2.Repository, tmp_path: Path) -> None:
    # the same files claimed for another instant: a pass then would have written another asOf
    commit(fleet, {"runs/t/r3.yaml": run("r3", 8)}, "r3\n", "pr")
    made = reconcile_pr(fleet, tmp_path)
    redated = amend(fleet, made, {}, author_time=T0 + 90)
    result = plan(fleet)
    assert result.exit_code == 3
    assert f"(changed by hand in {redated[:12]}:" in result.stderr
    assert "differs from what jobtree computes for Spec-Commit" in result.stderr
    assert "at 2026-03-02T09:01:30Z, so" in result.stderr


def test_a_genuine_pass_for_an_older_spec_laid_on_a_newer_one_is_refused(
    fleet: pygit2.Repository, tmp_path: Path
) -> None:
    # jobtree really computed "r1 deleted: close its leases" for the spec without r1; the branch puts r1
    # back and then lays that pass on top, naming the older spec (its ancestor) as its Spec-Commit
    without_r1 = commit(fleet, {}, "drop r1\n", "pr", delete=("runs/t/r1.yaml",))
    fleet.references.create("refs/heads/scratch", pygit2.Oid(hex=without_r1))
    closing = reconcile_once(tmp_path / "fleet", now=T0 + 60, branch="scratch").commit
    assert closing is not None
    back = commit(fleet, {"runs/t/r1.yaml": run("r1")}, "r1 back\n", "pr")
    genuine = fleet[closing].peel(pygit2.Commit)
    files = gitread.read_files(fleet, back, SPEC_PREFIXES)
    tree = write_tree(fleet, files | gitread.read_files(fleet, closing, ["state/", "rendered/"]))
    laid = fleet.create_commit(
        "refs/heads/pr", genuine.author, genuine.committer, genuine.message, tree, [pygit2.Oid(hex=back)]
    )
    result = plan(fleet)
    refused(result, str(laid), f"its parent's runs/ differs from Spec-Commit {without_r1[:12]}'s")


def test_a_reconciler_commit_against_a_configured_cluster_is_proven_from_what_it_recorded(
    fleet: pygit2.Repository, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the cluster is never reached (no kubeconfig): with no lease open on it (a pass would not believe
    # it with one, `passes.trust`), the pass plans with no node of it, and records that
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    commit(fleet, {}, "end r1 and r2\n", "pr", delete=("runs/t/r1.yaml", "runs/t/r2.yaml"))
    reconcile_pr(fleet, tmp_path)
    clusters = FLEET + b"  clusters:\n    - {name: c1, context: prod}\n"
    commit(fleet, {"jobtree.yaml": clusters, "runs/t/r3.yaml": run("r3", 8)}, "r3 and c1\n", "pr")
    reconcile_pr(fleet, tmp_path, T0 + 90)
    result = plan(fleet)
    assert result.exit_code == 0, result.stderr
    assert "changed by hand" not in result.stderr


def test_beyond_the_bound_reconciler_commits_off_main_are_refused_without_recomputing(
    fleet: pygit2.Repository, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan_module, "MAX_RECOMPUTED", 2)

    def never(*_: object) -> provenance.Verdict:
        raise AssertionError("recomputed a pass beyond the bound")

    monkeypatch.setattr(provenance, "verify", never)
    for i, name in enumerate(["r3", "r4", "r5"]):
        commit(fleet, {f"runs/t/{name}.yaml": run(name, 8)}, f"{name}\n", "pr")
        reconcile_pr(fleet, tmp_path, T0 + 60 * (i + 1))
    result = plan(fleet)
    assert result.exit_code == 3 and result.stdout == ""
    assert "jobtree proves at most 2 such commits per plan by recomputing them (this branch has 3)" in (
        result.stderr
    )
