"""Kueue-like: a ClusterQueue per team with its budget as nominal quota, one cohort tree, borrowing, reclaim.

As Kueue admits workloads: each team's queue is `BestEffortFIFO` (a job that cannot be admitted
does not block the jobs behind it); jobs within their team's nominal quota are admitted first, in
creation order, then jobs that borrow the cohort's unused quota (`borrowingLimit` unset: the whole
tree's idle quota). With `reclaimWithinCohort: Any`, a job within its nominal quota that does not
fit preempts workloads of teams that are borrowing, the most recently admitted first, as few as
make room, immediately. Placement is topology-aware (each group in one fabric domain), as Kueue's
TAS does. No lottery, no spares, no notice.
"""

from __future__ import annotations

from evaluation.engine import Engine
from evaluation.trace import Trace

LEAVES_OUT = (
    "no lottery and no notice before a reclaim: borrowers are preempted at once, newest first",
    "no spares, no elastic width (malleable jobs run at their full width)",
    "no fair sharing between cohort members (Kueue's optional fairSharing is off, its default)",
    "opportunistic jobs are the lowest priority and always reclaimable",
)


class Kueue:
    name: str = "Kueue-like quotas"
    leaves_out: tuple[str, ...] = LEAVES_OUT

    def __init__(self, trace: Trace) -> None:
        self.nominal = trace.entitlements()

    def within(self, engine: Engine, key: str) -> bool:
        job = engine.jobs[key]
        return not job.opportunistic and engine.team_gpus[job.team] + job.gpus <= self.nominal.get(
            job.team, 0
        )

    def borrowing(self, engine: Engine, team: str) -> bool:
        return engine.team_gpus[team] > self.nominal.get(team, 0)

    def schedule(self, engine: Engine) -> None:
        for key in list(engine.pending):  # within nominal quota, in creation order
            if key not in engine.pending or not self.within(engine, key):
                continue
            placement = engine.fits(engine.jobs[key])
            if placement is None:
                placement = self._reclaim(engine, key)
            if placement is not None:
                engine.start(key, placement)
        later = sorted(engine.pending, key=lambda k: (engine.jobs[k].opportunistic, engine.order[k]))
        for key in later:  # then borrowing, the opportunistic last
            placement = engine.fits(engine.jobs[key])
            if placement is not None:
                engine.start(key, placement)

    def _reclaim(self, engine: Engine, key: str) -> tuple[tuple[str, int], ...] | None:
        """Preempt borrowing teams' jobs, newest first, fewest that make room; None when they cannot."""
        held = dict(engine.team_gpus)
        free = engine.cluster.free()
        chosen: list[str] = []
        job = engine.jobs[key]
        for k in sorted(engine.running, key=lambda k: (-engine.running[k].since, k)):
            victim = engine.jobs[k]
            if not victim.opportunistic and held[victim.team] <= self.nominal.get(victim.team, 0):
                continue  # its team is no longer borrowing: not a candidate
            held[victim.team] -= victim.gpus
            for node, gpus in engine.running[k].placement:
                if node not in engine.cluster.down:
                    free[node] += gpus
            chosen.append(k)
            if engine.fits(job, free) is not None:
                break
        else:
            return None
        for k in reversed(chosen[:-1]):  # keep only the victims the room needs
            trial = dict(free)
            for node, gpus in engine.running[k].placement:
                if node not in engine.cluster.down:
                    trial[node] -= gpus
            if engine.fits(job, trial) is not None:
                free = trial
                chosen.remove(k)
        for k in chosen:
            engine.preempt(k)
        return engine.fits(job)
