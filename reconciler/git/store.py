"""Git source and sink (steps 1 and 6 of a pass): read a commit, write one state commit; never plans or renders.

With its helpers `gitpack` (object writes) and `worktree` (the checked-out branch) and with
`reconciler.git.remote` (fetch, compare-and-swap push, sync, retry; `gitlocal` for a bare
repository on a local path) the only code that writes Git; `reconciler.git.lock` guards one
writer per clone. pygit2 only, no `git` subprocess. For convenience `gitstore.push`,
`sync_with_remote`, `move_branch`, `writer_lock`, ... are re-exported. Which commits are jobtree's
own and which edited its files by hand is `reconciler.git.ownership`'s.

The reconciler works on a branch ref of a clone it owns. When that branch is also checked out in a
non-bare clone, every ref move first updates the changed paths of the work tree (`reconciler.git.checkout.worktree`,
like `git merge --ff-only`): local edits are never overwritten, and a conflict refuses the move with
`DirtyCheckout` instead. New objects of a big commit are written as one pack (`reconciler.git.packs`).

Errors are split the kopf way: `TemporaryGitError` (retry after a delay: remote unreachable, lock
busy) and `PermanentGitError` (retrying cannot help: bad revision, not a repository, dirty checkout).
A push the remote refuses is not an error but a `gitremote.PushResult`, so the caller can re-plan.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pygit2
from pygit2.enums import FileMode, ObjectType

from reconciler.git import packs as gitpack
from schemas import layout

OWNED_PREFIXES = layout.OWNED_PREFIXES
TRAILER = "Spec-Commit"
_TRAILER_RE = re.compile(rf"^{TRAILER}: ([0-9a-f]{{40}}|[0-9a-f]{{64}})$")
_SUBJECT_MAX = 72


class GitStoreError(Exception):
    """Base of every error this module raises; `temporary` says whether a later retry can help."""

    temporary = False


class TemporaryGitError(GitStoreError):
    temporary = True


class PermanentGitError(GitStoreError):
    temporary = False


class GitUnavailable(TemporaryGitError):
    """The remote could not be reached (network, URL, credentials); the next pass retries."""


class LockBusy(TemporaryGitError):
    """Another writer holds this clone's lock."""


class NotARepository(PermanentGitError):
    pass


class RevisionNotFound(PermanentGitError):
    pass


class BranchMoved(PermanentGitError):
    """The local branch is not where the caller's plan started; sync before committing."""


class DirtyCheckout(PermanentGitError):
    """The branch is checked out and local edits would be overwritten by moving it."""


# --------------------------------------------------------------------------------------------- read


def open_repo(path: str | os.PathLike[str]) -> pygit2.Repository:
    """Open the repository at `path` (a work tree, its `.git`, or a bare repository)."""
    try:
        return pygit2.Repository(os.fspath(path))
    except (pygit2.GitError, KeyError) as err:
        raise NotARepository(f"{os.fspath(path)} is not a Git repository ({err})") from err


def resolve(repo: pygit2.Repository, rev: str) -> pygit2.Commit:
    """The commit `rev` names (sha, branch, tag, `origin/main`, `HEAD~2`, ...)."""
    try:
        obj = repo.revparse_single(rev)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError) as err:
        raise RevisionNotFound(f"revision {rev!r} not found in {repo.path}: {err}") from err
    try:
        commit = obj.peel(pygit2.Commit)
    except (ValueError, pygit2.GitError, pygit2.InvalidSpecError) as err:
        raise RevisionNotFound(
            f"revision {rev!r} in {repo.path} names a {obj.type_str}, not a commit: give a branch, tag or commit"
        ) from err
    assert isinstance(commit, pygit2.Commit)
    return commit


def subtree(repo: pygit2.Repository, tree: pygit2.Tree, parts: Iterable[str]) -> pygit2.Tree | None:
    """The tree at `parts` below `tree` (None when absent or not a directory)."""
    for part in parts:
        if part not in tree:
            return None
        entry = tree[part]
        if entry.type != ObjectType.TREE:
            return None
        sub = repo[entry.id]
        assert isinstance(sub, pygit2.Tree)
        tree = sub
    return tree


