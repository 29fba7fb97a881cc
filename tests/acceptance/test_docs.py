"""The documentation is true: every command in docs/ runs as written, in order, and shows what its page says.

Each page with commands is followed as a new user would (`tests.support.docrunner`): in a fresh
copy of the Jobtree repository, one bash session per page, every `sh` block command by command
(each must exit 0), every `yaml file=NAME` block saved, every `python` block run, and every `text`
block after a command block compared with what it printed. `docs/cli.md` and `docs/verbs/` must be
what `make docs` generates, `docs/json.md` must name every key the verbs print
(tests/reconciler/cli/runs/test_json_documented.py), and the README must link every page.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.cli import reference
from tests.support import REPO
from tests.support.docrunner import BLOCK, RUNS, Reader, follow, sandbox, shows

DOCS = REPO / "docs"
# the pages a new user follows, each run as written; a page with commands must be here or below
FOLLOWED = ("quickstart.md", "concepts.md", "platform.md")
# pages whose commands no test can run yet, and why (the reason is for whoever adds the test)
NOT_YET = {
    "evaluation.md": "`make evaluate` replays a month for about twenty minutes; tests/evaluation/test_evaluate.py "
    "runs its entry point (python -m evaluation) on a one-day month, and evaluation.scaling's",
}


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    root, env = sandbox(tmp_path)
    person = Reader(root, env)
    try:
        yield person
    finally:
        person.close()


def test_every_command_of_the_quick_start_runs_as_written(reader: Reader) -> None:
    follow(DOCS / "quickstart.md", reader)
    assert any(
        c.startswith("kubectl runs shrink asr-elastic --by 8") for c in reader.ran
    )  # followed to its end
    practice = Path(reader.env["HOME"]) / "practice"
    assert (practice / "fleet.svg").read_bytes().startswith(b"<svg ")
    # nothing the page saved or drew is left inside the fleet's clone or the Jobtree clone
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=practice / "fleet", capture_output=True, text=True, check=True
    )
    assert status.stdout == ""
    assert not list(reader.root.glob("*.yaml")) and not (reader.root / "practice").exists()


def test_the_concepts_try_it_and_the_lottery_replay_run_as_written(reader: Reader) -> None:
    follow(DOCS / "concepts.md", reader)
    assert any(c.startswith("jobtree simulate") for c in reader.ran)
    assert (reader.cwd / "timeline.svg").read_bytes().startswith(b"<svg ")


def test_the_platform_guide_tries_the_cluster_plane_on_two_local_control_planes(tmp_path: Path) -> None:
    # a new user's home, on a machine where `make controlplane` has built the control plane (as
    # `make test` does first): the page's own `make controlplane` finds it in the user's cache
    root, env = sandbox(tmp_path)
    env["XDG_CACHE_HOME"] = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    reader = Reader(root, env)
    try:
        follow(DOCS / "platform.md", reader)
        assert reader.ran[-1] == "kill %1 %2"  # followed to its end
        fleet = Path(env["HOME"]) / "fleet"
        assert sorted(p.name for p in (fleet / "rendered").iterdir()) == ["gb-west", "h100-east"]
        assert (fleet / "state" / "observed" / "gb-west.yaml").is_file()
    finally:
        reader.close()


def test_every_page_with_commands_is_followed_by_a_test() -> None:
    for page in sorted(DOCS.rglob("*.md")):
        runs = [m for m in BLOCK.finditer(page.read_text()) if m[1] in RUNS]
        name = page.relative_to(DOCS).as_posix()
        if runs:
            assert name in FOLLOWED or name in NOT_YET, f"docs/{name} has commands no test runs"


def test_a_picture_must_be_what_was_printed_up_to_what_changes_from_run_to_run() -> None:
    printed = "pushed 0123456789ab: started 1 run (8 GPUs)\nETA 2026-03-02T10:10:00Z (in 14m)  4.844\n"
    assert (
        shows(
            "pushed 4140e5eba8c3: started 1 run (8 GPUs)\nETA 2026-01-01T00:00:00Z (in 2h 5m) 0.011\n",
            printed,
        )
        is None
    )
    assert (
        shows("pushed 4140e5eba8c3: started 2 runs (8 GPUs)\n...\n", printed) is not None
    )  # a number that matters
    assert shows("...\nETA 2026-01-01T00:00:00Z (in 2h)  0.5\n", printed) is None  # the end of it
    assert shows("ETA 2026-01-01T00:00:00Z (in 2h)  0.5\n", printed) is not None  # not all of it
    assert shows("pushed 4140e5eba8c3: started 1 run (8 GPUs)\n", printed) is not None


def test_a_block_that_fails_stops_the_page_naming_the_command(reader: Reader, tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```sh\ncd /\nexport X=1\nfalse && echo never\n```\n")
    with pytest.raises(AssertionError, match=r"`false && echo never` exited 1"):
        follow(page, reader)
    assert reader.cwd == Path("/")  # the session kept what came before
    page.write_text('```sh\necho "$X" \\\n  two\ncat <<EOF\nhere\nEOF\n```\n```text\n1 two\nhere\n```\n')
    follow(page, reader)  # a continuation and a here-document are one command each; `X` carried over
    assert reader.ran[-2:] == ['echo "$X" \\\n  two', "cat <<EOF\nhere\nEOF"]


def test_a_job_started_in_the_background_runs_until_the_page_is_done(reader: Reader, tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```sh\n(sleep 300; echo late) &\necho $! > pid\n```\n")
    follow(page, reader)
    pid = int((reader.cwd / "pid").read_text())
    assert Path(f"/proc/{pid}").exists()
    reader.close()

    def gone() -> bool:
        try:
            return "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
        except FileNotFoundError:
            return True

    deadline = time.monotonic() + 10  # a signal is delivered, not waited for: give it a moment
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone()


def test_the_cli_pages_are_what_the_click_application_says() -> None:
    # as `make docs` writes them: in a fresh process (click caches each command's help option the
    # first time a context asks, and this process has invoked commands outside `jobtree` already)
    fresh = subprocess.run(
        [sys.executable, "-c", "import json; from reconciler.cli import reference; print(json.dumps(reference.pages()))"],
        capture_output=True, text=True, cwd=REPO, check=True,
    )  # fmt: skip
    pages = json.loads(fresh.stdout)
    on_disk = {
        p.relative_to(DOCS).as_posix(): p.read_text()
        for p in [DOCS / reference.INDEX, *(DOCS / reference.VERB_FOLDER).glob("*.md")]
    }
    assert on_disk == pages, "docs/cli.md or docs/verbs/ is stale: run `make docs` and commit it"
    assert set(pages) >= {
        "verbs/kubectl-runs-get.md",
        "verbs/jobtree-reconcile.md",
        "verbs/kubectl-runs-budgets-usage.md",
    }


def test_every_verb_page_links_back_and_each_researchers_verb_names_its_json() -> None:
    index = (DOCS / reference.INDEX).read_text()
    for page in sorted((DOCS / reference.VERB_FOLDER).glob("*.md")):
        assert f"({reference.VERB_FOLDER}/{page.name})" in index, page.name
        text = page.read_text()
        if page.name.startswith("kubectl-runs-"):
            anchor = re.search(r"\(\.\./json\.md#([a-z0-9-]+)\)", text)
            assert anchor is not None, f"{page.name} names no JSON document"
            headings = {
                reference._anchor(h) for h in re.findall(r"^## (.+)$", (DOCS / "json.md").read_text(), re.M)
            }
            assert anchor[1] in headings, f"{page.name} links json.md#{anchor[1]}, which is no heading"


def test_the_readme_links_every_page_of_the_docs() -> None:
    readme = (REPO / "README.md").read_text()
    for page in sorted(DOCS.glob("*.md")):
        assert f"docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"
