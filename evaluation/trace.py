"""A trace: the fleet, the teams with their budgets, the jobs they submit and the nodes that fail.

Plain frozen data that every policy replays the same way. Times are seconds from the trace's start
(`Trace.start`, an epoch instant that fixes the weekday and time of day). Says nothing about how a
trace is made (`generate`, `readers`) or played (`engine`, `jobtree`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAVOR = "H100-80GB"


@dataclass(frozen=True, slots=True)
class Job:
    """One run: who submits it when, how wide it is and how much work it does."""

    name: str  # a DNS label, unique in the trace
    team: str  # the submitting team's name (its namespace)
    submit: int
    gpus: int  # totalGPUs
    duration: int  # seconds of useful work at `gpus`
    group: int | None = None  # groupGPUs: each group stays in one fabric domain
    malleable_min: int | None = None  # minTotalGPUs of a malleable run (its step is `group`)
    spares: int = 0  # sparesPerGroup
    opportunistic: bool = False
    checkpoint: int | None = None  # seconds between checkpoints

    @property
    def groups(self) -> list[int]:
        """GPUs of each placement group (the last may be smaller); one group without `group`."""
        size = self.group or self.gpus
        return [min(size, self.gpus - i) for i in range(0, self.gpus, size)]

    @property
    def held(self) -> int:
        """GPUs it holds when running at `gpus`, spares included."""
        return self.gpus + self.spares * len(self.groups)

    @property
    def work(self) -> int:
        """GPU-seconds of useful work."""
        return self.duration * self.gpus


@dataclass(frozen=True, slots=True)
class Team:
    """A budget owner: a team (with runs) or a division above teams (a family node)."""

    name: str  # namespace and budget name
    owner: str  # org:acme:...
    parent: str | None  # the parent's owner
    gpus: int  # its envelope's concurrency: what it is entitled to


@dataclass(frozen=True, slots=True)
class Domain:
    name: str
    nodes: int
    gpus_per_node: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_names(self) -> list[str]:
        return [f"{self.name}-n{i:02d}" for i in range(self.nodes)]


@dataclass(frozen=True, slots=True)
class Outage:
    """A node fails at `down` and is back, repaired, at `up`."""

    node: str
    down: int
    up: int


@dataclass(frozen=True, slots=True)
class Trace:
    name: str
    start: int  # epoch seconds of the trace's first instant
    horizon: int  # seconds the month lasts
    domains: tuple[Domain, ...]
    teams: tuple[Team, ...]
    jobs: tuple[Job, ...]
    outages: tuple[Outage, ...] = ()
    notes: tuple[str, ...] = field(default=())  # what the reader or generator left out, and why

    @property
    def gpus(self) -> int:
        return sum(d.gpus for d in self.domains)

    def entitlements(self) -> dict[str, int]:
        """Team -> GPUs its own envelope entitles it to (teams that submit jobs only)."""
        submitting = {j.team for j in self.jobs}
        return {t.name: t.gpus for t in self.teams if t.name in submitting}
