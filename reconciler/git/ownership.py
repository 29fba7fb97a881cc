"""Whose commits changed `state/` and `rendered/`: jobtree's own state commits, or hand edits.

Compares trees and reads commit authors and trailers; writes nothing. `reconcile` (through
`handedits`) plans from jobtree's last own commit, `plan` refuses a pull request that edits owned
files by hand, `provenance` proves a state commit by recomputing it, and `gitremote` tells a
state commit of jobtree's from a person's when syncing. What a state commit holds is `gitsink`'s.
"""

from __future__ import annotations

from collections.abc import Iterable

import pygit2
from pygit2.enums import ObjectType, SortMode

from reconciler.git.store import OWNED_PREFIXES, entry_at, resolve, spec_commit_of, subtree


def _changed(
    repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree | None, base: str
) -> set[str]:
    """Paths that differ between two trees, descending only into subtrees whose ids differ."""
    if old is not None and new is not None and old.id == new.id:
        return set()
    entries_old = {e.name: e for e in old} if old is not None else {}
    entries_new = {e.name: e for e in new} if new is not None else {}
    out: set[str] = set()
    for name in entries_old.keys() | entries_new.keys():
        a, b = entries_old.get(name), entries_new.get(name)
        if a is not None and b is not None and a.id == b.id and a.filemode == b.filemode:
            continue
        sub_a = repo[a.id] if a is not None and a.type == ObjectType.TREE else None
        sub_b = repo[b.id] if b is not None and b.type == ObjectType.TREE else None
        if sub_a is not None or sub_b is not None:
            assert sub_a is None or isinstance(sub_a, pygit2.Tree)
            assert sub_b is None or isinstance(sub_b, pygit2.Tree)
            out |= _changed(repo, sub_a, sub_b, f"{base}{name}/")
        if (a is not None and a.type != ObjectType.TREE) or (b is not None and b.type != ObjectType.TREE):
            out.add(f"{base}{name}")
    return out


def outside_owned(
    repo: pygit2.Repository,
    old: pygit2.Tree | None,
    new: pygit2.Tree | None,
    owned: tuple[str, ...] = OWNED_PREFIXES,
    base: str = "",
) -> str | None:
    """The first path outside the `owned` prefixes that differs between two trees (at directory
    `base`; None: absent), or None when only owned paths differ: what a commit of jobtree's may change.
    A directory with nothing owned below it is named as `dir/` without descending into it."""
    if old is not None and new is not None and old.id == new.id:
        return None
    before = {str(e.name): e for e in old or ()}
    after = {str(e.name): e for e in new or ()}
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a is not None and b is not None and a.id == b.id and a.filemode == b.filemode:
            continue
        path = f"{base}{name}"
        if any(e is not None and e.type != ObjectType.TREE for e in (a, b)) and not path.startswith(owned):
            return path  # a file outside the owned directories
        if (path + "/").startswith(owned):
            continue  # an owned directory: anything below it may change
        if not any(prefix.startswith(path + "/") for prefix in owned):
            return path + "/"  # a directory with nothing owned below it
        found = outside_owned(repo, _tree_of(repo, a), _tree_of(repo, b), owned, path + "/")
        if found is not None:
            return found
    return None


def claims_reconciler(commit: pygit2.Commit, email: str | None) -> bool:
    """What a state commit of jobtree's says of itself: authored by `email` (None: anyone) with a
    `Spec-Commit` trailer. Typed text anyone can copy: `hand_edited` also asks where the commit is,
    `provenance` what it holds."""
    return (email is None or commit.author.email == email) and spec_commit_of(commit.message) is not None


def reconciler_commit(
    repo: pygit2.Repository,
    commit: pygit2.Commit,
    author_email: str | None,
    owned: tuple[str, ...] = OWNED_PREFIXES,
) -> bool:
    """Whether `commit` looks like a state commit jobtree wrote: it claims so (`claims_reconciler`),
    has one parent, and changes nothing outside the `owned` paths (state/, rendered/)."""
    if not claims_reconciler(commit, author_email) or len(commit.parents) != 1:
        return False
    return outside_owned(repo, commit.parents[0].tree, commit.tree, owned) is None


def _tree_of(repo: pygit2.Repository, entry: pygit2.Object | None) -> pygit2.Tree | None:
    return repo[entry.id].peel(pygit2.Tree) if entry is not None and entry.type == ObjectType.TREE else None


def _owned_changes(repo: pygit2.Repository, commit: pygit2.Commit, prefixes: tuple[str, ...]) -> set[str]:
    """Owned paths `commit` changes itself: all it changes, or for a merge what it changes beyond
    taking one side's change since the merge base (a hand resolution, or keeping a side's older file
    over the other side's change, as `git merge -s ours` does: a rollback of what that side wrote)."""
    per_parent = []
    parents: list[pygit2.Commit | None] = list(commit.parents) or [None]
    for parent in parents:
        paths: set[str] = set()
        for prefix in prefixes:
            parts = [p for p in prefix.split("/") if p]
            old = subtree(repo, parent.tree, parts) if parent is not None else None
            new = subtree(repo, commit.tree, parts)
            paths |= _changed(repo, old, new, "/".join(parts) + "/")
        per_parent.append(paths)
    if len(per_parent) == 1:
        return per_parent[0]
    trees = [p.tree for p in commit.parents]
    ids: list[str | pygit2.Oid] = [p.id for p in commit.parents]
    base_id = repo.merge_base_octopus(ids)  # of two parents: their merge base
    base = repo[base_id].peel(pygit2.Tree) if base_id is not None else None
    found: set[str] = set()
    for path in set.union(*per_parent):
        mine, was = entry_at(commit.tree, path), entry_at(base, path)
        if not any(mine == theirs != was for theirs in (entry_at(t, path) for t in trees)):
            found.add(path)
    return found


def hand_edited(
    repo: pygit2.Repository,
    base: str,
    head: str,
    owned_prefixes: tuple[str, ...] = OWNED_PREFIXES,
    reconciler_email: str = "",
    reconciler_tips: Iterable[str] | None = None,
) -> list[tuple[str, str]]:
    """`(commit sha, path)` for commits in base..head touching owned paths that are not the reconciler's.

    The reconciler's own commits have author email `reconciler_email` and a `Spec-Commit` trailer;
    with `reconciler_tips` (the heads of the branch it commits to) they must also be reachable from
    `base` or one of those tips: anyone can type that author and trailer, so a commit claiming them
    that was made anywhere else is a hand edit. Oldest commit first, paths sorted.
    """
    walker = repo.walk(resolve(repo, head).id, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    walker.hide(resolve(repo, base).id)
    off_branch: set[pygit2.Oid] | None = None
    if reconciler_tips is not None:
        elsewhere = repo.walk(resolve(repo, head).id)
        elsewhere.hide(resolve(repo, base).id)
        for tip in reconciler_tips:
            elsewhere.hide(resolve(repo, tip).id)
        off_branch = {c.id for c in elsewhere}
    found: list[tuple[str, str]] = []
    for commit in walker:
        own = claims_reconciler(commit, reconciler_email)
        if own and (off_branch is None or commit.id not in off_branch):
            continue
        found.extend((str(commit.id), path) for path in sorted(_owned_changes(repo, commit, owned_prefixes)))
    return found
