"""A pass whose parsing, state decoding and rendering are split over forked children commits exactly
what the same pass computed in one process commits: same commit ids, cold and warm."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from bench import generate
from reconciler.git.checkout import files as workfiles
from reconciler.passes.reconcile import reconcile_once
from reconciler.perf import forkmap
from tests.support.git import T0, clone, write_tree

WARM_RUN = b"""apiVersion: rq.davidlangworthy.io/v1
kind: Run
metadata: {name: one-more, namespace: vision-g1-t01}
spec:
  owner: org:acme:vision:g1:t01
  resources: {gpuType: H100-80GB, totalGPUs: 8}
"""


def passes(path: Path, remote: pygit2.Repository) -> list[str | None]:
    """A cold pass, then a person's new run, then a warm pass (with the cold pass's caches)."""
    cold = reconcile_once(path, now=T0, push=True).commit
    head = remote.revparse_single("refs/heads/main").peel(pygit2.Commit)
    files = {"runs/vision-g1-t01/one-more.yaml": WARM_RUN}
    index = pygit2.Index()
    index.read_tree(head.tree)
    for name, data in files.items():
        index.add(pygit2.IndexEntry(name, remote.create_blob(data), pygit2.GIT_FILEMODE_BLOB))
    who = pygit2.Signature("Ada", "ada@example.com", T0 + 60, 0)
    remote.create_commit("refs/heads/main", who, who, "runs: one more\n", index.write_tree(remote), [head.id])
    warm = reconcile_once(path, now=T0 + 300, push=True).commit
    return [cold, warm]


def one_fleet(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch, split: bool
) -> tuple[list[str | None], int]:
    """The cold and the warm pass of a small generated fleet, every batch split over two forked
    children (`split`) or all in this process; and how many children were forked."""
    made = generate.build(5, 0.01)
    files = {p: t.encode() for p, t in generate.repo_files(made).items()}
    bare = pygit2.init_repository(str(tmp_path / f"{name}.git"), bare=True, initial_head="main")
    who = pygit2.Signature("Ada", "ada@example.com", T0 - 60, 0)
    bare.create_commit("refs/heads/main", who, who, "fleet\n", write_tree(bare, files), [])
    clone(tmp_path / f"{name}.git", tmp_path / name)
    forks: list[int] = []
    real_fork = forkmap._fork

    def counted(work, chunk):  # type: ignore[no-untyped-def]  # forkmap._fork's own signature
        forks.append(len(chunk))
        return real_fork(work, chunk)

    with monkeypatch.context() as patched:
        patched.setattr(forkmap, "workers", lambda: 2 if split else 1)
        patched.setattr(forkmap, "MIN_ITEMS", 4)  # every batch of this small fleet is split
        patched.setattr(workfiles, "FORK_FROM", 4)
        patched.setattr(forkmap, "_fork", counted)
        return passes(tmp_path / name, bare), len(forks)


def test_forked_children_give_the_bytes_one_process_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serial, none = one_fleet(tmp_path, "serial", monkeypatch, split=False)
    forked, some = one_fleet(tmp_path, "forked", monkeypatch, split=True)
    assert none == 0 and some > 0
    assert serial == forked
    assert all(commit is not None for commit in serial)
