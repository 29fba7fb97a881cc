"""The report's tables, as Markdown: the policies side by side, waits by size, the targets, the knobs, the sources.

Pure text from `metrics.Summary` values; deterministic (no clock, no timings: those go to
`performance`, which changes from machine to machine). The figures are `figures`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evaluation import sources
from evaluation.metrics import SIZES, Summary, percentile
from evaluation.trace import Trace

HOUR = 3600


@dataclass(frozen=True, slots=True)
class Target:
    what: str
    want: str
    got: str
    met: bool


def duration(seconds: float) -> str:
    """Seconds as a short human duration: 0s, 45s, 12m, 3.4h, 2.1d."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < HOUR:
        return f"{seconds / 60:.0f}m"
    if seconds < 48 * HOUR:
        return f"{seconds / HOUR:.1f}h"
    return f"{seconds / 86400:.1f}d"


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def policies(summaries: Sequence[Summary]) -> str:
    rows = []
    for s in summaries:
        team, low = s.lowest_team()
        rows.append([
            s.policy,
            pct(s.useful),
            pct(s.allocated),
            duration(percentile(s.waits, 0.5)),
            duration(percentile(s.waits, 0.9)),
            duration(percentile(s.waits, 0.99)),
            str(s.never_started),
            duration(percentile(s.jct, 0.5)),
            duration(percentile(s.jct, 0.9)),
            f"{s.cuts}",
            f"{s.lost_cuts:,.0f} ({pct(s.cut_share())})",
            f"{s.failures} / {s.lost_failures:,.0f}",
            f"{low:.2f} ({team})",
            f"{s.jain:.3f}",
            pct(s.eta_within()),
        ])  # fmt: skip
    header = [
        "policy", "useful util.", "allocated util.", "wait p50", "wait p90", "wait p99", "never started",
        "JCT p50", "JCT p90", "cuts", "GPU-h lost to cuts (of held)", "node failures / GPU-h lost",
        "lowest team share", "Jain (teams)", "ETA within ±30m",
    ]  # fmt: skip
    return table(rows, header)


def waits_by_size(summaries: Sequence[Summary]) -> str:
    rows = []
    for s in summaries:
        for name, _, _ in SIZES:
            w = s.by_size.get(name, [])
            rows.append([
                s.policy, name, str(len(w)), duration(percentile(w, 0.5)), duration(percentile(w, 0.9)),
                duration(percentile(w, 0.99)),
            ])  # fmt: skip
    return table(rows, ["policy", "job size", "jobs", "wait p50", "wait p90", "wait p99"])


def losses(summaries: Sequence[Summary]) -> str:
    rows = []
    for s in summaries:
        for kind, (count, hours) in sorted(s.by_kind.items()):
            rows.append([s.policy, kind, str(count), f"{hours:,.0f}"])
    return (
        table(rows, ["policy", "what ended the work", "times", "GPU-hours lost"])
        if rows
        else "No work was lost."
    )


def victims(summaries: Sequence[Summary]) -> str:
    """Work lost to cuts by what the victim was: who paid for the GPUs it lost, whether it checkpoints."""
    rows = []
    for s in summaries:
        total = s.lost_cuts or 1.0
        for (kind, paid, checkpoints), (count, hours) in sorted(
            s.by_victim.items(), key=lambda kv: (-kv[1][1], kv[0])
        ):
            rows.append([
                s.policy, kind, paid or "not recorded", "yes" if checkpoints else "no", str(count),
                f"{hours:,.0f}", pct(hours / total),
            ])  # fmt: skip
    return (
        table(
            rows,
            [
                "policy",
                "cut",
                "lost GPUs paid by",
                "checkpoints",
                "times",
                "GPU-hours lost",
                "of its cuts' loss",
            ],
        )
        if rows
        else "Nothing was cut."
    )


