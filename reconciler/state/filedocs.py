"""The YAML documents of a commit's owned files, parsed once per blob id (step 7 of a pass: what apply reads).

Apply reads every mirrored file of the commit it applies (`passes.apply.records_of`): at 10,000
nodes that is thousands of state and rendered files, and parsing them was the largest share of
an unchanged pass's own CPU after the cluster's lists. A file's documents depend on its bytes
alone, so they are kept by blob id in the clone's cache (`perf.diskcache`, under the Git dir):
applying the same commit again, or one that shares most of its files, parses only what is new.
The cache holds the files of the last read alone, so it never outgrows one commit. Any miss (no
cache, another format, a file it does not hold) is a parse, as `state.codec.documents` does it;
documents marshal cannot keep are parsed every time. Reads Git; writes only the cache.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reconciler.git import read as gitread
from reconciler.perf import diskcache
from reconciler.state import codec as statefiles

CACHE_NAME = "file-documents"


def parse(data: bytes) -> list[Any]:
    """A file's documents, as the cache keeps them (`state.codec.documents`)."""
    return statefiles.documents(data)


def documents(repo: gitread.Repository, rev: str, prefixes: Iterable[str]) -> dict[str, list[Any]]:
    """`{path: its YAML documents}` of every `.yaml` file under `prefixes` at `rev`."""
    where = gitread.cache_directory(repo)
    held = diskcache.load(where, CACHE_NAME)
    if not isinstance(held, dict):
        held = {}
    out: dict[str, list[Any]] = {}
    kept: dict[str, list[Any]] = {}
    for path, oid in gitread.list_blobs(repo, rev, prefixes).items():
        if not path.endswith(".yaml"):
            continue
        docs = held.get(oid)
        if not isinstance(docs, list):
            docs = parse(gitread.read_blob(repo, oid))
        out[path] = kept[oid] = docs
    if kept.keys() != held.keys():
        diskcache.save(where, CACHE_NAME, kept)
    return out
