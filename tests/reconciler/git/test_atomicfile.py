"""A file kept beside a repository is replaced whole or left as it was, with no temporary file behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pygit2
import pytest

from reconciler import atomicfile
from reconciler.git.checkout import journal as checkoutjournal


def test_a_new_file_replaces_the_old_one_whole_with_the_mode_asked(tmp_path: Path) -> None:
    target = tmp_path / "pack-1.idx"
    target.write_bytes(b"old")
    atomicfile.write(str(target), b"new contents", prefix="tmp_jobtree_", mode=0o444)
    assert target.read_bytes() == b"new contents"
    assert stat.S_IMODE(target.stat().st_mode) == 0o444
    assert sorted(os.listdir(tmp_path)) == ["pack-1.idx"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "checkout-journal"
    target.write_bytes(b"the journal in force")
    with pytest.raises(TypeError):
        atomicfile.write(str(target), "not bytes", prefix="checkout-journal.", suffix=".tmp", durable=True)  # type: ignore[arg-type]  # the wrong type is the point
    assert target.read_bytes() == b"the journal in force"
    assert sorted(os.listdir(tmp_path)) == ["checkout-journal"]


def test_a_durable_write_syncs_file_and_directory_and_its_leftover_is_one_the_journal_sweeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = pygit2.init_repository(str(tmp_path / "repo"))
    renamed: list[str] = []
    synced: list[int] = []
    real_replace, real_fsync = os.replace, os.fsync

    def replace(src: str, dst: str) -> None:
        renamed.append(src)
        real_replace(src, dst)

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "fsync", fsync)
    checkoutjournal.begin(repo.path, "main", None, bytes(20), {})  # the journal: a durable write
    assert len(renamed) == 1 and len(synced) >= 2  # the file, then its directory
    # a writer killed before its rename leaves that temporary file: the next pass's recovery sweeps it
    Path(renamed[0]).write_bytes(b"half a journal")
    checkoutjournal.end(repo.path)
    assert checkoutjournal.recover(repo) == []
    assert not Path(renamed[0]).exists()
