"""Checked-out branch (steps 1 and 6 of a pass): the work tree follows every ref move, path by path.

When the branch jobtree moves is checked out (a person's clone, the bench), exactly the files that
differ between the old and the new commit are rewritten and restaged: a first 12,000-file state
commit writes its files once, a one-run change touches a few hundred, and nothing else in the work
tree is even looked at. Like `git merge --ff-only`, local edits are never overwritten: a changed
path whose file or index entry matches neither the old nor the new commit refuses the whole move
with `DirtyCheckout` before anything is written. Every rewrite is recorded first in a checkout
journal (`checkout.journal`) and the journal is removed once files, index and branch agree: a writer
killed in between leaves it, and the next pass (or the next move) puts the listed paths back to the
branch head before anything is checked, so jobtree's own half-written files are never taken for a
person's edits. `restore_owned` repairs owned paths a writer left half written without a journal.
Never decides what to commit (`git.write`) and never talks to a remote.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping

import pygit2
from pygit2.enums import CheckoutNotify, CheckoutStrategy, FileMode, FileStatus, ReferenceType

from reconciler.git import errors
from reconciler.git import read as gitread
from reconciler.git.checkout import files as workfiles
from reconciler.git.checkout import journal as checkoutjournal

_FILES = (FileMode.BLOB, FileMode.BLOB_EXECUTABLE)
Entry = workfiles.Entry


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
    rewritten (a kill in between leaves the checkout journal, which the next pass settles).
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
            raise errors.TemporaryGitError(
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
        writer = _checked(repo, branch, lambda: follow(repo, old, new, contents or {}))
        if background and writer is not None:
            repo.references.create(f"refs/heads/{branch}", oid, force=True)
            return Pending(_settling(writer))
        if writer is not None:
            writer()
        repo.references.create(f"refs/heads/{branch}", oid, force=True)
        checkoutjournal.end(repo.path)  # only now do files, index and branch agree
        return None
    repo.references.create(f"refs/heads/{branch}", oid, force=True)
    return None


def _settling(writer: workfiles.Writer) -> Callable[[], None]:
    """The writer's files and index, then the journal removed (the branch has moved already)."""

    def work() -> None:
        writer()
        checkoutjournal.end(writer.gitdir)

    return work


def _checked(
    repo: pygit2.Repository, branch: str, check: Callable[[], workfiles.Writer | None]
) -> workfiles.Writer | None:
    try:
        return check()
    except errors.DirtyCheckout as err:
        raise errors.DirtyCheckout(
            f"{branch} is checked out in {repo.workdir} and local edits to {err} would be "
            "overwritten; commit, stash or discard them, or let jobtree use a clone of its own"
        ) from None


class Early(Pending):
    """The work tree of a commit not written yet: files are written now, the index once the branch moved.

    From `start`. The caller writes the objects and moves the branch, then calls `moved`; if that
    fails, `abandon`: the files written so far and the journal naming them are left for the next
    pass to put back (`checkout.journal.recover`), the index untouched.
    """

    def __init__(self, writer: workfiles.Writer) -> None:
        self._gate = threading.Event()
        self._moved = False

        def work() -> None:
            writer.files()
            self._gate.wait()
            if self._moved:
                writer.stage()
                checkoutjournal.end(writer.gitdir)

        super().__init__(work)

    def moved(self) -> None:
        self._moved = True
        self._gate.set()

    def abandon(self) -> None:
        self._gate.set()


def start(
    repo: pygit2.Repository,
    branch: str,
    new: bytes,
    trees: Mapping[bytes, bytes],
    contents: Mapping[str, bytes],
) -> Early | None:
    """Check the work tree for the tree `new` (raw id; `trees`: raw id -> data of trees not in the
    repository yet) and start writing its files (`checkout.files.Writer.launch`: by one forked process when
    they are many, so the commit and the push are made meanwhile without competing with it for
    this process's interpreter). None: nothing to write now (not checked out, no change, or a change
    libgit2 must write: `move_branch` does it once the commit exists).
    Raises `DirtyCheckout` before anything is written.
    """
    if not checked_out(repo, branch):
        return None
    current = repo.references.get(f"refs/heads/{branch}")
    old = repo[current.target].peel(pygit2.Tree).id.raw if current is not None else None
    writer = _checked(repo, branch, lambda: _plan(repo, _Trees(repo, trees), old, new, contents, early=True))
    if writer is None:
        return None
    writer.launch()  # a big batch is written by a forked process: no thread of this one waits on the kernel
    return Early(writer)


