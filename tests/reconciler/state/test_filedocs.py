"""The documents apply reads of a commit, kept by blob id: what a parse of the commit's files gives, parsed once.

A reconciled template fleet: its state and rendered files read through the cache equal their
parse, the second read parses nothing, a file changed since is parsed again (never its old
documents), and a damaged cache is only a miss.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2
import pytest

from reconciler.git import read as gitread
from reconciler.passes.apply import MIRRORED
from reconciler.state import codec as statefiles
from reconciler.state import filedocs
from tests.support.git import commit_by_hand, reconciled


def _parsed(repo: pygit2.Repository, rev: str) -> dict[str, list[Any]]:
    files = gitread.read_files(repo, rev, MIRRORED)
    return {path: statefiles.documents(data) for path, data in files.items() if path.endswith(".yaml")}


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many files `filedocs` parses from now on."""
    parsed = [0]
    parse = filedocs.parse

    def counted(data: bytes) -> list[Any]:
        parsed[0] += 1
        return parse(data)

    monkeypatch.setattr(filedocs, "parse", counted)
    return parsed


def test_a_commit_read_twice_is_parsed_once_with_the_same_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, repo = reconciled(tmp_path)
    head = str(repo.head.target)
    expected = _parsed(repo, head)
    assert any(p.startswith("rendered/") for p in expected) and any(p.startswith("state/") for p in expected)
    parsed = _counting(monkeypatch)
    assert filedocs.documents(repo, head, MIRRORED) == expected
    assert parsed[0] == len(expected)
    assert filedocs.documents(repo, head, MIRRORED) == expected
    assert parsed[0] == len(expected)  # the second read came from the cache


def test_a_file_changed_since_is_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, repo = reconciled(tmp_path)
    filedocs.documents(repo, str(repo.head.target), MIRRORED)
    path = sorted(p for p in _parsed(repo, "HEAD") if p.startswith("rendered/"))[0]
    old = gitread.read_file(repo, "HEAD", path)
    assert old is not None
    changed = old + b"---\nedited: true\n"
    commit_by_hand(repo, {path: changed}, "a rendered file edited\n")
    parsed = _counting(monkeypatch)
    docs = filedocs.documents(repo, "refs/heads/main", MIRRORED)
    assert parsed[0] == 1
    assert docs[path] == statefiles.documents(changed) != statefiles.documents(old)


def test_a_damaged_cache_is_a_miss(tmp_path: Path) -> None:
    _, repo = reconciled(tmp_path)
    head = str(repo.head.target)
    filedocs.documents(repo, head, MIRRORED)
    where = gitread.cache_directory(repo) / filedocs.CACHE_NAME
    where.write_bytes(where.read_bytes()[:-100])
    assert filedocs.documents(repo, head, MIRRORED) == _parsed(repo, head)
