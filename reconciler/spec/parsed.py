"""Spec files listed and parsed by blob id, and parsed early: in a forked child while `reconcile` imports.

A first pass at 100k GPUs parses 5,200 YAML files (~1.1 s of CPU) right after importing the planner
and the pydantic models (~0.8 s on one CPU). `start(path)`, called before those imports, lists the
spec files at the clone's HEAD and, when the clone has no parse cache yet, hands them to a forked
child, so both CPUs work from the start. `Prefetch.rows()` collects `{blob id: rows}` in the
cache's format (`speccache`). It is only a head start: the pass may read another commit (after a
fetch, or another branch), so `speccache` takes rows by blob id and parses whatever is missing.
Light on purpose: pygit2 and the YAML reader, none of the engine; it never validates.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pygit2
from pygit2.enums import FileMode, ObjectType

from reconciler.git import store as gitstore
from reconciler.perf import diskcache as passcache
from reconciler.perf import forkmap
from schemas import strays
from schemas.layout import MAX_FILE_BYTES, SPEC_DIRS, SPEC_FILES, spec_kind, walked
from schemas.yamldoc import parse_all

CACHE_NAME = "spec-documents"  # the parse cache `speccache` keeps in `passcache.directory`

Listing = tuple[tuple[str, str, bool], ...]  # (path below a tree, blob id, a symbolic link?)
Rows = tuple[tuple[int, Any, int, int, bytes], ...]  # per document: index, data, line, col, positions


def _listing(
    repo: pygit2.Repository, tree: pygit2.Tree, known: dict[str, Listing], seen: dict[str, Listing]
) -> Listing:
    """Every blob below `tree` as (relative path, blob id, symbolic link?); subtrees listed before
    are reused by id."""
    tid = str(tree.id)
    hit = known.get(tid) or seen.get(tid)
    if hit is None:
        rows: list[tuple[str, str, bool]] = []
        for entry in tree:
            if entry.type == ObjectType.TREE:
                sub = repo[entry.id].peel(pygit2.Tree)
                rows += [
                    (f"{entry.name}/{p}", oid, link) for p, oid, link in _listing(repo, sub, known, seen)
                ]
            elif entry.type == ObjectType.BLOB:
                rows.append((str(entry.name), str(entry.id), entry.filemode == FileMode.LINK))
        hit = tuple(rows)
    seen[tid] = hit
    return hit


def spec_blobs(
    repo: pygit2.Repository, commit: pygit2.Commit, known: dict[str, Listing]
) -> tuple[dict[str, str], dict[str, str], dict[str, str], dict[str, Listing]]:
    """`{path: blob id}` of the files validation reads, `{path: blob id}` of spec paths that are
    symbolic links (validation reports them; their blob is the target's name), `{path: blob id}`
    of files that may be stray spec (`strays.candidate`), and the subtree listings used (to cache)."""
    root = commit.tree
    out: dict[str, tuple[str, bool]] = {}
    seen: dict[str, Listing] = {}
    for name in SPEC_FILES:
        parts = name.split("/")
        parent = gitstore.subtree(repo, root, parts[:-1])
        if parent is not None and parts[-1] in parent:
            entry = parent[parts[-1]]
            if entry.type == ObjectType.BLOB:
                out[name] = (str(entry.id), entry.filemode == FileMode.LINK)
    stray: dict[str, str] = {}
    for item in root:
        top = str(item.name)
        if item.type == ObjectType.BLOB:
            rows: Listing = (("", str(item.id), item.filemode == FileMode.LINK),)
        elif item.type == ObjectType.TREE and walked(top):
            rows = _listing(repo, repo[item.id].peel(pygit2.Tree), known, seen)
        else:
            continue
        for p, oid, link in rows:
            path = f"{top}/{p}" if p else top
            if top in SPEC_DIRS and spec_kind(path):
                out[path] = (oid, link)
            elif not link and strays.candidate(path):
                stray[path] = oid
    files = {path: oid for path, (oid, link) in sorted(out.items()) if not link}
    links = {path: oid for path, (oid, link) in sorted(out.items()) if link}
    return files, links, stray, seen


def parse(items: Sequence[tuple[str, bytes]]) -> list[Rows | None]:
    """Per file, its documents as cacheable rows, or None when validation must see its bytes to
    report it with its own line and column: it does not parse, holds no document, or is too large."""
    out: list[Rows | None] = []
    for path, data in items:
        if len(data) > MAX_FILE_BYTES:
            out.append(None)
            continue
        docs, bad = parse_all(data, path)
        out.append(
            None
            if bad or not docs
            else tuple((d.index, d.data, d.line, d.col, marshal.dumps(dict(d.positions))) for d in docs)
        )
    return out


def _read_and_parse(git_dir: str, items: Sequence[tuple[str, str]]) -> list[Rows | None]:
    """`parse` of (path, blob id) pairs, read through a repository opened here (in a child)."""
    repo = pygit2.Repository(git_dir)
    return parse([(path, gitstore.read_blob(repo, oid)) for path, oid in items])


@dataclass(slots=True)
class Prefetch:
    items: list[tuple[str, str]]  # (path, blob id) of HEAD's spec files
    parsing: forkmap.Running  # their `parse`, in a forked child
    _rows: dict[str, Rows] | None = None

    def rows(self) -> dict[str, Rows]:
        """`{blob id: rows}` of every file that parsed; if the child failed, they are parsed here."""
        if self._rows is None:
            got = zip(self.items, self.parsing.wait(), strict=True)
            self._rows = {oid: rows for (_, oid), rows in got if rows is not None}
        return self._rows


def start(path: str | os.PathLike[str], least: int = forkmap.MIN_ITEMS) -> Prefetch | None:
    """Parse HEAD's spec files in a forked child, or None when there is no point: not a clone with a
    HEAD commit, a parse cache already there (a later pass parses only what changed), or fewer than
    `least` files. (With one CPU, or threads running, `forkmap` forks nothing: the files are then
    parsed here when the pass asks for them, as without a head start.)"""
    try:
        repo = pygit2.Repository(os.fspath(path))
        head = repo.head.peel(pygit2.Commit)
    except (pygit2.GitError, KeyError, ValueError):
        return None
    if (passcache.directory(repo) / CACHE_NAME).exists():
        return None
    blobs, _, _, _ = spec_blobs(repo, head, {})
    items = list(blobs.items())
    if len(items) < max(least, 1):
        return None
    return Prefetch(items, forkmap.start(partial(_read_and_parse, repo.path), items, least))
