"""A remote on a local path (step 7 of a pass): how Git reads its URL, its receive hooks, its ref locks; never pushes.

Pushes go through libgit2 whatever the URL (`remote.push`); a bare repository on a local path
(`/srv/fleet.git`, `file://…`, `../fleet.git` read from the clone's top-level directory) needs
three answers first: where it is (a relative path is read as Git reads it, from the clone's
top-level directory), whether it runs receive hooks (no push over a local path runs them, so
jobtree refuses to bypass them), and whether a ref lock in it was left by a push that was killed
(`stale_ref_lock`: a push holds it only while it moves one ref, so one older than
`REF_LOCK_STALE` is taken over, and the push goes on).

There was a push of its own here (packs linked into the remote as written). Measured against
libgit2's own push to a local path on the 100k-GPU bench fleet it saved nothing (0.1 s either way),
and only the benchmark had a remote on a local path: it went (bench/README.md, "Git rows on a
network remote").
"""

from __future__ import annotations

import os
import time
from urllib.parse import unquote, urlsplit

import pygit2

REF_LOCK_STALE = 60  # seconds: a ref lock older than this in a remote on a local path was left by a kill


def url_base(repo: pygit2.Repository) -> str:
    """The directory Git reads a relative remote path from: the top-level work directory (bare: the git dir)."""
    return os.path.abspath(repo.workdir or repo.path)


def path_of(url: str | None, base: str | None = None) -> str | None:
    """The absolute path a remote URL names when it is a local path, whether or not it exists.

    As Git reads it: `file://` URLs, and anything without `://` that has no `:` or a `/` before its
    first `:` (so `host:fleet.git` is SSH). A relative path is read from `base` (see `url_base`);
    with no `base` it names nothing. None for every other URL.
    """
    if not url:
        return None
    if url.startswith("file://"):
        parts = urlsplit(url)
        path = unquote(parts.path) if parts.netloc in ("", "localhost") else ""
        return path if os.path.isabs(path) else None
    if "://" in url:
        return None
    colon, slash = url.find(":"), url.find("/")
    if colon != -1 and not (slash != -1 and slash < colon):
        return None  # scp-like `host:path`, or a `transport::address` remote helper
    if os.path.isabs(url):
        return os.path.normpath(url)
    return os.path.normpath(os.path.join(base, url)) if base is not None else None


def local_path(url: str | None, base: str | None = None) -> str | None:
    """The existing directory a remote URL names when it is a local path (`/srv/fleet.git`, `file:///...`,
    `../fleet.git` read from `base`)."""
    path = path_of(url, base)
    return path if path is not None and os.path.isdir(path) else None


# hooks `git receive-pack` runs on a push; a push that writes a local repository directly runs none
RECEIVE_HOOKS = (
    "pre-receive", "update", "proc-receive", "reference-transaction", "post-receive", "post-update",
    "push-to-checkout",
)  # fmt: skip


def receive_hooks(path: str) -> list[str]:
    """The receive-side hooks the repository at `path` would run on a push (executable, in its
    hooks folder or `core.hooksPath`), which no push over a local path runs."""
    try:
        remote = pygit2.Repository(path)
        configured = remote.config["core.hooksPath"] if "core.hooksPath" in remote.config else None
    except (pygit2.GitError, KeyError, ValueError):
        return []
    folder = os.path.join(remote.path, "hooks")
    if configured:
        folder = os.path.join(remote.path, os.path.expanduser(str(configured)))
    return [
        name
        for name in RECEIVE_HOOKS
        if os.path.isfile(hook := os.path.join(folder, name)) and os.access(hook, os.X_OK)
    ]


def lock_path(path: str, branch: str) -> str:
    """The lock file a writer of `branch` holds in the bare repository at `path` while it moves it."""
    return os.path.join(path, "refs", "heads", *branch.split("/")) + ".lock"


def stale_ref_lock(path: str, branch: str, now: float | None = None) -> str | None:
    """Remove `branch`'s ref lock in the bare repository at `path` when a push killed while it moved
    the ref left it (older than `REF_LOCK_STALE`: a live push holds it for an instant); the lock's
    path when so. The ref itself still names the commit it held before: the kill came before the
    rename that moves it, so the next push simply finds the old value and moves it."""
    lock = lock_path(path, branch)
    try:
        age = (time.time() if now is None else now) - os.stat(lock).st_mtime
    except FileNotFoundError:
        return None
    if age < REF_LOCK_STALE:
        return None
    try:
        os.unlink(lock)
    except FileNotFoundError:
        return None
    return lock
