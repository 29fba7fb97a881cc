"""`python -m evaluation.scaling`: how fast Jobtree's simulator replays a trace as the fleet grows.

Replays the first `--hours` of the generated month at each fleet size (same per-GPU load, so jobs
and events grow with the fleet) and prints one Markdown table row per size: events, passes, wall
time, events per second, pass time (mean, p99, max). A measurement, not a test: nothing asserts
on it (performance is measured, not asserted), and it is not part of `make evaluate` (the largest
sizes take long).
"""

from __future__ import annotations

import argparse
import sys

from evaluation import jobtree, knobs, report
from evaluation.generate import Month, month
from evaluation.metrics import summarise


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evaluation.scaling", description=__doc__.splitlines()[0])
    p.add_argument(
        "--domains", type=int, nargs="+", default=[4, 16, 64], help="fleet sizes, in domains of 64 GPUs"
    )
    p.add_argument("--hours", type=int, default=24)
    args = p.parse_args(argv)
    rows = []
    for domains in args.domains:
        trace = knobs.window(month(Month(domains=domains, days=-(-args.hours // 24))), args.hours / 24)
        s = summarise(jobtree.play(trace))
        rows.append(s)
        print(f"{trace.gpus} GPUs: {s.events} events in {s.seconds:.0f} s", file=sys.stderr)
    print(report.performance(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
