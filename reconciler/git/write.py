"""Writing Git (step 6 of a pass): a state commit's trees, the commit, one ref move; never plans or renders.

`commit_tree` builds the next tree from the parent's with everything under the owned prefixes
replaced (only new trees are written), writes the new objects (one pack for a big batch:
`packs`), makes the commit and moves the branch, whose checked-out work tree follows path by path
(`checkout`: local edits are never overwritten; a conflict refuses the move with `DirtyCheckout`).
The message comes whole from the caller (`reconciler.state.message` is its one author). Also the
plain commits of a scenario's history and of the demo fleet (`commit_index`). Fetch and push are
`remote`'s, which commits are jobtree's `ownership`'s.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pygit2
from pygit2.enums import CheckoutStrategy, FileMode

from reconciler.git import packs as gitpack
from reconciler.git.checkout import worktree
from reconciler.git.errors import BranchMoved, MergeConflict, PermanentGitError
from reconciler.git.read import OWNED_PREFIXES, Commit, Repository, resolve, subtree


@dataclass(slots=True)
class _Node:
    owned: bool = False
    children: dict[str, _Node | bytes | None] | None = None  # a file is its raw blob id; None: removed

    def kids(self) -> dict[str, _Node | bytes | None]:
        if self.children is None:
            self.children = {}
        return self.children


def _trie(owned_prefixes: Iterable[str], blobs: Mapping[str, bytes | None], patch: bool = False) -> _Node:
    """The directories of `blobs` (path -> raw blob id) as nodes. Without `patch`, an owned prefix's
    directory holds exactly what `blobs` lists; with it, every directory keeps what the base tree
    holds but for the paths `blobs` names (None: removed)."""
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
        node.owned = not patch
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
        if child is None:
            rows.pop(name, None)
            continue
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


def _tree(
    repo: pygit2.Repository,
    base: pygit2.Tree | None,
    blobs: Mapping[str, str],
    owned_prefixes: tuple[str, ...],
    parent_blobs: Mapping[str, str] | None,
) -> tuple[list[tuple[bytes, str, bytes]], Iterable[str], bytes | None]:
    """The new trees (to write), the blobs that must exist, and the root tree's raw id (`commit_tree`):
    patched from `base` where `parent_blobs` describes it, else built whole."""
    objects: list[tuple[bytes, str, bytes]] = []
    if parent_blobs is not None and base is not None:
        differ = {path: oid for path, oid in blobs.items() if parent_blobs.get(path) != oid}
        changed: dict[str, bytes | None] = {path: bytes.fromhex(oid) for path, oid in differ.items()}
        changed.update((path, None) for path in parent_blobs.keys() - blobs.keys())
        try:
            root = _build(repo, base, _trie(owned_prefixes, changed, patch=True), objects)
            return objects, differ.values(), root
        except ValueError:  # a file where a directory was (or the reverse): built whole below
            objects = []
    raw: dict[str, bytes | None] = {path: bytes.fromhex(oid) for path, oid in blobs.items()}
    return objects, blobs.values(), _build(repo, base, _trie(owned_prefixes, raw), objects)


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
    pending: list[worktree.Pending] | None = None,
    parent_blobs: Mapping[str, str] | None = None,
) -> pygit2.Oid | None:
    """Commit parent's tree with everything under `owned_prefixes` replaced by exactly the files
    `blobs` names: every owned file's blob id (hex); `contents` holds the bytes of those the
    repository may not have yet (blob id -> bytes; the rest must exist).

    `parent_blobs`: what the caller knows the parent holds under `owned_prefixes` (path -> blob id,
    every entry a regular file: what jobtree itself committed). Then only the directories of the
    paths that differ are built again, from the parent's trees, and only their blobs are looked
    for: a pass that changed 100 of 120,000 files hashes a few dozen trees, not thousands. The same
    tree either way (`tests/reconciler/git/test_commit_patch.py`).

    Returns None (and commits nothing) when the tree would not change. Commit time is `now` (UTC),
    so the same inputs give the same commit id. Moves `refs/heads/<branch>`, which must point at
    the parent (or not exist when `parent_rev` is None); otherwise `BranchMoved`.

    Only new objects are written (one pack for a big batch, see `git.packs`), and a checked-out
    branch rewrites only the paths that changed (see `worktree`); with a `pending` list, it does so
    in a background thread, and the `worktree.Pending` to wait for is appended: the files are
    written while the objects are, the index once the branch has moved (`worktree.start`).
    """
    parent = resolve(repo, parent_rev) if parent_rev is not None else None
    base_tree = parent.tree if parent is not None else None
    objects, check, tree_oid = _tree(repo, base_tree, blobs, owned_prefixes, parent_blobs)
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
    for blob in sorted(set(check)):
        data = contents.get(blob)
        if data is not None:
            objects.append((bytes.fromhex(blob), "blob", data))
        elif not odb.exists(pygit2.Oid(hex=blob)):
            raise ValueError(f"blob {blob} is neither given nor in {repo.path}")
    early = None
    if pending is not None:  # the work tree's files are written while the objects are
        trees = {oid: data for oid, kind, data in objects if kind == "tree"}
        early = worktree.start(repo, branch, tree_oid, trees, contents)
    try:
        gitpack.write(repo, objects)
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


def init_repository(path: str | os.PathLike[str]) -> Repository:
    """A new repository with a work tree at `path`, on branch `main` (no commit yet)."""
    return pygit2.init_repository(os.fspath(path), initial_head="main")


def commit_snapshot(
    repo: Repository,
    files: Mapping[str, bytes],
    *,
    author_name: str,
    author_email: str,
    when: int,
    message: str,
    ref: str = "refs/heads/main",
    stage: bool = False,
) -> str:
    """A commit on `ref` holding exactly `files` (path -> bytes, regular files), whose parent is the
    head (none when the branch has no commit yet); its id. With `stage`, the repository's index
    holds the same files afterwards (a fleet a person then works in)."""
    index = repo.index if stage else pygit2.Index()
    for path, data in sorted(files.items()):
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), FileMode.BLOB))
    if stage:
        index.write()
    tree = index.write_tree(repo)
    parents = [] if repo.head_is_unborn else [repo.head.target]
    sig = pygit2.Signature(author_name, author_email, when, 0)
    return str(repo.create_commit(ref, sig, sig, message, tree, parents))


def check_out_head(repo: Repository) -> None:
    """The work tree and index made exactly the head's (a repository jobtree alone writes)."""
    if not repo.is_bare:
        repo.checkout_head(strategy=CheckoutStrategy.FORCE)


