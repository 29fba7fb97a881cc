"""The report's figures as SVG, drawn with matplotlib (the optional `evaluate` extra; `make evaluate` installs it).

Wait CDFs, waits by job size, utilisation over time, per-team shares, lost work, ETA errors and one
figure per tuning knob with the template's default marked. Byte-stable: no date in the files, and
matplotlib's element ids are salted with a constant. Computes nothing (`metrics` has).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluation.metrics import SIZES, Summary, percentile

HOUR = 3600


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("svg")
    matplotlib.rcParams["svg.hashsalt"] = "jobtree-evaluation"
    matplotlib.rcParams["svg.fonttype"] = "none"
    matplotlib.rcParams["font.size"] = 9
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)


def draw(
    out: Path, summaries: Sequence[Summary], knobs: dict[str, tuple[list[tuple[str, Summary]], str]]
) -> list[Path]:
    plt = _pyplot()
    paths = []
    paths.append(_wait_cdf(plt, out / "wait-cdf.svg", summaries))
    paths.append(_by_size(plt, out / "wait-by-size.svg", summaries))
    paths.append(_utilisation(plt, out / "utilisation.svg", summaries))
    paths.append(_teams(plt, out / "team-share.svg", summaries))
    paths.append(_lost(plt, out / "lost-work.svg", summaries))
    eta = [s for s in summaries if s.eta_errors]
    if eta:
        paths.append(_eta(plt, out / "eta-error.svg", eta))
    for name, (values, default) in knobs.items():
        paths.append(_knob(plt, out / f"knob-{name}.svg", name, values, default))
    return paths


def _wait_cdf(plt: Any, path: Path, summaries: Sequence[Summary]) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for s in summaries:
        waits = sorted(max(w, 1) / HOUR for w in s.waits)
        n = len(waits)
        ax.step(waits, [(i + 1) / n for i in range(n)], where="post", label=s.policy)
    ax.set_xscale("log")
    ax.set_xlabel("wait from submission to first start (hours, log; 1 s shown for no wait)")
    ax.set_ylabel("share of jobs")
    ax.set_title("Queueing delay, all jobs but opportunistic")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    _save(plt, fig, path)
    return path


def _by_size(plt: Any, path: Path, summaries: Sequence[Summary]) -> Path:
    fig, axes = plt.subplots(1, 3, figsize=(9, 3.2), sharey=True)
    width = 0.8 / len(summaries)
    for ax, q in zip(axes, (0.5, 0.9, 0.99), strict=True):
        for i, s in enumerate(summaries):
            ys = [percentile(s.by_size[name], q) / HOUR for name, _, _ in SIZES]
            ax.bar([k + i * width for k in range(len(SIZES))], ys, width, label=s.policy)
        ax.set_xticks(
            [k + 0.4 - width / 2 for k in range(len(SIZES))], [name for name, _, _ in SIZES], fontsize=7
        )
        ax.set_title(f"p{round(q * 100)} wait")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("hours")
    axes[0].legend(fontsize=6)
    _save(plt, fig, path)
    return path


def _utilisation(plt: Any, path: Path, summaries: Sequence[Summary]) -> Path:
    fig, ax = plt.subplots(figsize=(8, 3.4))
    for s in summaries:
        days = [h / 24 for h in range(len(s.hourly))]
        smooth = [
            sum(s.hourly[max(0, h - 5) : h + 1]) / len(s.hourly[max(0, h - 5) : h + 1])
            for h in range(len(s.hourly))
        ]
        ax.plot(
            days, [100 * u for u in smooth], label=f"{s.policy} (useful {100 * s.useful:.0f}%)", linewidth=0.9
        )
    ax.set_xlabel("day of the month")
    ax.set_ylabel("GPUs allocated (%, 6 h mean)")
    ax.set_ylim(0, 105)
    ax.set_title("Allocated utilisation over time; useful utilisation of the month in the legend")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    _save(plt, fig, path)
    return path


def _teams(plt: Any, path: Path, summaries: Sequence[Summary]) -> Path:
    names = sorted(summaries[0].teams)
    fig, ax = plt.subplots(figsize=(8, 3.4))
    width = 0.8 / len(summaries)
    for i, s in enumerate(summaries):
        ax.bar(
            [k + i * width for k in range(len(names))],
            [s.teams.get(t, 1.0) for t in names],
            width,
            label=f"{s.policy} (Jain {s.jain:.3f})",
        )
    ax.axhline(0.9, color="black", linestyle="--", linewidth=0.8)
    ax.text(len(names) - 0.5, 0.91, "target 0.9", fontsize=7, ha="right")
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(names))], names, fontsize=7, rotation=20)
    ax.set_ylabel("claim received")
    ax.set_ylim(0, 1.05)
    ax.set_title("Each team's share of its claim (min of budget and demand) received")
    ax.legend(fontsize=6, loc="lower left")
    _save(plt, fig, path)
    return path


def _lost(plt: Any, path: Path, summaries: Sequence[Summary]) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    xs = range(len(summaries))
    ax.bar(xs, [s.lost_cuts for s in summaries], label="lost to cuts")
    ax.bar(
        xs,
        [s.lost_failures for s in summaries],
        bottom=[s.lost_cuts for s in summaries],
        label="lost to node failures",
    )
    for x, s in zip(xs, summaries, strict=True):
        ax.text(x, s.lost_cuts + s.lost_failures, f"{s.cuts} cuts", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(xs), [s.policy for s in summaries], fontsize=7, rotation=15)
    ax.set_ylabel("GPU-hours of work redone")
    ax.set_title("Work lost and redone")
    ax.legend(fontsize=7)
    _save(plt, fig, path)
    return path


def _eta(plt: Any, path: Path, summaries: Sequence[Summary]) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for s in summaries:
        errors = sorted(e / HOUR for e in s.eta_errors)
        n = len(errors)
        ax.step(
            errors, [(i + 1) / n for i in range(n)], where="post", label=f"{s.policy} ({n} announced starts)"
        )
    ax.axvspan(-0.5, 0.5, color="grey", alpha=0.2, label="±30 min")
    ax.set_xlabel("actual start − announced start (hours; negative: early)")
    ax.set_ylabel("share")
    ax.set_xlim(-12, 12)
    ax.set_title("ETA accuracy")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    _save(plt, fig, path)
    return path


def _knob(plt: Any, path: Path, name: str, values: list[tuple[str, Summary]], default: str) -> Path:
    fig, axes = plt.subplots(1, 3, figsize=(9, 2.8))
    labels = [label for label, _ in values]
    series = (
        ("useful utilisation (%)", [100 * s.useful for _, s in values]),
        ("wait p90 (hours)", [percentile(s.waits, 0.9) / HOUR for _, s in values]),
        ("work lost to cuts (% of held)", [100 * s.cut_share() for _, s in values]),
    )
    for ax, (title, ys) in zip(axes, series, strict=True):
        colours = ["tab:orange" if label == default else "tab:blue" for label in labels]
        ax.bar(range(len(labels)), ys, color=colours)
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set_title(title, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"{name} (orange: the template's default, {default})", fontsize=9)
    _save(plt, fig, path)
    return path