def walk(repo: pygit2.Repository, tree: pygit2.Tree, base: str = "") -> Iterator[tuple[str, pygit2.Object]]:
    """`(path, entry)` for every entry below `tree` that is not a directory (blobs, links, submodules)."""
    for entry in tree:
        path = f"{base}{entry.name}"
        if entry.type == ObjectType.TREE:
            sub = repo[entry.id]
            assert isinstance(sub, pygit2.Tree)
            yield from walk(repo, sub, path + "/")
        else:
            yield path, entry


def list_blobs(repo: pygit2.Repository, rev: str, prefixes: Iterable[str] | None = None) -> dict[str, str]:
    """`{path: blob id}` at `rev`, walking only the subtrees under `prefixes` (plain string prefixes)."""
    root = resolve(repo, rev).tree
    out: dict[str, str] = {}
    for prefix in sorted(set(prefixes)) if prefixes is not None else [""]:
        directory = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
        start = subtree(repo, root, [p for p in directory.split("/") if p])
        if start is None:
            continue
        for path, entry in walk(repo, start, directory):
            if entry.type == ObjectType.BLOB and path.startswith(prefix):
                out[path] = str(entry.id)
    return dict(sorted(out.items()))


def read_blob(repo: pygit2.Repository, oid_hex: str) -> bytes:
    blob = repo[oid_hex]
    assert isinstance(blob, pygit2.Blob)
    return blob.data


def read_blobs(
    repo: pygit2.Repository, rev: str, prefixes: Iterable[str] | None = None
) -> dict[str, tuple[str, bytes]]:
    """`{path: (blob id, content)}` at `rev`; callers cache parsed files by blob id."""
    return {path: (oid, read_blob(repo, oid)) for path, oid in list_blobs(repo, rev, prefixes).items()}


def read_file(repo: pygit2.Repository, rev: str, path: str) -> bytes | None:
    """The content of the file at `path` in `rev` (None when there is no such file)."""
    parts = path.split("/")
    parent = subtree(repo, resolve(repo, rev).tree, parts[:-1])
    if parent is None or parts[-1] not in parent:
        return None
    entry = parent[parts[-1]]
    return read_blob(repo, str(entry.id)) if entry.type == ObjectType.BLOB else None


def read_files(repo: pygit2.Repository, rev: str, prefixes: Iterable[str] | None = None) -> dict[str, bytes]:
    """`{path: content}` at `rev`, no checkout."""
    return {path: data for path, (_, data) in read_blobs(repo, rev, prefixes).items()}


# ------------------------------------------------------------------------------------------- commit


def format_message(summary_lines: list[str], spec_commit: str, heading: str = "") -> str:
    """Subject line, blank line, one bullet per decision, blank line, `Spec-Commit: <sha>` trailer.

    `heading` opens the subject (`jobtree: pass at <time>: ...`, as `simulate --git` writes) and is
    not repeated in the body."""
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", spec_commit):
        raise ValueError(f"spec commit must be a full hex sha, got {spec_commit!r}")
    lines = [line.strip() for line in summary_lines if line.strip()]
    prefix = f"jobtree: {heading}: " if heading else "jobtree: "
    subject = prefix + "refresh state"
    if lines:  # as many whole lines as fit (the body lists them all); a first line too long is cut
        room = _SUBJECT_MAX - len(prefix)
        head = lines[0] if len(lines[0]) <= room else lines[0][: room - 1] + "…"
        for line in lines[1:]:
            if len(head) + 2 + len(line) > room:
                break
            head += "; " + line
        subject = prefix + head
    body = "\n".join(f"- {line}" for line in lines) or "- no decision changed; state refreshed"
    return f"{subject}\n\n{body}\n\n{TRAILER}: {spec_commit}\n"


def spec_commit_of(message: str) -> str | None:
    """The `Spec-Commit` trailer of a commit message (last paragraph), if any."""
    last = message.strip().split("\n\n")[-1]
    for line in last.splitlines():
        m = _TRAILER_RE.match(line.strip())
        if m:
            return m.group(1)
    return None


@dataclass(slots=True)
class _Node:
    owned: bool = False
    children: dict[str, _Node | bytes] | None = None  # a file is its raw blob id

    def kids(self) -> dict[str, _Node | bytes]:
        if self.children is None:
            self.children = {}
        return self.children


