"""What a replay measured: utilisation, waits by job size, completion times, cuts and lost work, fairness, ETAs.

`summarise(result)` turns one policy's `Result` into a `Summary` of plain numbers and lists (what
the report and the figures need, small enough to send between processes). Definitions, also in
docs/evaluation.md:

- allocated utilisation: GPU-hours held (spares included) / GPU-hours of the fleet in the month;
  useful: GPU-hours of work that counted (done, and not lost to a cut) / the same.
- wait: submission to first start. A job never started by the month's end counts with the time it
  had waited then (a lower bound), so a scheduler cannot look good by never starting big jobs.
  Opportunistic jobs are measured apart (Jobtree runs them only on idle spares, by design).
- lost work: GPU-hours of work sent back to a checkpoint, by a scheduler's cut or a failed node,
  as a share of the GPU-hours held.
- team share: over the month, the GPU-hours a team received up to its claim, where its claim at
  each instant is the smaller of its budget and what its waiting and running jobs ask for, divided
  by its claimed GPU-hours; Jain's index over teams of those shares.
- ETA accuracy: each announced start (Jobtree's first published earliestStart of a reservation;
  the backfill reservation's shadow time) against the real start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from evaluation.outcome import FAILURE, Result

SIZES = (("1 GPU", 1, 1), ("2-8 GPUs", 2, 8), ("9-32 GPUs", 9, 32), ("33+ GPUs", 33, 10**9))
ETA_TOLERANCE = 1800


def percentile(values: list[int] | list[float], q: float) -> float:
    """Nearest rank: the ceil(q * n)-th smallest (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(q * len(ordered)) - 1)])


@dataclass(slots=True)
class Summary:
    policy: str
    gpus: int
    horizon: int
    jobs: int = 0
    allocated: float = 0.0
    useful: float = 0.0
    waits: list[int] = field(default_factory=list)  # seconds, non-opportunistic jobs (censored included)
    never_started: int = 0
    by_size: dict[str, list[int]] = field(default_factory=dict)
    opportunistic_waits: list[int] = field(default_factory=list)
    jct: list[int] = field(default_factory=list)  # seconds from submission to completion, finished jobs
    finished: int = 0
    cuts: int = 0
    failures: int = 0
    lost_cuts: float = 0.0  # GPU-hours
    lost_failures: float = 0.0
    held_hours: float = 0.0
    by_kind: dict[str, tuple[int, float]] = field(default_factory=dict)  # kind -> (count, GPU-hours lost)
    # (kind, who paid for the lost work, whether the job checkpoints) -> (count, GPU-hours lost), cuts only
    by_victim: dict[tuple[str, str, bool], tuple[int, float]] = field(default_factory=dict)
    teams: dict[str, float] = field(default_factory=dict)  # team -> share of its claim received
    jain: float = 1.0
    eta_errors: list[int] = field(default_factory=list)  # started - predicted, seconds, started promises
    eta_unstarted: int = 0
    hourly: list[float] = field(default_factory=list)  # allocated utilisation hour by hour
    seconds: float = 0.0
    decisions: int = 0
    decision_mean: float = 0.0
    decision_p99: float = 0.0
    decision_max: float = 0.0
    events: int = 0  # arrivals, completions and node events the replay went through
    notes: list[str] = field(default_factory=list)

    def lost_share(self) -> float:
        return (self.lost_cuts + self.lost_failures) / self.held_hours if self.held_hours else 0.0

    def cut_share(self) -> float:
        return self.lost_cuts / self.held_hours if self.held_hours else 0.0

    def eta_within(self) -> float | None:
        if not self.eta_errors:
            return None
        return sum(abs(e) <= ETA_TOLERANCE for e in self.eta_errors) / len(self.eta_errors)

    def eta_kept(self) -> float | None:
        """Share of announced starts the job did not start later than (plus the tolerance)."""
        if not self.eta_errors:
            return None
        return sum(e <= ETA_TOLERANCE for e in self.eta_errors) / len(self.eta_errors)

    def lowest_team(self) -> tuple[str, float]:
        return min(self.teams.items(), key=lambda kv: (kv[1], kv[0])) if self.teams else ("", 1.0)


