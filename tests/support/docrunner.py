"""A person following a documentation page: every command run as written, in order, in one shell; every picture checked.

`sandbox(where)` makes what a new user has after cloning Jobtree: a fresh copy of the repository
(its files as `git ls-files` lists them, with the working tree's edits) whose `.venv` is the one
this test runs in, a home folder, and `kubectl` (the real one when installed, else a stand-in that
runs kubectl plugins as kubectl does: `kubectl runs ...` runs `kubectl-runs ...`). `Reader` is a
bash session in it, as a person keeps one terminal open: `cd`, `export`, `source` and jobs started
with `&` carry from command to command and from block to block (`close` ends the session and every
process it started). `follow(page, reader)` does what the page says, top to bottom:

- a `sh` (or `bash`) block: each command in it (a line, or the lines one command spans: a `\\`
  continuation, a here-document, an open quote; bash itself says when the text parses) runs in
  the session and must exit 0; the block's output (stdout and stderr) is kept;
- a block whose info string says `file=NAME` (```` ```yaml file=trainer.yaml ````): its body is
  written to NAME in the session's current folder, as a person saves the file they are shown;
- a `python` block: run by the session's Python (jobtree installed);
- a `text` block right after a command block (hidden directives between them allowed): the picture
  of what that block printed. It must be exactly that output once what changes from run to run is
  masked (`mask`: commit ids, times, durations, GPU-hours, column alignment); a line `...` stands
  for any number of lines;
- `<!-- test: expect "TEXT" -->`: the last command block's output contains TEXT;
- `<!-- test: skip the next block: REASON -->`: the next block is not run (what only a production
  cluster can do); the reason is part of the page's source for everyone to read.

A block with no language (```` ``` ````) is an illustration: neither run nor checked.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import REPO

BLOCK = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```[ \t]*\n|^<!-- test: (.*?) -->[ \t]*\n", re.S | re.M)
RUNS = ("sh", "bash")
STAND_IN = (
    "#!/bin/sh\n# kubectl finds plugins on PATH: `kubectl runs ...` runs `kubectl-runs ...`\n"
    'name="$1"; shift\n'
    'command -v "kubectl-$name" >/dev/null || { echo "kubectl (stand-in): no kubectl here and no plugin kubectl-$name" >&2; exit 1; }\n'
    'exec "kubectl-$name" "$@"\n'
)
# the session's helper: run a command file with its output in a file, then record the status and folder
HELPER = (
    '__jt_run() { { eval "$(cat "$1")"; } >"$2" 2>&1 </dev/null; __jt_s=$?; '
    'pwd >"$3.pwd"; echo "$__jt_s" >"$3.tmp"; mv "$3.tmp" "$3"; }\n'
)
COMMAND_TIMEOUT = 600.0  # seconds one documented command may take (a first `make demo` included)


def sandbox(where: Path, linked: tuple[str, ...] = ()) -> tuple[Path, dict[str, str]]:
    """A fresh copy of the repository in `where/jobtree` as a clone of it holds it, the folder a
    reader starts in, and the environment of their shell. `linked`: folders Git ignores that the
    copy links to this checkout's (a control plane's downloaded binaries under `build/`, say), as
    `.venv` always is."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    root = where / "jobtree"
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    venv = Path(sys.executable).parent.parent
    (root / ".venv").symlink_to(venv, target_is_directory=True)
    for folder in linked:
        if (REPO / folder).is_dir() and not (root / folder).exists():
            (root / folder).symlink_to(REPO / folder, target_is_directory=True)
    home, tools = where / "home", where / "tools"
    home.mkdir()
    tools.mkdir()
    if shutil.which("kubectl") is None:
        (tools / "kubectl").write_text(STAND_IN)
        (tools / "kubectl").chmod(0o755)
    env = {
        "PATH": os.pathsep.join([str(tools), os.environ.get("PATH", "/usr/bin:/bin"), str(venv / "bin")]),
        "HOME": str(home), "TMPDIR": os.environ.get("TMPDIR", str(where)), "LANG": "C.UTF-8",
        "NO_COLOR": "1", "TERM": "dumb", "JT_PYTHON": sys.executable,
        "GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@acme.example",
        "GIT_COMMITTER_NAME": "Ada Lovelace", "GIT_COMMITTER_EMAIL": "ada@acme.example",
    }  # fmt: skip
    return root, env


HEREDOC = re.compile(r"(?<!<)<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")


