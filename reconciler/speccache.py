"""Spec files of a commit, validated (steps 1-2 of a pass), parsing only blobs no earlier pass parsed.

YAML parsing is most of the cost of reading 5,000 Run files. The parse of a file depends on its
bytes alone, so the documents (data, and the line and column of every field) are cached by blob
id under the Git dir (`passcache`); so is the listing of each spec subtree, by tree id. Documents
then go through `pipeline.read_spec` like freshly parsed ones: every per-document check and every
cross-object rule runs over the whole fleet each pass (re-checking a model measured cheaper than
loading one back from disk). A file that does not parse is never cached: validation sees its
bytes and reports it as always. Reads Git, writes only its cache.
"""

from __future__ import annotations

import marshal
from collections.abc import Sequence
from functools import partial
from typing import Any

import pygit2
from pygit2.enums import ObjectType

from reconciler import forkmap, gitstore, passcache, pipeline
from schemas.fleetcheck import spec_kind
from schemas.load import FLEET_FILE, INVENTORY_FILE, load_documents
from schemas.yamldoc import Document

CACHE_NAME = "spec-documents"
SPEC_FILES = (FLEET_FILE, INVENTORY_FILE)
SPEC_DIRS = ("budgets", "runs")

Listing = tuple[tuple[str, str], ...]  # (path below a tree, blob id)


def _listing(
    repo: pygit2.Repository, tree: pygit2.Tree, known: dict[str, Listing], seen: dict[str, Listing]
) -> Listing:
    """Every blob below `tree` as (relative path, blob id); subtrees listed before are reused by id."""
    tid = str(tree.id)
    hit = known.get(tid) or seen.get(tid)
    if hit is None:
        rows: list[tuple[str, str]] = []
        for entry in tree:
            if entry.type == ObjectType.TREE:
                sub = repo[entry.id].peel(pygit2.Tree)
                rows += [(f"{entry.name}/{p}", oid) for p, oid in _listing(repo, sub, known, seen)]
            elif entry.type == ObjectType.BLOB:
                rows.append((str(entry.name), str(entry.id)))
        hit = tuple(rows)
    seen[tid] = hit
    return hit


def spec_blobs(
    repo: pygit2.Repository, commit: pygit2.Commit, known: dict[str, Listing]
) -> tuple[dict[str, str], dict[str, Listing]]:
    """`{path: blob id}` of the files validation reads, and the subtree listings used (to cache)."""
    root = commit.tree
    out: dict[str, str] = {}
    seen: dict[str, Listing] = {}
    for name in SPEC_FILES:
        parts = name.split("/")
        parent = gitstore.subtree(repo, root, parts[:-1])
        if parent is not None and parts[-1] in parent:
            entry = parent[parts[-1]]
            if entry.type == ObjectType.BLOB:
                out[name] = str(entry.id)
    for top in SPEC_DIRS:
        sub = gitstore.subtree(repo, root, [top])
        if sub is not None:
            out.update(
                (f"{top}/{p}", oid) for p, oid in _listing(repo, sub, known, seen) if spec_kind(f"{top}/{p}")
            )
    return dict(sorted(out.items())), seen


def _parse(items: Sequence[tuple[str, bytes]]) -> list[Any]:
    """Per file, its documents as cacheable rows, or None when it does not parse."""
    out: list[Any] = []
    for path, data in items:
        docs, problems = load_documents(path, data)
        out.append(
            None
            if problems
            else tuple((d.index, d.data, d.line, d.col, marshal.dumps(dict(d.positions))) for d in docs)
        )
    return out


def read_spec(repo: pygit2.Repository, commit: pygit2.Commit) -> tuple[pipeline.Spec, int, int]:
    """The validated spec at `commit`, the number of spec files, and how many had to be parsed."""
    where = passcache.directory(repo)
    cached = passcache.load(where, CACHE_NAME)
    try:
        known_docs, known_trees = cached  # type: ignore[misc]
        known_docs, known_trees = dict(known_docs), dict(known_trees)
    except (TypeError, ValueError):
        known_docs, known_trees = {}, {}
    blobs, trees = spec_blobs(repo, commit, known_trees)
    files: dict[str, bytes] = {}
    parsed: dict[str, list[Document]] = {}
    docs_by_blob: dict[str, Any] = {oid: known_docs[oid] for oid in blobs.values() if oid in known_docs}
    todo = [(path, gitstore.read_blob(repo, oid)) for path, oid in blobs.items() if oid not in known_docs]
    for (path, data), rows in zip(todo, forkmap.map_chunks(_parse, todo), strict=True):
        if rows is None:
            files[path] = data  # validation reports it, with its own line and column
        else:
            docs_by_blob[blobs[path]] = rows
    for path, oid in blobs.items():
        rows = docs_by_blob.get(oid)
        if rows is not None:
            parsed[path] = [
                Document(path, index, data, line, col, partial(marshal.loads, raw))
                for index, data, line, col, raw in rows
            ]
    fresh = len(todo)
    spec = pipeline.read_spec(files, parsed)
    if fresh or trees.keys() != known_trees.keys():
        passcache.save(where, CACHE_NAME, (docs_by_blob, trees))
    return spec, len(blobs), fresh
