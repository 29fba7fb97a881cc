"""One long-lived reconciler's passes, timed one by one: `python -m bench.longlived REPO --now T [--apply]`.

The process `jobtree reconcile --interval` is, at a fixed instant: one `Kept` with its `Watches`
(the configured clusters' nodes, pods, mirrors and Services kept by watch between passes),
`reconcile_once` with it, pass after pass, the caches closed at the end. (`--interval` follows the
clock and refuses `--now`; a bench replays one instant so that every pass after the first has
nothing to change.) The collector as the command line sets it (`reconciler.cli.main`'s thresholds,
each pass in `batchgc.paused`, its apply included, as the loop wraps it). A pass runs each time a
line arrives on stdin; after each, one JSON line on stdout: its wall and CPU seconds (the
process's, the watch threads' included), the process's peak RSS so far (`VmHWM`), what it
committed and wrote, whether the clusters were read from their watches (and why any was listed),
and its progress lines with the seconds since it began. Ends at EOF.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from collections.abc import Callable

from reconciler.cluster.watched import Watches
from reconciler.passes.reconcile import Kept, reconcile_once
from reconciler.perf import batchgc
from schemas.common import parse_time


def peak_mb() -> float:
    """The process's peak resident set so far, in MB (`ru_maxrss`: on Linux the kernel's VmHWM)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stamped(lines: list[str], began: float) -> Callable[[str], None]:
    """A pass's `say`: each progress line kept with the seconds since `began`."""
    return lambda text: lines.append(f"[{time.perf_counter() - began:6.2f}s] {text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.longlived", description=__doc__.splitlines()[0])
    parser.add_argument("repo")
    parser.add_argument("--now", required=True)
    parser.add_argument("--apply", action="store_true")
    args = parser.parse_args(argv)
    now = parse_time(args.now)
    gc.set_threshold(100_000, 50, 100)  # as `reconciler.cli.main` sets it for every verb
    kept = Kept(watches=Watches())
    notes: list[str] = []
    try:
        for _ in sys.stdin:
            notes.clear()
            began, spent = time.perf_counter(), cpu()
            with batchgc.paused():
                outcome = reconcile_once(
                    args.repo, now=now, apply=args.apply, kept=kept, say=stamped(notes, began)
                )
            applied = outcome.applied.clusters if outcome.applied is not None else []
            print(json.dumps({
                "seconds": round(time.perf_counter() - began, 2), "cpu": round(cpu() - spent, 2),
                "rssMB": peak_mb(), "commit": outcome.commit, "writes": sum(a.writes for a in applied),
                "failed": outcome.applied.failed if outcome.applied is not None else [],
                "watched": any("from its watch" in n for n in notes),
                "listed": [w for w in outcome.warnings if "listed its nodes and pods" in w]
                + [f"{a.cluster}: {a.listed}" for a in applied if a.listed],
                "lines": notes,  # its progress lines, each with the seconds since it began
            }), flush=True)  # fmt: skip
    finally:
        assert kept.watches is not None
        kept.watches.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
