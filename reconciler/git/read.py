"""Reading Git (steps 1-3 of a pass): open a repository, resolve a revision, walk trees, read blobs; never writes.

pygit2 only, no `git` subprocess, no checkout needed. Every error is one of `errors`'; callers get
plain values (paths, blob ids as hex, bytes) and the repository, commit and tree handles this
module hands out (`Repository`, `Commit`, `Tree`), which they pass back without looking inside.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, ObjectType

from reconciler.git.errors import LIBGIT2_ERRORS, GitReadError, NotARepository, RevisionNotFound
from schemas import layout

Repository = pygit2.Repository
Commit = pygit2.Commit
Tree = pygit2.Tree
Oid = pygit2.Oid
OWNED_PREFIXES = layout.OWNED_PREFIXES
BLOB_MODE = int(FileMode.BLOB)  # a regular file's mode in a tree
CACHE_DIR = ("jobtree", "cache")  # below the Git dir: the pass caches (`reconciler.perf.diskcache`)


def open_repo(path: str | os.PathLike[str]) -> pygit2.Repository:
    """Open the repository at `path` (a work tree, its `.git`, or a bare repository)."""
    try:
        return pygit2.Repository(os.fspath(path))
    except (pygit2.GitError, KeyError) as err:
        raise NotARepository(f"{os.fspath(path)} is not a Git repository ({err})") from err


def discover(start: str | os.PathLike[str]) -> str | None:
    """The top of the Git repository around the folder `start` (its work tree, or a bare
    repository's own folder); None when `start` is in no repository."""
    try:
        found = pygit2.discover_repository(os.fspath(start))
    except LIBGIT2_ERRORS:
        return None
    if found is None:
        return None
    repo = pygit2.Repository(found)
    return repo.workdir or repo.path


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


def entries(repo: pygit2.Repository, tree: pygit2.Tree, parts: Iterable[str]) -> list[tuple[str, bool]]:
    """`(name, is a folder)` of every entry of the folder at `parts` below `tree` (none when absent)."""
    folder = subtree(repo, tree, parts)
    if folder is None:
        return []
    return sorted((str(entry.name), entry.type == ObjectType.TREE) for entry in folder)


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


def entry_at(tree: pygit2.Tree | None, path: str) -> tuple[pygit2.Oid, int] | None:
    """The id and file mode of what `tree` holds at `path` (a file, a directory or a submodule), or None."""
    if tree is None:
        return None
    try:
        obj = tree[path]
    except KeyError:
        return None
    return obj.id, int(obj.filemode)


def owned_trees(
    repo: Repository, commit: Commit, prefixes: Iterable[str] = OWNED_PREFIXES
) -> tuple[tuple[str, str], ...]:
    """`(prefix, tree id or "")` of each owned prefix at `commit`: what identifies its owned files."""
    out = []
    for prefix in sorted(prefixes):
        tree = subtree(repo, commit.tree, [p for p in prefix.split("/") if p])
        out.append((prefix, str(tree.id) if tree is not None else ""))
    return tuple(out)


def cache_directory(repo: Repository) -> Path:
    """Where a clone keeps jobtree's caches: `<gitdir>/jobtree/cache/`, never in the work tree."""
    return Path(repo.path).joinpath(*CACHE_DIR)


Listing = tuple[tuple[str, str, bool], ...]  # (path below a tree, blob id, a symbolic link?)


def listing(repo: Repository, tree: Tree, known: dict[str, Listing], seen: dict[str, Listing]) -> Listing:
    """Every file below `tree` as (relative path, blob id, symbolic link?); subtrees listed before
    (`known`: from a cache, `seen`: this walk) are reused by tree id. Submodules are not files."""
    tid = str(tree.id)
    hit = known.get(tid) or seen.get(tid)
    if hit is None:
        rows: list[tuple[str, str, bool]] = []
        for entry in tree:
            if entry.type == ObjectType.TREE:
                sub = repo[entry.id].peel(pygit2.Tree)
                rows += [(f"{entry.name}/{p}", oid, link) for p, oid, link in listing(repo, sub, known, seen)]
            elif entry.type == ObjectType.BLOB:
                rows.append((str(entry.name), str(entry.id), entry.filemode == FileMode.LINK))
        hit = tuple(rows)
    seen[tid] = hit
    return hit


def top_level(
    repo: Repository,
    tree: Tree,
    known: dict[str, Listing],
    seen: dict[str, Listing],
    walked: Callable[[str], bool],
) -> Iterator[tuple[str, Listing]]:
    """Per top-level entry of `tree`: its name and the files it holds (a file: itself, path "");
    directories only when `walked(name)`."""
    for item in tree:
        top = str(item.name)
        if item.type == ObjectType.BLOB:
            yield top, (("", str(item.id), item.filemode == FileMode.LINK),)
        elif item.type == ObjectType.TREE and walked(top):
            yield top, listing(repo, repo[item.id].peel(pygit2.Tree), known, seen)


def file_at(repo: Repository, tree: Tree, path: str) -> tuple[str, bool] | None:
    """(blob id, symbolic link?) of the file at `path` below `tree`; None when there is none."""
    parts = path.split("/")
    parent = subtree(repo, tree, parts[:-1])
    if parent is None or parts[-1] not in parent:
        return None
    entry = parent[parts[-1]]
    if entry.type != ObjectType.BLOB:
        return None
    return str(entry.id), entry.filemode == FileMode.LINK


def folder_tree(repo_path: str | os.PathLike[str], rev: str) -> tuple[Repository, Tree | None]:
    """The repository holding the folder `repo_path` and the tree of that folder at `rev` (None when
    the commit has no such folder); `GitReadError` says what to fix."""
    if not Path(repo_path).is_dir():
        raise GitReadError(f"{repo_path} is not a directory; pass the fleet repository's folder")
    try:
        found = pygit2.discover_repository(str(repo_path))
        if found is None:
            raise GitReadError(f"{repo_path} is not inside a Git repository; drop --rev or run git init")
        repo = pygit2.Repository(found)
        commit = repo.revparse_single(rev).peel(pygit2.Commit)
    except GitReadError:
        raise
    except LIBGIT2_ERRORS as err:
        raise GitReadError(
            f"revision {rev!r} is not in {repo_path}: {err}; pass a branch, tag or commit"
        ) from None
    tree = commit.tree
    if repo.workdir:
        rel = Path(os.path.relpath(Path(repo_path).resolve(), Path(repo.workdir).resolve())).as_posix()
        if rel != ".":
            try:
                tree = tree[rel].peel(pygit2.Tree)
            except LIBGIT2_ERRORS:
                return repo, None
    return repo, tree


def ignored_by_git(root: Path) -> Callable[[Path], bool]:
    """Whether Git ignores a file below `root` (.gitignore); outside a repository nothing is."""
    found = pygit2.discover_repository(str(root))
    repo = pygit2.Repository(found) if found is not None else None
    if repo is None or repo.workdir is None:
        return lambda file: False
    top = Path(repo.workdir).resolve()

    def ignored(file: Path) -> bool:
        try:
            return bool(repo.path_is_ignored(file.resolve().relative_to(top).as_posix()))
        except (ValueError, pygit2.GitError):
            return False

    return ignored


def head_commit(path: str | os.PathLike[str]) -> tuple[Repository, Commit] | None:
    """The repository at `path` and its HEAD commit; None when there is none (quietly: a head start
    that cannot start is no error)."""
    try:
        repo = pygit2.Repository(os.fspath(path))
        return repo, repo.head.peel(pygit2.Commit)
    except LIBGIT2_ERRORS:
        return None


def commit(repo: Repository, sha: str) -> Commit:
    """The commit `sha` (full hex) names."""
    return repo[sha].peel(pygit2.Commit)


def owned_files(repo: Repository, tree: Tree) -> dict[str, tuple[str, int]]:
    """`{path: (object id, mode)}` of every non-directory entry under the owned prefixes."""
    out: dict[str, tuple[str, int]] = {}
    for prefix in OWNED_PREFIXES:
        parts = [p for p in prefix.split("/") if p]
        sub = subtree(repo, tree, parts)
        if sub is not None:
            base = "/".join(parts) + "/"
            out.update((path, (str(e.id), int(e.filemode))) for path, e in walk(repo, sub, base))
        elif len(parts) == 1 and parts[0] in tree:  # a file where jobtree keeps a directory
            out[parts[0]] = (str(tree[parts[0]].id), int(tree[parts[0]].filemode))
    return out
