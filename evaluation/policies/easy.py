"""FIFO with EASY backfill: the first job that does not fit gets a reservation; later jobs may pass it if they do not delay it.

EASY (Lifka, 1995), as Slurm's backfill scheduler does it for the top job: the head's reservation
is the earliest instant at which it fits once running jobs end (its *shadow time*, announced as
its expected start); a job behind it starts now if it fits now and either ends by the shadow time
or leaves the head's GPUs at the shadow time free. Run times are known exactly here, the best case
for backfill (users' time limits are longer). `backfill` is shared with the Slurm-like policy.
"""

from __future__ import annotations

from evaluation.engine import Engine

LEAVES_OUT = (
    "no budgets or teams: one queue for the fleet",
    "perfect run-time estimates (real users give time limits, usually far longer)",
    "no preemption, no elastic width (malleable jobs run at their full width), no spares",
    "opportunistic jobs are ordinary jobs",
)


def shadow(engine: Engine, key: str) -> tuple[int, dict[str, int]] | None:
    """When the job `key` fits as running jobs end (ends known exactly), and the GPUs free then."""
    free = engine.cluster.free()
    job = engine.jobs[key]
    if engine.fits(job, free) is not None:
        return engine.now, free
    ends = sorted((engine.now + engine.remaining(k), k) for k in engine.running)
    for at, k in ends:
        for node, gpus in engine.running[k].placement:
            if node not in engine.cluster.down:
                free[node] += gpus
        if engine.fits(job, free) is not None:
            return at, free
    return None


def backfill(engine: Engine, queue: list[str]) -> None:
    """Start jobs in `queue` order while they fit; then reserve for the first that does not, and
    start every later job that fits now without delaying it."""
    i = 0
    while i < len(queue):
        placement = engine.fits(engine.jobs[queue[i]])
        if placement is None:
            break
        engine.start(queue[i], placement)
        i += 1
    if i == len(queue):
        return
    head = queue[i]
    found = shadow(engine, head)
    if found is not None:
        engine.promise(head, found[0])
    for key in queue[i + 1 :]:
        job = engine.jobs[key]
        placement = engine.fits(job)
        if placement is None:
            continue
        if found is None:  # the head cannot fit whatever ends (nodes are down): nothing to protect
            engine.start(key, placement)
            continue
        at, later = found
        if engine.now + engine.remaining(key) <= at:
            engine.start(key, placement)
            continue
        after = dict(later)  # what is free at the shadow time includes what is free now
        for node, gpus in placement:
            after[node] -= gpus
        if engine.fits(engine.jobs[head], after) is not None:
            engine.start(key, placement)
            found = (at, after)


class Easy:
    name: str = "FIFO + EASY backfill"
    leaves_out: tuple[str, ...] = LEAVES_OUT

    def schedule(self, engine: Engine) -> None:
        backfill(engine, list(engine.pending))