class _Trees:
    """Tree entries by raw id: `{name: (raw id, mode)}`, from given tree data or the repository."""

    def __init__(self, repo: pygit2.Repository, given: Mapping[bytes, bytes]) -> None:
        self.repo, self.given = repo, given

    def __call__(self, oid: bytes) -> dict[str, tuple[bytes, int]]:
        data = self.given.get(oid)
        if data is None:
            tree = self.repo[pygit2.Oid(raw=oid)].peel(pygit2.Tree)
            return {str(e.name): (e.id.raw, int(e.filemode)) for e in tree}
        out: dict[str, tuple[bytes, int]] = {}
        at = 0
        while at < len(data):  # "<octal mode> <name>\0<raw id>" per entry (gitformat-tree)
            space = data.index(b" ", at)
            nul = data.index(b"\0", space)
            out[data[space + 1 : nul].decode()] = (data[nul + 1 : nul + 21], int(data[at:space], 8))
            at = nul + 21
        return out


def changes(
    repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree | None, base: str = ""
) -> dict[str, tuple[Entry | None, Entry | None]]:
    """`{path: (old entry, new entry)}` for every non-tree path that differs; equal subtrees are skipped."""
    return _changes(
        _Trees(repo, {}),
        old.id.raw if old is not None else None,
        new.id.raw if new is not None else None,
        base,
    )


def _changes(
    entries: _Trees, old: bytes | None, new: bytes | None, base: str
) -> dict[str, tuple[Entry | None, Entry | None]]:
    if old is not None and old == new:
        return {}
    before = entries(old) if old is not None else {}
    after = entries(new) if new is not None else {}
    out: dict[str, tuple[Entry | None, Entry | None]] = {}
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a == b:
            continue
        sub_a = a[0] if a is not None and a[1] == FileMode.TREE else None
        sub_b = b[0] if b is not None and b[1] == FileMode.TREE else None
        if sub_a is not None or sub_b is not None:
            out.update(_changes(entries, sub_a, sub_b, f"{base}{name}/"))
        file_a = (pygit2.Oid(raw=a[0]), a[1]) if a is not None and sub_a is None else None
        file_b = (pygit2.Oid(raw=b[0]), b[1]) if b is not None and sub_b is None else None
        if file_a is not None or file_b is not None:
            out[f"{base}{name}"] = (file_a, file_b)
    return out


def follow(
    repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree, contents: Mapping[str, bytes]
) -> workfiles.Writer | None:
    """Check the paths that differ between `old` and `new`; return what rewrites them (None: nothing).

    Raises `DirtyCheckout` (nothing written) when a changed path holds something that is neither
    its old nor its new content. Symlinks and submodules are left to libgit2's SAFE checkout. The
    returned writer opens its own handle on the repository, so it may run in another thread.
    """
    return _plan(repo, _Trees(repo, {}), old.id.raw if old is not None else None, new.id.raw, contents)


def _plan(
    repo: pygit2.Repository,
    entries: _Trees,
    old: bytes | None,
    new: bytes,
    contents: Mapping[str, bytes],
    early: bool = False,
) -> workfiles.Writer | None:
    """`follow` on raw tree ids; `early`: the commit is not written yet, so what needs libgit2 waits.

    A journal a killed writer left is settled first, so its half-written files are no conflict.
    """
    checkoutjournal.recover(repo)
    todo = _changes(entries, old, new, "")
    if not todo:
        return None
    head = repo.references.get("HEAD")
    branch = str(head.target) if head is not None and head.type == ReferenceType.SYMBOLIC else "HEAD"
    gitdir = repo.path

    def journal() -> None:
        checkoutjournal.begin(gitdir, branch, old, new, todo)

    if any(e is not None and e[1] not in _FILES for pair in todo.values() for e in pair) or _filtered(
        repo, entries, new
    ):
        if not early:  # the journal stays until `move_branch` has moved the branch
            journal()
            try:
                _libgit2_checkout(repo, repo[pygit2.Oid(raw=new)].peel(pygit2.Tree), todo)
            except BaseException:  # refused before writing, or failed: a person's files stay theirs
                checkoutjournal.end(gitdir)
                raise
        return None
    workdir = os.path.join(repo.workdir, "")
    index = repo.index
    index.read(False)
    removed = {path for path, (_, b) in todo.items() if b is None}
    clear: set[str] = set()  # parent directories known not to be blocked
    missing: set[str] = set()  # and those known absent: no file below them to look at
    racy_from = workfiles.index_time(repo)
    conflicts = [
        path
        for path, pair in todo.items()
        if (pair[1] is not None and workfiles.blocked(workdir, path, removed, clear, missing))
        or not workfiles.safe(workdir, index, path, pair, racy_from, path.rpartition("/")[0] in missing)
    ]
    if conflicts:
        raise errors.DirtyCheckout(", ".join(sorted(conflicts)))
    return workfiles.Writer(repo.path, workdir, todo, removed, contents, journal)


