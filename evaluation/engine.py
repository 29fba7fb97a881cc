"""The baselines' event engine: arrivals, completions and node failures at their own instants, a policy between.

One clock, one queue in submission order (a requeued job keeps its place), one `Cluster`, and the
same work model as Jobtree's simulator (`reconciler.passes.workloads.Work`: a cut goes back to the
last checkpoint). At each instant every event is applied, then the policy decides once. The
policy (`policies`) only calls `start` and `preempt`; the engine owns the books.
"""

from __future__ import annotations

import bisect
import heapq
import time
from dataclasses import dataclass
from typing import Protocol

from evaluation.cluster import Cluster, Placement
from evaluation.outcome import FAILURE, PREEMPTED, Holding, Outcome, Promise, Result
from evaluation.trace import Job, Trace
from reconciler.passes.workloads import Work

ARRIVE, FINISH, DOWN, UP, WAKE = 0, 1, 2, 3, 4  # their order at one instant: failures after finishes


class Policy(Protocol):
    name: str
    leaves_out: tuple[str, ...]

    def schedule(self, engine: Engine) -> None: ...


def key_of(job: Job) -> str:
    return f"{job.team}/{job.name}"


@dataclass(slots=True)
class Running:
    placement: Placement
    since: int
    token: int


class Engine:
    def __init__(self, trace: Trace, policy: Policy) -> None:
        self.trace = trace
        self.policy = policy
        self.cluster = Cluster(trace.domains)
        self.now = 0
        self.jobs = {key_of(j): j for j in trace.jobs}
        self.order = {key_of(j): (j.submit, key_of(j)) for j in trace.jobs}
        self.pending: list[str] = []  # in queue order: submission, then name
        self.running: dict[str, Running] = {}
        self.work = {k: Work(j.work, j.checkpoint) for k, j in self.jobs.items()}
        self.outcomes = {k: Outcome(j) for k, j in self.jobs.items()}
        self.holdings: list[Holding] = []
        self.promised: dict[str, tuple[int, int]] = {}  # job -> (published, predicted start)
        self.promises: list[Promise] = []
        self.team_gpus: dict[str, int] = {t.name: 0 for t in trace.teams}
        self._events: list[tuple[int, int, str, int]] = []
        self._tokens = 0
        self._wakes: set[int] = set()
        for j in trace.jobs:
            self._push(j.submit, ARRIVE, key_of(j))
        for o in trace.outages:
            self._push(o.down, DOWN, o.node)
            self._push(o.up, UP, o.node)

    def _push(self, at: int, kind: int, what: str, token: int = 0) -> None:
        heapq.heappush(self._events, (at, kind, what, token))

    # -- what a policy may ask and do ---------------------------------------------------------------
    def fits(self, job: Job, free: dict[str, int] | None = None) -> Placement | None:
        return self.cluster.place(job, free)

    def remaining(self, key: str) -> int:
        """Seconds of work the job still needs at its full width (the perfect estimate backfill is given)."""
        w = self.work[key]
        w.advance(self.now)
        return -(-(w.need - w.done) // self.jobs[key].gpus)

    def start(self, key: str, placement: Placement) -> None:
        job = self.jobs[key]
        self.pending.remove(key)
        self.cluster.take(placement)
        self._tokens += 1
        self.running[key] = Running(placement, self.now, self._tokens)
        self.team_gpus[job.team] += job.gpus
        w = self.work[key]
        w.run_at(self.now, job.gpus)
        self.outcomes[key].starts.append(self.now)
        due = w.due()
        assert due is not None
        self._push(due, FINISH, key, self._tokens)
        if key in self.promised:
            published, predicted = self.promised.pop(key)
            self.promises.append(Promise(key, published, predicted, self.now))

    def preempt(self, key: str, cause: str = PREEMPTED) -> None:
        """Stop a running job: it loses the work since its checkpoint and goes back in line."""
        lost = self.work[key].cut(self.now)
        self.outcomes[key].losses.append((self.now, cause, lost))
        self._stop(key)
        bisect.insort(self.pending, key, key=self.order.__getitem__)

    def wake(self, at: int) -> None:
        """Let the policy decide again at `at` even if nothing happens then (a protection running out)."""
        if at > self.now and at not in self._wakes:
            self._wakes.add(at)
            self._push(at, WAKE, "")

    def promise(self, key: str, predicted: int) -> None:
        """The policy announces when a waiting job will start (the first announcement is kept)."""
        self.promised.setdefault(key, (self.now, predicted))

    def _stop(self, key: str) -> None:
        run = self.running.pop(key)
        job = self.jobs[key]
        self.cluster.release(run.placement)
        self.team_gpus[job.team] -= job.gpus
        self.work[key].run_at(self.now, 0)
        self.holdings.append(Holding(key, job.team, run.since, self.now, job.gpus))

    # -- the clock ----------------------------------------------------------------------------------
    def run(self) -> Result:
        began = time.perf_counter()
        decisions: list[float] = []
        horizon = self.trace.horizon
        while self._events and self._events[0][0] < horizon:
            self.now = self._events[0][0]
            while self._events and self._events[0][0] == self.now:
                _, kind, what, token = heapq.heappop(self._events)
                self._apply(kind, what, token)
            t0 = time.perf_counter()
            self.policy.schedule(self)
            decisions.append(time.perf_counter() - t0)
        self.now = horizon
        for key in sorted(self.running):
            run = self.running[key]
            job = self.jobs[key]
            self.holdings.append(Holding(key, job.team, run.since, horizon, job.gpus))
        for key, out in self.outcomes.items():
            w = self.work[key]
            w.advance(horizon)
            out.done, out.finished = w.done, w.finished
        self.promises += [Promise(k, p, t, None) for k, (p, t) in sorted(self.promised.items())]
        result = Result(self.policy.name, False, self.trace, self.outcomes, self.holdings, self.promises)
        result.seconds, result.decisions = time.perf_counter() - began, decisions
        result.notes = list(self.policy.leaves_out)
        return result

    def _apply(self, kind: int, what: str, token: int) -> None:
        if kind == ARRIVE:
            bisect.insort(self.pending, what, key=self.order.__getitem__)
        elif kind == FINISH:
            run = self.running.get(what)
            if run is not None and run.token == token:
                self._stop(what)
                self.work[what].finished = self.now
        elif kind == WAKE:
            self._wakes.discard(self.now)
        elif kind == DOWN:
            for key in sorted(k for k, r in self.running.items() if any(n == what for n, _ in r.placement)):
                self.preempt(key, FAILURE)
            self.cluster.down.add(what)
        elif kind == UP:
            self.cluster.down.discard(what)


def play(trace: Trace, policy: Policy) -> Result:
    return Engine(trace, policy).run()
