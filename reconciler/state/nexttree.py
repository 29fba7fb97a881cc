"""The next tree (step 5 of a pass): a plan becomes the files of `state/` and `rendered/`, and whether anything meaningful changed.

Renders only what changed (a file whose source the memo shows unchanged keeps its blob), and
decides whether a decision changed: GPU-hour meters and `asOf` move on every pass, so they alone
never make a commit; they are written with the next meaningful change, and metering from the last
committed `asOf` is exact because no lease opened or closed in between (that would be a change).
Files someone changed by hand since jobtree's last state commit are handed in and written back as
jobtree computes them (a meaningful change). The pictures (`state/fleet.svg`, `state/timeline.svg`)
are drawn from the decisions, so they never make a commit by themselves either: they change with
the decisions they show, and otherwise ride along with the next meaningful change. Returns a frozen `NextTree`; the commit message is
`message`'s, writing the commit `reconciler.git.write`'s.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from planner import manifests, records
from planner.plan import Plan
from reconciler.git import packs as gitpack
from reconciler.perf import forkmap
from reconciler.state import codec as statefiles
from reconciler.state import layout, rendering
from reconciler.state import memo as passmemo

VOLATILE = records.CLOCK_FIELDS  # fields that change with the clock alone, not with a decision
LEDGER = layout.LEDGER
_BLOB_MODE = 0o100644  # a regular file, as Git writes it


def _same_decisions(old: bytes, new: bytes) -> bool:
    try:
        a = statefiles.documents(old)
        b = statefiles.documents(new)
    except yaml.YAMLError:
        return False  # a damaged state file is always worth rewriting
    return bool(records.without_clock(a) == records.without_clock(b))


@dataclass(frozen=True, slots=True)
class NextTree:
    blobs: dict[str, str]  # every file under state/ and rendered/ the next commit holds -> blob id
    contents: dict[str, bytes]  # blob id -> bytes, for the files this pass wrote anew
    meaningful: list[str]  # paths whose decisions changed, or written back (empty: commit nothing)
    memo: passmemo.Memo  # the next tree: what to cache once it is committed
    kept: passmemo.Memo  # the current tree, plus what this pass checked: what to cache when not
    restored: list[str] = field(default_factory=list)  # files changed by hand, written back
    problems: list[str] = field(default_factory=list)  # §4.9: pods rendered this pass that break it

    def changed_files(self) -> int:
        """Owned files the next tree adds, removes or changes (meters and `asOf` included)."""
        before, after = self.kept.blobs, self.blobs
        changed = {p for p, blob in after.items() if before.get(p) != blob} | (before.keys() - after.keys())
        return len(changed | set(self.restored))


_MISSING = object()


@dataclass(frozen=True, slots=True)
class Observed:
    """What a pass observed of configured clusters, to commit with its decisions (`state.observed`)."""

    files: Mapping[str, bytes] = field(default_factory=dict)  # state/observed/<cluster>.yaml -> bytes
    rows: Sequence[tuple[int, dict[str, Any]]] = ()  # ledger rows (workload outcomes), written first


def next_tree(
    plan: Plan,
    current: passmemo.Memo,
    read: Callable[[str], bytes],
    hand_edited: Mapping[str, tuple[str, int] | None] | None = None,
    observed: Observed | None = None,
    origins: Mapping[str, str] | None = None,
) -> NextTree:
    """The owned files after this plan, given the current tree's memo and a blob reader.

    `hand_edited`: owned files that differ between the commit planned from and the branch head
    (changed by hand since), with what the head holds there (blob id and file mode; None: nothing).
    Each one the next tree holds otherwise is written back and counts as a meaningful change.
    `observed`: the observed clusters' files (every one the next tree holds; a change is meaningful:
    they hold nothing that moves without one) and ledger rows; none with the embedded cluster.

    Ledger days get this pass's events appended; a frozen run's pods and Service (its spec is
    invalid now) stay as its file last held them, rendered from its last valid spec;
    every other owned file is exactly `encode(plan)`. A file whose source the memo shows unchanged
    keeps its blob without being written again; the rest are written in parallel when there are
    many (`forkmap`). `origins`: each run's spec file blob (`validated.Spec.origins`): a run whose
    pods' inputs the memo shows unchanged is not rendered at all (`state.rendering`); the pods of
    those rendered are checked against their leases, and `NextTree.problems` says what breaks §4.9.
    """
    old_blobs = current.blobs
    blobs: dict[str, str] = {}
    pieces: dict[str, tuple[str, Any]] = {}
    keys: dict[str, Any] = {}
    prints: dict[str, bytes] = {}
    todo: list[tuple[str, str, Any]] = []
    by_run = rendering.open_by_run(plan)
    digests = rendering.inputs(plan, by_run, origins or {})
    held: dict[str, list[str]] = defaultdict(list)  # run -> its rendered files in the current tree
    for path in old_blobs:
        if path.startswith(layout.RENDERED):
            held[layout.rendered_run(path) or ""].append(path)
    again: list[str] = []  # runs rendered again: their inputs changed, or have no digest
    for run, leases in by_run.items():
        digest, paths = digests[run], held.get(run, [])
        if (
            digest is not None
            and all(current.prints.get(path) == digest for path in paths)
            and set(paths) == rendering.files_of(run, leases, plan)
        ):
            for path in paths:
                blobs[path], prints[path] = old_blobs[path], digest
        else:
            again.append(run)
    pods, problems = rendering.render(plan, by_run, again)
    for path, (kind, key) in statefiles.sources(plan, pods).items():
        old = old_blobs.get(path)
        if old is not None:
            if kind == statefiles.RENDERED:
                if plan.frozen and manifests.run_of(key[0]) in plan.frozen:
                    key = statefiles.as_last_rendered(key, read(old))  # rendered from no spec
            elif kind in _PRINTED:
                fp = passmemo.fingerprint(key)
                if fp is not None and current.prints.get(path) == fp:
                    blobs[path], prints[path] = old, fp
                    continue
            elif current.keys.get(path, _MISSING) == key:
                blobs[path], keys[path], pieces[path] = old, key, current.pieces[path]
                continue
        todo.append((path, kind, key))
    contents: dict[str, bytes] = {}
    changed: list[str] = []
    kept_keys, kept_prints = dict(current.keys), dict(current.prints)
    for (path, kind, key), (data, blob, rows, fp) in zip(todo, forkmap.map_chunks(_write, todo), strict=True):
        old = old_blobs.get(path)
        blobs[path] = blob
        if kind == statefiles.RENDERED:
            fp = digests.get(layout.rendered_run(path) or "")
        if kind in _PRINTED:
            if fp is not None:
                prints[path] = fp
        else:  # rows equal to the source are kept as the same object: the cache stores it once
            keys[path], pieces[path] = key, (kind, key if rows == key else rows)
        if blob == old:  # same bytes: what this pass knows about the file holds for the current tree too
            if kind not in _PRINTED:
                kept_keys[path] = key
            elif fp is not None:
                kept_prints[path] = fp
            continue
        contents[blob] = data
        if kind in statefiles.PICTURES:
            continue  # drawn from the decisions: it rides along with the next commit that changes one
        if old is None or kind == statefiles.RENDERED or not _same(current, path, kind, key, data, read):
            changed.append(path)
    seen = observed or Observed()
    for path, data in sorted(seen.files.items()):
        blob = gitpack.object_id("blob", data).hex()
        blobs[path] = blob
        if blob != old_blobs.get(path):
            contents[blob] = data
            changed.append(path)
    for path, blob in old_blobs.items():
        if path.startswith(LEDGER):
            blobs[path] = blob
        elif path not in blobs:
            changed.append(path)  # removed
    for path, lines in statefiles.ledger_lines(plan, seen.rows).items():
        data = (read(blobs[path]) if path in blobs else b"") + lines
        blob = gitpack.object_id("blob", data).hex()
        if blob != blobs.get(path):
            blobs[path], contents[blob] = blob, data
            changed.append(path)
    memo = passmemo.Memo((), blobs, pieces, keys, prints)
    kept = passmemo.Memo(current.trees, old_blobs, current.pieces, kept_keys, kept_prints)
    restored = _written_back(blobs, hand_edited or {})
    return NextTree(blobs, contents, sorted({*changed, *restored}), memo, kept, restored, problems)


def _written_back(blobs: Mapping[str, str], hand_edited: Mapping[str, tuple[str, int] | None]) -> list[str]:
    """Hand-edited files the next tree puts back as jobtree computes them (in the order given)."""

    def written(path: str) -> tuple[str, int] | None:
        blob = blobs.get(path)
        return (blob, _BLOB_MODE) if blob is not None else None

    return [path for path, held in hand_edited.items() if written(path) != held]


def _write(items: Sequence[tuple[str, str, Any]]) -> list[tuple[bytes, str, Any, bytes | None]]:
    """(bytes, blob id, decoded rows of a state file, fingerprint of a manifest) per file to write."""
    out = []
    for _, kind, key in items:
        obj = statefiles.file_object(kind, key)
        data = statefiles.file_bytes(kind, obj)
        blob = gitpack.object_id("blob", data).hex()
        if kind in statefiles.PICTURES:
            out.append((data, blob, None, passmemo.fingerprint(key)))
        elif kind == statefiles.RENDERED:
            out.append((data, blob, None, None))  # told by its inputs' digest (`rendering`)
        else:
            out.append((data, blob, statefiles.piece(kind, obj), None))
    return out


def _same(
    current: passmemo.Memo, path: str, kind: str, key: Any, data: bytes, read: Callable[[str], bytes]
) -> bool:
    """Whether a rewritten state file holds the same decisions (only meters and `asOf` moved)."""
    old_key = current.keys.get(path, _MISSING)
    if old_key is not _MISSING:
        if kind in _NO_VOLATILE:
            return False  # its bytes changed, so its source did, and every field of it is a decision
        return _same_stable(statefiles.file_object(kind, old_key), statefiles.file_object(kind, key))
    obj = statefiles.file_object(kind, key)
    if path in current.loaded:
        return _same_stable(current.loaded[path], obj if kind == statefiles.LEASES else [obj])
    return _same_decisions(read(current.blobs[path]), data)


# Kinds whose unchanged files are told by a fingerprint of their source (the memo keeps no copy).
_PRINTED = statefiles.PICTURES | {statefiles.RENDERED}

# Kinds whose files hold no VOLATILE field (tests/reconciler/state/test_statefiles.py checks it).
_NO_VOLATILE = frozenset({statefiles.LEASES, statefiles.RESERVATION})


def _same_stable(a: Any, b: Any) -> bool:
    """`without_clock(a) == without_clock(b)`, without building either."""
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return False
        keys = {k for k in a if k not in VOLATILE}
        return keys == {k for k in b if k not in VOLATILE} and all(_same_stable(a[k], b[k]) for k in keys)
    if isinstance(b, dict):
        return False
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same_stable, a, b))
    if isinstance(b, list):
        return False
    return bool(a == b)
