"""Git sink (stage 5 of a pass): a plan becomes the next tree of `state/` and `rendered/`, or nothing.

Decides whether a plan changed anything meaningful and words the commit; `gitstore` writes the
commit, `reconcile` drives the loop. GPU-hour meters and `asOf` move on every pass, so they alone
never make a commit: they are written with the next meaningful change, and metering from the last
committed `asOf` is exact because no lease opened or closed in between (that would be a change).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pygit2
import yaml

from planner.plan import Plan
from reconciler import statefiles

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
        a = list(yaml.load_all(old, Loader=statefiles._Loader))
        b = list(yaml.load_all(new, Loader=statefiles._Loader))
    except yaml.YAMLError:
        return False  # a damaged state file is always worth rewriting
    return bool(_stable(a) == _stable(b))


@dataclass(slots=True)
class NextTree:
    files: dict[str, bytes]  # every file under state/ and rendered/ the next commit holds
    meaningful: list[str]  # paths whose decisions changed (empty: commit nothing)


def next_tree(plan: Plan, current: Mapping[str, str], read: Callable[[str], bytes]) -> NextTree:
    """The owned files after this plan, given the current `{path: blob id}` and a blob reader.

    Ledger days get this pass's events appended; every other owned file is exactly `encode(plan)`.
    """
    files = statefiles.encode(plan)
    for path, blob in current.items():
        if path.startswith(LEDGER):
            files[path] = read(blob)
    for path, lines in statefiles.ledger_lines(plan).items():
        files[path] = files.get(path, b"") + lines
    changed: list[str] = []
    for path in sorted(set(files) | set(current)):
        new = files.get(path)
        old = current.get(path)
        if new is not None and old is not None and str(pygit2.hash(new)) == old:
            continue
        if new is None or old is None or path.startswith(LEDGER):
            changed.append(path)
        elif not (path.startswith("state/") and _same_decisions(read(old), new)):
            changed.append(path)
    return NextTree(files, changed)


def summary(plan: Plan) -> list[str]:
    """One line per decision kind, then the runs concerned: what a reviewer reads in `git log`."""
    started: Counter[str] = Counter()
    ended: dict[str, set[str]] = {}
    for ev in plan.events:
        if ev.event == "Start" and ev.lease.role in ("Active", "Borrowed"):
            started[ev.lease.run] += ev.lease.gpus
        elif ev.event == "End":
            ended.setdefault(ev.reason.split("(")[0], set()).add(ev.lease.run)
    reserved = sorted(k for k, r in plan.state.reservations.items() if r.state == "Pending")
    lines: list[str] = []
    if started:
        lines.append(f"started or grew {len(started)} runs ({sum(started.values())} GPUs)")
    for reason, runs in sorted(ended.items()):
        lines.append(f"{reason}: {len(runs)} runs")
    if reserved:
        lines.append(f"{len(reserved)} runs reserved")
    details = [f"{run} +{gpus} GPUs" for run, gpus in sorted(started.items())]
    for reason, runs in sorted(ended.items()):
        details += [f"{run} {reason}" for run in sorted(runs)]
    if len(details) > MAX_MESSAGE_LINES:
        details = details[:MAX_MESSAGE_LINES] + [f"... and {len(details) - MAX_MESSAGE_LINES} more"]
    return lines + details
