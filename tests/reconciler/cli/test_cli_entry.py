"""The installed console script: whatever a verb prints reaches its reader whole, with its exit code,
although the process leaves without tearing its heap down."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.scenarios import EXAMPLES

SCRIPT = shutil.which("jobtree", path=str(Path(sys.executable).parent))


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    assert SCRIPT is not None, "the jobtree console script is installed beside this Python"
    return subprocess.run([SCRIPT, *args], capture_output=True, check=False)


def test_a_simulation_printed_to_a_pipe_arrives_whole() -> None:
    proc = run("simulate", str(EXAMPLES / "04-reservation-and-lottery.yaml"), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # the whole document, not a truncated buffer
    assert result["ledger"] and result["final"]["runs"]
    assert proc.stdout.endswith(b"\n")


def test_usage_errors_keep_their_exit_code_and_message() -> None:
    proc = run("no-such-verb")
    assert proc.returncode == 2
    assert b"No such command 'no-such-verb'" in proc.stderr


def test_an_invalid_scenario_exits_3_with_its_diagnostic(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Scenario\nmetadata: {name: x}\nspec:\n  start: [unclosed\n")
    proc = run("simulate", str(bad))
    assert proc.returncode == 3
    assert str(bad).encode() in proc.stderr
    assert b"Traceback" not in proc.stderr


# a verb cut short by SIGTERM inside a library that wraps the stop in its own error (pydantic
# turns a KeyboardInterrupt raised while it builds a validator into a SchemaError), or not
CUT_SHORT = """
import signal
import reconciler.cli as cli
from reconciler.cli import signals

def verb():
    if {signalled}:
        signals._received.append(signal.SIGTERM)  # what the SIGTERM handler records before raising
    raise RuntimeError("Error building validator: KeyboardInterrupt")

cli.main = verb
cli.entry()
"""


def test_a_verb_a_signal_cut_short_exits_as_the_signal_says_without_a_traceback() -> None:
    stopped = subprocess.run([sys.executable, "-c", CUT_SHORT.format(signalled=True)], capture_output=True)
    assert stopped.returncode == 143 and b"Traceback" not in stopped.stderr
    crashed = subprocess.run([sys.executable, "-c", CUT_SHORT.format(signalled=False)], capture_output=True)
    assert (
        crashed.returncode == 1 and b"RuntimeError: Error building validator" in crashed.stderr
    )  # a bug shows