def teams(summaries: Sequence[Summary], trace: Trace) -> str:
    entitled = trace.entitlements()
    names = sorted(entitled, key=lambda t: (-entitled[t], t))
    rows = [[s.policy, *(f"{s.teams.get(t, 1.0):.2f}" for t in names)] for s in summaries]
    return table(rows, ["policy", *(f"{t} ({entitled[t]})" for t in names)])


def targets(jobtree: Summary, fifo: Summary) -> list[Target]:
    """The issue's five targets for Jobtree on the default month, measured."""
    p90, fifo90 = percentile(jobtree.waits, 0.9), percentile(fifo.waits, 0.9)
    team, low = jobtree.lowest_team()
    eta = jobtree.eta_within()
    return [
        Target(
            "useful utilisation ≥ FIFO gang's + 15 points",
            f"≥ {pct(fifo.useful + 0.15)}",
            pct(jobtree.useful),
            jobtree.useful >= fifo.useful + 0.15,
        ),
        Target(
            "p90 wait ≤ half of FIFO gang's", f"≤ {duration(fifo90 / 2)}", duration(p90), p90 <= fifo90 / 2
        ),
        Target(
            "work lost to cuts ≤ 2% of GPU-hours",
            "≤ 2.0%",
            pct(jobtree.cut_share()),
            jobtree.cut_share() <= 0.02,
        ),
        Target(
            "ETA within ±30 min for ≥ 80% of reservations that started",
            "≥ 80.0%",
            pct(eta),
            eta is not None and eta >= 0.8,
        ),
        Target(
            "no team below 90% of its entitlement while it had demand",
            "every team ≥ 0.90",
            f"{low:.2f} ({team})",
            low >= 0.9,
        ),
    ]


def target_table(found: dict[str, Sequence[Target]]) -> str:
    """The targets, one pair of columns (measured, met or missed) per Jobtree configuration."""
    rows = [
        [ts[0].what, ts[0].want, *(cell for t in ts for cell in (t.got, "met" if t.met else "**missed**"))]
        for ts in zip(*found.values(), strict=True)
    ]
    return table(rows, ["target", "wants", *(cell for name in found for cell in (name, ""))])


def sources_table() -> str:
    rows = [[n.what, _number(n.value), n.source, n.why] for n in sources.TABLE]
    refs = "\n".join(f"- {key} {text}" for key, text in sources.REFERENCES)
    return table(rows, ["number", "value", "source", "how"]) + "\n\n" + refs


def _number(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:,.6g}"


def leaves_out(summaries: Sequence[Summary]) -> str:
    out = []
    for s in summaries:
        if s.notes:
            out.append(f"- **{s.policy}**: " + "; ".join(s.notes) + ".")
    return "\n".join(out)


def knob(name: str, values: Sequence[tuple[str, Summary]], default: str) -> str:
    rows = []
    for label, s in values:
        rows.append([
            label + (" (template default)" if label == default else ""),
            pct(s.useful), duration(percentile(s.waits, 0.9)), str(s.cuts), pct(s.cut_share()),
            f"{s.lowest_team()[1]:.2f}", pct(s.eta_within()),
        ])  # fmt: skip
    return table(
        rows, [name, "useful util.", "wait p90", "cuts", "lost to cuts", "lowest team share", "ETA ±30m"]
    )


def performance(summaries: Sequence[Summary]) -> str:
    rows = []
    for s in summaries:
        rate = s.events / s.seconds if s.seconds else 0.0
        rows.append([
            s.policy, f"{s.gpus}", f"{s.events:,}", f"{s.decisions:,}", f"{s.seconds:,.1f}", f"{rate:,.0f}",
            f"{1000 * s.decision_mean:.1f}", f"{1000 * s.decision_p99:.0f}", f"{1000 * s.decision_max:.0f}",
        ])  # fmt: skip
    header = [
        "policy",
        "GPUs",
        "events",
        "passes",
        "wall s",
        "events/s",
        "pass mean ms",
        "pass p99 ms",
        "pass max ms",
    ]
    return table(rows, header)
