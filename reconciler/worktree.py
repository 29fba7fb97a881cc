"""Checked-out branch (steps 1 and 6 of a pass): the work tree follows every ref move, path by path.

When the branch jobtree moves is checked out (a person's clone, the bench), exactly the files that
differ between the old and the new commit are rewritten and restaged: a first 25,000-file state
commit writes its files once, a one-run change touches a few hundred, and nothing else in the work
tree is even looked at. Like `git merge --ff-only`, local edits are never overwritten: a changed
path whose file or index entry matches neither the old nor the new commit refuses the whole move
with `DirtyCheckout` before anything is written. `restore_owned` repairs owned paths a killed
writer left half written. Never decides what to commit (`gitstore`) and never talks to a remote.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pygit2
from pygit2 import C, ffi
from pygit2.enums import CheckoutNotify, CheckoutStrategy, FileMode, FileStatus, ObjectType, ReferenceType

from reconciler import gitstore

_FILES = (FileMode.BLOB, FileMode.BLOB_EXECUTABLE)
Entry = tuple[pygit2.Oid, int]  # (blob id, file mode) of a path in a tree


class _Conflicts(pygit2.CheckoutCallbacks):
    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def checkout_notify_flags(self) -> CheckoutNotify:
        return CheckoutNotify.CONFLICT

    def checkout_notify(self, why, path, baseline, target, workdir) -> None:  # type: ignore[no-untyped-def]  # pygit2's signature
        self.paths.append(path)


def checked_out(repo: pygit2.Repository, branch: str) -> bool:
    if repo.is_bare:
        return False
    head = repo.references.get("HEAD")
    return (
        head is not None and head.type == ReferenceType.SYMBOLIC and (head.target == f"refs/heads/{branch}")
    )


class Pending:
    """Work still running in a background thread (work-tree writes of a ref move); `wait` joins it.

    For a ref move the branch has moved already; until `wait` returns, the changed paths are being
    rewritten (a kill in between leaves owned files for `restore_owned`, as a kill mid-checkout did).
    """

    def __init__(self, work: Callable[[], None], what: str = "updating the checked-out work tree") -> None:
        self._error: BaseException | None = None
        self._what = what
        self._thread = threading.Thread(target=self._run, args=(work,), name=f"jobtree: {what}")
        self._thread.start()

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as err:  # noqa: B036 - handed to the waiting thread
            self._error = err

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise gitstore.TemporaryGitError(
                f"{self._what} failed ({error}); the next pass repairs it"
            ) from error


def move_branch(
    repo: pygit2.Repository,
    branch: str,
    oid: pygit2.Oid,
    contents: Mapping[str, bytes] | None = None,
    *,
    background: bool = False,
) -> Pending | None:
    """Point the branch at `oid`; a checked-out branch's work tree follows (and never clobbers).

    Conflicts are checked before the branch moves. The files are written first, or with
    `background` after the move in a thread the caller must `wait` for (it can push meanwhile).
    `contents` (blob id hex -> bytes) spares reading blobs the caller has just written.
    """
    if checked_out(repo, branch):
        current = repo.references.get(f"refs/heads/{branch}")
        old = repo[current.target].peel(pygit2.Tree) if current is not None else None
        new = repo[oid].peel(pygit2.Tree)
        try:
            apply = follow(repo, old, new, contents or {})
        except gitstore.DirtyCheckout as err:
            raise gitstore.DirtyCheckout(
                f"{branch} is checked out in {repo.workdir} and local edits to {err} would be "
                "overwritten; commit, stash or discard them, or let jobtree use a clone of its own"
            ) from None
        if background and apply is not None:
            repo.references.create(f"refs/heads/{branch}", oid, force=True)
            return Pending(apply)
        if apply is not None:
            apply()
    repo.references.create(f"refs/heads/{branch}", oid, force=True)
    return None


def changes(
    repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree | None, base: str = ""
) -> dict[str, tuple[Entry | None, Entry | None]]:
    """`{path: (old entry, new entry)}` for every non-tree path that differs; equal subtrees are skipped."""
    if old is not None and new is not None and old.id == new.id:
        return {}
    before = {str(e.name): e for e in old} if old is not None else {}
    after = {str(e.name): e for e in new} if new is not None else {}
    out: dict[str, tuple[Entry | None, Entry | None]] = {}
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a is not None and b is not None and a.id == b.id and a.filemode == b.filemode:
            continue
        sub_a = repo[a.id].peel(pygit2.Tree) if a is not None and a.type == ObjectType.TREE else None
        sub_b = repo[b.id].peel(pygit2.Tree) if b is not None and b.type == ObjectType.TREE else None
        if sub_a is not None or sub_b is not None:
            out.update(changes(repo, sub_a, sub_b, f"{base}{name}/"))
        file_a = (a.id, a.filemode) if a is not None and sub_a is None else None
        file_b = (b.id, b.filemode) if b is not None and sub_b is None else None
        if file_a is not None or file_b is not None:
            out[f"{base}{name}"] = (file_a, file_b)
    return out


def follow(
    repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree, contents: Mapping[str, bytes]
) -> Callable[[], None] | None:
    """Check the paths that differ between `old` and `new`; return what rewrites them (None: nothing).

    Raises `DirtyCheckout` (nothing written) when a changed path holds something that is neither
    its old nor its new content. Symlinks and submodules are left to libgit2's SAFE checkout. The
    returned writer opens its own handle on the repository, so it may run in another thread.
    """
    todo = changes(repo, old, new)
    if not todo:
        return None
    if any(e is not None and e[1] not in _FILES for pair in todo.values() for e in pair) or _filtered(
        repo, new
    ):
        _libgit2_checkout(repo, new)
        return None
    workdir = os.path.join(repo.workdir, "")
    index = repo.index
    index.read(False)
    removed = {path for path, (_, b) in todo.items() if b is None}
    clear: set[str] = set()  # parent directories known not to be blocked
    conflicts = [
        path
        for path, pair in todo.items()
        if not _safe(workdir, index, path, pair)
        or (pair[1] is not None and _blocked(workdir, path, removed, clear))
    ]
    if conflicts:
        raise gitstore.DirtyCheckout(", ".join(sorted(conflicts)))
    gitdir = repo.path

    def write() -> None:
        own = pygit2.Repository(gitdir)
        index = own.index
        index.read(False)
        for path in sorted(removed, reverse=True):
            _remove(workdir, path)
            if path in index:
                index.remove(path)
        made: set[str] = set()
        for path, (_, b) in sorted(todo.items()):
            if b is None:
                continue
            oid, mode = b
            data = contents.get(str(oid))
            if data is None:
                data = own[oid].peel(pygit2.Blob).data
            _write(workdir, path, data, mode, made, index, oid)
        index.write()

    return write


def _filtered(repo: pygit2.Repository, new: pygit2.Tree) -> bool:
    """Whether checked-out files may differ from their blobs (line-ending or attribute filters).

    Then libgit2 writes them (it applies the filters); jobtree writes blob bytes as they are.
    """
    config = repo.config
    for name in ("core.autocrlf", "core.eol"):
        if name in config and str(config[name]).lower() in ("true", "input", "crlf"):
            return True
    if ".gitattributes" in new or os.path.exists(os.path.join(repo.path, "info", "attributes")):
        return True
    return any(
        ".gitattributes" in sub
        for prefix in gitstore.OWNED_PREFIXES
        if (sub := gitstore.subtree(repo, new, [p for p in prefix.split("/") if p])) is not None
    )


def _content_id(full: str) -> pygit2.Oid | None | str:
    """The blob id of the file at `full`; None when absent; "other" for a directory, link or device."""
    try:
        info = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return "other"
    with open(full, "rb") as fh:
        return pygit2.hash(fh.read())


def _safe(workdir: str, index: pygit2.Index, path: str, pair: tuple[Entry | None, Entry | None]) -> bool:
    """Whether the file and the index entry at `path` each hold the old or the new content."""
    allowed = {e[0] if e is not None else None for e in pair}
    have = _content_id(workdir + path)
    staged = index[path].id if path in index else None
    return have in allowed and staged in allowed


def _blocked(workdir: str, path: str, removed: set[str], clear: set[str]) -> bool:
    """Whether a parent of `path` is a file (or link) in the work tree that is not being removed."""
    parent = path.rpartition("/")[0]
    unknown: list[str] = []
    while parent and parent not in clear:
        unknown.append(parent)
        parent = parent.rpartition("/")[0]
    for parent in reversed(unknown):  # outermost first: below a missing directory nothing can block
        try:
            info = os.lstat(workdir + parent)
        except FileNotFoundError:
            break
        if not stat.S_ISDIR(info.st_mode):
            return parent not in removed
    clear.update(unknown)
    return False


def _remove(workdir: str, path: str) -> None:
    full = os.path.join(workdir, path)
    try:
        os.unlink(full)
    except FileNotFoundError:
        pass
    parent = os.path.dirname(path)
    while parent:
        try:
            os.rmdir(os.path.join(workdir, parent))
        except OSError:
            break
        parent = os.path.dirname(parent)


def _write(
    workdir: str,
    path: str,
    data: bytes,
    mode: int,
    made: set[str],
    index: pygit2.Index,
    oid: pygit2.Oid,
) -> None:
    full = workdir + path
    parent = full.rpartition("/")[0]
    if parent not in made:
        os.makedirs(parent, exist_ok=True)
        made.add(parent)
    executable = mode == FileMode.BLOB_EXECUTABLE
    fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o777 if executable else 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if executable != bool(os.fstat(fd).st_mode & 0o100):
            os.fchmod(fd, (0o777 if executable else 0o666) & ~_umask())
        info = os.fstat(fd)
    finally:
        os.close(fd)
    _stage(index, path, oid, mode, info)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _stage(index: pygit2.Index, path: str, oid: pygit2.Oid, mode: int, info: os.stat_result) -> None:
    """Add an index entry with the file's stat data, as `git add` would (so status stays fast)."""
    entry: Any = ffi.new("git_index_entry *")
    entry.ctime.seconds, entry.ctime.nanoseconds = divmod(info.st_ctime_ns, 1_000_000_000)
    entry.mtime.seconds, entry.mtime.nanoseconds = divmod(info.st_mtime_ns, 1_000_000_000)
    entry.dev = info.st_dev & 0xFFFFFFFF
    entry.ino = info.st_ino & 0xFFFFFFFF
    entry.mode = int(mode)
    entry.uid = info.st_uid & 0xFFFFFFFF
    entry.gid = info.st_gid & 0xFFFFFFFF
    entry.file_size = info.st_size & 0xFFFFFFFF
    ffi.buffer(ffi.addressof(entry, "id"))[:] = oid.raw
    name = ffi.new("char[]", path.encode())
    entry.path = name
    if C.git_index_add(index._index, entry) != 0:
        index.add(path)  # let libgit2 raise its own error, or stat and hash the file itself


