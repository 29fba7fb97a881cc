"""One writer per clone (around steps 1-6 of a pass): a lock file in the Git dir, made whole or not at all; it never touches Git objects.

`<gitdir>/jobtree.lock` holds `pid=<pid> host=<host> since=<unix time>`. A second writer waits for
it up to the seconds it was given (`reconcile` and the webhook give `WAIT`: a pass or several),
then gets `LockBusy` (temporary) naming the holder; a lock whose pid is dead on this host (or is this
process's own pid while this process holds no such lock: a restarted container, pid 1 again) is
taken over, and
the Git lock files that writer left since it started (`GIT_LOCKS`: a ref, the index, packed-refs,
FETCH_HEAD of a fetch it was killed in) are removed:
only it could have held them, and Git would refuse every later update while they stay.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pygit2

from reconciler.git.errors import LockBusy, NotARepository, PermanentGitError

LOCK_NAME = "jobtree.lock"
WAIT = 60.0  # seconds `reconcile` and the webhook wait for another pass on the same clone to end
_POLL = 0.2  # seconds between looks at a held lock
_HELD: set[Path] = set()  # the lock files this process holds now (threads take turns)
# Git's lock files in the Git dir a writer holds while it writes: the index, refs, and what a fetch
# writes (FETCH_HEAD, and `shallow` in a shallow clone); under `refs/` every `*.lock` too.
GIT_LOCKS = (
    "index.lock",
    "packed-refs.lock",
    "HEAD.lock",
    "FETCH_HEAD.lock",
    "ORIG_HEAD.lock",
    "shallow.lock",
)


def _gitdir(repo_path: str | os.PathLike[str]) -> Path:
    found = pygit2.discover_repository(os.fspath(repo_path))
    if found is None:
        raise NotARepository(f"{os.fspath(repo_path)} is not a Git repository")
    return Path(found)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def writer_lock(
    repo_path: str | os.PathLike[str], wait: float = 0.0, waiting: Callable[[str], None] | None = None
) -> Iterator[Path]:
    """Hold `<gitdir>/jobtree.lock` (one writer per clone); a lock left by a dead pid is taken over.

    A lock another writer holds is waited for up to `wait` seconds (`waiting` hears once who holds
    it), then `LockBusy`."""
    path = _gitdir(repo_path) / LOCK_NAME
    deadline = time.monotonic() + wait
    told = False
    taken: list[str] = []  # what this call wrote, from the moment the file is ours
    try:  # so a signal anywhere after that still lets the lock go
        while True:
            try:
                dead_since = _take(path, taken)
                break
            except LockBusy as busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                if waiting is not None and not told:
                    waiting(f"waiting up to {wait:g} s: {busy}")
                    told = True
                time.sleep(min(_POLL, left))
        if dead_since is not None:
            _clear_git_locks(path.parent, dead_since)
        yield path
    finally:
        if taken:
            _HELD.discard(path)
            try:
                if path.read_text() == taken[0]:
                    path.unlink()
            except FileNotFoundError:
                pass


def _take(path: Path, taken: list[str]) -> int | None:
    """Create the lock file (what it holds is appended to `taken`); when the dead writer it took
    over from started. SIGINT and SIGTERM wait while the file is made and recorded: one arriving as
    it appears is handled once the caller can let the lock go, so no lock outlives its writer."""
    mine = f"pid={os.getpid()} host={socket.gethostname()} since={int(time.time())}\n"
    dead_since: int | None = None
    for _ in range(3):
        with _signals_held():
            made = _place(path, mine)
            if made:
                taken.append(mine)  # from here on the caller lets it go
        if not made:
            since = _take_over_if_stale(path)
            dead_since = since if since is not None else dead_since
            continue
        _HELD.add(path)
        return dead_since
    raise _busy(path)


def _place(path: Path, content: str) -> bool:
    """Put the lock file at `path` holding `content`, whole or not at all (False: one is there).

    The content is written to a draft first and hard-linked into place (the link fails when the
    lock exists, as O_EXCL does), so even a kill -9 never leaves an empty lock that no later pass
    could tell from a writer starting; a killed writer's draft is removed by the next one."""
    draft = path.with_name(f"{LOCK_NAME}.{os.getpid()}.{threading.get_ident()}.draft")
    try:
        with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "w") as fh:
            fh.write(content)
        try:
            os.link(draft, path)
        except FileExistsError:
            return False
        except OSError as err:
            if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            return _create(path, content)  # a filesystem without hard links: O_EXCL, then write
        return True
    except OSError as err:  # a read-only or full Git dir: nothing can be committed here
        raise PermanentGitError(
            f"cannot create {path} ({err.strerror}): jobtree writes its lock, commits and cache in "
            "the clone's Git directory; reconcile in a clone you can write to"
        ) from None
    finally:
        draft.unlink(missing_ok=True)
        for left in path.parent.glob(f"{LOCK_NAME}.*.draft"):  # drafts of writers killed mid-take
            pid = left.name.split(".")[2]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                left.unlink(missing_ok=True)


def _create(path: Path, content: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        fh.write(content)
    return True


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back (delivered when the block ends) in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _fields(seen: str) -> dict[str, str]:
    """The lock file's `key=value` words (pid, host, since)."""
    return dict(f.split("=", 1) for f in seen.split() if "=" in f)


def _busy(path: Path, seen: str | None = None) -> LockBusy:
    """The error for a held lock, naming its holder as people read it: `pid=… host=… since=<UTC>`."""
    if seen is None:
        try:
            seen = path.read_text()
        except FileNotFoundError:
            seen = ""
    fields = _fields(seen)
    since = fields.get("since", "")
    if since.isdigit():
        fields["since"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(since)))
    holder = " ".join(f"{k}={v}" for k, v in fields.items()) or seen.strip() or "a writer that is starting"
    elsewhere = fields.get("host") not in (None, socket.gethostname())
    note = (
        " (on another host, so jobtree cannot tell whether it still runs: once it is gone, delete the "
        "lock file; the next pass repairs whatever that writer left half done)"
        if elsewhere
        else ""
    )
    return LockBusy(f"{path} is held by {holder}; another jobtree writer is working on this clone{note}")


def _take_over_if_stale(path: Path) -> int | None:
    """Remove a lock whose holder is dead on this host; when so, when that holder started."""
    try:
        seen = path.read_text()
    except FileNotFoundError:
        return None
    fields = _fields(seen)
    pid = int(fields["pid"]) if fields.get("pid", "").isdigit() else None
    same_host = fields.get("host") == socket.gethostname()
    mine_before = pid == os.getpid() and path not in _HELD  # left by an earlier process with our pid
    if pid is None or not same_host or (_alive(pid) and not mine_before):
        raise _busy(path, seen)
    grave = path.with_name(f"{LOCK_NAME}.stale.{os.getpid()}")
    try:
        os.rename(path, grave)
    except FileNotFoundError:
        return None
    if grave.read_text() != seen:  # someone took it over between our read and rename: give it back
        try:
            os.link(grave, path)
        except FileExistsError:
            pass
        grave.unlink()
        return None
    grave.unlink()
    since = fields.get("since", "")
    return int(since) if since.isdigit() else 0


def _clear_git_locks(gitdir: Path, since: int) -> None:
    """Remove Git lock files under `gitdir` made since a dead writer started (refs, index, packed-refs)."""
    found = [gitdir / name for name in GIT_LOCKS]
    for lock in [*found, *(gitdir / "refs").rglob("*.lock")]:
        try:
            if lock.stat().st_mtime >= since:
                lock.unlink()
        except FileNotFoundError:
            continue
