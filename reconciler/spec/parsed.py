"""Spec files parsed once per blob id (steps 1-2 of a pass): the parse cache, its one format, and its head start.

YAML parsing is most of the cost of reading 5,000 Run files. The parse of a file depends on its
bytes alone, so its documents (data, and the line and column of every field) are kept by blob id
in the clone's cache (`reconciler.perf.diskcache`, under the Git dir), with the listing of each
spec subtree by tree id; `documents` takes what it holds and parses only the rest (on every CPU for
a big batch). A file that does not parse is never cached: validation sees its bytes and reports it
as always. This module is the one owner of the cached rows' format (`Rows`).

A first pass at 100k GPUs parses 5,200 files (~1.1 s of CPU) right after importing the planner and
the pydantic models (~0.8 s on one CPU). `start(path)`, called before those imports, lists the
spec files at the clone's HEAD and, when the clone has no parse cache yet, hands them to a forked
child, so both CPUs work from the start (`Prefetch.rows()`: `{blob id: rows}`). It is only a head
start: the pass may read another commit (after a fetch, or another branch), so rows are taken by
blob id and whatever is missing is parsed. Light on purpose: pygit2 through `reconciler.git.read`
and the YAML reader, none of the engine; it never validates.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from reconciler.git import read as gitread
from reconciler.perf import diskcache, forkmap
from reconciler.spec import files
from schemas.layout import MAX_FILE_BYTES
from schemas.yamldoc import Document, parse_all

CACHE_NAME = "spec-documents"  # the parse cache kept in the clone's cache directory

Rows = tuple[tuple[int, Any, int, int, bytes], ...]  # per document: index, data, line, col, positions


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
    repo = gitread.open_repo(git_dir)
    return parse([(path, gitread.read_blob(repo, oid)) for path, oid in items])


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


@dataclass(slots=True)
class Cache:
    """What the clone's parse cache holds: rows by blob id, subtree listings by tree id."""

    rows: dict[str, Rows]
    trees: dict[str, files.Listing]

    @classmethod
    def load(cls, repo: gitread.Repository) -> Cache:
        data = diskcache.load(gitread.cache_directory(repo), CACHE_NAME)
        try:
            rows, trees = data  # type: ignore[misc]  # a miss (None) or damaged data: empty below
            return cls(dict(rows), dict(trees))
        except (TypeError, ValueError):
            return cls({}, {})

    def save(self, repo: gitread.Repository) -> None:
        diskcache.save(gitread.cache_directory(repo), CACHE_NAME, (self.rows, self.trees))


def documents(
    repo: gitread.Repository,
    listed: files.Listed,
    cache: Cache,
    early: Prefetch | None = None,
    held: Mapping[str, list[Document]] | None = None,
) -> tuple[dict[str, list[Document]], dict[str, bytes], int]:
    """The listed spec files as documents (from `held`: this process's own from its last read, the
    very same objects; from `cache`, `early`, or parsed here, on every CPU for a big batch), the
    bytes of those that do not parse (validation reports them with their own line and column), and
    how many were neither held nor in the cache. Rows parsed here are added to `cache`."""
    blobs = listed.files
    held = held or {}
    rows: dict[str, Rows] = {
        oid: cache.rows[oid] for oid in blobs.values() if oid in cache.rows and oid not in held
    }
    fresh = sum(1 for oid in blobs.values() if oid not in held and oid not in rows)
    if early is not None and fresh:
        head_start = early.rows()
        rows.update((oid, head_start[oid]) for oid in blobs.values() if oid in head_start)
    todo = [  # capped as `jobtree validate` reads: past the limit is reported, not parsed
        (path, gitread.read_blob(repo, oid)[: MAX_FILE_BYTES + 1])
        for path, oid in blobs.items()
        if oid not in rows and oid not in held
    ]
    unparsed: dict[str, bytes] = {}
    for (path, data), found in zip(todo, forkmap.map_chunks(parse, todo), strict=True):
        if found is None:
            unparsed[path] = data
        else:
            rows[blobs[path]] = found
    parsed: dict[str, list[Document]] = {}
    for path, oid in blobs.items():
        same = held.get(oid)
        if same is not None and all(d.path == path for d in same):
            parsed[path] = same
            continue
        got = rows.get(oid) or _rows(same)
        if got is not None:
            parsed[path] = [
                Document(path, index, data, line, col, partial(marshal.loads, raw))
                for index, data, line, col, raw in got
            ]
    cache.rows = rows
    return parsed, unparsed, fresh


def _rows(docs: list[Document] | None) -> Rows | None:
    """Held documents as rows again (the same blob at another path: its documents name their path)."""
    if docs is None:
        return None
    return tuple((d.index, d.data, d.line, d.col, marshal.dumps(dict(d.positions))) for d in docs)


def start(path: str | os.PathLike[str], least: int = forkmap.MIN_ITEMS) -> Prefetch | None:
    """Parse HEAD's spec files in a forked child, or None when there is no point: not a clone with a
    HEAD commit, a parse cache already there (a later pass parses only what changed), or fewer than
    `least` files. (With one CPU, or threads running, `forkmap` forks nothing: the files are then
    parsed here when the pass asks for them, as without a head start.)"""
    found = gitread.head_commit(path)
    if found is None:
        return None
    repo, head = found
    if (gitread.cache_directory(repo) / CACHE_NAME).exists():
        return None
    items = list(files.list_commit(repo, head.tree, {}).files.items())
    if len(items) < max(least, 1):
        return None
    return Prefetch(items, forkmap.start(partial(_read_and_parse, repo.path), items, least))