def _trie(owned_prefixes: Iterable[str], blobs: Mapping[str, bytes]) -> _Node:
    root = _Node()
    prefixes = tuple(owned_prefixes)
    for prefix in prefixes:
        if not prefix.endswith("/") or prefix.startswith("/") or "//" in prefix:
            raise ValueError(f"owned prefix must be a directory like 'state/', got {prefix!r}")
        node = root
        for part in prefix.strip("/").split("/"):
            nxt = node.kids().setdefault(part, _Node())
            assert isinstance(nxt, _Node)
            node = nxt
        node.owned = True
    dirs: dict[str, _Node] = {}  # directory path -> node, so each directory is walked to once
    for path, oid in blobs.items():
        if not path.startswith(prefixes):
            raise ValueError(f"{path} is outside the owned prefixes {list(prefixes)}")
        directory, _, name = path.rpartition("/")
        found = dirs.get(directory)
        if found is None:
            node = root
            for part in directory.split("/"):
                if part in _BAD_PARTS:
                    raise ValueError(f"invalid path {path!r}")
                nxt = node.kids().setdefault(part, _Node(owned=node.owned))
                if not isinstance(nxt, _Node):
                    raise ValueError(f"{path} needs {part} to be a directory, but it is a file")
                node = nxt
            dirs[directory] = found = node
        if name in _BAD_PARTS:
            raise ValueError(f"invalid path {path!r}")
        kids = found.kids()
        if isinstance(kids.get(name), _Node):
            raise ValueError(f"{path} is a directory in the same commit")
        kids[name] = oid
    return root


_BAD_PARTS = frozenset({"", ".", "..", ".git"})


_BLOB_ENTRY = b"%o " % FileMode.BLOB
_TREE_ENTRY = b"%o " % FileMode.TREE


def _build(
    repo: pygit2.Repository, base: pygit2.Tree | None, node: _Node, out: list[tuple[bytes, str, bytes]]
) -> bytes | None:
    """The raw id of the tree for `node` (None when empty); trees `base` does not have go to `out`.

    Unowned directories keep `base`'s other entries; owned ones hold exactly what `node` lists.
    """
    rows: dict[str, tuple[bytes, bytes]] = {}  # name -> (Git's sort key, the entry's bytes)
    if not node.owned and base is not None:
        for e in base:
            raw, mode = str(e.name).encode(), int(e.filemode)
            key = raw + b"/" if mode == FileMode.TREE else raw  # Git orders a directory as "name/"
            rows[str(e.name)] = (key, b"%o %s\0%s" % (mode, raw, e.id.raw))
    for name, child in node.kids().items():
        raw = name.encode()
        if isinstance(child, bytes):
            rows[name] = (raw, _BLOB_ENTRY + raw + b"\0" + child)
            continue
        sub = _build(repo, subtree(repo, base, [name]) if base is not None else None, child, out)
        if sub is None:
            rows.pop(name, None)
        else:
            rows[name] = (raw + b"/", _TREE_ENTRY + raw + b"\0" + sub)
    if not rows:
        return None
    data = b"".join([entry for _, entry in sorted(rows.values())])  # keys are unique: entries never compared
    oid = gitpack.object_id("tree", data)
    if base is None or oid != base.id.raw:
        out.append((oid, "tree", data))
    return oid


def commit_files(
    repo: pygit2.Repository,
    branch: str,
    parent_rev: str | None,
    files: Mapping[str, bytes],
    *,
    message: str,
    author_name: str,
    author_email: str,
    now: int,
    owned_prefixes: tuple[str, ...] = OWNED_PREFIXES,
) -> pygit2.Oid | None:
    """Commit parent's tree with everything under `owned_prefixes` replaced by exactly `files`.

    Returns None (and commits nothing) when the tree would not change. Commit time is `now` (UTC), so
    the same inputs give the same commit id. Moves `refs/heads/<branch>`, which must point at the
    parent (or not exist when `parent_rev` is None); otherwise `BranchMoved`.
    """
    blobs: dict[str, str] = {}
    contents: dict[str, bytes] = {}
    for path, data in files.items():
        oid = gitpack.object_id("blob", bytes(data)).hex()
        blobs[path] = oid
        contents[oid] = bytes(data)
    return commit_tree(
        repo, branch, parent_rev, blobs, contents, message=message, author_name=author_name,
        author_email=author_email, now=now, owned_prefixes=owned_prefixes,
    )  # fmt: skip


