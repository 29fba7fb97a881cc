"""A file kept beside a repository is replaced whole or left as it was, with no temporary file behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from reconciler import atomicfile


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
        atomicfile.write(str(target), "not bytes", prefix="checkout-journal.", suffix=".tmp", durable=True)  # type: ignore[arg-type]
    assert target.read_bytes() == b"the journal in force"
    assert sorted(os.listdir(tmp_path)) == ["checkout-journal"]


def test_a_durable_write_names_its_temporary_file_as_the_caller_sweeps_leftovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    real_replace = os.replace

    def spy(src: str, dst: str) -> None:
        seen.append(os.path.basename(src))
        real_replace(src, dst)

    target = tmp_path / "checkout-journal"
    monkeypatch.setattr(os, "replace", spy)
    atomicfile.write(str(target), b"{}\n", prefix="checkout-journal.", suffix=".tmp", durable=True)
    assert target.read_bytes() == b"{}\n"
    assert len(seen) == 1 and seen[0].startswith("checkout-journal.") and seen[0].endswith(".tmp")
