"""Fleet repositories the scenario engine writes (`jobtree simulate --git`), and the researcher's verbs run on them.

`history(scenario, where)` plays a scenario into a new repository whose history reads as a fleet
repository's (a spec commit, then a state commit per pass); `pass_at(repo, instant)` is the state
commit of the pass at that instant, to read the fleet as it was then (`--rev`). `runs(...)` runs a
`kubectl runs` verb in-process as a researcher types it and returns what they would see.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2
import yaml
from click.testing import CliRunner

from reconciler.cli.runs import command as runs_group
from reconciler.cli.simulate import command as simulate


def history(scenario: Path, where: Path) -> Path:
    """`jobtree simulate SCENARIO --git WHERE`: every pass as a commit on main."""
    result = CliRunner().invoke(simulate, [str(scenario), "--git", str(where)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return where


def played(doc: dict[str, Any], where: Path) -> Path:
    """A Scenario document (`tests.support.builders.scenario`) saved in `where` and played into the
    fleet repository `where/fleet`."""
    (where / "scenario.yaml").write_text(yaml.safe_dump(doc))
    return history(where / "scenario.yaml", where / "fleet")


def pass_at(repo: Path, instant: str) -> str:
    """The state commit of the pass at `instant` (RFC 3339), as `simulate --git` words its subject."""
    git = pygit2.Repository(str(repo))
    for commit in git.walk(git.references["refs/heads/main"].target):
        if commit.message.startswith(f"jobtree: pass at {instant}"):
            return str(commit.id)
    raise AssertionError(f"no pass at {instant} in {repo}")


COMMIT_ID = re.compile(r"\b(?:[0-9a-f]{40}|[0-9a-f]{12})\b")


@dataclass(frozen=True)
class Shown:
    """What a verb printed, and how it exited."""

    code: int
    out: str
    err: str

    @property
    def shown(self) -> str:
        """The output with commit ids as `<commit>`: what golden files keep (a commit id changes with
        every byte of the history, a seed never: `0x` + 16 hex digits is not a commit id)."""
        return COMMIT_ID.sub("<commit>", self.out)

    def json(self) -> Any:
        assert self.code == 0, self.err
        return json.loads(self.out)


def runs(*args: str, repo: Path | None = None, env: dict[str, str] | None = None) -> Shown:
    """`kubectl runs ARGS... [--repo REPO]`, in-process."""
    argv = [*args, *(["--repo", str(repo)] if repo is not None else [])]
    result = CliRunner().invoke(runs_group, argv, env=env, catch_exceptions=False)
    return Shown(result.exit_code, result.stdout, result.stderr)
