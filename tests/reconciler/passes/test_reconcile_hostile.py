"""Hostile spec files met by `reconcile` as `jobtree validate` meets them: the same problems, named
by file and line, and nothing running touched.

Reconcile reads spec files by blob id through its parse cache (`speccache`), validate through
`gitread`; both must see a symbolic link, a file past the size limit and an empty file alike.
The template fleet (see test_reconcile.py) runs five runs after its first pass.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pygit2
from click.testing import CliRunner

from reconciler.cli import main
from reconciler.cli.reconcile import command
from reconciler.git import read as gitread
from schemas.layout import MAX_FILE_BYTES
from tests.support.git import reconciled, state_at

RUNNING = "runs/media-audio/whisper-finetune.yaml"


def git(work: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=Ada", "-c", "user.email=ada@example.com", *args],
        cwd=work, check=True, capture_output=True,
    )  # fmt: skip


def test_symlinks_huge_and_empty_files_are_reported_as_validate_reports_them_and_nothing_running_moves(
    tmp_path: Path,
) -> None:
    work, repo = reconciled(tmp_path)
    before = {x.run: x.slots for x in state_at(repo).leases if x.open}
    neighbour = (work / RUNNING).read_bytes().replace(b"whisper-finetune", b"neighbour")
    (work / "runs/media-audio/neighbour.yaml").write_bytes(neighbour)  # valid: it must still start
    os.symlink("/etc/passwd", work / "runs/media-audio/passwd.yaml")
    (work / RUNNING).unlink()
    os.symlink("../rai-sys/moe-spares.yaml", work / RUNNING)  # a running run's file becomes a link
    (work / "runs/media-audio/huge.yaml").write_bytes(
        neighbour.replace(b"neighbour", b"huge") + b"# " + b"x" * MAX_FILE_BYTES + b"\n"
    )
    (work / "runs/media-audio/empty.yaml").write_bytes(b"")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "hostile files")

    checked = CliRunner().invoke(main, ["validate", str(work), "--rev", "HEAD"])
    assert checked.exit_code == 3, checked.output
    want = sorted(line for line in checked.output.splitlines() if line.startswith("runs/"))
    assert [line.split(":")[0] for line in want] == [
        "runs/media-audio/empty.yaml",
        "runs/media-audio/huge.yaml",
        "runs/media-audio/passwd.yaml",
        "runs/media-audio/whisper-finetune.yaml",
    ]
    assert "symbolic link (to /etc/passwd)" in want[2] and "root:" not in checked.output  # never read through
    assert "larger than 8 MiB" in want[1] and "holds no object" in want[0]

    result = CliRunner().invoke(command, [str(work), "--once", "--now", "2026-03-02T09:10:00Z", "--quiet"])
    assert result.exit_code == 3, (
        result.output
    )  # invalid fleet files (DESIGN §5); the valid ones were reconciled
    assert sorted(line for line in result.stderr.splitlines() if line.startswith("runs/")) == want
    after = state_at(repo)
    assert {x.run: x.slots for x in after.leases if x.open and x.run in before} == before  # nothing moved
    assert "media-audio/neighbour" in {x.run for x in after.leases if x.open}
    assert "media-audio/huge" not in {x.run for x in after.leases}
    status = gitread.read_file(repo, "main", "state/status/runs/media-audio/whisper-finetune.yaml")
    assert status is not None and b"spec invalid: fix runs/media-audio/whisper-finetune.yaml" in status
    assert str(repo.head.target) == str(repo.references["refs/heads/main"].target)
    assert isinstance(repo.head.peel(pygit2.Commit), pygit2.Commit)


def test_a_run_folder_committed_as_a_link_is_reported_and_its_running_runs_keep_running(
    tmp_path: Path,
) -> None:
    # The fault: `runs/rai-llm` replaced by a link to a copy. Git holds only the link's target name,
    # so the folder's runs vanish from the spec; validate said the fleet was valid, and the next
    # pass closed every lease of the running rai-llm/pretrain-64 as RunDeleted.
    work, repo = reconciled(tmp_path)
    running = "rai-llm/pretrain-64"
    before = {x.slots for x in state_at(repo).leases if x.open and x.run == running}
    assert before
    os.rename(work / "runs/rai-llm", work / "rai-llm-copy")
    os.symlink("../rai-llm-copy", work / "runs/rai-llm")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "runs/rai-llm as a link")
    assert repo.head.peel(pygit2.Commit).tree["runs"]["rai-llm"].filemode == pygit2.enums.FileMode.LINK

    for args in (["--rev", "HEAD"], []):  # the commit, and the folder as it is checked out
        checked = CliRunner().invoke(main, ["validate", str(work), *args])
        assert checked.exit_code == 3, checked.output
        (line,) = [line for line in checked.output.splitlines() if line.startswith("runs/rai-llm")]
        assert line.startswith("runs/rai-llm:1:1: JT002 the folder is a symbolic link (to ../rai-llm-copy)")

    result = CliRunner().invoke(command, [str(work), "--once", "--now", "2026-03-02T09:10:00Z", "--quiet"])
    assert result.exit_code == 3, result.output  # the link is an invalid fleet file; the rest was reconciled
    assert "runs/rai-llm:1:1: JT002" in result.stderr
    after = state_at(repo)
    assert {
        x.slots for x in after.leases if x.open and x.run == running
    } == before  # still running, as it was
    assert not [x for x in after.leases if x.run == running and x.closure == "RunDeleted"]
    status = gitread.read_file(repo, "main", f"state/status/runs/{running}.yaml")
    assert status is not None and b"fix runs/rai-llm" in status


def test_a_submodule_in_place_of_rendered_whose_folder_is_missing_is_named_not_a_libgit2_error(
    tmp_path: Path,
) -> None:
    # The fault: `rendered` committed as a submodule (a gitlink) whose folder is not in the work
    # tree. Every pass exited 4 with libgit2's "odb: cannot read object: null OID cannot exist".
    work, repo = reconciled(tmp_path)
    git(work, "rm", "-rq", "rendered")
    git(work, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},rendered")
    git(work, "commit", "-qm", "rendered as a submodule")
    assert not (work / "rendered").exists()

    result = CliRunner().invoke(command, [str(work), "--once", "--now", "2026-03-02T09:10:00Z", "--quiet"])
    assert result.exit_code == 4
    assert "rendered is a submodule (a link to commit 111111111111) whose folder is missing" in result.stderr
    assert "git rm --cached rendered" in result.stderr and "null OID" not in result.stderr

    git(work, "rm", "-q", "--cached", "rendered")  # as the message says
    git(work, "commit", "-qm", "no submodule")
    again = CliRunner().invoke(command, [str(work), "--once", "--now", "2026-03-02T09:15:00Z", "--quiet"])
    assert again.exit_code == 0, again.stderr
    assert (work / "rendered" / "gb-west" / "rai-llm" / "pretrain-64.yaml").is_file()


def test_names_that_climb_out_of_their_folder_are_reported_and_every_neighbour_is_reconciled(
    tmp_path: Path,
) -> None:
    # The fault: a run named `../x` (or in namespace `..`, or a budget named so) made every pass end
    # in a traceback (`ValueError: invalid path 'state/status/runs/rai-sys/../x.yaml'`): the object was
    # refused, but its name still named the status file of the run left out, so nothing else was
    # reconciled until a person removed the file.
    work, repo = reconciled(tmp_path)
    before = {x.run: x.slots for x in state_at(repo).leases if x.open}
    running = (work / RUNNING).read_bytes()
    hostile = {
        "runs/media-audio/climber.yaml": running.replace(b"name: whisper-finetune", b"name: ../x"),
        "runs/media-audio/rooted.yaml": running.replace(b"namespace: media-audio", b'namespace: ".."'),
        "runs/media-audio/slashed.yaml": running.replace(b"name: whisper-finetune", b"name: ../rai-sys/y"),
        "budgets/climber.yaml": (work / "budgets/media.yaml")
        .read_bytes()
        .replace(b"name: media", b"name: ../../x"),
    }
    for rel, data in hostile.items():
        assert data != running and b".." in data
        (work / rel).write_bytes(data)
    neighbour = running.replace(b"whisper-finetune", b"neighbour")
    (work / "runs/media-audio/neighbour.yaml").write_bytes(neighbour)  # valid: it must still start
    git(work, "add", "-A")
    git(work, "commit", "-qm", "hostile names")

    checked = CliRunner().invoke(
        main, ["validate", str(work), "--rev", "HEAD", "--now", "2026-03-02T09:10:00Z"]
    )
    assert checked.exit_code == 3, checked.output
    want = sorted(line for line in checked.output.splitlines() if line.split(":")[0] in hostile)
    assert [line.split(":")[0] for line in want] == sorted(hostile)
    assert all(" JT010 metadata." in line for line in want)

    result = CliRunner().invoke(command, [str(work), "--once", "--now", "2026-03-02T09:10:00Z", "--quiet"])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 3, (
        result.output
    )  # invalid fleet files (DESIGN §5); the valid ones were reconciled
    assert sorted(line for line in result.stderr.splitlines() if line.split(":")[0] in hostile) == want
    after = state_at(repo)
    assert {x.run: x.slots for x in after.leases if x.open and x.run in before} == before  # nothing moved
    assert "media-audio/neighbour" in {x.run for x in after.leases if x.open}
    paths = set(gitread.list_blobs(repo, "main"))
    assert not [p for p in paths if ".." in p.split("/")], "no file is named after a hostile name"
    assert {p for p in paths if p.startswith("state/status/runs/media-audio/")} >= {
        "state/status/runs/media-audio/climber.yaml",  # each run left out goes by its file, and says why
        "state/status/runs/media-audio/slashed.yaml",
    }
