"""Hand edits on the fleet branch: `state/` or `rendered/` changed by a commit that is not jobtree's.

`reconcile` plans from the state jobtree itself last committed (the newest first-parent commit
that names its `Spec-Commit`), not from files someone changed after it: a deleted lease file must
not read as a run that stopped, nor an edited one as GPUs that moved. The next state commit writes
those files back. Only compares trees and names what differs; deciding what a pass writes is the
planner's, refusing hand edits on a pull request branch is `plan`'s (`provenance`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

from reconciler import gitstore, passmemo

WALK_LIMIT = 10_000  # first-parent commits looked at for jobtree's last state commit


@dataclass(frozen=True, slots=True)
class Start:
    """Where a pass's state comes from: `commit`, and the hand edits made since (none: the head)."""

    commit: pygit2.Commit
    edited_in: tuple[str, ...] = ()  # commits after `commit` that changed owned files, newest first
    files: tuple[str, ...] = ()  # owned files that differ between `commit` and the head


def state_start(repo: pygit2.Repository, head: pygit2.Commit) -> Start:
    """jobtree's last state commit on `head`'s first-parent line, when the owned files at `head`
    differ from it; else `head` itself. A branch jobtree never wrote starts from its head as it is."""
    at_head = passmemo.owned_trees(repo, head)
    commit, edited = head, list[str]()
    for _ in range(WALK_LIMIT):
        trees = passmemo.owned_trees(repo, commit)
        if gitstore.spec_commit_of(commit.message) is not None:
            if trees == at_head:
                return Start(head)
            return Start(commit, tuple(edited), _differing(commit.tree, head.tree))
        if not commit.parents:
            break
        parent = commit.parents[0]
        if trees != passmemo.owned_trees(repo, parent):
            edited.append(str(commit.id))
        commit = parent
    return Start(head)


def _differing(old: pygit2.Tree, new: pygit2.Tree) -> tuple[str, ...]:
    """Owned file paths whose blob (or presence) differs between two trees (Git's tree diff: equal
    subtrees are not entered)."""
    paths = {p for d in old.diff_to_tree(new).deltas for p in (d.old_file.path, d.new_file.path)}
    return tuple(sorted(p for p in paths if p.startswith(gitstore.OWNED_PREFIXES)))
