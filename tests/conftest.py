"""What every test shares: a temporary directory of the session's own, and the golden-file convention.

- Every temporary file a test or a `jobtree` it starts creates (`tempfile`, `TMPDIR`) goes below
  pytest's own temporary directory for this session, which is removed when the session ends:
  `make test` leaves nothing behind in the machine's temporary directory.
- Golden files (`tests/golden/`) are compared byte for byte by the `golden` fixture. A plain run
  that would change one fails and shows the difference; `pytest --regen-golden` rewrites them, to
  be reviewed as a diff like any other change (STYLE habit 8).
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# The browser checks need Chromium, which `make pictures` provides: the suite `make test` runs is
# everything else (nothing in it is skipped for want of a tool).
collect_ignore = [] if os.environ.get("JOBTREE_CHROMIUM") else ["browser"]

GOLDEN = Path(__file__).resolve().parent / "golden"
# the real control plane the cluster tests run against (`server`, `west`: tests/support/controlplane)
pytest_plugins = ["tests.support.controlplane.fixtures"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/ from this run's output instead of comparing with it",
    )


@pytest.fixture(scope="session", autouse=True)
def _own_temporary_directory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point `tempfile` and `TMPDIR` (for `jobtree` subprocesses) into a folder of this session,
    removed at its end with everything in it (the demo's repository, push and bench folders)."""
    where = tmp_path_factory.mktemp("tmp", numbered=True)
    before = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = str(where)
    os.environ["TMPDIR"] = str(where)
    try:
        yield where
    finally:
        tempfile.tempdir = before[0]
        if before[1] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before[1]
        shutil.rmtree(where, ignore_errors=True)


class Golden:
    """`check(name, text)`: `text` must equal `tests/golden/<name>`; with `--regen-golden` it is written."""

    def __init__(self, regen: bool) -> None:
        self.regen = regen

    def check(self, name: str, text: str) -> None:
        path = GOLDEN / name
        if self.regen:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        want = path.read_text() if path.exists() else ""
        if text != want:
            diff = "".join(
                difflib.unified_diff(
                    want.splitlines(True), text.splitlines(True), f"golden/{name}", "this run", n=2
                )
            )
            pytest.fail(
                f"the output differs from tests/golden/{name}; if the change is meant, run "
                f"`pytest --regen-golden` and review the diff:\n{diff[:6000]}",
                pytrace=False,
            )


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    return Golden(bool(request.config.getoption("--regen-golden")))