def complete(text: str) -> bool:
    """Whether `text` is whole shell commands: bash parses it (no open quote or `\\`), and every
    here-document has its closing line (bash -n only warns of a missing one)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        for dash, _, word in HEREDOC.findall(line):
            if not any((rest.lstrip("\t") if dash else rest) == word for rest in lines[i + 1 :]):
                return False
    return subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True).returncode == 0


def commands(body: str) -> list[str]:
    """The commands of a block, each as written (one line, or the lines it spans)."""
    out: list[str] = []
    pending = ""
    for line in body.splitlines(keepends=True):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line
        if complete(pending) and not pending.rstrip().endswith("\\"):
            out.append(pending)
            pending = ""
    assert not pending.strip(), f"a command never ends in its block: {pending!r}"
    return out


# what differs from one run to the next, masked in pictures and in what was printed alike
MASKS = (
    (re.compile(r"\b[0-9a-f]{40}\b|\b[0-9a-f]{12}\b"), "<commit>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"), "<time>"),
    (re.compile(r"\b\d+\.\d+\b"), "<number>"),
    (re.compile(r"\b\d+[dhms](?: \d+[dhms])?\b"), "<duration>"),
    (re.compile(r"[ \t]+"), " "),
)
ELLIPSIS = ("...", "…")


def mask(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        for pattern, instead in MASKS:
            line = pattern.sub(instead, line)
        lines.append(line.strip())
    while lines and not lines[-1]:
        lines.pop()
    return lines


def shows(picture: str, printed: str) -> str | None:
    """None when `printed` is what `picture` shows (masked; `...` for any lines), else why not."""
    want, got = mask(picture), mask(printed)
    chunks: list[list[str]] = [[]]
    for line in want:
        if line in ELLIPSIS:
            chunks.append([])
        else:
            chunks[-1].append(line)
    if len(chunks) == 1:
        return None if got == want else "it differs (no `...` in the picture: it shows all of it)"
    head, *middle, tail = chunks
    if got[: len(head)] != head:
        return f"it does not begin with {head}"
    at = len(head)
    for chunk in middle:
        found = next(
            (k for k in range(at, len(got) - len(chunk) + 1) if got[k : k + len(chunk)] == chunk), None
        )
        if found is None:
            return f"the lines {chunk} are not in it, in this order"
        at = found + len(chunk)
    if len(got) - len(tail) < at or got[len(got) - len(tail) :] != tail:
        return f"it does not end with {tail}"
    return None


@dataclass
class Reader:
    """A bash session a page is followed in: where it is, what it ran, what the last block printed."""

    root: Path
    env: dict[str, str]
    cwd: Path = field(init=False)
    last: str = ""
    ran: list[str] = field(default_factory=list)
    _n: int = 0

    def __post_init__(self) -> None:
        self.cwd = self.root
        self.work = self.root.parent / ".reader"
        self.work.mkdir(exist_ok=True)
        self.shell = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, cwd=self.root, env=self.env, text=True, start_new_session=True,
        )  # fmt: skip
        self._send(HELPER)

    def _send(self, text: str) -> None:
        assert self.shell.stdin is not None
        self.shell.stdin.write(text)
        self.shell.stdin.flush()

    def run(self, command: str, what: str | None = None) -> tuple[int, str]:
        """Run `command` in the session; its exit status and output."""
        self._n += 1
        base = self.work / f"{self._n}"
        script, out, status = base.with_suffix(".sh"), base.with_suffix(".out"), base.with_suffix(".status")
        script.write_text(command)
        self._send(f"__jt_run '{script}' '{out}' '{status}'\n")
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while not status.exists():
            if self.shell.poll() is not None:
                raise AssertionError(
                    f"`{what or command.strip()}` ended the shell (exit {self.shell.returncode})"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"`{what or command.strip()}` took over {COMMAND_TIMEOUT:.0f} s")
            time.sleep(0.02)
        self.cwd = Path(Path(f"{status}.pwd").read_text().strip())
        return int(status.read_text()), out.read_text(errors="replace")

    def block(self, body: str) -> None:
        self.last = ""
        for command in commands(body):
            code, printed = self.run(command)
            self.ran.append(command.strip())
            self.last += printed
            assert code == 0, f"`{command.strip()}` exited {code}:\n{printed}"

    def python(self, code: str) -> None:
        self._n += 1
        script = self.work / f"{self._n}.py"
        script.write_text(code)
        status, printed = self.run(f'"$JT_PYTHON" {script}\n', what="a python block")
        assert status == 0, printed
        self.last = printed

    def save(self, name: str, body: str) -> None:
        target = Path(self.env["HOME"]) / name[2:] if name.startswith("~/") else self.cwd / name
        assert target.parent.is_dir(), f"the page saves {name} into {target.parent}, which does not exist"
        target.write_text(body)

    def directive(self, text: str) -> bool:
        """Act on a hidden directive; True when it asks to skip the next block."""
        expect = re.fullmatch(r'expect "(.*)"', text)
        if expect is not None:
            assert expect[1] in self.last, f"expected {expect[1]!r} after {self.ran[-3:]}, got:\n{self.last}"
            return False
        assert re.fullmatch(r"skip the next block: .+", text), f"unknown test directive {text!r}"
        return True

    def close(self) -> None:
        """End the session and every process it started (its own process group)."""
        if self.shell.poll() is None:
            try:
                os.killpg(self.shell.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            self.shell.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.shell.pid, signal.SIGKILL)
            self.shell.wait()


def follow(page: Path, reader: Reader) -> Reader:
    """Do what the page says, in order."""
    skip = False
    after_commands = False  # the blocks since the last command block were directives only
    for found in BLOCK.finditer(page.read_text()):
        language, info, body, directive = found.groups()
        if directive is not None:
            skip = reader.directive(directive) or skip
            continue
        if skip:
            skip, after_commands = False, False
            continue
        if "file=" in info:
            reader.save(info.split("file=", 1)[1].split()[0], body)
        elif language in RUNS:
            reader.block(body)
            after_commands = True
            continue
        elif language == "python":
            reader.python(body)
        elif language == "text" and after_commands:
            why = shows(body, reader.last)
            assert why is None, (
                f"{page.name}: the picture after `{reader.ran[-1]}` is not what it printed ({why}).\n"
                f"--- the picture ---\n{body}--- printed ---\n{reader.last}"
            )
        after_commands = False
    return reader
