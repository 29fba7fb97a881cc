"""Syncing a clone with its remote: only the reconciler's own unpushed state commits are ever thrown away."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from reconciler.git import errors
from reconciler.git import read as gitread
from reconciler.git import remote as gitremote
from reconciler.git.remote import SyncOutcome
from reconciler.state import message
from tests.support.git import (
    BOT,
    NEW_STATE,
    NOW,
    SPEC_SHA,
    bot_commit,
    make_remote,
    remote_head,
    write_tree,
)
from tests.support.git import PERSON as HUMAN
from tests.support.git import clone_of as clone
from tests.support.git import person_commit as human_commit

STATE_MESSAGE = message.format_message(["started team-a/r1 (8 GPUs)"], SPEC_SHA)


@pytest.fixture
def pair(tmp_path: Path) -> tuple[pygit2.Repository, pygit2.Repository]:
    """Two bare clones of one remote on a local path."""
    origin = str(make_remote(tmp_path))
    return clone(origin, tmp_path / "one.git"), clone(origin, tmp_path / "two.git")


def move_remote_on(one: pygit2.Repository) -> str:
    """`one` pushes a state commit, so every other clone's unpushed commits have diverged."""
    bot_commit(one, {"state/one.yaml": b"one's pass\n"})
    assert gitremote.push(one, "origin", "main", remote_head(one)).ok
    return remote_head(one)


def head(repo: pygit2.Repository) -> str:
    return str(repo.references["refs/heads/main"].target)


def commit_as(
    repo: pygit2.Repository,
    files: dict[str, bytes],
    author: pygit2.Signature,
    message: str = STATE_MESSAGE,
    drop: tuple[str, ...] = (),
) -> pygit2.Commit:
    """A one-parent commit on main setting `files` (and deleting paths under `drop`), as anyone may."""
    parent = repo.references["refs/heads/main"].peel(pygit2.Commit)
    current = gitread.read_files(repo, "refs/heads/main")
    kept = {path: data for path, data in current.items() if not path.startswith(drop)}
    tree = write_tree(repo, {**kept, **files})
    oid = repo.create_commit("refs/heads/main", author, author, message, tree, [parent.id])
    commit = repo[oid]
    assert isinstance(commit, pygit2.Commit)
    return commit


BOT_SIGNATURE = pygit2.Signature(BOT[0], BOT[1], NOW, 0)


# ---------------------------------------------------------------------------------------- refused


def test_a_persons_unpushed_commit_is_refused_and_the_branch_does_not_move(pair) -> None:
    one, two = pair
    mine = human_commit(two, {"runs/team-a/b1.yaml": b"kind: Run\n"}, "add b1\n\nwhy it matters\n")
    move_remote_on(one)
    with pytest.raises(gitremote.UnpushedWork) as refused:
        gitremote.sync_with_remote(two, discard_unpushed=True, author_email=BOT[1])
    message = str(refused.value)
    assert "main has 1 local commit that origin/main does not have" in message
    assert f'{mine[:12]} "add b1"' in message
    assert "pull request" in message and "git reset --hard origin/main" in message
    assert isinstance(refused.value, errors.PermanentGitError) and not refused.value.temporary
    assert head(two) == mine  # nothing discarded
    assert gitread.read_files(two, "main")["runs/team-a/b1.yaml"] == b"kind: Run\n"


def test_a_person_under_the_reconcilers_own_commits_is_counted_and_named(pair) -> None:
    one, two = pair
    mine = human_commit(two, {"runs/team-a/b1.yaml": b"kind: Run\n"}, "add b1\n")
    bot_commit(two, {"state/two.yaml": b"2\n"})
    before = head(two)
    move_remote_on(one)
    with pytest.raises(
        gitremote.UnpushedWork, match="2 local commits .*1 of them not written by jobtree"
    ) as e:
        gitremote.sync_with_remote(two, discard_unpushed=True, author_email=BOT[1])
    assert f'{mine[:12]} "add b1"' in str(e.value)
    assert head(two) == before


