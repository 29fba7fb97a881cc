"""A bare remote on a local path: pushed through libgit2 with the same compare-and-swap, its URL read as
Git reads it, and a ref lock a killed push left in it taken over, so it never wedges later passes."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pygit2
import pytest

from reconciler.git import localpath
from reconciler.git import packs as gitpack
from reconciler.git import remote as gitremote
from reconciler.git import write as gitwrite
from reconciler.git.errors import TemporaryGitError
from reconciler.git.remote import PushStatus
from reconciler.passes.reconcile import reconcile_once
from reconciler.state import message
from tests.support.git import (
    BOT,
    NEW_STATE,
    NOW,
    SPEC_SHA,
    lose_the_race_after_the_fetch,
    make_remote,
    remote_head,
)
from tests.support.git import clone_of as clone


def state_commit(repo: pygit2.Repository, files: dict[str, bytes], now: int = NOW) -> str:
    oid = gitwrite.commit_tree(
        repo, "main", str(repo.references["refs/heads/main"].target),
        {path: gitpack.object_id("blob", data).hex() for path, data in files.items()},
        {gitpack.object_id("blob", data).hex(): data for data in files.values()},
        message=message.format_message(["started team-a/r1 (8 GPUs)"], SPEC_SHA),
        author_name=BOT[0], author_email=BOT[1], now=now,
    )  # fmt: skip
    assert oid is not None
    return str(oid)


def fsck(path: Path) -> None:
    checked = subprocess.run(
        ["git", "--git-dir", str(path), "fsck", "--strict"], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_remote(tmp_path)


def test_a_remote_that_moved_after_the_fetch_keeps_its_head_and_the_push_is_stale(
    origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = clone(str(origin), tmp_path / "one.git"), clone(str(origin), tmp_path / "two.git")
    base = remote_head(one)
    state_commit(one, NEW_STATE)
    theirs = state_commit(two, {"state/two.yaml": b"2\n"})
    lose_the_race_after_the_fetch(monkeypatch, two, base)
    lost = gitremote.push(one, "origin", "main", base)
    assert lost.status is PushStatus.STALE and lost.remote_oid == theirs
    assert str(pygit2.Repository(str(origin)).references["refs/heads/main"].target) == theirs
    fsck(origin)


def test_a_branch_locked_by_another_writer_is_a_stale_push_to_retry_and_nothing_moves(
    origin: Path, tmp_path: Path
) -> None:
    """Two reconcilers pushing at once: the one that finds the branch locked re-plans and retries
    (as a server refusing a locked ref makes it), rather than giving up the pass."""
    one = clone(str(origin), tmp_path / "one.git")
    base = remote_head(one)
    state_commit(one, NEW_STATE)
    lock = origin / "refs" / "heads" / "main.lock"
    lock.write_text("held\n")
    assert gitremote.push(one, "origin", "main", base).status is PushStatus.STALE
    lock.unlink()
    assert str(pygit2.Repository(str(origin)).references["refs/heads/main"].target) == base
    assert gitremote.push(one, "origin", "main", base).status is PushStatus.PUSHED


def test_a_branch_lock_let_go_before_the_pusher_looks_is_still_a_stale_push(
    origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The racing writer may release its lock between our failed lock and our look for its lock
    file: the failure itself says the branch was locked, so the pass re-plans rather than fails."""
    one = clone(str(origin), tmp_path / "one.git")
    base = remote_head(one)
    state_commit(one, NEW_STATE)
    lock = origin / "refs" / "heads" / "main.lock"
    lock.write_text("held\n")
    exists = os.path.exists
    monkeypatch.setattr(
        os.path, "exists", lambda p: not str(p).endswith(".lock") and exists(p)
    )  # gone when we look
    assert gitremote.push(one, "origin", "main", base).status is PushStatus.STALE
    monkeypatch.undo()
    lock.unlink()
    assert gitremote.push(one, "origin", "main", base).status is PushStatus.PUSHED


def test_a_ref_lock_left_by_a_push_killed_as_it_moved_the_branch_is_taken_over_by_a_later_pass(
    tmp_path: Path,
) -> None:
    """The fault: a push killed between writing `refs/heads/main.lock` and renaming it onto the ref
    left the lock (holding the new commit id; the ref still names the old one), and every later pass
    exited 4 saying "delete it". A push holds that lock for an instant: one older than
    `REF_LOCK_STALE` is a dead push's, and the next pass takes it over and pushes."""
    from tests.support.git import T0, bare_remote, steady_files
    from tests.support.git import clone as work_clone

    remote = bare_remote(tmp_path, steady_files())
    work = tmp_path / "work"
    work_clone(remote, work)
    before = str(pygit2.Repository(str(remote)).references["refs/heads/main"].target)
    lock = remote / "refs" / "heads" / "main.lock"
    lock.write_text("1" * 40 + "\n")  # what the killed push had written into it
    with pytest.raises(TemporaryGitError, match="was locked"):  # a live push's, for all we know yet
        reconcile_once(work, now=T0, push=True, attempts=2)
    assert str(pygit2.Repository(str(remote)).references["refs/heads/main"].target) == before
    old = time.time() - localpath.REF_LOCK_STALE - 1
    os.utime(lock, (old, old))  # a minute later: no push holds a ref lock that long
    done = reconcile_once(work, now=T0, push=True)
    assert done.pushed and not lock.exists()
    assert str(pygit2.Repository(str(remote)).references["refs/heads/main"].target) == done.head
    fsck(remote)


def test_only_absolute_local_paths_and_file_urls_name_a_local_remote(origin: Path, tmp_path: Path) -> None:
    assert localpath.local_path(str(origin)) == str(origin)
    assert localpath.local_path(origin.as_uri()) == str(origin)
    for other in ("git://127.0.0.1/fleet.git", "ssh://host/fleet.git", "host:fleet.git", "fleet.git", None):
        assert localpath.local_path(other) is None
    assert localpath.local_path(str(tmp_path / "missing.git")) is None


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("../fleet.git", "/srv/fleet.git"),
        ("fleet.git", "/srv/clone/fleet.git"),
        ("./odd:name.git", "/srv/clone/odd:name.git"),  # a `/` before the `:`: still a path
        ("/srv/./fleet.git", "/srv/fleet.git"),
        ("file:///srv/fleet.git", "/srv/fleet.git"),
        ("host:fleet.git", None),  # scp-like SSH
        ("ssh://host/fleet.git", None),
        ("hg::/srv/fleet", None),  # a remote helper
        ("", None),
    ],
)
def test_a_path_url_is_read_as_git_reads_it_relative_to_the_repository(url: str, want: str | None) -> None:
    assert localpath.path_of(url, "/srv/clone") == want


def test_a_relative_url_names_a_local_remote_only_from_a_base(origin: Path, tmp_path: Path) -> None:
    work = pygit2.init_repository(str(tmp_path / "work"), initial_head="main")
    base = localpath.url_base(work)
    assert base == str(tmp_path / "work")
    assert localpath.local_path("../fleet.git", base) == str(origin)
    assert localpath.local_path("../missing.git", base) is None
    assert localpath.local_path("../fleet.git") is None
    bare = pygit2.init_repository(str(tmp_path / "bare.git"), bare=True)
    assert localpath.url_base(bare) == str(tmp_path / "bare.git")  # a bare repository: its git directory
