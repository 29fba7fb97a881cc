"""A person's change as a branch (`kubectl runs submit`, `shrink`, `grow`): files committed on top of the fleet, as them.

The commit holds the parent's tree with the given files set, authored and committed by the
person Git is configured as (`user.name`, `user.email`; `GIT_AUTHOR_NAME`/`GIT_AUTHOR_EMAIL` win,
as for git itself), on a new branch that must not exist yet (or on no branch, to plan it
unreferenced), or on top of the person's own open branch (`only_yours`: every commit it adds to
the base is theirs and changes that one file), moved forward only; a branch whose commits the base
already has (a merged pull request's) may be dropped and made anew. Pushing is `remote.push`'s; nothing here touches the work tree or another branch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pygit2
from pygit2.enums import FileMode, SortMode

from reconciler.git.errors import LIBGIT2_ERRORS, PermanentGitError


class NoIdentity(PermanentGitError):
    """Git does not know who the person is: the message says how to tell it."""


def identity(repo: pygit2.Repository) -> tuple[str, str]:
    """(name, email) the person commits as."""
    config = repo.config

    def setting(env: str, key: str) -> str | None:
        if os.environ.get(env):
            return os.environ[env]
        try:
            return str(config[key]) or None
        except LIBGIT2_ERRORS:
            return None

    name, email = setting("GIT_AUTHOR_NAME", "user.name"), setting("GIT_AUTHOR_EMAIL", "user.email")
    if not name or not email:
        raise NoIdentity(
            "Git does not know who you are, and the commit is authored as you: run "
            '`git config --global user.name "Your Name"` and `git config --global user.email you@example.com`'
        )
    return name, email


def exists(repo: pygit2.Repository, branch: str) -> bool:
    return repo.references.get(f"refs/heads/{branch}") is not None


def remote_url(repo: pygit2.Repository, remote: str) -> str | None:
    """The URL a remote is fetched from (None when there is no such remote)."""
    try:
        return str(repo.remotes[remote].url)
    except LIBGIT2_ERRORS:
        return None


def commit_change(
    repo: pygit2.Repository,
    parent: str,
    files: Mapping[str, bytes],
    *,
    message: str,
    author: tuple[str, str],
    when: int,
    branch: str | None,
    forward: bool = False,
) -> str:
    """A commit of `parent`'s tree with `files` (path -> bytes) set, on the new `branch` (None: no
    ref names it); its id. An existing branch is never moved (`PermanentGitError`), but with
    `forward` (the person's own open branch) forward: `parent` is its tip or descends from it."""
    if branch is not None and exists(repo, branch):
        held = repo.references[f"refs/heads/{branch}"]
        if not forward or not descends(repo, parent, str(held.target)):
            raise PermanentGitError(f"a local branch {branch!r} exists already")
        held.set_target(repo[parent].peel(pygit2.Commit).id)  # a fast-forward: nothing on it is lost
    base = repo[parent].peel(pygit2.Commit)
    index = pygit2.Index()
    index.read_tree(base.tree)
    for path, data in sorted(files.items()):
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), FileMode.BLOB))
    tree = index.write_tree(repo)
    sig = pygit2.Signature(author[0], author[1], int(when), 0)
    ref = f"refs/heads/{branch}" if branch is not None else None
    try:
        return str(repo.create_commit(ref, sig, sig, message, tree, [base.id]))
    except LIBGIT2_ERRORS as err:
        raise PermanentGitError(f"cannot write the commit in {repo.path}: {err}") from None


def merged(repo: pygit2.Repository, rev: str, base: str) -> bool:
    """Whether everything `rev` holds is in `base` (the branch of a merged pull request)."""
    try:
        tip, into = repo.revparse_single(rev).peel(pygit2.Commit).id, repo[base].peel(pygit2.Commit).id
        return bool(tip == into or repo.descendant_of(into, tip))
    except LIBGIT2_ERRORS:
        return False


def only_yours(repo: pygit2.Repository, tip: str, base: str, email: str, path: str) -> bool:
    """Whether every commit `tip` adds to `base` was authored by `email`, has one parent and changes
    `path` alone: a person's own open proposal of one run file, which they may add a commit to."""
    try:
        walker = repo.walk(repo[tip].peel(pygit2.Commit).id, SortMode.TOPOLOGICAL)
        walker.hide(repo[base].peel(pygit2.Commit).id)
        for commit in walker:
            if commit.author.email != email or len(commit.parents) != 1:
                return False
            changed = repo.diff(commit.parents[0], commit).deltas
            if any(d.new_file.path != path or d.old_file.path != path for d in changed):
                return False
    except LIBGIT2_ERRORS:
        return False
    return True


def descends(repo: pygit2.Repository, rev: str, other: str) -> bool:
    """Whether commit `rev` is `other` or has it in its history."""
    try:
        a, b = repo[rev].peel(pygit2.Commit).id, repo[other].peel(pygit2.Commit).id
        return bool(a == b or repo.descendant_of(a, b))
    except LIBGIT2_ERRORS:
        return False


def delete(repo: pygit2.Repository, branch: str) -> None:
    repo.references.delete(f"refs/heads/{branch}")