def _filtered(repo: pygit2.Repository, entries: _Trees, new: bytes) -> bool:
    """Whether checked-out files may differ from their blobs (line-ending or attribute filters).

    Then libgit2 writes them (it applies the filters); jobtree writes blob bytes as they are.
    """
    config = repo.config
    for name in ("core.autocrlf", "core.eol"):
        if name in config and str(config[name]).lower() in ("true", "input", "crlf"):
            return True
    root = entries(new)
    if ".gitattributes" in root or os.path.exists(os.path.join(repo.path, "info", "attributes")):
        return True
    for prefix in gitread.OWNED_PREFIXES:
        tree: dict[str, tuple[bytes, int]] | None = root
        for part in [p for p in prefix.split("/") if p]:
            found = tree.get(part) if tree is not None else None
            tree = entries(found[0]) if found is not None and found[1] == FileMode.TREE else None
        if tree is not None and ".gitattributes" in tree:
            return True
    return False


def _libgit2_checkout(
    repo: pygit2.Repository, new: pygit2.Tree, todo: Mapping[str, tuple[Entry | None, Entry | None]]
) -> None:
    notes = _Conflicts()
    try:
        repo.checkout_tree(new, strategy=CheckoutStrategy.SAFE, callbacks=notes)
    except pygit2.GitError as err:
        missing = _missing_submodules(repo, todo)
        if missing:  # libgit2 says only "null OID cannot exist": name the path and what to do
            path, sha = missing[0]
            raise errors.PermanentGitError(
                f"{path} is a submodule (a link to commit {sha[:12]}) whose folder is missing from the "
                f"work tree {repo.workdir}, and the branch moves it: Git cannot check out over it. "
                f"state/ and rendered/ hold only files jobtree writes: remove the submodule from the "
                f"branch (`git rm --cached {path}`, then commit), or `git submodule update --init {path}`"
            ) from err
        raise errors.DirtyCheckout(f"{', '.join(sorted(notes.paths)) or 'some files'} ({err})") from err


def _missing_submodules(
    repo: pygit2.Repository, todo: Mapping[str, tuple[Entry | None, Entry | None]]
) -> list[tuple[str, str]]:
    """(path, commit id) of the submodules (gitlinks) a move changes whose folder is not in the work tree."""
    return [
        (path, str(entry[0]))
        for path, pair in sorted(todo.items())
        for entry in pair
        if entry is not None
        and entry[1] == FileMode.COMMIT
        and not os.path.isdir(os.path.join(repo.workdir or "", path))
    ]


PUT_BACK_KEPT = 20  # folders of copies kept under .git/jobtree/put-back/, the newest


def restore_owned(
    repo: pygit2.Repository, branch: str, prefixes: tuple[str, ...] = gitread.OWNED_PREFIXES
) -> tuple[list[str], str | None]:
    """Put owned files in a checked-out worktree back to the branch head (after a writer was killed
    mid-checkout, or a person edited or added one). Only paths under `prefixes` are touched; a
    person's edits elsewhere are kept. Returns the paths and the folder where a copy of each file
    as it was waits (`.git/jobtree/put-back/<UTC time>-<pid>/`; None when none was a file)."""
    if not checked_out(repo, branch):
        return [], None
    dirty = sorted(
        path
        for path, flags in repo.status().items()
        if path.startswith(prefixes) and not flags & FileStatus.IGNORED
    )
    if not dirty or repo.workdir is None:
        return dirty, None
    saved = _keep_copies(repo, dirty)
    tracked = set(gitread.list_blobs(repo, f"refs/heads/{branch}", prefixes))
    for path in dirty:
        target = os.path.join(repo.workdir, path)
        if path not in tracked and (os.path.isfile(target) or os.path.islink(target)):
            os.remove(target)
    keep = [p for p in dirty if p in tracked]
    if keep:
        head = gitread.resolve(repo, f"refs/heads/{branch}")
        repo.checkout_tree(head, strategy=CheckoutStrategy.FORCE, paths=keep)
        repo.index.read()
        for path in keep:
            repo.index.add(path)
        repo.index.write()
    return dirty, saved


def _keep_copies(repo: pygit2.Repository, paths: list[str]) -> str | None:
    """Copy the work tree's files at `paths` into a new folder under `.git/jobtree/put-back/` (links as
    links); only the newest `PUT_BACK_KEPT` folders stay. Nothing is put back when a copy fails."""
    assert repo.workdir is not None
    here = ((p, os.path.join(repo.workdir, p)) for p in paths)
    files = [(p, at) for p, at in here if os.path.lexists(at) and not os.path.isdir(at)]
    if not files:
        return None
    root = os.path.join(repo.path, "jobtree", "put-back")
    where = os.path.join(root, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}")
    try:
        for path, at in files:
            copy = os.path.join(where, path)
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            shutil.copy2(at, copy, follow_symlinks=False)
        for old in sorted(os.listdir(root))[:-PUT_BACK_KEPT]:
            shutil.rmtree(os.path.join(root, old), ignore_errors=True)
    except OSError as err:
        raise errors.PermanentGitError(
            f"cannot keep a copy of the changed files under state/ and rendered/ in {where} before "
            f"putting them back ({err.strerror or err}); nothing was put back: free space or fix "
            "the permissions, or move the files out yourself"
        ) from err
    return where
