"""The tuning knobs the report measures, each a list of values with the template's default named.

Jobtree's `reservations.noticePeriod`, `reservations.minRuntime` and `reservations.lottery` (the
fair lottery, or structural cuts only); backfill on and off, on the Slurm-like baseline (Jobtree's
backfill rule has no setting).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from evaluation.jobtree import Settings
from evaluation.trace import Trace

NOTICE = (("5m", 300), ("15m", 900), ("1h", 3600))
NOTICE_DEFAULT = "15m"
MIN_RUNTIME = (("0", 0), ("30m", 1800), ("2h", 7200), ("6h", 21600))
MIN_RUNTIME_DEFAULT = "2h"
LOTTERY = (("on", True), ("off (structural cuts only)", False))
LOTTERY_DEFAULT = "on"
BACKFILL = (("on", True), ("off", False))
BACKFILL_DEFAULT = "on"


@dataclass(frozen=True, slots=True)
class Point:
    """One replay of the knob study: which knob, its value's label, and Jobtree's settings or the baseline's backfill."""

    knob: str
    label: str
    settings: Settings | None = None
    backfill: bool | None = None


def points() -> list[Point]:
    """Every replay the knob figures need (the defaults once each)."""
    out = [Point("noticePeriod", label, Settings(notice=v)) for label, v in NOTICE]
    out += [
        Point("minRuntime", label, Settings(min_runtime=v))
        for label, v in MIN_RUNTIME
        if label != MIN_RUNTIME_DEFAULT
    ]
    out += [Point("lottery", label, Settings(lottery=v)) for label, v in LOTTERY if label != LOTTERY_DEFAULT]
    out += [Point("backfill", label, backfill=v) for label, v in BACKFILL]
    return out


def values() -> dict[str, tuple[tuple[str, object], ...]]:
    """Each knob's values, in the order the report shows them."""
    return {"noticePeriod": NOTICE, "minRuntime": MIN_RUNTIME, "lottery": LOTTERY, "backfill": BACKFILL}


def shared() -> dict[tuple[str, str], tuple[str, str]]:
    """Knob points that are the template's defaults replayed once: (knob, label) -> the point run."""
    default = ("noticePeriod", NOTICE_DEFAULT)
    return {("minRuntime", MIN_RUNTIME_DEFAULT): default, ("lottery", LOTTERY_DEFAULT): default}


def defaults() -> dict[str, str]:
    return {
        "noticePeriod": NOTICE_DEFAULT,
        "minRuntime": MIN_RUNTIME_DEFAULT,
        "lottery": LOTTERY_DEFAULT,
        "backfill": BACKFILL_DEFAULT,
    }


def window(trace: Trace, days: float) -> Trace:
    """The trace's first `days` days: jobs submitted and outages begun in them."""
    horizon = min(trace.horizon, int(days * 86400))
    return replace(
        trace,
        horizon=horizon,
        jobs=tuple(j for j in trace.jobs if j.submit < horizon),
        outages=tuple(o for o in trace.outages if o.down < horizon),
    )