def summarise(result: Result) -> Summary:
    trace = result.trace
    h = trace.horizon
    s = Summary(result.policy, trace.gpus, h, jobs=len(trace.jobs), notes=list(result.notes))
    capacity = trace.gpus * h
    held = sum(x.gpus * (x.end - x.start) for x in result.holdings)
    s.allocated = held / capacity
    s.held_hours = held / 3600
    s.useful = sum(o.done for o in result.outcomes.values()) / capacity
    s.by_size = {name: [] for name, _, _ in SIZES}
    for out in result.outcomes.values():
        job = out.job
        wait = out.wait if out.wait is not None else h - job.submit
        if job.opportunistic:
            s.opportunistic_waits.append(wait)
        else:
            s.waits.append(wait)
            s.never_started += out.wait is None
            for name, low, high in SIZES:
                if low <= job.gpus <= high:
                    s.by_size[name].append(wait)
        if out.finished is not None:
            s.jct.append(out.finished - job.submit)
            s.finished += 1
        for at, kind, lost in out.losses:
            count, hours = s.by_kind.get(kind, (0, 0.0))
            s.by_kind[kind] = (count + 1, hours + lost / 3600)
            if kind == FAILURE:
                s.failures += 1
                s.lost_failures += lost / 3600
            else:
                s.cuts += 1
                s.lost_cuts += lost / 3600
                victim = (kind, out.paid.get(at, ""), job.checkpoint is not None)
                count, hours = s.by_victim.get(victim, (0, 0.0))
                s.by_victim[victim] = (count + 1, hours + lost / 3600)
    s.teams = team_shares(result)
    shares = list(s.teams.values())
    s.jain = sum(shares) ** 2 / (len(shares) * sum(x * x for x in shares)) if shares and any(shares) else 1.0
    s.eta_errors = [p.started - p.predicted for p in result.promises if p.started is not None]
    s.eta_unstarted = sum(p.started is None for p in result.promises)
    s.hourly = hourly(result)
    s.seconds = result.seconds
    s.decisions = len(result.decisions)
    if result.decisions:
        s.decision_mean = sum(result.decisions) / len(result.decisions)
        s.decision_p99 = percentile(result.decisions, 0.99)
        s.decision_max = max(result.decisions)
    s.events = len(trace.jobs) + s.finished + 2 * len(trace.outages)
    return s


def team_shares(result: Result) -> dict[str, float]:
    """Each team's received GPU-hours up to its claim over its claimed GPU-hours (module docstring)."""
    trace = result.trace
    entitled = trace.entitlements()
    changes: dict[str, list[tuple[int, int, int]]] = {t: [] for t in entitled}  # (instant, d held, d asked)
    opportunistic = {f"{j.team}/{j.name}" for j in trace.jobs if j.opportunistic}
    for x in result.holdings:
        if x.team in changes and x.job not in opportunistic:
            changes[x.team] += [(x.start, x.gpus, 0), (x.end, -x.gpus, 0)]
    for out in result.outcomes.values():
        job = out.job
        if job.opportunistic or job.team not in changes:
            continue
        asks = job.held if result.spares else job.gpus
        end = out.finished if out.finished is not None else trace.horizon
        changes[job.team] += [(job.submit, 0, asks), (end, 0, -asks)]
    out_shares: dict[str, float] = {}
    for team, events in sorted(changes.items()):
        held = asked = 0
        got = claimed = 0.0
        last = 0
        for at, d_held, d_asked in sorted(events):
            claim = min(entitled[team], asked)
            got += min(held, claim) * (at - last)
            claimed += claim * (at - last)
            held, asked, last = held + d_held, asked + d_asked, at
        out_shares[team] = got / claimed if claimed else 1.0
    return out_shares


def hourly(result: Result) -> list[float]:
    """Allocated utilisation in each hour of the month."""
    hours = -(-result.trace.horizon // 3600)
    busy = [0.0] * hours
    for x in result.holdings:
        t = x.start
        while t < x.end:
            h = t // 3600
            step = min(x.end, (h + 1) * 3600) - t
            busy[h] += x.gpus * step
            t += step
    return [b / (3600 * result.trace.gpus) for b in busy]
