"""Work-tree files and their index entries: write, remove, compare by content or stat data, stage.

The file-level half of `worktree`: what one path's file and index entry hold, and writing them as
`git checkout` and `git add` would (stat data recorded, so `git status` stays fast). Decides
nothing about which paths change (`worktree`) and never moves a ref.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pygit2
from pygit2 import C, ffi
from pygit2.enums import FileMode

from reconciler.perf import forkmap

Entry = tuple[pygit2.Oid, int]  # (blob id, file mode) of a path in a tree
# Files from which `Writer.launch` forks a writer: below, a fork (and the copy-on-write faults it
# costs this process while the commit is made) is not repaid; a first 100k pass writes 12,000.
FORK_FROM = 10_000
Stat = tuple[int, int, int, int, int, int, int]  # what an index entry records of a file (`stat_of`)


def stat_of(info: os.stat_result) -> Stat:
    """ctime and mtime (ns), device, inode, uid, gid, size: plain ints, so a forked writer can send them."""
    return (
        info.st_ctime_ns, info.st_mtime_ns, info.st_dev, info.st_ino, info.st_uid, info.st_gid, info.st_size
    )  # fmt: skip


class Writer:
    """The rewrite of the changed paths: the files (`files`), then the index entries (`stage`).

    Calling it does both. It opens its own handle on the repository, so it may run in another thread.
    `journal` runs before the first file is touched (`worktree` records there what is being written).
    `launch` (optional, from the thread that forks) starts the files in a forked process instead.
    """

    def __init__(
        self,
        gitdir: str,
        workdir: str,
        todo: Mapping[str, tuple[Entry | None, Entry | None]],
        removed: set[str],
        contents: Mapping[str, bytes],
        journal: Callable[[], None] | None = None,
    ) -> None:
        self.gitdir, self.workdir, self.todo, self.removed, self.contents = (
            gitdir,
            workdir,
            todo,
            removed,
            contents,
        )
        self.journal = journal
        self.written: list[tuple[str, pygit2.Oid, int, Stat]] = []
        self._running: forkmap.Running | None = None

    def __call__(self) -> None:
        self.files()
        self.stage()

    def launch(self) -> None:
        """Journal and remove now, then start writing the files in a forked process (`forkmap.start`:
        a big batch only), so the caller's thread goes on and `files` collects their stat data. Call
        it from the thread that made the writer, while no other thread runs. If it raises (a fork that
        fails), the journal is written and the removals done: `checkout.journal.recover` puts those
        paths back on the next pass."""
        self._removals()
        self._running = forkmap.start(self._write, self._items, FORK_FROM)

    def files(self) -> None:
        if self._running is None:
            self._removals()
            stats = self._write(self._items)
        else:
            stats = self._running.wait()
        self.written += [
            (path, oid, mode, info) for (path, oid, mode), info in zip(self._items, stats, strict=True)
        ]

    def _removals(self) -> None:
        if self.journal is not None:
            self.journal()
        for path in sorted(self.removed, reverse=True):
            remove(self.workdir, path)

    @functools.cached_property
    def _items(self) -> list[tuple[str, pygit2.Oid, int]]:
        """`(path, blob id, mode)` of the files to write, in path order."""
        return [(path, b[0], b[1]) for path, (_, b) in sorted(self.todo.items()) if b is not None]

    def _write(self, items: Sequence[tuple[str, pygit2.Oid, int]]) -> list[Stat]:
        """Write `(path, blob id, mode)` files (in whichever process runs it); their stat data."""
        own: pygit2.Repository | None = None
        made: set[str] = set()
        out = []
        for path, oid, mode in items:
            data = self.contents.get(str(oid))
            if data is None:
                own = own or pygit2.Repository(self.gitdir)
                data = own[oid].peel(pygit2.Blob).data
            out.append(stat_of(write(self.workdir, path, data, mode, made)))
        return out

    def stage(self) -> None:
        index = pygit2.Repository(self.gitdir).index
        index.read(False)
        for path in sorted(self.removed, reverse=True):
            if path in index:
                index.remove(path)
        for path, oid, mode, info in self.written:
            stage(index, path, oid, mode, info)
        index.write()


def content_id(full: str, entry: Any = None, racy_from: int = 0) -> pygit2.Oid | None | str:
    """The blob id of the file at `full`; None when absent; "other" for a directory, link or device.

    `entry` (a `git_index_entry` for the path, or None): when the file's stat data are the ones it
    records and the file is older than the index (`racy_from`, ns), its id is the entry's without
    reading the file, as git's own status decides.
    """
    try:
        info = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return "other"
    if entry is not None and info.st_mtime_ns < racy_from and stat_matches(entry, info):
        return pygit2.Oid(raw=bytes(ffi.buffer(entry.id.id, 20)))
    with open(full, "rb") as fh:
        return pygit2.hash(fh.read())


def stat_matches(entry: Any, info: os.stat_result) -> bool:
    return (
        entry.file_size == info.st_size & 0xFFFFFFFF
        and entry.ino == info.st_ino & 0xFFFFFFFF
        and (entry.mtime.seconds, entry.mtime.nanoseconds) == divmod(info.st_mtime_ns, 1_000_000_000)
        and (entry.ctime.seconds, entry.ctime.nanoseconds) == divmod(info.st_ctime_ns, 1_000_000_000)
    )


def safe(
    workdir: str,
    index: pygit2.Index,
    path: str,
    pair: tuple[Entry | None, Entry | None],
    racy_from: int,
    absent: bool = False,
) -> bool:
    """Whether the file and the index entry at `path` each hold the old or the new content.

    `absent`: the file's directory is known to be missing (`blocked` notes it), so it is not looked up.
    """
    allowed = {e[0] if e is not None else None for e in pair}
    entry = C.git_index_get_bypath(index._index, path.encode(), 0)
    if entry == ffi.NULL:
        entry, staged = None, None
    else:
        staged = pygit2.Oid(raw=bytes(ffi.buffer(entry.id.id, 20)))
    if staged not in allowed:
        return False
    return None in allowed if absent else content_id(workdir + path, entry, racy_from) in allowed


def index_time(repo: pygit2.Repository) -> int:
    """When the index was last written (ns): files changed since may not show in their stat data."""
    try:
        return os.stat(os.path.join(repo.path, "index")).st_mtime_ns
    except OSError:
        return 0


def blocked(
    workdir: str, path: str, removed: set[str], clear: set[str], missing: set[str] | None = None
) -> bool:
    """Whether a parent of `path` is a file (or link) in the work tree that is not being removed.

    `clear` gathers the directories known not to block; `missing` (optional) those known absent.
    """
    parent = path.rpartition("/")[0]
    unknown: list[str] = []
    while parent and parent not in clear:
        unknown.append(parent)
        parent = parent.rpartition("/")[0]
    for at, parent in enumerate(reversed(unknown)):  # outermost first: below a missing one nothing blocks
        try:
            info = os.lstat(workdir + parent)
        except FileNotFoundError:
            if missing is not None:
                missing.update(unknown[: len(unknown) - at])  # it and every directory below it
            break
        if not stat.S_ISDIR(info.st_mode):
            return parent not in removed
    clear.update(unknown)
    return False


def remove(workdir: str, path: str) -> None:
    full = os.path.join(workdir, path)
    try:
        os.unlink(full)
    except (FileNotFoundError, NotADirectoryError):  # gone already, or a parent is a file now
        pass
    parent = os.path.dirname(path)
    while parent:
        try:
            os.rmdir(os.path.join(workdir, parent))
        except OSError:
            break
        parent = os.path.dirname(parent)


def write(workdir: str, path: str, data: bytes, mode: int, made: set[str]) -> os.stat_result:
    """Write one file (its directories first); its stat data, for the index entry.

    An existing file is written over in place and then cut to length, not truncated first: freeing
    its blocks and allocating new ones (with ext4's `discard`, a TRIM each) made a warm pass's
    17,000 rewrites at 1M GPUs take 10-15 s; in place, a fraction of that. A writer killed midway
    leaves a mixed file either way, which the checkout journal puts back."""
    full = workdir + path
    parent = full.rpartition("/")[0]
    if parent not in made:
        os.makedirs(parent, exist_ok=True)
        made.add(parent)
    executable = mode == FileMode.BLOB_EXECUTABLE
    fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o777 if executable else 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.ftruncate(fd, len(data))
        info = os.fstat(fd)
        if executable != bool(info.st_mode & 0o100):
            os.fchmod(fd, (0o777 if executable else 0o666) & ~_umask())
            info = os.fstat(fd)
    finally:
        os.close(fd)
    return info


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def stage(index: pygit2.Index, path: str, oid: pygit2.Oid, mode: int, info: Stat) -> None:
    """Add an index entry with the file's stat data, as `git add` would (so status stays fast)."""
    ctime, mtime, dev, ino, uid, gid, size = info
    entry: Any = ffi.new("git_index_entry *")
    entry.ctime.seconds, entry.ctime.nanoseconds = divmod(ctime, 1_000_000_000)
    entry.mtime.seconds, entry.mtime.nanoseconds = divmod(mtime, 1_000_000_000)
    entry.dev = dev & 0xFFFFFFFF
    entry.ino = ino & 0xFFFFFFFF
    entry.mode = int(mode)
    entry.uid = uid & 0xFFFFFFFF
    entry.gid = gid & 0xFFFFFFFF
    entry.file_size = size & 0xFFFFFFFF
    ffi.buffer(ffi.addressof(entry, "id"))[:] = oid.raw
    name = ffi.new("char[]", path.encode())
    entry.path = name
    if C.git_index_add(index._index, entry) != 0:
        index.add(path)  # let libgit2 raise its own error, or stat and hash the file itself
