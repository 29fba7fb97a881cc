"""A push to a bare remote on a local path killed part way: the clone that was killed fetches and converges."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from reconciler.git import packs as gitpack
from reconciler.git import read as gitread
from reconciler.passes.reconcile import reconcile_once
from tests.git_support import write_tree
from tests.test_reconcile import HUMAN, T0, bare_remote, clone, steady_files


class Killed(BaseException):
    """kill -9 between two object writes: nothing after it runs."""


class _DyingOdb:
    def __init__(self, odb: pygit2.Odb, writes: int) -> None:
        self.odb, self.writes = odb, writes

    def exists(self, oid: pygit2.Oid) -> bool:
        return self.odb.exists(oid)

    def write(self, kind: int, data: bytes) -> pygit2.Oid:
        if self.writes == 0:
            raise Killed
        self.writes -= 1
        return self.odb.write(kind, data)


class _Dying:
    """A repository whose object database dies after `writes` object writes."""

    def __init__(self, repo: pygit2.Repository, writes: int) -> None:
        self.repo, self.odb = repo, _DyingOdb(repo.odb, writes)

    def __getattr__(self, name: str) -> object:
        return getattr(self.repo, name)


def test_a_batch_written_loose_stores_its_commits_last_so_a_kill_leaves_none_without_its_tree(
    tmp_path: Path,
) -> None:
    tree = b"100644 a\0" + pygit2.hash(b"a\n").raw
    commit = b"tree %s\nauthor A <a@x> 0 +0000\ncommitter A <a@x> 0 +0000\n\nc\n" % (
        gitpack.object_id("tree", tree).hex().encode()
    )
    batch = [
        (gitpack.object_id("commit", commit), "commit", commit),  # the order gitlocal finds them in
        (gitpack.object_id("tree", tree), "tree", tree),
        (gitpack.object_id("blob", b"a\n"), "blob", b"a\n"),
    ]
    for writes in range(len(batch) + 1):
        repo = pygit2.init_repository(str(tmp_path / f"r{writes}"), bare=True)
        try:
            gitpack.write(_Dying(repo, writes), batch)  # type: ignore[arg-type]  # stands in for a repository
        except Killed:
            pass
        stored = {kind for oid, kind, _ in batch if repo.odb.exists(pygit2.Oid(raw=oid))}
        assert "commit" not in stored or stored == {"commit", "tree", "blob"}, writes


@pytest.mark.parametrize("writes", [1, 3])
def test_a_push_killed_while_writing_objects_into_the_remote_does_not_wedge_the_next_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes: int
) -> None:
    remote = bare_remote(tmp_path, steady_files())
    clone(remote, tmp_path / "other")
    victim = tmp_path / "victim"
    clone(remote, victim)
    real = gitpack.write

    def dying(repo: pygit2.Repository, objects: object, packs: list[str] | None = None) -> int:
        if Path(repo.path).resolve() == remote.resolve():
            return real(_Dying(repo, writes), objects, packs)  # type: ignore[arg-type]  # as above
        return real(repo, objects, packs)  # type: ignore[arg-type]  # passed through

    with monkeypatch.context() as patched:
        patched.setattr(gitpack, "write", dying)
        with pytest.raises(Killed):
            reconcile_once(victim, now=T0, push=True)
    # meanwhile the remote moves on: another clone pushes state, a person adds a run
    assert reconcile_once(tmp_path / "other", now=T0 + 60, push=True).pushed
    served = pygit2.Repository(str(remote))
    files = gitread.read_files(served, "main")
    run = files["runs/media-audio/whisper-finetune.yaml"].replace(b"whisper-finetune", b"whisper-more")
    files["runs/media-audio/whisper-more.yaml"] = run
    parent = served.references["refs/heads/main"].target
    served.create_commit(
        "refs/heads/main", HUMAN, HUMAN, "another run\n", write_tree(served, files), [parent]
    )
    outcome = reconcile_once(victim, now=T0 + 120, push=True)  # fetches: no "object not found"
    assert outcome.pushed and outcome.head == str(served.references["refs/heads/main"].target)
