"""`python -m evaluation` (what `make evaluate` runs): replay a month against Jobtree and the baselines, write the report.

Without `--trace`: the seeded month (`generate`), written to docs/evaluation/ (the committed
report's numbers and figures). With `--trace PATH` (a Helios or Philly CSV): that trace, written to
build/evaluation/<name>/. Replays run in `--workers` processes (Jobtree's are the long ones).
Writes results.md and results.json (deterministic: same inputs, same bytes), performance.md (wall
times of this machine) and the SVG figures (when matplotlib is installed: `pip install -e '.[evaluate]'`).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

from evaluation import engine, jobtree, knobs, readers, report
from evaluation.generate import Month, month
from evaluation.metrics import Summary, percentile, summarise
from evaluation.policies import Slurm, baselines
from evaluation.trace import Trace

# Jobtree as the template ships it, and the same fleet with `reservations.lottery: false` (structural
# cuts only): the month replayed whole for both, since the knob study's week is too short to show it.
JOBTREE = {"Jobtree": jobtree.Settings(), "Jobtree, lottery off": jobtree.Settings(lottery=False)}
BASELINES = ("FIFO gang", "FIFO + EASY backfill", "Slurm-like multifactor", "Kueue-like quotas")
POLICIES = (*JOBTREE, *BASELINES)


def replay(
    trace: Trace, policy: str, settings: jobtree.Settings | None = None, backfill: bool = True
) -> Summary:
    """One replay, summarised (what a worker process hands back)."""
    if policy in JOBTREE:
        summary = summarise(jobtree.play(trace, settings or JOBTREE[policy]))
        summary.policy = policy
        return summary
    chosen = (
        Slurm(trace, backfill=False)
        if not backfill
        else next(p for p in baselines(trace) if p.name == policy)
    )
    return summarise(engine.play(trace, chosen))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    began = time.perf_counter()
    try:
        if args.trace is not None:
            trace = readers.read(Path(args.trace), days=args.days, gpus=args.gpus, seed=args.seed)
            out = Path(args.out or f"build/evaluation/{trace.name}")
        else:
            trace = month(Month(seed=args.seed, days=args.days, domains=args.domains, load=args.load))
            out = Path(args.out or "docs/evaluation")
    except readers.TraceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"{trace.name}: {len(trace.jobs)} jobs on {trace.gpus} GPUs over {trace.horizon // 86400} days",
        file=sys.stderr,
    )
    short = knobs.window(trace, args.knob_days)
    points = [] if args.no_knobs else knobs.points()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        main_runs = {p: pool.submit(replay, trace, p) for p in POLICIES}
        knob_runs = {
            (pt.knob, pt.label): pool.submit(
                replay,
                short,
                "Jobtree" if pt.settings else "Slurm-like multifactor",
                pt.settings,
                pt.backfill is not False,
            )
            for pt in points
        }
        summaries = [main_runs[p].result() for p in POLICIES]
        for p, s in zip(POLICIES, summaries, strict=True):
            print(f"  {p}: {s.seconds:.0f} s", file=sys.stderr)
        studied = {k: f.result() for k, f in knob_runs.items()}
    for (name, label), s in studied.items():
        s.policy = f"{s.policy} ({name} {label})"
    if studied:
        studied.update({point: studied[ran] for point, ran in knobs.shared().items()})
    knob_values = {
        name: ([(label, studied[(name, label)]) for label, _ in values], knobs.defaults()[name])
        for name, values in knobs.values().items()
        if studied
    }
    figures = [] if args.no_figures else _figures(out, summaries, knob_values)
    (out / "results.md").write_text(_results(trace, summaries, knob_values, args.knob_days, figures))
    (out / "results.json").write_text(json.dumps(_numbers(summaries), indent=1, sort_keys=True) + "\n")
    (out / "performance.md").write_text(
        _performance(trace, summaries, [s for _, (v, _) in knob_values.items() for _, s in v])
    )
    print(f"wrote {out}/results.md in {time.perf_counter() - began:.0f} s", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evaluation", description=__doc__.splitlines()[0])
    p.add_argument("--trace", help="a Helios or Philly CSV trace to replay instead of the generated month")
    p.add_argument("--out", help="where to write (default: docs/evaluation, or build/evaluation/<trace>)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--domains", type=int, default=4, help="fabric domains of 64 GPUs in the generated fleet")
    p.add_argument("--load", type=float, default=1.0, help="x Helios's offered load (0.80)")
    p.add_argument("--gpus", type=int, help="fleet size for --trace (default: sized to the trace's work)")
    p.add_argument("--knob-days", type=int, default=7, help="days of the month each knob replay covers")
    p.add_argument("--no-knobs", action="store_true", help="replay only the five policies")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--no-figures", action="store_true", help="tables only (no matplotlib needed)")
    return p


def _figures(
    out: Path, summaries: list[Summary], knob_values: dict[str, tuple[list[tuple[str, Summary]], str]]
) -> list[str]:
    try:
        from evaluation import figures
    except ImportError:  # pragma: no cover - the figures need matplotlib
        return []
    try:
        return [p.name for p in figures.draw(out, summaries, knob_values)]
    except ImportError:
        print("matplotlib is not installed: no figures (pip install -e '.[evaluate]')", file=sys.stderr)
        return []


def _results(
    trace: Trace,
    summaries: list[Summary],
    knob_values: dict[str, tuple[list[tuple[str, Summary]], str]],
    knob_days: int,
    figures: list[str],
) -> str:
    by = {s.policy: s for s in summaries}
    parts = [
        f"# Results: {trace.name}",
        "Generated by `make evaluate` (`python -m evaluation`); the discussion is in "
        "[../evaluation.md](../evaluation.md). Same trace and seed, same file.",
        "## The month",
        "\n".join(f"- {n}" for n in trace.notes),
        f"- {len(trace.jobs)} jobs, {trace.gpus} GPUs in {len(trace.domains)} fabric domains, "
        f"{len(trace.outages)} node failures; offered work {sum(j.work for j in trace.jobs) / (trace.gpus * trace.horizon):.2f} "
        "of the month's GPU-time",
        "## Policies side by side",
        report.policies(summaries),
        "Waits are of every job but the opportunistic ones; a job never started counts with its wait "
        "so far. JCT: submission to completion, completed jobs.",
    ]
    if "Jobtree" in by and "FIFO gang" in by:
        parts += [
            "## The targets (Jobtree on this month)",
            report.target_table(
                {name: report.targets(by[name], by["FIFO gang"]) for name in JOBTREE if name in by}
            ),
            "The first column is Jobtree with the template's settings (the targets' subject); the second "
            "is the same fleet with `reservations.lottery: false`, replayed over the whole month.",
        ]
    parts += [
        "## Waits by job size", report.waits_by_size(summaries),
        "## What ended work early", report.losses(summaries),
        "Work lost to each scheduler's cuts, by what the victim was (Jobtree's ledger says who paid for "
        "the GPUs a cut ended: the run's own budget, a budget it borrowed from, or a spare's GPUs lent "
        "to opportunistic work):",
        report.victims(summaries),
        "## Each team's share of its claim", report.teams(summaries, trace),
        "## ETA accuracy",
        "\n".join(
            f"- {s.policy}: {len(s.eta_errors)} announced starts that happened, {report.pct(s.eta_within())} within "
            f"±30 min, {report.pct(s.eta_kept())} not later than announced + 30 min; median error "
            f"{report.duration(abs(percentile(s.eta_errors, 0.5)))} "
            f"({'late' if percentile(s.eta_errors, 0.5) > 0 else 'early or on time'}); {s.eta_unstarted} announced starts "
            "still waiting at the month's end"
            for s in summaries if s.eta_errors or s.eta_unstarted
        ),
        "## What each baseline leaves out", report.leaves_out(summaries),
    ]  # fmt: skip
    if knob_values:
        parts.append(f"## Tuning knobs (the first {knob_days} days of the month)")
        parts += [report.knob(name, values, default) for name, (values, default) in knob_values.items()]
    if figures:
        parts += ["## Figures", "\n".join(f"![{f}]({f})" for f in figures)]
    parts += ["## Where the numbers come from", report.sources_table()]
    return "\n\n".join(parts) + "\n"


def _numbers(summaries: list[Summary]) -> dict[str, object]:
    """The summaries without the long lists and timings: what the report's tables say, for scripts."""
    keep: dict[str, object] = {}
    for s in summaries:
        d = asdict(s)
        for k in ("waits", "by_size", "opportunistic_waits", "jct", "eta_errors", "hourly", "seconds", "decisions",
                  "decision_mean", "decision_p99", "decision_max", "notes"):  # fmt: skip
            d.pop(k)
        d["by_victim"] = {
            f"{kind} | {paid or 'not recorded'} | {'checkpoints' if checkpoints else 'no checkpoint'}": v
            for (kind, paid, checkpoints), v in sorted(s.by_victim.items())
        }
        d["wait_p50"], d["wait_p90"], d["wait_p99"] = (percentile(s.waits, q) for q in (0.5, 0.9, 0.99))
        d["eta_within_30m"] = s.eta_within()
        keep[s.policy] = d
    return keep


def _performance(trace: Trace, summaries: list[Summary], knob_runs: list[Summary]) -> str:
    return "\n\n".join([
        "# Replay performance",
        f"Measured by `make evaluate` on {platform.node() and 'this machine'} ({platform.machine()}, "
        f"Python {platform.python_version()}): wall time of each replay of {trace.name} ({trace.gpus} GPUs), "
        "events (arrivals, completions, node failures and repairs) per second, and each pass's time "
        "(Jobtree: one reconcile pass; baselines: one scheduling round). Changes from run to run.",
        report.performance(summaries),
        "Knob replays (Jobtree and the Slurm-like baseline on the shorter window):",
        report.performance(list({id(s): s for s in knob_runs}.values())) if knob_runs else "none",
    ]) + "\n"  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
