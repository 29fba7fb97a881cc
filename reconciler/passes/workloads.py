"""Useful work of simulated runs: what each needs, has done, has kept at its last checkpoint and has lost.

The simulator's model of a workload (§6 `workloads`): a run needs `duration` of running at its
`totalGPUs`, counted in GPU-seconds (a malleable run at other widths goes proportionally faster or
slower); it checkpoints every `runtime.checkpoint` of running since it last (re)started; a cut goes
back to its last checkpoint (to nothing without one) and the run must redo the rest. Integer seconds
throughout, so the instant a run finishes is exact. Decides nothing about leases: the planner does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Work:
    """One run's useful work, in GPU-seconds."""

    need: int  # duration x totalGPUs: the work that finishes the run
    checkpoint: int | None = None  # seconds of running between checkpoints (None: the run never saves)
    done: int = 0  # work done so far that still counts (saved, plus what came since)
    saved: int = 0  # work done at the last checkpoint: what a cut goes back to
    rate: int = 0  # GPUs working on it now
    since: int = 0  # the instant `done` is counted to
    segment: int = 0  # when the run last (re)started: checkpoints fall every `checkpoint` after it
    lost: int = 0  # work lost to cuts, to be redone
    cuts: int = 0
    finished: int | None = None

    def advance(self, now: int) -> None:
        """Count the work done at the current rate up to `now`, and the checkpoints that fell on the way."""
        if now <= self.since:
            return
        if self.rate and self.checkpoint:
            last = self.segment + (now - self.segment) // self.checkpoint * self.checkpoint
            if last > self.since:  # a checkpoint fell in (since, now]: it saved what was done by then
                self.saved = self.done + self.rate * (last - self.since)
        self.done = min(self.need, self.done + self.rate * (now - self.since))
        self.since = now

    def run_at(self, now: int, gpus: int) -> None:
        """From `now` on the run works on `gpus` GPUs (0: it stopped, waiting in line or finished)."""
        self.advance(now)
        if gpus and not self.rate:
            self.segment = now  # a (re)start: the checkpoint cadence counts from here
        self.rate = gpus

    def cut(self, now: int) -> int:
        """The run was cut at `now`: it goes back to its last checkpoint. Returns the work lost."""
        self.advance(now)
        lost = self.done - self.saved
        self.lost += lost
        self.done = self.saved
        self.cuts += 1
        self.segment = now  # whatever still runs restarts from the checkpoint now
        return lost

    def finish(self, now: int) -> None:
        self.advance(now)
        self.done, self.rate, self.finished = self.need, 0, now

    def due(self) -> int | None:
        """The instant the work is complete at the current rate (None while nothing runs it)."""
        if self.finished is not None or not self.rate:
            return None
        return self.since + -(-(self.need - self.done) // self.rate)  # ceiling: whole seconds
