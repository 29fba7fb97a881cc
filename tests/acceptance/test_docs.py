"""The documentation is true: every command in docs/ runs as written, and the reference is current.

`docs/quickstart.md` and `docs/concepts.md` are run as a researcher would follow them, in a folder
holding a copy of `fleet-repo-template/` and `examples/` (as a clone of Jobtree does): each `sh`
block line by line in bash (`kubectl runs …` through a stand-in for kubectl's plugin lookup, which
runs `kubectl-runs …`), each `yaml file=NAME` block written to that file, each `python` block run.
A hidden directive after a block says what its output must say (`<!-- test: expect "…" -->`).
`docs/cli.md` must be what `make docs` generates, `docs/json.md` must name every key the verbs
print (tests/reconciler/cli/runs/test_json_documented.py), and the README must link every page.
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
from tests.support import REPO

DOCS = REPO / "docs"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```\n|^<!-- test: (.*?) -->\n", re.S | re.M)
KUBECTL = '#!/bin/sh\n# kubectl finds plugins on PATH: `kubectl runs ...` runs `kubectl-runs ...`\nname="$1"; shift\nexec "kubectl-$name" "$@"\n'


@dataclass
class Reader:
    """A researcher following a page: where they are, what they ran, what the last block printed."""

    cwd: Path
    env: dict[str, str]
    last: str = ""
    ran: list[str] = field(default_factory=list)

    def shell(self, line: str) -> None:
        command = line.split("  #", 1)[0].strip()
        if command.startswith("cd "):
            self.cwd = (self.cwd / command[3:].strip()).resolve()
            return
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
        assert expect is not None, f"unknown test directive {text!r}"
        assert expect[1] in self.last, f"expected {expect[1]!r} after {self.ran[-3:]}, got:\n{self.last}"


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
def sandbox(tmp_path: Path) -> Reader:
    """A folder like a clone of Jobtree (the template and the examples), a PATH with jobtree and a
    stand-in kubectl, and Git knowing who the reader is."""
    shutil.copytree(REPO / "fleet-repo-template", tmp_path / "fleet-repo-template")
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "kubectl").write_text(KUBECTL)
    (tools / "kubectl").chmod(0o755)
    (tmp_path / "home").mkdir()
    env = {
        "PATH": f"{tools}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path / "home"),
        "TMPDIR": os.environ.get("TMPDIR", str(tmp_path)),
        "PYTHONPATH": str(REPO),
        "GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@acme.example",
        "GIT_COMMITTER_NAME": "Ada Lovelace", "GIT_COMMITTER_EMAIL": "ada@acme.example",
    }  # fmt: skip
    return Reader(tmp_path, env)


def test_every_command_of_the_quick_start_runs_as_written(sandbox: Reader) -> None:
    reader = follow(DOCS / "quickstart.md", sandbox)
    assert any(c.startswith("kubectl runs shrink") for c in reader.ran)  # the page was followed to its end
    assert (reader.cwd / "fleet.svg").read_bytes().startswith(b"<svg ")


def test_the_concepts_try_it_and_the_lottery_replay_run_as_written(sandbox: Reader) -> None:
    reader = follow(DOCS / "concepts.md", sandbox)
    assert any(c.startswith("jobtree simulate") for c in reader.ran)
    assert (reader.cwd / "timeline.svg").read_bytes().startswith(b"<svg ")


def test_the_cli_reference_is_what_the_click_application_says() -> None:
    # as `make docs` writes it: in a fresh process (click caches each command's help option the
    # first time a context asks, and this process has invoked commands outside `jobtree` already)
    fresh = subprocess.run(
        [sys.executable, "-m", "reconciler.cli.reference"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert (DOCS / "cli.md").read_text() == fresh.stdout, (
        "docs/cli.md is stale: run `make docs` and commit it"
    )
    assert fresh.stdout.startswith(reference().split("\n", 1)[0])


def test_the_readme_links_every_page_of_the_docs() -> None:
    readme = (REPO / "README.md").read_text()
    for page in sorted(DOCS.glob("*.md")):
        assert f"docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"
