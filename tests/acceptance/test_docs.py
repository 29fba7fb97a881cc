"""The documentation is true: every command in docs/ runs as written, and the reference is current.

`docs/quickstart.md` and `docs/concepts.md` are run as a researcher would follow them: each `sh`
block line by line in bash (`kubectl runs …` through a stand-in for kubectl's plugin lookup, which
runs `kubectl-runs …`), each `yaml file=NAME` block written to that file, each `python` block run.
The quick start's fleet is the template, served from a local bare repository in place of
`https://github.com/acme/fleet.git` (GitHub Actions' variables name that host, so compare links
read as on GitHub). Hidden directives say what the platform does between the researcher's steps
(`<!-- test: the platform merges BRANCH and jobtree reconciles -->`, `<!-- test: jobtree
reconciles -->`) and what the last block's output must say (`<!-- test: expect "…" -->`).
`docs/cli.md` must be what `make docs` generates, and `docs/json.md` must name every key the
verbs print.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reconciler.cli.reference import reference
from reconciler.passes.reconcile import reconcile_once
from tests.support import REPO
from tests.support.git import bare_remote, clone, steady_files

DOCS = REPO / "docs"
FLEET_URL = "https://github.com/acme/fleet.git"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```\n|^<!-- test: (.*?) -->\n", re.S | re.M)
KUBECTL = '#!/bin/sh\n# kubectl finds plugins on PATH: `kubectl runs ...` runs `kubectl-runs ...`\nname="$1"; shift\nexec "kubectl-$name" "$@"\n'


@dataclass
class Reader:
    """A researcher following a page, and the platform acting between their steps."""

    root: Path
    cwd: Path
    env: dict[str, str]
    last: str = ""
    ran: list[str] = field(default_factory=list)

    def shell(self, line: str) -> None:
        command = line.split("  #", 1)[0].strip()
        if command.startswith("cd "):
            self.cwd = (self.cwd / command[3:].strip()).resolve()
            return
        command = command.replace(FLEET_URL, str(self.root / "fleet.git"))
        done = subprocess.run(
            ["bash", "-c", command], cwd=self.cwd, env=self.env, capture_output=True, text=True, check=False
        )
        self.ran.append(command)
        self.last += done.stdout + done.stderr
        assert done.returncode == 0, f"`{line}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}"

    def python(self, code: str) -> None:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        self.last = done.stdout

    def directive(self, text: str) -> None:
        expect = re.fullmatch(r'expect "(.*)"', text)
        merge = re.fullmatch(r"the platform merges (\S+) and jobtree reconciles", text)
        if expect is not None:
            assert expect[1] in self.last, f"expected {expect[1]!r} after {self.ran[-3:]}, got:\n{self.last}"
        elif merge is not None:
            self.merge(merge[1])
            self.reconcile()
        elif text == "jobtree reconciles":
            self.reconcile()
        else:
            raise AssertionError(f"unknown test directive {text!r}")

    def merge(self, branch: str) -> None:
        """The platform team approves and merges the pull request (a merge commit on main)."""
        platform = self.root / "reconciler"
        for git in (
            ["fetch", "-q", "origin"],
            ["merge", "-q", "--no-ff", "-m", f"Merge {branch}", f"origin/{branch}"],
            ["push", "-q", "origin", "main"],
        ):
            done = subprocess.run(
                ["git", *git], cwd=platform, env=self.env, capture_output=True, text=True, check=False
            )
            assert done.returncode == 0, done.stderr

    def reconcile(self) -> None:
        reconcile_once(self.root / "reconciler", push=True)


def follow(page: Path, reader: Reader) -> Reader:
    """Do what the page says, in order."""
    for found in BLOCK.finditer(page.read_text()):
        language, info, body, directive = found.groups()
        if directive is not None:
            reader.directive(directive)
        elif language == "sh":
            reader.last = ""
            for line in body.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    reader.shell(line)
        elif language == "yaml" and "file=" in info:
            (reader.cwd / info.split("file=", 1)[1].split()[0]).write_text(body)
        elif language == "python":
            reader.python(body)
    return reader


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "kubectl").write_text(KUBECTL)
    (tools / "kubectl").chmod(0o755)
    env = {
        "PATH": f"{tools}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path / "home"),
        "TMPDIR": os.environ.get("TMPDIR", str(tmp_path)),
        "PYTHONPATH": str(REPO),
        "GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@acme.example",
        "GIT_COMMITTER_NAME": "Ada Lovelace", "GIT_COMMITTER_EMAIL": "ada@acme.example",
        "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/fleet",
    }  # fmt: skip
    (tmp_path / "home").mkdir()
    return tmp_path, env


def test_every_command_of_the_quick_start_runs_as_written(sandbox: tuple[Path, dict[str, str]]) -> None:
    root, env = sandbox
    bare_remote(root, steady_files())
    clone(root / "fleet.git", root / "reconciler")
    assert reconcile_once(root / "reconciler", push=True).pushed  # the fleet, running
    (root / "desk").mkdir()
    reader = follow(DOCS / "quickstart.md", Reader(root, root / "desk", env))
    assert any(c.startswith("kubectl runs shrink") for c in reader.ran)  # the page was followed to its end
    assert (reader.cwd / "fleet.svg").read_bytes().startswith(b"<svg ")


def test_the_concepts_try_it_and_the_lottery_replay_run_as_written(
    sandbox: tuple[Path, dict[str, str]],
) -> None:
    root, env = sandbox
    shutil.copytree(REPO / "examples", root / "examples")
    reader = follow(DOCS / "concepts.md", Reader(root, root, env))
    assert any(c.startswith("jobtree simulate") for c in reader.ran)
    assert (root / "timeline.svg").read_bytes().startswith(b"<svg ")


def test_the_cli_reference_is_what_the_click_application_says() -> None:
    written = (DOCS / "cli.md").read_text()
    assert written == reference(), "docs/cli.md is stale: run `make docs` and commit it"


def test_the_readme_links_every_page_of_the_docs() -> None:
    readme = (REPO / "README.md").read_text()
    for page in sorted(DOCS.glob("*.md")):
        assert f"docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"
