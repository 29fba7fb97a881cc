"""Read a fleet repository's spec files (jobtree.yaml, budgets/, runs/, inventory) from a commit or a folder.

Also the first bytes of data files that may be misplaced spec (`schemas.strays`), for validation to
name. Read-only and small: no checkout, no writes, no remote; the Git sink is `reconciler.git.store`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, ObjectType

from schemas import layout, load, strays

FLEET_FILE, SPEC_FILES, SPEC_DIRS = layout.FLEET_FILE, layout.SPEC_FILES, layout.SPEC_DIRS
YAML_SUFFIXES = layout.YAML_SUFFIXES
# Past this size a spec file is a mistake or an attack: only its first MAX_FILE_BYTES + 1 bytes are
# read, and validation reports the file as too large (its neighbours are still checked).
MAX_FILE_BYTES = load.MAX_FILE_BYTES


class GitReadError(Exception):
    """The repository or revision cannot be read; the message says what to fix."""


def read_worktree(path: str | os.PathLike[str]) -> dict[str, bytes]:
    """Spec files of a folder, keyed by POSIX path relative to it. A symlinked file is handed over as a
    `load.Symlink` (validation reports it), as in --rev; symlinked folders are not entered."""
    root = Path(path)
    if not root.is_dir():
        raise GitReadError(f"{root} is not a directory; pass the fleet repository's folder")
    if (root / "HEAD").is_file() and (root / "objects").is_dir() and not (root / FLEET_FILE).exists():
        raise GitReadError(
            f"{root} is a bare Git repository with no files to read; pass --rev (e.g. --rev main)"
        )
    out: dict[str, bytes] = {}
    ignored = _ignored_by_git(root)
    for name in SPEC_FILES:
        file = root / name
        if file.is_symlink():
            out[name] = load.Symlink(os.fsencode(os.readlink(file)))
        elif file.is_file():
            out[name] = _read(file)
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        linked = [d for d in dirnames if (here / d).is_symlink()]
        dirnames[:] = sorted(  # not a nested repository (a submodule): Git does not hold its files here
            d
            for d in dirnames
            if d not in linked and (here != root or layout.walked(d)) and not (here / d / ".git").exists()
        )
        for name in sorted([*filenames, *linked]):  # Git stores a link to a folder as a link too
            file = here / name
            rel = file.relative_to(root).as_posix()
            if rel.split("/", 1)[0] in SPEC_DIRS and name.endswith(YAML_SUFFIXES):
                if file.is_symlink():  # reported, never read through
                    out[rel] = load.Symlink(os.fsencode(os.readlink(file)))
                elif file.is_file():
                    out[rel] = _read(file)
            elif strays.candidate(rel) and file.is_file() and not file.is_symlink() and not ignored(file):
                out[rel] = _read(file, strays.SNIFF_BYTES)
    return out


def _ignored_by_git(root: Path) -> Callable[[Path], bool]:
    """Whether Git ignores a file below `root` (.gitignore): such a file is never committed, so it
    is not named as stray spec. Outside a repository nothing is ignored."""
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


def _read(file: Path, cap: int = MAX_FILE_BYTES + 1) -> bytes:
    with file.open("rb") as f:
        return f.read(cap)


def read_tree(repo_path: str | os.PathLike[str], rev: str) -> dict[str, bytes]:
    """Spec files at `rev` (any revision Git understands), for the folder `repo_path` inside its repo."""
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
    except (KeyError, ValueError, pygit2.GitError) as err:
        raise GitReadError(
            f"revision {rev!r} is not in {repo_path}: {err}; pass a branch, tag or commit"
        ) from None
    tree = commit.tree
    if repo.workdir:
        rel = Path(os.path.relpath(Path(repo_path).resolve(), Path(repo.workdir).resolve())).as_posix()
        if rel != ".":
            try:
                tree = tree[rel].peel(pygit2.Tree)
            except (KeyError, ValueError, pygit2.GitError):
                return {}
    out: dict[str, bytes] = {}
    for name in SPEC_FILES:
        blob = _blob(repo, tree, name)
        if blob is not None:
            out[name] = blob
    for entry in tree:
        name = str(entry.name)
        if entry.type == ObjectType.TREE and layout.walked(name):
            _walk(repo, tree, name, out)
        elif entry.type == ObjectType.BLOB and strays.candidate(name) and entry.filemode != FileMode.LINK:
            out[name] = _data(repo, entry.id)[: strays.SNIFF_BYTES]
    return out


def _blob(repo: pygit2.Repository, tree: pygit2.Tree, path: str) -> bytes | None:
    try:
        entry = tree[path]
    except KeyError:
        return None
    if entry.type != ObjectType.BLOB:
        return None
    return _data(repo, entry.id, entry.filemode == FileMode.LINK)


def _walk(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str, out: dict[str, bytes]) -> None:
    try:
        sub = tree[prefix]
    except KeyError:
        return
    if sub.type != ObjectType.TREE:
        return
    stack: list[tuple[str, pygit2.Tree]] = [(prefix, repo[sub.id].peel(pygit2.Tree))]
    while stack:
        base, node = stack.pop()
        for entry in node:
            path = f"{base}/{entry.name}"
            if entry.type == ObjectType.TREE:
                stack.append((path, repo[entry.id].peel(pygit2.Tree)))
            elif entry.type != ObjectType.BLOB:
                continue
            elif prefix in SPEC_DIRS and path.endswith(YAML_SUFFIXES):
                out[path] = _data(repo, entry.id, entry.filemode == FileMode.LINK)
            elif strays.candidate(path) and entry.filemode != FileMode.LINK:
                out[path] = _data(repo, entry.id)[: strays.SNIFF_BYTES]


def _data(repo: pygit2.Repository, oid: pygit2.Oid, link: bool = False) -> bytes:
    """A blob's bytes (capped), or for a symbolic link its target's name, marked as such."""
    blob = repo[oid]
    if not isinstance(blob, pygit2.Blob):
        raise GitReadError(f"{oid} is not a file")
    data: bytes = blob.data
    return load.Symlink(data[: layout.LINK_BYTES]) if link else data[: MAX_FILE_BYTES + 1]
