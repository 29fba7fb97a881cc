"""Slurm-like: multifactor priority (age and fair-share), backfill, and QOS preemption with `PreemptExemptTime`.

Priority = `PriorityWeightAge` x min(age / `PriorityMaxAge`, 1) + `PriorityWeightFairshare` x
2^(-U/S), the classic fair-share factor: U a team's GPU usage decayed with `PriorityDecayHalfLife`,
S its share of the budgets, both as fractions of the whole. Jobs start in priority order with EASY
backfill for the top job (`easy.backfill`). Preemption as sites configure it with
`PreemptType=preempt/qos`, `PreemptMode=REQUEUE`: a job started while its team was over its share
runs in a preemptible QOS; a waiting job whose team is within its share may requeue such jobs (the
lowest priority first, the newest among equals) once they have run `PreemptExemptTime`.
"""

from __future__ import annotations

import math

from evaluation.engine import Engine
from evaluation.policies.easy import backfill
from evaluation.trace import Trace

LEAVES_OUT = (
    "no family tree: fair-share is flat over teams (Slurm's account tree is not modelled)",
    "perfect run-time estimates for backfill; one reservation (the top job), as EASY",
    "no elastic width (malleable jobs run at their full width), no spares",
    "opportunistic jobs run in the preemptible QOS with the lowest priority",
)
DAY = 86400


class Slurm:
    name: str = "Slurm-like multifactor"
    leaves_out: tuple[str, ...] = LEAVES_OUT

    def __init__(
        self,
        trace: Trace,
        *,
        exempt: int = 7200,  # PreemptExemptTime: as the template's minRuntime, to compare like with like
        half_life: int = 7 * DAY,  # PriorityDecayHalfLife (Slurm's default)
        max_age: int = 7 * DAY,  # PriorityMaxAge (Slurm's default)
        weight_age: int = 1000,
        weight_fairshare: int = 10000,
        backfill: bool = True,
    ) -> None:
        entitled = trace.entitlements()
        total = sum(entitled.values()) or 1
        self.shares = {t: g / total for t, g in entitled.items()}
        self.entitled = entitled
        self.usage = dict.fromkeys(entitled, 0.0)
        self.alloc = dict.fromkeys(entitled, 0)
        self.last = 0
        self.exempt, self.half_life, self.max_age = exempt, half_life, max_age
        self.weight_age, self.weight_fairshare = weight_age, weight_fairshare
        self.backfill = backfill
        self.preemptible: set[str] = set()
        if not backfill:
            self.name = "Slurm-like, backfill off"

    def fairshare(self, team: str) -> float:
        total = sum(self.usage.values())
        used = self.usage.get(team, 0.0) / total if total > 0 else 0.0
        share = self.shares.get(team, 0.0)
        return 2 ** (-used / share) if share > 0 else 0.0

    def priority(self, engine: Engine, key: str) -> float:
        job = engine.jobs[key]
        if job.opportunistic:
            return 0.0
        age = min((engine.now - job.submit) / self.max_age, 1.0)
        return self.weight_age * age + self.weight_fairshare * self.fairshare(job.team)

    def _decay(self, engine: Engine) -> None:
        dt = engine.now - self.last
        if dt > 0:
            lam = math.log(2) / self.half_life
            keep = math.exp(-lam * dt)
            for team in self.usage:
                self.usage[team] = self.usage[team] * keep + self.alloc[team] * (1 - keep) / lam
        self.last = engine.now

    def schedule(self, engine: Engine) -> None:
        self._decay(engine)
        self.preemptible &= set(engine.running)
        prio = {k: self.priority(engine, k) for k in engine.pending}
        queue = sorted(engine.pending, key=lambda k: (-prio[k], engine.order[k]))
        held = dict(engine.team_gpus)
        if self.backfill:
            backfill(engine, queue)
        else:
            for key in queue:
                placement = engine.fits(engine.jobs[key])
                if placement is None:
                    break
                engine.start(key, placement)
        for key in queue:  # in the order they started: over its share then means preemptible
            if key in engine.running:
                job = engine.jobs[key]
                held[job.team] += job.gpus
                if job.opportunistic or held[job.team] > self.entitled.get(job.team, 0):
                    self.preemptible.add(key)
        self._preempt(engine, prio)
        self.alloc = {t: engine.team_gpus.get(t, 0) for t in self.usage}

    def _preempt(self, engine: Engine, prio: dict[str, float]) -> None:
        for key in sorted(engine.pending, key=lambda k: (-prio[k], engine.order[k])):
            job = engine.jobs[key]
            if job.opportunistic or engine.team_gpus[job.team] + job.gpus > self.entitled.get(job.team, 0):
                continue
            protected = [
                k
                for k in engine.running
                if k in self.preemptible and engine.now - engine.running[k].since < self.exempt
            ]
            victims = sorted(
                (k for k in engine.running if k in self.preemptible and k not in protected),
                key=lambda k: (self.priority(engine, k), -engine.running[k].since, k),
            )
            chosen = _enough(engine, key, victims)
            if chosen is None:
                if protected:  # look again when the first protected job may be requeued
                    engine.wake(min(engine.running[k].since for k in protected) + self.exempt)
                continue
            for k in chosen:
                engine.preempt(k)
            placement = engine.fits(job)
            assert placement is not None
            engine.start(key, placement)  # within its share: not preemptible


def _enough(engine: Engine, key: str, victims: list[str]) -> list[str] | None:
    """The fewest of `victims`, taken in order, whose GPUs make room for `key` (None: they cannot)."""
    free = engine.cluster.free()
    chosen: list[str] = []
    for k in victims:
        for node, gpus in engine.running[k].placement:
            if node not in engine.cluster.down:
                free[node] += gpus
        chosen.append(k)
        if engine.fits(engine.jobs[key], free) is not None:
            return chosen
    return None
