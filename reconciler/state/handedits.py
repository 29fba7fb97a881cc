"""Hand edits on the fleet branch: `state/` or `rendered/` changed by a commit that is not jobtree's.

`reconcile` plans from the state jobtree itself last committed (the newest first-parent commit
that names its `Spec-Commit`), not from files someone changed after it: a deleted lease file must
not read as a run that stopped, nor an edited one as GPUs that moved. The next state commit writes
those files back (`write_back` marks them as changes due, `summary` words them). Compares trees and
names what differs; what a pass writes is the planner's and `gitsink`'s business, and refusing hand
edits on a pull request branch is `plan`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2
from pygit2.enums import FileMode

from reconciler.git import ownership as authorship
from reconciler.git import store as gitstore
from reconciler.state import memo as passmemo
from reconciler.state import nexttree as gitsink

WALK_LIMIT = 10_000  # first-parent commits looked at for jobtree's last state commit
EDITS_NAMED = 5  # commits named in the summary line


@dataclass(frozen=True, slots=True)
class Start:
    """Where a pass's state comes from: `commit`, and the hand edits made since (none: the head)."""

    commit: pygit2.Commit
    edited_in: tuple[str, ...] = ()  # commits after `commit` that changed owned files, newest first
    files: tuple[str, ...] = ()  # owned files that differ between `commit` and the head


def state_start(repo: pygit2.Repository, head: pygit2.Commit, email: str | None) -> Start:
    """jobtree's last state commit below `head` (`authorship.reconciler_commit` by the fleet's author
    `email`: typed text, but the branch is where jobtree commits), when the owned files at `head`
    differ from it; else `head` itself. The walk follows first parents, except through a merge
    whose owned files are one parent's as they are (a `git pull` over jobtree's newer state commit):
    then that parent. A branch jobtree never wrote (or not within `WALK_LIMIT` commits, or not under
    this author) starts from its head as it is."""
    at_head = passmemo.owned_trees(repo, head)
    commit, trees = head, at_head
    edited: list[str] = []
    for _ in range(WALK_LIMIT):
        if authorship.reconciler_commit(repo, commit, email):
            if trees == at_head:
                return Start(head)
            return Start(commit, tuple(edited), _differing(commit.tree, head.tree))
        if not commit.parents:
            break
        sides = [(p, passmemo.owned_trees(repo, p)) for p in commit.parents]
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
    return tuple(sorted(p for p in paths if p.startswith(gitstore.OWNED_PREFIXES)))


def write_back(head: pygit2.Commit, tree: gitsink.NextTree, start: Start) -> list[str]:
    """Hand-edited files the next tree puts back as jobtree computes them; they count as meaningful
    changes (`tree.meaningful`), so the commit is made even when no decision changed."""
    if not start.files:
        return []

    def written(path: str) -> tuple[str, int] | None:
        blob = tree.blobs.get(path)
        return (blob, int(FileMode.BLOB)) if blob is not None else None

    def held(path: str) -> tuple[str, int] | None:
        entry = gitstore.entry_at(head.tree, path)
        return (str(entry[0]), entry[1]) if entry is not None else None

    restored = [p for p in start.files if written(p) != held(p)]
    tree.meaningful = sorted({*tree.meaningful, *restored})
    return restored


def summary(start: Start, restored: list[str]) -> list[str]:
    """Commit message lines: one for the subject, then why and which files (capped)."""
    shown, more = restored[: gitsink.MAX_MESSAGE_LINES], len(restored) - gitsink.MAX_MESSAGE_LINES
    edits = ", ".join(sha[:12] for sha in start.edited_in[:EDITS_NAMED])
    edits += ", ..." if len(start.edited_in) > EDITS_NAMED else ""
    return [
        f"wrote back {len(restored)} file{'s' * (len(restored) != 1)} changed by hand in {edits}",
        f"planned from jobtree's own {str(start.commit.id)[:12]}: state/ and rendered/ are written only by jobtree",
        *(f"{path} written back" for path in shown),
        *([f"... and {more} more"] if more > 0 else []),
    ]
