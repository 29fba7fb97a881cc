"""Remote URLs that are paths: a relative one is read from the repository, as Git reads it, never from
the process's current directory; a path that does not exist says so."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from reconciler.git import errors
from reconciler.git import remote as gitremote
from reconciler.git.remote import PushStatus, SyncOutcome
from tests.support.git import NEW_STATE, bot_commit, make_remote, remote_head


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The process runs from a directory where no relative URL of these tests resolves."""
    cwd = tmp_path / "somewhere" / "else"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    return cwd


def work_clone(origin: Path, dest: Path, url: str) -> pygit2.Repository:
    """A clone with a work tree whose `origin` is `url` (as after `git remote set-url origin <url>`)."""
    repo = pygit2.clone_repository(str(origin), str(dest), checkout_branch="main")
    repo.remotes.set_url("origin", url)
    return repo


def served_head(origin: Path) -> str:
    return str(pygit2.Repository(str(origin)).references["refs/heads/main"].target)


def test_a_relative_url_is_read_from_the_work_tree_not_the_current_directory(
    tmp_path: Path, elsewhere: Path
) -> None:
    origin = make_remote(tmp_path)
    one = work_clone(origin, tmp_path / "one", "../fleet.git")
    base = remote_head(one)
    one.references.delete("refs/remotes/origin/main")
    assert gitremote.fetch(one, "origin", "main") == base
    assert remote_head(one) == base  # the tracking ref was written
    bot_commit(one, NEW_STATE)
    pushed = gitremote.push(one, "origin", "main", base)
    assert pushed.status is PushStatus.PUSHED and served_head(origin) == pushed.local_oid
    assert one.remotes["origin"].url == "../fleet.git"  # the clone's configuration is untouched


def test_a_bare_clone_reads_a_relative_url_from_its_git_directory(tmp_path: Path, elsewhere: Path) -> None:
    origin = make_remote(tmp_path)
    (tmp_path / "clones").mkdir()
    one = pygit2.clone_repository(str(origin), str(tmp_path / "clones" / "one.git"), bare=True)
    one.remotes.set_url("origin", "../../fleet.git")  # from clones/one.git/, as `git -C one.git` reads it
    other = pygit2.clone_repository(str(origin), str(tmp_path / "other.git"), bare=True)
    bot_commit(other, NEW_STATE)
    assert gitremote.push(other, "origin", "main", remote_head(other)).ok
    assert gitremote.sync_with_remote(one) is SyncOutcome.FAST_FORWARDED
    assert str(one.references["refs/heads/main"].target) == served_head(origin)


def test_a_relative_url_to_a_remote_libgit2_pushes_to_is_resolved_too(
    tmp_path: Path, elsewhere: Path
) -> None:
    origin = make_remote(tmp_path)
    root = served_head(origin)
    (origin / "shallow").write_text(
        root + "\n"
    )  # a shallow remote is not the local fast path: libgit2 pushes
    assert pygit2.Repository(str(origin)).is_shallow
    one = work_clone(origin, tmp_path / "one", "../fleet.git")
    bot_commit(one, NEW_STATE)
    pushed = gitremote.push(one, "origin", "main", root)
    assert pushed.status is PushStatus.PUSHED and served_head(origin) == pushed.local_oid


@pytest.mark.parametrize("relative", [True, False], ids=["relative", "absolute"])
def test_a_remote_path_that_does_not_exist_says_so(tmp_path: Path, elsewhere: Path, relative: bool) -> None:
    origin = make_remote(tmp_path)
    missing = tmp_path / "gone.git"
    url = "../gone.git" if relative else str(missing)
    one = work_clone(origin, tmp_path / "one", url)
    with pytest.raises(errors.PermanentGitError) as err:
        gitremote.fetch(one, "origin", "main")
    text = str(err.value)
    assert f"'origin' at {url}: the local path {missing} does not exist" in text
    assert "unsupported URL protocol" not in text
    assert ("read from " + str(tmp_path / "one")) in text if relative else "read from" not in text


def test_a_push_url_that_does_not_exist_says_so(tmp_path: Path, elsewhere: Path) -> None:
    origin = make_remote(tmp_path)
    one = work_clone(origin, tmp_path / "one", "../fleet.git")
    one.remotes.set_push_url("origin", "../gone.git")
    base = gitremote.fetch(one, "origin", "main")
    bot_commit(one, NEW_STATE)
    with pytest.raises(
        errors.PermanentGitError, match=r"push to remote 'origin' at \.\./gone\.git: .*does not exist"
    ):
        gitremote.push(one, "origin", "main", base)
    assert served_head(origin) == base
