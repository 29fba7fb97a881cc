"""Small hand-made traces for the evaluation's tests: one fabric domain, two teams, a few jobs."""

from __future__ import annotations

from evaluation.generate import MONDAY
from evaluation.trace import Domain, Job, Team, Trace


def a_job(
    name: str,
    team: str,
    submit: int,
    gpus: int,
    duration: int,
    *,
    group: int | None = None,
    checkpoint: int | None = None,
) -> Job:
    return Job(name, team, submit, gpus, duration, group=group, checkpoint=checkpoint)


def two_teams(jobs: list[Job], *, nodes: int = 2, a: int = 8, b: int = 8, days: float = 1) -> Trace:
    """Teams a and b (budgets `a` and `b` GPUs) under one root, on one domain of `nodes` x 8 GPUs."""
    family = (
        Team("root", "org:root", None, 0),
        Team("a", "org:root:a", "org:root", a),
        Team("b", "org:root:b", "org:root", b),
    )
    return Trace("tiny", MONDAY, int(days * 86400), (Domain("d00", nodes, 8),), family, tuple(jobs))