def merge_commit(repo: Repository, base: Commit, head: Commit, author_name: str, author_email: str) -> Commit:
    """The merge of `head` into `base` as a commit no ref names (as GitHub's `refs/pull/N/merge`),
    the same bytes for the same two commits. Where both sides changed jobtree's own files, base's
    side is taken; a conflict anywhere else raises `MergeConflict`, a commit that cannot be
    written `PermanentGitError`."""
    index = repo.merge_commits(base, head)
    clashes = sorted({e.path for entries in (index.conflicts or ()) for e in entries if e is not None})
    spec = [p for p in clashes if not p.startswith(OWNED_PREFIXES)]
    if spec:
        raise MergeConflict(
            f"{str(head.id)[:12]} does not merge cleanly into {str(base.id)[:12]} (conflicts in "
            f"{', '.join(spec[:10])}{' and more' if len(spec) > 10 else ''}): merge the base into "
            "the branch (or rebase it), resolve, and plan again"
        )
    for path in clashes:  # jobtree's own files: base's side (plans read state from base anyway)
        ours = index.conflicts[path][1]
        del index.conflicts[path]
        if ours is not None:
            index.add(ours)
    when = max(base.commit_time, head.commit_time)
    sig = pygit2.Signature(author_name, author_email, when, 0)
    try:
        tree = index.write_tree(repo)
        oid = repo.create_commit(
            None, sig, sig, f"jobtree plan: {head.id} merged into {base.id}\n", tree, [base.id, head.id]
        )
    except pygit2.GitError as err:
        raise PermanentGitError(
            f"cannot write the merge of {str(head.id)[:12]} into {str(base.id)[:12]} to plan it ({err}); "
            "plan in a clone you can write to, or merge the base into the branch first"
        ) from None
    return repo[oid].peel(pygit2.Commit)
