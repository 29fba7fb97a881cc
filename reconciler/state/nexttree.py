"""Git sink (stage 5 of a pass): a plan becomes the next tree of `state/` and `rendered/`, or nothing.

Decides whether a plan changed anything meaningful and words the commit; `gitstore` writes the
commit, `reconciliation` drives the loop. GPU-hour meters and `asOf` move on every pass, so they alone
never make a commit: they are written with the next meaningful change, and metering from the last
committed `asOf` is exact because no lease opened or closed in between (that would be a change).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from planner import manifests
from planner.plan import Plan
from reconciler.git import packs as gitpack
from reconciler.perf import forkmap
from reconciler.state import codec as statefiles
from reconciler.state import memo as passmemo
from schemas.common import format_time

# Fields that change with the clock alone, not with a decision.
VOLATILE = frozenset(
    {"asOf", "meters", "hours", "ownedGPUHours", "borrowedGPUHours", "consumedGPUHours", "spareGPUHours"}
)
LEDGER = "state/ledger/"
MAX_MESSAGE_LINES = 40


def _stable(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _stable(v) for k, v in data.items() if k not in VOLATILE}
    if isinstance(data, list):
        return [_stable(v) for v in data]
    return data


def _same_decisions(old: bytes, new: bytes) -> bool:
    try:
        a = statefiles.documents(old)
        b = statefiles.documents(new)
    except yaml.YAMLError:
        return False  # a damaged state file is always worth rewriting
    return bool(_stable(a) == _stable(b))


@dataclass(slots=True)
class NextTree:
    blobs: dict[str, str]  # every file under state/ and rendered/ the next commit holds -> blob id
    contents: dict[str, bytes]  # blob id -> bytes, for the files this pass wrote anew
    meaningful: list[str]  # paths whose decisions changed (empty: commit nothing)
    memo: passmemo.Memo  # the next tree: what to cache once it is committed
    kept: passmemo.Memo  # the current tree, plus what this pass checked: what to cache when not


_MISSING = object()


def next_tree(plan: Plan, current: passmemo.Memo, read: Callable[[str], bytes]) -> NextTree:
    """The owned files after this plan, given the current tree's memo and a blob reader.

    Ledger days get this pass's events appended; a frozen run's pods and Service (its spec is
    invalid now) stay as its file last held them, rendered from its last valid spec;
    every other owned file is exactly `encode(plan)`. A file whose source the memo shows unchanged
    keeps its blob without being written again; the rest are written in parallel when there are
    many (`forkmap`).
    """
    old_blobs = current.blobs
    blobs: dict[str, str] = {}
    pieces: dict[str, tuple[str, Any]] = {}
    keys: dict[str, Any] = {}
    prints: dict[str, bytes] = {}
    todo: list[tuple[str, str, Any]] = []
    for path, (kind, key) in statefiles.sources(plan).items():
        old = old_blobs.get(path)
        if old is not None:
            if kind == statefiles.RENDERED:
                if plan.frozen and manifests.run_of(key[0]) in plan.frozen:  # rendered from no spec
                    key = statefiles.as_last_rendered(key, read(old))
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
            if fp is not None:
                prints[path] = fp
        else:  # rows equal to the source are kept as the same object: the cache stores it once
            keys[path], pieces[path] = key, (kind, key if rows == key else rows)
        if blob == old:  # same bytes: what this pass knows about the file holds for the current tree too
            if kind != statefiles.RENDERED:
                kept_keys[path] = key
            elif fp is not None:
                kept_prints[path] = fp
            continue
        contents[blob] = data
        if old is None or kind == statefiles.RENDERED or not _same(current, path, kind, key, data, read):
            changed.append(path)
    for path, blob in old_blobs.items():
        if path.startswith(LEDGER):
            blobs[path] = blob
        elif path not in blobs:
            changed.append(path)  # removed
    for path, lines in statefiles.ledger_lines(plan).items():
        data = (read(blobs[path]) if path in blobs else b"") + lines
        blob = gitpack.object_id("blob", data).hex()
        if blob != blobs.get(path):
            blobs[path], contents[blob] = blob, data
            changed.append(path)
    memo = passmemo.Memo((), blobs, pieces, keys, prints)
    kept = passmemo.Memo(current.trees, old_blobs, current.pieces, kept_keys, kept_prints)
    return NextTree(blobs, contents, sorted(changed), memo, kept)


def _write(items: Sequence[tuple[str, str, Any]]) -> list[tuple[bytes, str, Any, bytes | None]]:
    """(bytes, blob id, decoded rows of a state file, fingerprint of a manifest) per file to write."""
    out = []
    for _, kind, key in items:
        obj = statefiles.file_object(kind, key)
        data = statefiles.file_bytes(kind, obj)
        blob = gitpack.object_id("blob", data).hex()
        if kind == statefiles.RENDERED:
            out.append((data, blob, None, passmemo.fingerprint(key)))
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


# Kinds whose files hold no VOLATILE field (tests/test_statefiles.py checks it).
_NO_VOLATILE = frozenset({statefiles.LEASES, statefiles.RESERVATION})


def _same_stable(a: Any, b: Any) -> bool:
    """`_stable(a) == _stable(b)`, without building either."""
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


def summary(plan: Plan, meaningful: Sequence[str] = ()) -> list[str]:
    """One line per decision kind, then the runs concerned: what a reviewer reads in `git log`.

    `meaningful`: the paths the commit changes, for running runs whose pods are rendered anew."""
    started: Counter[str] = Counter()
    swapped: set[str] = set()
    ended: dict[str, set[str]] = {}
    for ev in plan.events:
        if ev.event == "Start" and ev.reason == "Swap":
            swapped.add(ev.lease.run)  # a group moved onto its spare: neither a start nor growth
        elif ev.event == "Start" and ev.lease.role in ("Active", "Borrowed"):
            started[ev.lease.run] += ev.lease.gpus
        elif ev.event == "End":
            ended.setdefault(ev.reason.split("(")[0], set()).add(ev.lease.run)
    waiting = {k: r for k, r in plan.state.reservations.items() if r.state == "Pending"}
    reserved = sorted(waiting.keys() - plan.waiting_before)  # by this pass
    unfunded, refunded = _funding_changes(plan)
    updated = _rendered_anew(plan, meaningful)
    lines: list[str] = []
    if started:
        lines.append(f"started or grew {_runs(len(started))} ({sum(started.values())} GPUs)")
    if swapped:
        lines.append(f"swapped {_runs(len(swapped))} onto hot spares")
    for reason, runs in sorted(ended.items()):
        lines.append(f"{reason}: {_runs(len(runs))}")
    if unfunded:
        lines.append(f"unfunded: {_runs(len(unfunded))} (running, charged to nobody, reclaimed first)")
    if refunded:
        lines.append(f"funded again: {_runs(len(refunded))}")
    if reserved:
        also = f" ({len(waiting)} waiting)" if len(waiting) > len(reserved) else ""
        lines.append(f"reserved {_runs(len(reserved))}{also}")
    elif waiting:
        lines.append(f"{_runs(len(waiting))} waiting")
    if updated:
        lines.append(f"rendered pods anew for {_runs(len(updated))} (no GPU moved)")
    details = [f"{run} +{gpus} GPUs" for run, gpus in sorted(started.items())]
    details += [f"{run} swapped to spare" for run in sorted(swapped)]
    for reason, runs in sorted(ended.items()):
        details += [f"{run} {reason}" for run in sorted(runs)]
    details += [f"{run} unfunded ({_groups(n)})" for run, n in sorted(unfunded.items())]
    details += [f"{run} funded again ({_groups(n)})" for run, n in sorted(refunded.items())]
    details += [
        f"{run} reserved, ETA {format_time(waiting[run].earliest_start)}: {waiting[run].reason}"
        for run in reserved
    ]
    details += [f"{run} pods rendered anew" for run in updated]
    if len(details) > MAX_MESSAGE_LINES:
        details = details[:MAX_MESSAGE_LINES] + [f"... and {len(details) - MAX_MESSAGE_LINES} more"]
    return lines + details


def _rendered_anew(plan: Plan, meaningful: Sequence[str]) -> list[str]:
    """Runs whose rendered pods changed though no lease of theirs moved: their template (image,
    command, env) did, or their nodes' cluster."""
    moved = {ev.lease.run for ev in plan.events}
    paths = (p.split("/") for p in meaningful if p.startswith("rendered/"))
    runs = {f"{parts[2]}/{parts[3].removesuffix('.yaml')}" for parts in paths if len(parts) == 4}
    return sorted(runs - moved)


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _groups(n: int) -> str:
    return f"{n} group" if n == 1 else f"{n} groups"


def _funding_changes(plan: Plan) -> tuple[Counter[str], Counter[str]]:
    """Groups still running that this pass left charged to nobody, and those funded again, per run."""
    running = plan.running_groups
    after, before = plan.state.unfunded & running, plan.unfunded_before & running
    return Counter(run for run, _ in after - before), Counter(run for run, _ in before - after)
