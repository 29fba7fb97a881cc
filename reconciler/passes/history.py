"""`jobtree simulate --git DIR`: every pass of a scenario becomes one commit, so a what-if is history.

The history reads as a fleet repository's own, on branch `main`, at the virtual clock: when a
pass's spec files (inventory included) differ from the last commit's, a commit by the scenario
changes them first; then the pass is one state commit by the fleet's git author with a
`Spec-Commit` trailer, changing only `state/` (the ledger so far included) and `rendered/`, as
`reconcile` writes them. So `jobtree plan` between two of its commits, and `reconcile` from any of
them, take the state commits for jobtree's own. Writes only to its own repository (through `reconciler.git.write`), in the words of
`reconciler.state.message`; deciding and simulating stay in `simulation` and the planner.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from planner.plan import Plan
from reconciler.git import write as gitwrite
from reconciler.state import codec as statefiles
from reconciler.state import message
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
        self.repo = gitwrite.init_repository(where)
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
        text = message.message(plan, (), spec_commit, heading=f"pass at {format_time(now)}")
        oid = self._commit(author, now, text)
        self.commits += 1
        gitwrite.check_out_head(self.repo)
        return oid

    def _commit(self, author: GitAuthor, now: int, text: str) -> str:
        return gitwrite.commit_snapshot(
            self.repo, {**self.spec, **self.owned}, author_name=author.name, author_email=author.email,
            when=now, message=text, ref=BRANCH,
        )  # fmt: skip


def _spec_message(now: int, changed: list[str]) -> str:
    """`scenario: 3 spec files at <time>`, then the files by name (the first `NAMED_FILES`)."""
    names = [f"- {p}" for p in changed[:NAMED_FILES]]
    if len(changed) > NAMED_FILES:
        names.append(f"- ... {len(changed) - NAMED_FILES} more")
    files = "file" if len(changed) == 1 else "files"
    return f"scenario: {len(changed)} spec {files} at {format_time(now)}\n\n" + "\n".join(names) + "\n"
