"""`jobtree reconcile` prints what the pass returns: the warnings a person must see even with
--quiet (the pass itself never prints), on success and when the pass fails after giving them."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from reconciler.cli.reconcile import command
from tests.support.git import RESNET_SMALL, commit_by_hand, reconciled


def test_files_put_back_under_state_are_said_even_with_quiet(tmp_path: Path) -> None:
    work, _ = reconciled(tmp_path)
    (work / "state" / "fleet.yaml").write_text("asOf: by hand\n")
    result = CliRunner().invoke(command, [str(work), "--once", "--now", "2026-03-02T09:05:00Z", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "jobtree: put back 1 file under state/ and rendered/ as main has them" in result.stderr
    assert "state/fleet.yaml" in result.stderr and not result.stderr.startswith("[")  # no progress lines


def test_a_now_before_the_last_pass_is_said_before_the_outcome(tmp_path: Path) -> None:
    work, _ = reconciled(tmp_path)  # the first pass ran at 09:00
    result = CliRunner().invoke(command, [str(work), "--once", "--now", "2026-03-02T08:00:00Z", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "jobtree: --now 2026-03-02T08:00:00Z is before the last pass" in result.stderr
    assert result.stdout.startswith("no change at ")


def test_a_pass_that_fails_after_a_warning_still_says_it(tmp_path: Path) -> None:
    import subprocess

    work, _ = reconciled(tmp_path)
    (work / "jobtree.yaml").write_text("kind: [\n")  # every object depends on it: the pass stops (exit 3)
    subprocess.run(["git", "-C", str(work), "-c", "user.name=A", "-c", "user.email=a@x", "commit", "-qam", "x"],
                   check=True)  # fmt: skip
    result = CliRunner().invoke(command, [str(work), "--once", "--now", "2026-03-02T08:00:00Z", "--quiet"])
    assert result.exit_code == 3, result.output
    said = result.stderr
    assert said.index("--now 2026-03-02T08:00:00Z is before the last pass") < said.index(
        "nothing was planned"
    )


def test_progress_counts_read_as_english(tmp_path: Path) -> None:
    # one new 8-GPU run on one node: one lease opened, one event
    work, repo = reconciled(tmp_path)
    commit_by_hand(repo, {"runs/rai-sys/resnet-small.yaml": RESNET_SMALL}, "resnet\n")
    result = CliRunner().invoke(command, [str(work), "--once", "--now", "2026-03-02T09:05:00Z"])
    assert result.exit_code == 0, result.output
    assert "planned: 1 lease event\n" in result.stderr
    assert "1 lease events" not in result.stderr and "0 problems" in result.stderr  # plural for 0 and many


def test_apply_with_no_cluster_says_there_is_nothing_to_apply_and_succeeds_as_reconcile_does(
    tmp_path: Path,
) -> None:
    from reconciler.cli.apply import command as apply

    work, _ = reconciled(tmp_path)
    dry = CliRunner().invoke(apply, [str(work), "--dry-run"])
    assert (
        dry.exit_code == 0
        and "configures no cluster: the embedded cluster has nothing to apply" in dry.stderr
    )
    passed = CliRunner().invoke(command, [str(work), "--once", "--apply", "--now", "2026-03-02T09:05:00Z"])
    assert passed.exit_code == dry.exit_code == 0
