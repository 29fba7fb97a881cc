"""Spec files of a commit, validated (steps 1-2 of a pass), parsing only blobs no earlier pass parsed.

YAML parsing is most of the cost of reading 5,000 Run files. The parse of a file depends on its
bytes alone, so the documents (data, and the line and column of every field) are cached by blob
id under the Git dir (`passcache`); so is the listing of each spec subtree, by tree id. Documents
then go through `pipeline.read_spec` like freshly parsed ones: every per-document check and every
cross-object rule runs over the whole fleet each pass (re-checking a model measured cheaper than
loading one back from disk). A file that does not parse is never cached: validation sees its
bytes and reports it as always. A cold pass may bring documents parsed while it was starting
(`specprefetch`), taken by blob id like the cache's. Reads Git, writes only its cache.
"""

from __future__ import annotations

import marshal
from functools import partial
from typing import Any

import pygit2

from reconciler.git import store as gitstore
from reconciler.passes import pipeline
from reconciler.perf import diskcache as passcache
from reconciler.perf import forkmap
from reconciler.spec import lastvalid
from reconciler.spec.parsed import CACHE_NAME, Prefetch, parse, spec_blobs
from schemas.layout import LINK_BYTES, MAX_FILE_BYTES
from schemas.load import Symlink
from schemas.strays import SNIFF_BYTES
from schemas.yamldoc import Document


def read_spec(
    repo: pygit2.Repository, commit: pygit2.Commit, early: Prefetch | None = None
) -> tuple[pipeline.Spec, int, int]:
    """The validated spec at `commit` (with the last valid version of each Budget rejected there:
    `lastvalid`), the number of spec files, and how many were not in the cache (parsed here, or by
    `early`: files a `specprefetch` started before the engine was imported)."""
    where = passcache.directory(repo)
    cached = passcache.load(where, CACHE_NAME)
    try:
        known_docs, known_trees = cached  # type: ignore[misc]
        known_docs, known_trees = dict(known_docs), dict(known_trees)
    except (TypeError, ValueError):
        known_docs, known_trees = {}, {}
    blobs, links, stray, trees = spec_blobs(repo, commit, known_trees)
    files: dict[str, bytes] = {  # a link's blob is its target's name: kept short, never read through
        path: Symlink(gitstore.read_blob(repo, oid)[:LINK_BYTES]) for path, oid in links.items()
    }
    files.update((path, gitstore.read_blob(repo, oid)[:SNIFF_BYTES]) for path, oid in stray.items())
    parsed: dict[str, list[Document]] = {}
    docs_by_blob: dict[str, Any] = {oid: known_docs[oid] for oid in blobs.values() if oid in known_docs}
    fresh = len(blobs) - len(docs_by_blob)
    if early is not None and fresh:
        head_start = early.rows()
        docs_by_blob.update((oid, head_start[oid]) for oid in blobs.values() if oid in head_start)
    todo = [  # capped as `jobtree validate` reads: past the limit is reported, not parsed
        (path, gitstore.read_blob(repo, oid)[: MAX_FILE_BYTES + 1])
        for path, oid in blobs.items()
        if oid not in docs_by_blob
    ]
    for (path, data), rows in zip(todo, forkmap.map_chunks(parse, todo), strict=True):
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
    memo: dict[str, Any] = {}
    spec = lastvalid.keep_budgets(repo, commit, pipeline.read_spec(files, parsed, memo), files, parsed, memo)
    if fresh or trees.keys() != known_trees.keys():
        passcache.save(where, CACHE_NAME, (docs_by_blob, trees))
    return spec, len(blobs) + len(links), fresh
