"""`jobtree simulate --git DIR`: every pass of a scenario becomes one commit, so a what-if is history.

Each commit holds the whole fleet repository as it would be after that pass (spec files, inventory,
`state/`, `rendered/`, the ledger so far), authored at the virtual clock, on branch `main`. Writes
only to its own repository; deciding and simulating stay in `simulate` and the planner.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pygit2
from pygit2.enums import CheckoutStrategy, FileMode

from planner.plan import Plan
from reconciler import gitsink, statefiles
from schemas.common import format_time

BRANCH = "refs/heads/main"


class History:
    """A new repository at `path` (a new or empty directory) that records passes as commits on main."""

    def __init__(
        self, path: str | os.PathLike[str], author: tuple[str, str] = ("jobtree", "jobtree@localhost")
    ):
        where = Path(path)
        if where.is_dir() and any(where.iterdir()):  # a repository too: its work tree is checked out over
            raise ValueError(
                f"{where} is not empty; give --git a new or empty directory (simulate writes a new "
                "repository, and never checks out over files or history already there)"
            )
        self.repo = pygit2.init_repository(str(where), initial_head="main")
        self.author = author
        self.ledger: dict[str, bytes] = {}
        self.commits = 0

    def record(self, now: int, spec_files: Mapping[str, bytes], plan: Plan) -> str:
        for path, appended in statefiles.ledger_lines(plan).items():
            self.ledger[path] = self.ledger.get(path, b"") + appended
        files = {**spec_files, **statefiles.encode(plan), **self.ledger}
        index = pygit2.Index()
        for path, data in sorted(files.items()):
            index.add(pygit2.IndexEntry(path, self.repo.create_blob(data), FileMode.BLOB))
        tree = index.write_tree(self.repo)
        ref = self.repo.references.get(BRANCH)
        parents = [ref.target] if ref is not None else []
        sig = pygit2.Signature(self.author[0], self.author[1], now, 0)
        lines = gitsink.summary(plan)
        subject = f"pass at {format_time(now)}: " + (lines[0] if lines else "no lease changes")
        body = "\n".join(f"- {line}" for line in lines[1:])
        oid = self.repo.create_commit(
            BRANCH, sig, sig, subject + ("\n\n" + body if body else "") + "\n", tree, parents
        )
        self.commits += 1
        if not self.repo.is_bare:
            self.repo.checkout_head(strategy=CheckoutStrategy.FORCE)
        return str(oid)