def _libgit2_checkout(repo: pygit2.Repository, new: pygit2.Tree) -> None:
    notes = _Conflicts()
    try:
        repo.checkout_tree(new, strategy=CheckoutStrategy.SAFE, callbacks=notes)
    except pygit2.GitError as err:
        raise gitstore.DirtyCheckout(f"{', '.join(sorted(notes.paths)) or 'some files'} ({err})") from err


def restore_owned(
    repo: pygit2.Repository, branch: str, prefixes: tuple[str, ...] = gitstore.OWNED_PREFIXES
) -> list[str]:
    """Put owned files in a checked-out worktree back to the branch head (after a writer was killed
    mid-checkout). Only paths under `prefixes` are touched; a person's edits elsewhere are kept."""
    if not checked_out(repo, branch):
        return []
    dirty = sorted(
        path
        for path, flags in repo.status().items()
        if path.startswith(prefixes) and not flags & FileStatus.IGNORED
    )
    if not dirty:
        return dirty
    tracked = set(gitstore.list_blobs(repo, f"refs/heads/{branch}", prefixes))
    for path in dirty:
        if path not in tracked and repo.workdir is not None:
            target = os.path.join(repo.workdir, path)
            if os.path.isfile(target):
                os.remove(target)
    keep = [p for p in dirty if p in tracked]
    if keep:
        head = gitstore.resolve(repo, f"refs/heads/{branch}")
        repo.checkout_tree(head, strategy=CheckoutStrategy.FORCE, paths=keep)
        repo.index.read()
        for path in keep:
            repo.index.add(path)
        repo.index.write()
    return dirty
