"""FIFO gang scheduling: the oldest waiting job starts when all its GPUs are free; nobody passes it.

The simplest scheduler a cluster runs (a single Kubernetes queue with gang admission, Slurm with
backfill off and one priority). Leaves out everything else, named in `LEAVES_OUT`.
"""

from __future__ import annotations

from evaluation.engine import Engine

LEAVES_OUT = (
    "no budgets or teams: one queue for the fleet",
    "no backfill: a job that does not fit blocks every job behind it",
    "no preemption, no elastic width (malleable jobs run at their full width), no spares",
    "opportunistic jobs are ordinary jobs",
)


class Fifo:
    name: str = "FIFO gang"
    leaves_out: tuple[str, ...] = LEAVES_OUT

    def schedule(self, engine: Engine) -> None:
        for key in list(engine.pending):
            placement = engine.fits(engine.jobs[key])
            if placement is None:
                return
            engine.start(key, placement)
