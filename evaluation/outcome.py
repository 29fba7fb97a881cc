"""What a policy did with a trace: each job's fate, the GPUs held over time, and the cost of deciding.

The one shape every replay hands to `metrics`, Jobtree's (`jobtree`) and the baselines' (`engine`)
alike. Data only: it measures nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evaluation.trace import Job, Trace

FAILURE = "NodeFailure"  # a node under the job failed; every other kind of loss is a scheduler's cut
PREEMPTED = "Preempted"  # a baseline's preemption (requeue); Jobtree's cuts carry their closure


@dataclass(slots=True)
class Outcome:
    """One job under one policy."""

    job: Job
    starts: list[int] = field(default_factory=list)  # every instant it went from no GPUs to some
    finished: int | None = None
    done: int = 0  # GPU-seconds of its work that counted, at the end of the month
    losses: list[tuple[int, str, int]] = field(default_factory=list)  # (instant, kind, GPU-seconds lost)
    # instant of a loss -> who paid for what it lost (Jobtree: `own` budget, `borrowed` from family or
    # a sponsor, `spare` for work on a spare's GPUs); a baseline does not say
    paid: dict[int, str] = field(default_factory=dict)

    @property
    def wait(self) -> int | None:
        """Seconds from submission to its first start (None: it never started)."""
        return self.starts[0] - self.job.submit if self.starts else None


@dataclass(frozen=True, slots=True)
class Holding:
    """GPUs one job held from `start` to `end`: working (Active or fill) or standing by (spares)."""

    job: str
    team: str
    start: int
    end: int
    gpus: int
    working: bool = True


@dataclass(frozen=True, slots=True)
class Promise:
    """A start time a policy announced for a waiting job, and when the job really started."""

    job: str
    published: int
    predicted: int
    started: int | None


@dataclass(slots=True)
class Result:
    policy: str
    spares: bool  # the policy holds the jobs' spare GPUs (what a team asks for includes them)
    trace: Trace
    outcomes: dict[str, Outcome]
    holdings: list[Holding]
    promises: list[Promise] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the replay
    decisions: list[float] = field(default_factory=list)  # seconds each pass (scheduling round) took
    notes: list[str] = field(default_factory=list)  # what this policy leaves out or did differently
