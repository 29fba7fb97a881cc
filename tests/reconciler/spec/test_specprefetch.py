"""The spec head start of a cold `reconcile`: files parsed in a forked child while the engine imports.

Whatever the child parsed, a pass must read exactly the spec it reads without them: same
objects, same problems at the same lines, and the changes made after the child started.
"""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner

from reconciler.cli.reconcile import command
from reconciler.git import read as gitread
from reconciler.spec import commit as speccache
from reconciler.spec import parsed as specprefetch
from tests.support.git import bare_remote, clone, forget_caches, template_files
from tests.support.git import commit_by_hand as human_commit

NEW_RUN = "runs/media-audio/whisper-small.yaml"
WHISPER = "runs/media-audio/whisper-finetune.yaml"


@pytest.fixture(autouse=True)
def two_cpus(monkeypatch) -> None:
    """Children fork as on the 2-CPU machines jobtree is measured on, whatever runs the tests."""
    monkeypatch.setattr(specprefetch.forkmap, "workers", lambda: 2)


def template_spec_files() -> int:
    """How many files of the template people write: jobtree.yaml, the inventory, budgets and runs."""
    return sum(1 for p in template_files() if p.startswith(("budgets/", "runs/", "inventory/", "jobtree")))


def a_clone(tmp_path: Path) -> pygit2.Repository:
    return clone(bare_remote(tmp_path), tmp_path / "fleet")


def read_without_head_start(repo: pygit2.Repository) -> tuple[object, int, int]:
    forget_caches(repo)
    return speccache.read_spec(repo, gitread.resolve(repo, "main"))


def test_a_head_start_reads_the_same_spec_as_parsing_in_the_pass(tmp_path: Path) -> None:
    repo = a_clone(tmp_path)
    early = specprefetch.start(repo.workdir, least=1)
    assert early is not None
    spec, count, parsed = speccache.read_spec(repo, gitread.resolve(repo, "main"), early)
    assert count == parsed == template_spec_files()  # every file counts as parsed, none from a cache
    assert len(early.rows()) == count  # ... and the child parsed them all
    assert (spec, count, parsed) == read_without_head_start(repo)


def test_files_changed_after_the_head_start_are_read_as_committed(tmp_path: Path) -> None:
    repo = a_clone(tmp_path)
    early = specprefetch.start(repo.workdir, least=1)
    assert early is not None
    whisper = template_files()[WHISPER]
    human_commit(
        repo,
        {
            NEW_RUN: whisper.replace(b"name: whisper-finetune", b"name: whisper-small"),
            WHISPER: whisper.replace(b"totalGPUs: 8", b"totalGPUs: 16"),
        },
        "a new run, a wider one\n",
    )
    spec, count, parsed = speccache.read_spec(repo, gitread.resolve(repo, "main"), early)
    by_name = {r.metadata.name: r for r in spec.runs}
    assert by_name["whisper-small"].spec.resources.totalGPUs == 8
    assert by_name["whisper-finetune"].spec.resources.totalGPUs == 16
    assert (spec, count, parsed) == read_without_head_start(repo)


def test_a_file_that_does_not_parse_is_reported_at_its_line_as_without_a_head_start(tmp_path: Path) -> None:
    repo = a_clone(tmp_path)
    human_commit(repo, {NEW_RUN: b"kind: Run\nmetadata:\n  name: [unclosed\n"}, "broken\n")
    early = specprefetch.start(repo.workdir, least=1)
    assert early is not None
    spec, _, _ = speccache.read_spec(repo, gitread.resolve(repo, "main"), early)
    problems = [str(d) for d in spec.diagnostics if d.path == NEW_RUN]
    assert problems and problems[0].startswith(f"{NEW_RUN}:3:")
    assert [str(d) for d in read_without_head_start(repo)[0].diagnostics] == [
        str(d) for d in spec.diagnostics
    ]


def test_no_head_start_where_it_cannot_help(tmp_path: Path) -> None:
    repo = a_clone(tmp_path)
    assert template_spec_files() < specprefetch.forkmap.MIN_ITEMS
    assert specprefetch.start(repo.workdir) is None  # so few files: forking costs more than it saves
    speccache.read_spec(repo, gitread.resolve(repo, "main"))  # leaves the parse cache
    assert specprefetch.start(repo.workdir, least=1) is None  # a later pass parses only what changed
    pygit2.init_repository(str(tmp_path / "empty"))
    assert specprefetch.start(tmp_path / "empty", least=1) is None  # no commit yet
    (tmp_path / "plain").mkdir()
    assert specprefetch.start(tmp_path / "plain", least=1) is None  # not a repository


def test_reconcile_with_a_head_start_commits_what_one_without_commits(tmp_path: Path, monkeypatch) -> None:
    remote = bare_remote(tmp_path)
    real_start = specprefetch.start
    trees = []
    for name, least in (("with", 1), ("without", 10**9)):
        started: list[specprefetch.Prefetch | None] = []

        def recording(path: str, least: int = least, started: list = started) -> specprefetch.Prefetch | None:
            started.append(real_start(path, least))
            return started[-1]

        monkeypatch.setattr(specprefetch, "start", recording)
        path = tmp_path / name
        clone(remote, path)
        result = CliRunner().invoke(command, [str(path), "--once", "--now", "2026-03-02T09:00:00Z"])
        assert result.exit_code == 0, result.output
        assert (started[0] is not None) == (least == 1)
        assert f"{template_spec_files()} parsed, 0 cached" in result.output
        trees.append(pygit2.Repository(str(path)).revparse_single("main").peel(pygit2.Commit).tree_id)
    assert trees[0] == trees[1]
