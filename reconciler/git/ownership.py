"""Whose commits changed `state/` and `rendered/` (steps 2-3 of a pass): jobtree's own state commits, or hand edits.

Compares trees and reads commit authors and the `Spec-Commit` trailer; writes nothing. `reconcile`
plans from jobtree's last own state commit (`state_start`: a deleted lease file must not read as
a run that stopped, nor an edited one as GPUs that moved; the next state commit writes those files
back), `plan` refuses a pull request that edits owned files by hand, `provenance` proves a state
commit by recomputing it, and `remote` tells a state commit of jobtree's from a person's when
syncing. What a state commit holds is `reconciler.state`'s; its message is `state.message`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import pygit2
from pygit2.enums import ObjectType, SortMode

from reconciler.git.errors import LIBGIT2_ERRORS
from reconciler.git.read import (
    OWNED_PREFIXES,
    Commit,
    Repository,
    Tree,
    entry_at,
    owned_trees,
    resolve,
    subtree,
)

TRAILER = "Spec-Commit"  # names the spec commit a state commit was computed from (DESIGN §2)
_TRAILER_RE = re.compile(rf"^{TRAILER}: ([0-9a-f]{{40}}|[0-9a-f]{{64}})$")
WALK_LIMIT = 10_000  # first-parent commits looked at for jobtree's last state commit


def spec_commit_of(message: str) -> str | None:
    """The `Spec-Commit` trailer of a commit message (last paragraph), if any."""
    last = message.strip().split("\n\n")[-1]
    for line in last.splitlines():
        m = _TRAILER_RE.match(line.strip())
        if m:
            return m.group(1)
    return None


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


@dataclass(frozen=True, slots=True)
class Start:
    """Where a pass's state comes from: `commit`, and the hand edits made since (none: the head)."""

    commit: pygit2.Commit
    edited_in: tuple[str, ...] = ()  # commits after `commit` that changed owned files, newest first
    files: tuple[str, ...] = ()  # owned files that differ between `commit` and the head
    own: bool = False  # the head's owned files are exactly those of jobtree's last state commit


def state_start(repo: pygit2.Repository, head: pygit2.Commit, email: str | None) -> Start:
    """jobtree's last state commit below `head` (`reconciler_commit` by the fleet's author
    `email`: typed text, but the branch is where jobtree commits), when the owned files at `head`
    differ from it; else `head` itself. The walk follows first parents, except through a merge
    whose owned files are one parent's as they are (a `git pull` over jobtree's newer state commit):
    then that parent. A branch jobtree never wrote (or not within `WALK_LIMIT` commits, or not under
    this author) starts from its head as it is."""
    at_head = owned_trees(repo, head)
    commit, trees = head, at_head
    edited: list[str] = []
    for _ in range(WALK_LIMIT):
        if reconciler_commit(repo, commit, email):
            if trees == at_head:
                return Start(head, own=True)
            return Start(commit, tuple(edited), _differing(commit.tree, head.tree))
        if not commit.parents:
            break
        sides = [(p, owned_trees(repo, p)) for p in commit.parents]
        same = next(((p, t) for p, t in sides if t == trees), None)
        if same is None:  # this commit changed owned files itself
            edited.append(str(commit.id))
            same = sides[0]
        commit, trees = same
    return Start(head)


def _differing(old: pygit2.Tree, new: pygit2.Tree) -> tuple[str, ...]:
    """Owned file paths whose blob (or presence) differs between two trees (Git's tree diff: equal
    subtrees are not entered)."""
    paths = {p for d in old.diff_to_tree(new).deltas for p in (d.old_file.path, d.new_file.path)}
    return tuple(sorted(p for p in paths if p.startswith(OWNED_PREFIXES)))


def changed_paths(old: Tree | None, new: Tree) -> set[str]:
    """Every path whose entry differs between two trees (Git's tree diff)."""
    diff = old.diff_to_tree(new) if old is not None else new.diff_to_tree(swap=True)
    return {p for d in diff.deltas for p in (d.old_file.path, d.new_file.path) if p}


def branch_tips(repo: Repository, branch: str) -> list[str]:
    """Where the reconciler's own commits are: its branch as fetched from each remote
    (`refs/remotes/<remote>/<branch>`), or here in a clone with no remote (`refs/heads/<branch>`).
    Not a local branch beside a remote: anyone can point that at anything. A state commit of
    jobtree's not yet on a remote is proven by recomputing it instead (`passes.provenance`)."""
    remotes = list(repo.remotes.names())
    names = [f"refs/remotes/{r}/{branch}" for r in remotes] if remotes else [f"refs/heads/{branch}"]
    tips = []
    for name in names:
        ref = repo.references.get(name)
        if ref is not None and isinstance(ref.target, pygit2.Oid):
            tips.append(str(ref.target))
    return tips


def _spec_is_ancestor(repo: Repository, commit: Commit, spec: str) -> bool:
    if any(str(p.id) == spec for p in commit.parents):
        return True  # the usual case, no history walk
    try:
        return bool(repo.descendant_of(commit.id, pygit2.Oid(hex=spec)))
    except LIBGIT2_ERRORS:
        return False  # a commit this repository does not hold


def disguised_edits(repo: Repository, base: str, head: str, email: str) -> list[tuple[str, str, str]]:
    """`(commit, path, why)` for owned paths changed by commits that claim to be the reconciler's (its
    email and a `Spec-Commit` trailer) but cannot be: it writes one-parent commits touching only
    state/ and rendered/, computed from the spec commit its trailer names, an ancestor."""
    walker = repo.walk(resolve(repo, head).id, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    walker.hide(resolve(repo, base).id)
    found: list[tuple[str, str, str]] = []
    for commit in walker:
        if not claims_reconciler(commit, email):
            continue
        per_parent = [changed_paths(p.tree, commit.tree) for p in commit.parents] or [
            changed_paths(None, commit.tree)
        ]
        paths = set.intersection(*per_parent)
        owned = {p for p in paths if p.startswith(OWNED_PREFIXES)}
        if not owned:
            continue
        spec = spec_commit_of(commit.message) or ""
        if not reconciler_commit(repo, commit, email):
            why = "a reconciler commit has one parent and changes only state/ and rendered/"
        elif not _spec_is_ancestor(repo, commit, spec):
            why = f"its Spec-Commit {spec[:12]} is not one of its ancestors"
        else:
            continue
        found += [(str(commit.id), p, why) for p in sorted(owned)]
    return found
