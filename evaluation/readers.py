"""Public GPU cluster traces as a `Trace`: Helios's `cluster_log.csv` and Philly's trace in the same CSV shape.

Helios (github.com/S-Lab-System-Group/HeliosData) publishes `job_id, user, vc, gpu_num, cpu_num,
node_num, state, submit_time, start_time, end_time, duration, queue`; the Helios authors' artifact
converts the Philly trace to the same columns with Philly's states (`Pass`, `Killed`, `Failed`).
Read: `gpu_num`, `submit_time`, and `duration` (or `start_time` and `end_time`); `vc` when present
(each virtual cluster becomes a team). A job's recorded run time is its work; when the scheduler in
the trace queued it is not used. What no such file says is filled in as the generator does (the
share of grouped, checkpointing jobs) and named in `Trace.notes`. Bad rows are skipped and
reported with their line; a file that cannot be a trace raises `TraceError` saying why.
"""

from __future__ import annotations

import csv
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from evaluation import sources as src
from evaluation.generate import shaped
from evaluation.trace import Domain, Team, Trace

NEEDED = ("gpu_num", "submit_time")
DAY = 86400
DOMAIN_GPUS = 64  # fabric domains of 8 nodes x 8 GPUs, as the generated month's
MAX_PROBLEMS = 20  # bad rows reported one by one; the rest counted


class TraceError(ValueError):
    """The file cannot be read as a trace (the message names it, and what to do)."""


@dataclass(frozen=True, slots=True)
class Row:
    line: int
    team: str
    submit: int
    gpus: int
    duration: int


