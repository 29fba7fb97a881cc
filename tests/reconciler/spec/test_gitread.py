"""The read-only fleet reader: a folder and its commit give the same spec files, and nothing else
but the start of data files that may be misplaced spec (`strays`), for validation to name."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from reconciler.spec import files as gitread
from schemas import load


def _fleet(root: Path) -> None:
    for rel, text in {
        "jobtree.yaml": "kind: FleetConfig\n",
        "budgets/a.yaml": "kind: Budget\n",
        "runs/ns/deep/r.yml": "kind: Run\n",
        "runs/ns/README.md": "not a manifest\n",
        "inventory/nodes.yaml": "domains: []\n",
        "inventory/other.yaml": "not read, so named\n",
        "docs/guide.md": "prose\n",
        ".github/workflows/plan.yaml": "kind: Run\n",
        "state/leases/ns/r.yaml": "machine-written\n",
        "rendered/c/ns/p.yaml": "machine-written\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "runs" / "ns" / "link.yaml").symlink_to(root / "budgets" / "a.yaml")
    (root / "runs" / "ns" / "dir.yaml").symlink_to(root / "budgets")  # a link to a folder


LINKS = {"runs/ns/link.yaml", "runs/ns/dir.yaml"}
WANT = {"jobtree.yaml", "budgets/a.yaml", "runs/ns/deep/r.yml", "inventory/nodes.yaml", *LINKS}
STRAYS = {"inventory/other.yaml"}  # not state/, rendered/, hidden folders or prose


def test_the_worktree_reader_returns_only_spec_yaml_and_marks_symlinks_unread(tmp_path: Path) -> None:
    _fleet(tmp_path)
    files = gitread.read_worktree(tmp_path)
    assert set(files) == WANT | STRAYS
    link = files["runs/ns/link.yaml"]  # the target's name, for validation to report, not its content
    assert isinstance(link, load.Symlink) and link == str(tmp_path / "budgets" / "a.yaml").encode()
    assert {path for path, data in files.items() if isinstance(data, load.Symlink)} == LINKS


def test_a_commit_reads_exactly_what_its_working_tree_reads(tmp_path: Path) -> None:
    _fleet(tmp_path)
    repo = pygit2.init_repository(str(tmp_path))
    repo.index.add_all()
    repo.index.write()
    sig = pygit2.Signature("t", "t@example.com", 1767225600, 0)
    repo.create_commit("HEAD", sig, sig, "fleet", repo.index.write_tree(), [])
    committed, on_disk = gitread.read_tree(tmp_path, "HEAD"), gitread.read_worktree(tmp_path)
    assert committed == on_disk
    assert {p for p, d in committed.items() if isinstance(d, load.Symlink)} == LINKS


def test_an_empty_repository_has_no_revision_to_read(tmp_path: Path) -> None:
    pygit2.init_repository(str(tmp_path))
    with pytest.raises(gitread.GitReadError, match="HEAD"):
        gitread.read_tree(tmp_path, "HEAD")


def test_validating_a_bare_repository_without_rev_says_to_pass_rev(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from reconciler.cli import main

    pygit2.init_repository(str(tmp_path / "fleet.git"), bare=True)
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "fleet.git")])
    assert result.exit_code == 2
    assert "bare Git repository" in result.stderr and "--rev" in result.stderr
