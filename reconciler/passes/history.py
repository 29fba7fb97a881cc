"""`jobtree simulate --git DIR`: every pass of a scenario becomes one commit, so a what-if is history.

The history reads as a fleet repository's own, on branch `main`, at the virtual clock: when a
pass's spec files (inventory included) differ from the last commit's, a commit by the scenario
changes them first; then the pass is one state commit by the fleet's git author with a
`Spec-Commit` trailer, changing only `state/` (the ledger so far included) and `rendered/`, as
`reconcile` writes them. So `jobtree plan` between two of its commits, and `reconcile` from any of
them, take the state commits for jobtree's own. Writes only to its own repository; deciding and
simulating stay in `simulate` and the planner.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pygit2
from pygit2.enums import CheckoutStrategy, FileMode

from planner.plan import Plan
from reconciler.git import store as gitstore
from reconciler.state import codec as statefiles
from reconciler.state import nexttree as gitsink
from schemas.common import format_time
from schemas.fleet import GitAuthor

BRANCH = "refs/heads/main"
SCENARIO_AUTHOR = GitAuthor(name="scenario", email="scenario@localhost")
NAMED_FILES = 20  # spec files a spec commit's message lists by name


class History:
    """A new repository at `path` (a new or empty directory) that records passes as commits on main."""

    def __init__(self, path: str | os.PathLike[str]):
        where = Path(path)
        if where.is_dir() and any(where.iterdir()):  # a repository too: its work tree is checked out over
            raise ValueError(
                f"{where} is not empty; give --git a new or empty directory (simulate writes a new "
                "repository, and never checks out over files or history already there)"
            )
        self.repo = pygit2.init_repository(str(where), initial_head="main")
        self.ledger: dict[str, bytes] = {}
        self.spec: dict[str, bytes] = {}  # spec files at the last commit
        self.owned: dict[str, bytes] = {}  # state/ and rendered/ files at the last commit
        self.commits = 0  # passes recorded
        self.spec_commits = 0

    def record(self, now: int, spec_files: Mapping[str, bytes], plan: Plan, author: GitAuthor) -> str:
        """Commit the pass `plan` made at `now` from `spec_files`, after a commit of those files when
        they changed; `author` is the fleet's git author. Returns the state commit's id."""
        if dict(spec_files) != self.spec or self.repo.head_is_unborn:
            changed = sorted(
                p for p in spec_files.keys() | self.spec.keys() if spec_files.get(p) != self.spec.get(p)
            )
            self.spec = dict(spec_files)
            self._commit(SCENARIO_AUTHOR, now, _spec_message(now, changed))
            self.spec_commits += 1
        for path, appended in statefiles.ledger_lines(plan).items():
            self.ledger[path] = self.ledger.get(path, b"") + appended
        self.owned = {**statefiles.encode(plan), **self.ledger}
        spec_commit = str(self.repo.head.target)
        message = gitstore.format_message(gitsink.summary(plan), spec_commit, f"pass at {format_time(now)}")
        oid = self._commit(author, now, message)
        self.commits += 1
        if not self.repo.is_bare:
            self.repo.checkout_head(strategy=CheckoutStrategy.FORCE)
        return oid

    def _commit(self, author: GitAuthor, now: int, message: str) -> str:
        index = pygit2.Index()
        for path, data in sorted({**self.spec, **self.owned}.items()):
            index.add(pygit2.IndexEntry(path, self.repo.create_blob(data), FileMode.BLOB))
        tree = index.write_tree(self.repo)
        parents = [] if self.repo.head_is_unborn else [self.repo.head.target]
        sig = pygit2.Signature(author.name, author.email, now, 0)
        return str(self.repo.create_commit(BRANCH, sig, sig, message, tree, parents))


def _spec_message(now: int, changed: list[str]) -> str:
    """`scenario: 3 spec files at <time>`, then the files by name (the first `NAMED_FILES`)."""
    names = [f"- {p}" for p in changed[:NAMED_FILES]]
    if len(changed) > NAMED_FILES:
        names.append(f"- ... {len(changed) - NAMED_FILES} more")
    files = "file" if len(changed) == 1 else "files"
    return f"scenario: {len(changed)} spec {files} at {format_time(now)}\n\n" + "\n".join(names) + "\n"
