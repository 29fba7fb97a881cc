"""Pushes to a bare repository on a local path: packs handed over as written, same compare-and-swap, fsck clean."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pygit2
import pytest

from reconciler.git import localpush as gitlocal
from reconciler.git import packs as gitpack
from reconciler.git import read as gitread
from reconciler.git import remote as gitremote
from reconciler.git import write as gitwrite
from reconciler.git.remote import PushStatus
from reconciler.state import message
from tests.git_support import lose_the_race_after_the_fetch
from tests.test_gitstore import BOT, NEW_STATE, NOW, SPEC_SHA, clone, human_commit, make_remote, remote_head

MANY = {
    f"rendered/gpu-a/team-a/pod-{i}.yaml": f"kind: Pod # {i}\n".encode() for i in range(gitpack.PACK_FROM)
}


def state_commit(repo: pygit2.Repository, files: dict[str, bytes], packs: list[str], now: int = NOW) -> str:
    oid = gitwrite.commit_tree(
        repo, "main", str(repo.references["refs/heads/main"].target),
        {path: gitpack.object_id("blob", data).hex() for path, data in files.items()},
        {gitpack.object_id("blob", data).hex(): data for data in files.values()},
        message=message.format_message(["started team-a/r1 (8 GPUs)"], SPEC_SHA),
        author_name=BOT[0], author_email=BOT[1], now=now, packs=packs,
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


def test_a_big_state_commit_reaches_a_bare_remote_as_the_very_pack_the_pass_wrote(
    origin: Path, tmp_path: Path
) -> None:
    one = clone(str(origin), tmp_path / "one.git")
    packs: list[str] = []
    commit = state_commit(one, MANY, packs)
    assert len(packs) == 1
    pushed = gitremote.push(one, "origin", "main", remote_head(one), packs=packs)
    assert pushed.status is PushStatus.PUSHED and pushed.remote_oid == commit
    handed = origin / "objects" / "pack" / (os.path.basename(packs[0]) + ".pack")
    assert handed.read_bytes() == Path(packs[0] + ".pack").read_bytes()
    fsck(origin)
    assert str(pygit2.Repository(str(origin)).references["refs/heads/main"].target) == commit
    assert gitread.read_files(pygit2.Repository(str(origin)), "main", ["rendered/"]) == MANY
    assert remote_head(one) == commit


def test_unpushed_commits_of_people_travel_with_the_state_commit(origin: Path, tmp_path: Path) -> None:
    one = clone(str(origin), tmp_path / "one.git")
    base = remote_head(one)
    human_commit(one, {"runs/team-a/r2.yaml": b"kind: Run\nname: r2\n"})
    human_commit(one, {"runs/team-a/r3.yaml": b"kind: Run\nname: r3\n"})
    packs: list[str] = []
    commit = state_commit(one, MANY | NEW_STATE, packs)
    assert gitremote.push(one, "origin", "main", base, packs=packs).status is PushStatus.PUSHED
    fsck(origin)
    theirs = pygit2.Repository(str(origin))
    assert str(theirs.references["refs/heads/main"].target) == commit
    assert gitread.read_files(theirs, "main") == gitread.read_files(one, "main")


def test_small_commits_without_a_pack_arrive_as_loose_objects(origin: Path, tmp_path: Path) -> None:
    one = clone(str(origin), tmp_path / "one.git")
    base = remote_head(one)
    packs: list[str] = []
    commit = state_commit(one, NEW_STATE, packs)
    assert packs == []
    assert gitremote.push(one, "origin", "main", base).status is PushStatus.PUSHED
    fsck(origin)
    assert gitread.read_files(pygit2.Repository(str(origin)), commit, ["state/"]) == {
        k: v for k, v in NEW_STATE.items() if k.startswith("state/")
    }


def test_a_remote_that_moved_after_the_fetch_keeps_its_head_and_the_push_is_stale(
    origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = clone(str(origin), tmp_path / "one.git"), clone(str(origin), tmp_path / "two.git")
    base = remote_head(one)
    state_commit(one, NEW_STATE, [])
    theirs = state_commit(two, {"state/two.yaml": b"2\n"}, [])
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
    state_commit(one, NEW_STATE, [])
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
    state_commit(one, NEW_STATE, [])
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


def test_a_local_head_that_does_not_descend_from_the_remote_head_is_stale(
    origin: Path, tmp_path: Path
) -> None:
    one = clone(str(origin), tmp_path / "one.git")
    base = remote_head(one)
    state_commit(one, NEW_STATE, [])
    assert gitlocal.push(one, str(origin), "main", base) is True
    one.references.create("refs/heads/main", pygit2.Oid(hex=base), force=True)
    state_commit(one, {"state/other.yaml": b"other\n"}, [], now=NOW + 60)
    assert gitlocal.push(one, str(origin), "main", remote_head(one)) is False


def test_only_absolute_local_paths_and_file_urls_name_a_local_remote(origin: Path, tmp_path: Path) -> None:
    assert gitlocal.local_path(str(origin)) == str(origin)
    assert gitlocal.local_path(origin.as_uri()) == str(origin)
    for other in ("git://127.0.0.1/fleet.git", "ssh://host/fleet.git", "host:fleet.git", "fleet.git", None):
        assert gitlocal.local_path(other) is None
    assert gitlocal.local_path(str(tmp_path / "missing.git")) is None


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
    assert gitlocal.path_of(url, "/srv/clone") == want


def test_a_relative_url_names_a_local_remote_only_from_a_base(origin: Path, tmp_path: Path) -> None:
    work = pygit2.init_repository(str(tmp_path / "work"), initial_head="main")
    base = gitlocal.url_base(work)
    assert base == str(tmp_path / "work")
    assert gitlocal.local_path("../fleet.git", base) == str(origin)
    assert gitlocal.local_path("../missing.git", base) is None
    assert gitlocal.local_path("../fleet.git") is None
    bare = pygit2.init_repository(str(tmp_path / "bare.git"), bare=True)
    assert gitlocal.url_base(bare) == str(tmp_path / "bare.git")  # a bare repository: its git directory


def test_a_remote_with_a_work_tree_is_left_to_libgit2(tmp_path: Path) -> None:
    work = pygit2.init_repository(str(tmp_path / "work"), initial_head="main")
    one = clone(str(make_remote(tmp_path)), tmp_path / "one.git")
    assert gitlocal.push(one, work.workdir, "main", None) is None