@pytest.mark.parametrize(
    ("author", "files", "message", "drop"),
    [
        pytest.param(BOT_SIGNATURE, {"runs/team-a/r1.yaml": b"kind: Run # edited\n"}, STATE_MESSAGE, (),
                     id="the fleet's author editing a spec file"),
        pytest.param(BOT_SIGNATURE, NEW_STATE | {"jobtree.yaml": b"kind: FleetConfig # x\n"}, STATE_MESSAGE, (),
                     id="the fleet's author changing state and the fleet settings together"),
        pytest.param(HUMAN, NEW_STATE, STATE_MESSAGE, (), id="a person editing state with a state commit's message"),
        pytest.param(BOT_SIGNATURE, NEW_STATE, "fix state by hand\n", (), id="the fleet's author without a Spec-Commit"),
        pytest.param(BOT_SIGNATURE, {"state": b"not a directory\n"}, STATE_MESSAGE, ("state/",),
                     id="a file named like an owned directory"),
        pytest.param(BOT_SIGNATURE, {"inventory/nodes.yaml": b"nodes: []\n"}, STATE_MESSAGE, (),
                     id="the fleet's author adding a spec directory"),
    ],
)  # fmt: skip
def test_commits_that_are_not_state_commits_jobtree_wrote_are_never_discarded(
    pair, author: pygit2.Signature, files: dict[str, bytes], message: str, drop: tuple[str, ...]
) -> None:
    one, two = pair
    theirs = commit_as(two, files, author, message, drop)
    move_remote_on(one)
    with pytest.raises(gitremote.UnpushedWork):
        gitremote.sync_with_remote(two, discard_unpushed=True, author_email=BOT[1])
    assert head(two) == str(theirs.id)


def test_a_merge_is_not_a_state_commit(pair) -> None:
    one, two = pair
    base = two.references["refs/heads/main"].peel(pygit2.Commit)
    side = bot_commit(two, {"state/side.yaml": b"s\n"})
    two.references.create("refs/heads/main", base.id, force=True)
    main = bot_commit(two, {"state/main.yaml": b"m\n"})
    tree = two[main].peel(pygit2.Commit).tree_id
    merge = two.create_commit(
        "refs/heads/main", BOT_SIGNATURE, BOT_SIGNATURE, STATE_MESSAGE, tree, [main, side]
    )
    assert not gitremote.reconciler_commit(two, two[merge].peel(pygit2.Commit), BOT[1])
    move_remote_on(one)
    with pytest.raises(gitremote.UnpushedWork):
        gitremote.sync_with_remote(two, discard_unpushed=True, author_email=BOT[1])


# -------------------------------------------------------------------------------------- discarded


def test_the_reconcilers_own_unpushed_commits_are_discarded_when_the_remote_moved_on(pair) -> None:
    one, two = pair
    bot_commit(two, NEW_STATE)  # a pass killed before its push
    bot_commit(two, {"state/again.yaml": b"again\n", "rendered/gpu-a/team-a/r1-g0.yaml": b"kind: Pod # 2\n"})
    want = move_remote_on(one)
    assert gitremote.sync_with_remote(two, discard_unpushed=True, author_email=BOT[1]) is SyncOutcome.RESET
    assert head(two) == want


def test_owned_directories_may_sit_deeper_than_the_top_level(pair) -> None:
    _, two = pair
    deep = ("runs/team-a/generated/",)
    mine = commit_as(two, {"runs/team-a/generated/x.yaml": b"x\n"}, BOT_SIGNATURE)
    assert gitremote.reconciler_commit(two, mine, BOT[1], deep)
    assert not gitremote.reconciler_commit(two, mine, BOT[1])  # not below state/ or rendered/
    theirs = commit_as(
        two, {"runs/team-a/generated/y.yaml": b"y\n", "runs/team-a/r1.yaml": b"# 2\n"}, BOT_SIGNATURE
    )
    assert not gitremote.reconciler_commit(two, theirs, BOT[1], deep)


# -------------------------------------------------------------------------------------- untouched


def test_without_discarding_a_diverged_branch_is_reported_and_left_alone(pair) -> None:
    one, two = pair
    mine = human_commit(two, {"runs/team-a/b1.yaml": b"kind: Run\n"})
    move_remote_on(one)
    assert gitremote.sync_with_remote(two, author_email=BOT[1]) is SyncOutcome.DIVERGED
    assert head(two) == mine


def test_a_persons_commit_ahead_of_an_unmoved_remote_is_left_alone(pair) -> None:
    _, two = pair
    mine = human_commit(two, {"runs/team-a/b1.yaml": b"kind: Run\n"})
    assert gitremote.sync_with_remote(two, discard_unpushed=True, author_email=BOT[1]) is SyncOutcome.AHEAD
    assert head(two) == mine