def commit_tree(
    repo: pygit2.Repository,
    branch: str,
    parent_rev: str | None,
    blobs: Mapping[str, str],
    contents: Mapping[str, bytes],
    *,
    message: str,
    author_name: str,
    author_email: str,
    now: int,
    owned_prefixes: tuple[str, ...] = OWNED_PREFIXES,
    pending: list[Any] | None = None,
    packs: list[str] | None = None,
) -> pygit2.Oid | None:
    """`commit_files` given blob ids: `blobs` is every owned file's blob id (hex), `contents` the
    bytes of those the repository may not have yet (blob id -> bytes; the rest must exist).

    Only new objects are written (one pack for a big batch, see `gitpack`), and a checked-out
    branch rewrites only the paths that changed (see `worktree`); with a `pending` list, it does so
    in a background thread, and the `worktree.Pending` to wait for is appended: the files are
    written while the objects are, the index once the branch has moved (`worktree.start`).
    A pack written is appended to `packs` (its path without extension), for a local push to reuse.
    """
    parent = resolve(repo, parent_rev) if parent_rev is not None else None
    base_tree = parent.tree if parent is not None else None
    raw = {path: bytes.fromhex(oid) for path, oid in blobs.items()}
    objects: list[tuple[bytes, str, bytes]] = []
    tree_oid = _build(repo, base_tree, _trie(owned_prefixes, raw), objects)
    if tree_oid is None:
        tree_oid = gitpack.object_id("tree", b"")
        objects.append((tree_oid, "tree", b""))
    if base_tree is not None and tree_oid == base_tree.id.raw:
        return None
    ref_name = f"refs/heads/{branch}"
    current = repo.references.get(ref_name)
    want = parent.id if parent is not None else None
    if (current.target if current is not None else None) != want:
        raise BranchMoved(
            f"{ref_name} is at {current.target if current else 'nothing'}, not at the planned parent "
            f"{want or 'nothing'}; run sync_with_remote and plan again"
        )
    odb = repo.odb
    for blob in sorted(set(blobs.values())):
        data = contents.get(blob)
        if data is not None:
            objects.append((bytes.fromhex(blob), "blob", data))
        elif not odb.exists(pygit2.Oid(hex=blob)):
            raise ValueError(f"blob {blob} is neither given nor in {repo.path}")
    from reconciler.git.checkout import worktree  # imported late: worktree builds on this module

    early = None
    if pending is not None:  # the work tree's files are written while the objects are
        trees = {oid: data for oid, kind, data in objects if kind == "tree"}
        early = worktree.start(repo, branch, tree_oid, trees, contents)
    try:
        gitpack.write(repo, objects, packs)
        sig = pygit2.Signature(author_name, author_email, int(now), 0)
        parents = [parent.id] if parent is not None else []
        oid = repo.create_commit(None, sig, sig, message, pygit2.Oid(raw=tree_oid), parents)
        if early is None:
            later = worktree.move_branch(repo, branch, oid, contents, background=pending is not None)
        else:
            repo.references.create(ref_name, oid, force=True)
            later = early
    except BaseException:
        if early is not None and pending is not None:
            early.abandon()
            pending.append(early)
        raise
    if early is not None:
        early.moved()
    if later is not None and pending is not None:
        pending.append(later)
    return oid


# ------------------------------------------------------------------------------------- hand edits


def entry_at(tree: pygit2.Tree | None, path: str) -> tuple[pygit2.Oid, int] | None:
    """The id and file mode of what `tree` holds at `path` (a file, a directory or a submodule), or None."""
    if tree is None:
        return None
    try:
        obj = tree[path]
    except KeyError:
        return None
    return obj.id, int(obj.filemode)


_REEXPORTS = {
    "move_branch": "reconciler.git.checkout.worktree",
    "restore_owned": "reconciler.git.checkout.worktree",
    "PushResult": "reconciler.git.remote",
    "PushStatus": "reconciler.git.remote",
    "SyncOutcome": "reconciler.git.remote",
    "fetch": "reconciler.git.remote",
    "push": "reconciler.git.remote",
    "sync_with_remote": "reconciler.git.remote",
    "run_with_retry": "reconciler.git.remote",
    "writer_lock": "reconciler.git.lock",
}


def __getattr__(name: str) -> Any:
    if name in _REEXPORTS:
        return getattr(importlib.import_module(_REEXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