def read(path: Path, *, days: int = 30, gpus: int | None = None, seed: int = 1) -> Trace:
    """The first `days` days of the trace in `path`, on a fleet of `gpus` (default: sized so the
    trace's work is Helios's 80% of it)."""
    problems: list[str] = []
    rows, dialect = _rows(path, problems)
    if not rows:
        raise TraceError(
            f"{path}: no GPU job could be read" + (f"; first problem: {problems[0]}" if problems else "")
        )
    first = min(r.submit for r in rows)
    start = first - first % DAY
    horizon = days * DAY
    window = sorted((r for r in rows if r.submit - start < horizon), key=lambda r: (r.submit, r.line))
    short = [r for r in window if r.duration < src.MIN_DURATION.value]
    window = [r for r in window if r.duration >= src.MIN_DURATION.value]
    work = sum(r.gpus * min(r.duration, horizon) for r in window)
    if gpus is None:
        gpus = max(-(-int(work / (horizon * src.offered_load())) // DOMAIN_GPUS) * DOMAIN_GPUS, DOMAIN_GPUS)
    gpus = -(-gpus // DOMAIN_GPUS) * DOMAIN_GPUS
    too_wide = [r for r in window if r.gpus > gpus]
    window = [r for r in window if r.gpus <= gpus]
    domains = tuple(Domain(f"d{i:02d}", DOMAIN_GPUS // 8, 8) for i in range(gpus // DOMAIN_GPUS))
    teams = _teams(window)
    rng = random.Random(seed)
    jobs = []
    for n, r in enumerate(window, 1):
        draws = rng.random(), rng.random(), rng.random()
        jobs.append(
            shaped(f"j{n:05d}", teams[r.team], r.submit - start, r.gpus, r.duration, draws, extras=False)
        )
    family = (
        Team("trace", "org:trace", None, 0),
        *(
            Team(name, f"org:trace:{name}", "org:trace", share)
            for name, share in _shares(window, teams, gpus)
        ),
    )
    notes = [
        f"{path.name} read as a {dialect} trace: {len(jobs)} jobs in the first {days} days from "
        f"{datetime.fromtimestamp(start, UTC):%Y-%m-%d}, on {gpus} GPUs ({len(domains)} domains of {DOMAIN_GPUS})",
        f"left out: {len(short)} jobs under {int(src.MIN_DURATION.value) // 60} minutes, {len(too_wide)} wider "
        f"than the fleet, {len(problems)} unreadable rows",
        "each virtual cluster is a team whose budget is its share of the window's GPU-time (the file has "
        "no budgets); jobs are grouped and checkpoint as the generated month's; no spares, no elastic or "
        "opportunistic jobs, no node failures (the file does not say)",
        *problems[:MAX_PROBLEMS],
    ]
    if len(problems) > MAX_PROBLEMS:
        notes.append(f"... and {len(problems) - MAX_PROBLEMS} more unreadable rows")
    return Trace(_name(path), start, horizon, domains, family, tuple(jobs), (), tuple(notes))


def _rows(path: Path, problems: list[str]) -> tuple[list[Row], str]:
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as err:
        raise TraceError(
            f"{path}: cannot be read ({err.strerror}); give the path of a cluster_log.csv"
        ) from None
    with handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in NEEDED if c not in header]
        if not ("duration" in header or {"start_time", "end_time"} <= set(header)):
            missing.append("duration (or start_time and end_time)")
        if missing:
            raise TraceError(
                f"{path}:1: not a Helios or Philly CSV trace: no column {', '.join(missing)} "
                f"(the header has {', '.join(header) or 'nothing'})"
            )
        rows = []
        states: set[str] = set()
        try:
            for line, raw in enumerate(reader, 2):
                states.add(raw.get("state") or "")
                row = _row(path, line, raw, problems)
                if row is not None:
                    rows.append(row)
        except (csv.Error, UnicodeDecodeError) as err:
            raise TraceError(
                f"{path}:{reader.line_num}: not CSV text ({err}); give the trace's CSV file"
            ) from None
    dialect = "Philly" if states & {"Pass", "Killed"} else "Helios"
    return rows, dialect


def _row(path: Path, line: int, raw: dict[str, str | None], problems: list[str]) -> Row | None:
    try:
        gpus = _whole(raw.get("gpu_num"), "gpu_num")
        if gpus == 0:
            return None  # a CPU job
        submit = _instant(raw.get("submit_time"), "submit_time")
        if raw.get("duration") not in (None, ""):
            duration = _whole(raw.get("duration"), "duration")
        else:
            duration = _instant(raw.get("end_time"), "end_time") - _instant(
                raw.get("start_time"), "start_time"
            )
            if duration < 0:
                raise ValueError("end_time is before start_time")
    except ValueError as err:
        problems.append(f"{path}:{line}: {err}; the row is left out")
        return None
    return Row(line, raw.get("vc") or "all", submit, gpus, duration)


def _whole(text: str | None, column: str) -> int:
    try:
        value = float(text or "")
    except ValueError:
        raise ValueError(f"{column} {text!r} is not a number") from None
    if value < 0 or value != int(value):
        raise ValueError(f"{column} {text!r} is not a whole number of 0 or more")
    return int(value)


def _instant(text: str | None, column: str) -> int:
    try:
        when = datetime.fromisoformat((text or "").strip())
    except ValueError:
        raise ValueError(f"{column} {text!r} is not a time like 2020-06-09 18:41:01") from None
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp())


def _teams(rows: list[Row]) -> dict[str, str]:
    """Virtual cluster -> team name (a DNS label: `vc-` and its name in lower case, numbered on a clash)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for vc in sorted({r.team for r in rows}):
        base = "vc-" + (re.sub(r"[^a-z0-9-]+", "-", vc.lower()).strip("-") or "x")[:40]
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        out[vc] = name
    return out


def _shares(rows: list[Row], teams: dict[str, str], gpus: int) -> Iterator[tuple[str, int]]:
    """Each team's budget: its share of the window's GPU-time, in whole GPUs adding up to the fleet."""
    work: dict[str, int] = {}
    for r in rows:
        work[teams[r.team]] = work.get(teams[r.team], 0) + r.gpus * r.duration
    total = sum(work.values()) or 1
    shares = {t: gpus * w // total for t, w in work.items()}
    biggest = max(shares, key=lambda t: (work[t], t))
    shares[biggest] += gpus - sum(shares.values())
    yield from sorted(shares.items())


def _name(path: Path) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", path.stem.lower()).strip("-") or "trace"
