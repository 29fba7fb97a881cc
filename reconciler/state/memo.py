"""Pass memo (steps 1 and 5 of a pass): the owned files of one commit, decoded, and what wrote them.

A pass needs the `state/` its branch head holds as a FleetState (step 1), and, to render only what
changed (step 5), which file came from which source. Decoding 10,000 YAML state files takes the
better part of ten seconds; the memo the previous pass left in the cache (`perf.diskcache`) holds the
same thing as rows, keyed by the ids of the owned trees it describes, and loads in a fraction of
a second. A memo whose trees are not the head's is never used; `read` then decodes from Git.

Per owned file the memo keeps its blob id; per state file the rows `state.codec.decode` takes from
it; and, only where this code wrote and checked the bytes itself, the source (`state.codec` key) of
a state file, a fingerprint of a picture's source, or a digest of what a rendered file is made of
(`state.rendering`): an equal source means equal bytes, so the file need not be written (or
rendered) again. Reads Git, never writes it.
"""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from planner.world import FleetState
from reconciler.git import read as gitread
from reconciler.perf import diskcache as passcache
from reconciler.perf import forkmap
from reconciler.state import codec as statefiles

CACHE_NAME = "state-memo"


@dataclass(slots=True)
class Memo:
    trees: tuple[tuple[str, str], ...]  # (owned prefix, tree id or "") of the commit described
    blobs: dict[str, str]  # every owned file -> blob id
    pieces: dict[str, tuple[str, Any]]  # every state file `decode` reads -> (kind, rows)
    keys: dict[str, Any] = field(default_factory=dict)  # state file -> the source its bytes were written from
    prints: dict[str, bytes] = field(default_factory=dict)  # picture or rendered file -> its inputs' digest
    loaded: dict[str, list[Any]] = field(default_factory=dict)  # not cached: documents `read` parsed

    def state(self) -> FleetState:
        return statefiles.assemble(self.pieces)

    def data(self) -> tuple[Any, ...]:
        return (self.trees, self.blobs, self.pieces, self.keys, self.prints)


def fingerprint(value: Any) -> bytes | None:
    """A digest of a manifest: equal digests mean equal values (None: not plain data, never equal).

    Marshal format 0 writes a value alone: later formats refer back to objects seen before (by
    reference count) and mark interned strings, so equal manifests built in another process (a
    render worker, the next pass) got other bytes, and every rendered file was written again on
    every pass. Equal values built in another key order still get different digests; that only
    costs a rewrite whose bytes then turn out unchanged.
    """
    try:
        return hashlib.blake2b(marshal.dumps(value, 0), digest_size=16).digest()
    except ValueError:
        return None


def cached(repo: gitread.Repository, commit: gitread.Commit) -> Memo | None:
    """The memo the last pass saved, if it describes `commit`'s owned trees (else None)."""
    data = passcache.load(gitread.cache_directory(repo), CACHE_NAME)
    try:
        trees, blobs, pieces, keys, prints = data  # type: ignore[misc]  # a miss (None) or damaged data: caught below
        memo = Memo(tuple(tuple(t) for t in trees), blobs, pieces, keys, prints)
    except (TypeError, ValueError):
        return None
    return memo if memo.trees == gitread.owned_trees(repo, commit) else None


def save(where: Path, memo: Memo) -> bool:
    """Keep `memo` in the cache directory `where` (`git.read.cache_directory(repo)`), for the next pass."""
    return passcache.save(where, CACHE_NAME, memo.data())


def read(repo: gitread.Repository, commit: gitread.Commit, documents: bool = True) -> Memo:
    """Decode the owned files of `commit` from Git (no sources known: every file counts as unverified).

    `documents=False`: the memo keeps no parsed documents (`Memo.loaded`), for a caller that only
    plans from the state (`jobtree plan`): the forked decoders then send back only the rows."""
    blobs = gitread.list_blobs(repo, str(commit.id), gitread.OWNED_PREFIXES)
    todo = []
    for path, oid in blobs.items():
        kind = statefiles.kind_of(path)
        if kind is not None and kind not in statefiles.UNDECODED:
            todo.append((path, kind, gitread.read_blob(repo, oid)))
    pieces: dict[str, tuple[str, Any]] = {}
    loaded: dict[str, list[Any]] = {}
    decoded = forkmap.map_chunks(partial(_decode, keep=documents), todo)
    for (path, kind, _), (docs, rows) in zip(todo, decoded, strict=True):
        pieces[path] = (kind, rows)
        if docs is not None:
            loaded[path] = docs
    return Memo(gitread.owned_trees(repo, commit), blobs, pieces, loaded=loaded)


def _decode(items: Sequence[tuple[str, str, bytes]], keep: bool = True) -> list[tuple[list[Any] | None, Any]]:
    """Per state file, its YAML documents (None unless `keep`) and the rows `decode` takes from them."""
    out = []
    for _, kind, data in items:
        docs = statefiles.documents(data)
        out.append((docs if keep else None, statefiles.piece(kind, _as_decode_reads(kind, docs, data))))
    return out


def _as_decode_reads(kind: str, docs: list[Any], data: bytes) -> Any:
    """The object `state.codec.load` gives for a file whose documents are `docs`."""
    if kind == statefiles.LEASES:
        return [o for o in docs if o]
    if len(docs) > 1:
        return statefiles.load(kind, data)  # raises as `decode` does: one document expected
    return docs[0] if docs else None
