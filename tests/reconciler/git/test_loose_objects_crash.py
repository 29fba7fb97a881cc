"""Objects written loose by a pass killed part way: never a commit without its tree, so every later fetch works."""

from __future__ import annotations

from pathlib import Path

import pygit2

from reconciler.git import packs as gitpack


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
        (
            gitpack.object_id("commit", commit),
            "commit",
            commit,
        ),  # commits first, as a history walk lists them
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
