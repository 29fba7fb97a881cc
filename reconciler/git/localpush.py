"""Push to a bare repository on a local path (step 6 of a pass): hand over packs already written, no repacking.

libgit2 pushes to a path as it pushes over the network: it enumerates the new objects, inflates
each one, deflates it again into a new pack, then indexes that pack into the remote, inflating and
hashing every object once more. For a first 25,000-file state commit (measured before rendered
files were grouped per run) that was about 3 s of CPU spent on bytes that already sit, compressed
and indexed, in the pack `gitpack` wrote a moment earlier.

Here the objects the remote lacks are enumerated as libgit2 does (every commit the remote head
does not reach, each tree compared with its parents' trees at the same path), a pack this pass
wrote that holds any of them is linked (or copied) into the remote as it is, the few others go
through `gitpack`, and the branch moves under the remote's ref lock only if it still points at the
expected commit: the compare-and-swap a server makes. Objects are in place before the ref moves,
so a crash leaves at most unreferenced objects. Anything unusual (a URL that is not a local path,
a remote that is not a bare SHA-1 repository, or is shallow) answers None, and the caller pushes
through libgit2. A relative path is read as Git reads it, from the clone's top-level directory.
Never plans, commits or touches the clone's own refs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit

import pygit2
from pygit2.enums import ObjectType, SortMode

from reconciler.git import packs as gitpack

KINDS = {ObjectType.COMMIT: "commit", ObjectType.TREE: "tree", ObjectType.BLOB: "blob", ObjectType.TAG: "tag"}


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


def push(
    repo: pygit2.Repository, path: str, branch: str, expected: str | None, packs: Sequence[str] = ()
) -> bool | None:
    """Move the remote's `branch` from `expected` (None: absent) to the local branch head.

    True: pushed. False: the remote no longer holds `expected`, or the local head does not descend
    from it (the caller re-plans). None: not a remote this code handles; nothing was written.
    `packs` are pack paths (without extension) this pass wrote; they are reused when they help.
    """
    try:
        remote = pygit2.Repository(path)
    except (pygit2.GitError, KeyError):
        return None
    if not remote.is_bare or remote.is_shallow or not gitpack.sha1_repository(remote):
        return None
    ref = f"refs/heads/{branch}"
    tip = repo.references[ref].target
    assert isinstance(tip, pygit2.Oid)
    if expected is not None and not (tip == pygit2.Oid(hex=expected) or repo.descendant_of(tip, expected)):
        return False
    # A pack holding any new object goes over whole, unchecked: asking the remote about each of a
    # first commit's 14,000 objects cost more than linking a pack it may partly hold (harmless).
    todo = {oid.raw: oid for oid in _new_objects(repo, tip, expected)}
    for pack in packs:
        names = gitpack.pack_names(pack + ".idx")
        if not names.isdisjoint(todo):
            _hand_over(pack, os.path.join(remote.path, "objects", "pack"))
            for name in names:
                todo.pop(name, None)
    have, odb = remote.odb, repo.odb
    rest = []
    for oid in todo.values():
        if not have.exists(oid):
            kind, data = odb.read(oid)
            rest.append((oid.raw, KINDS[ObjectType(kind)], data))
    gitpack.write(remote, rest)
    try:
        with remote.transaction() as tx:
            tx.lock_ref(ref)
            current = remote.references.get(ref)
            now = str(current.target) if current is not None else None
            if now != expected:
                return False
            tx.set_target(ref, tip, message="push: jobtree")
    except pygit2.GitError as err:
        # another writer holds the branch (its lock may be gone by the time we look): as a server
        # would, refuse; the caller re-plans
        # (libgit2 says "failed to lock file" or "failed to create locked file ...: File exists"
        # only when the lock exists; an unwritable or full remote fails otherwise and is raised)
        text = str(err)
        if "failed to lock file" in text or "File exists" in text or os.path.exists(lock_path(path, branch)):
            return False
        raise
    return True


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


def _new_objects(repo: pygit2.Repository, tip: pygit2.Oid, expected: str | None) -> list[pygit2.Oid]:
    """Every object reachable from `tip` that `expected` may not reach (a superset is harmless).

    Commits come oldest first; a tree entry equal to the same path in a parent is skipped: that
    parent is the remote's (complete) or new and walked already. Callers drop what the remote has.
    """
    walker = repo.walk(tip, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    if expected is not None:
        walker.hide(pygit2.Oid(hex=expected))
    out: list[pygit2.Oid] = []
    seen: set[pygit2.Oid] = set()
    for commit in walker:
        out.append(commit.id)
        bases = [p.tree for p in commit.parents]
        if all(b.id != commit.tree_id for b in bases):
            _tree(repo, commit.tree, bases, out, seen)
    return out


def _tree(
    repo: pygit2.Repository,
    tree: pygit2.Tree,
    bases: list[pygit2.Tree],
    out: list[pygit2.Oid],
    seen: set[pygit2.Oid],
) -> None:
    if tree.id in seen:
        return  # walked in full before, with its own bases
    seen.add(tree.id)
    out.append(tree.id)
    for entry in tree:
        name = str(entry.name)
        same = [b[name] for b in bases if name in b]
        if any(e.id == entry.id for e in same):
            continue
        if entry.type == ObjectType.TREE:
            subs = [repo[e.id].peel(pygit2.Tree) for e in same if e.type == ObjectType.TREE]
            _tree(repo, repo[entry.id].peel(pygit2.Tree), subs, out, seen)
        elif entry.type == ObjectType.BLOB and entry.id not in seen:
            seen.add(entry.id)
            out.append(entry.id)


def _hand_over(pack: str, directory: str) -> None:
    """Link (or copy) `<pack>.pack` then `<pack>.idx` into `directory`; the index makes it visible."""
    os.makedirs(directory, exist_ok=True)
    for ext in (".pack", ".idx"):
        target = os.path.join(directory, os.path.basename(pack) + ext)
        if os.path.exists(target):
            continue
        fd, tmp = tempfile.mkstemp(prefix="tmp_jobtree_", dir=directory)
        os.close(fd)
        try:
            os.unlink(tmp)
            try:
                os.link(pack + ext, tmp)
            except OSError:  # another file system, or links not allowed: a copy does the same
                shutil.copyfile(pack + ext, tmp)
                os.chmod(tmp, 0o444)
            os.replace(tmp, target)
        except BaseException:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise
