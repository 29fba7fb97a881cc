"""The planner's vocabulary: observed facts and the state one pass hands to the next.

Frozen dataclasses for observations; leases, reservations and run records are plain slotted
dataclasses that a pass copies before changing. No parsing (that is `schemas`) and no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from planner.reasons import Closure, Confidence, OpenReason, Phase, Remedy, ResState, Role, Wait
from schemas.budget import Budget
from schemas.run import Run

REQUIRED_LABELS = ("region", "cluster", "fabric.domain", "gpu.flavor")


@dataclass(frozen=True, slots=True)
class NodeObs:
    """One node as observed: labels, GPU capacity and health."""

    name: str
    gpus: int
    labels: dict[str, str]
    ready: bool = True
    cordoned: bool = False
    out_of_service: bool = False
    deleted: bool = False
    not_ready_since: int | None = None


DISRUPT = "Disrupt"  # WorkloadEvent.event of a pod ended by an eviction, a refusal, a drain (§7.6)


@dataclass(frozen=True, slots=True)
class WorkloadEvent:
    """A workload outcome observed from pods: a whole run (group None) or one group. `Disrupt`: one
    pod of the group, on `node`, ended by something other than its workload (an eviction, a kubelet
    refusal, a drain: §7.6); never a failure of the run. `reason`: the Kubernetes reason."""

    run: str  # "ns/name"
    event: str  # Succeed | Fail | Disrupt
    group: int | None = None
    node: str | None = None  # where the pod was (a Disrupt's is required)
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Payer:
    owner: str
    budget: str | None = None
    envelope: str | None = None
    env_key: str | None = field(default=None, init=False, compare=False, repr=False)  # "budget/envelope"

    def __post_init__(self) -> None:
        key = f"{self.budget}/{self.envelope}" if self.budget and self.envelope else None
        object.__setattr__(self, "env_key", key)

    @property
    def key(self) -> tuple[str, str] | None:
        return (self.budget, self.envelope) if self.budget and self.envelope else None

    def as_dict(self) -> dict[str, str | None]:
        return {"owner": self.owner, "budget": self.budget, "envelope": self.envelope}


@dataclass(slots=True)
class Lease:
    """A slice of one group on one node with one payer; closure is the only later change."""

    name: str
    run: str  # "ns/name"
    group: int
    role: Role
    node: str
    slots: tuple[int, ...]
    payer: Payer
    start: int
    reason: OpenReason
    ended: int | None = None
    closure: str | None = None
    rank: int | None = None  # first rendezvous rank these GPUs serve (None for spares)
    # how the payer related to the run's owner when the lease opened: own, family or sponsor (the
    # seeds' "borrowed segments are labelled as such on the emitted leases"); None for fill, and for
    # leases written before it was recorded
    funding: str | None = None

    def copy(self) -> Lease:
        """A copy the next pass may close (every field holds an immutable value)."""
        return Lease(
            self.name, self.run, self.group, self.role, self.node, self.slots, self.payer, self.start,
            self.reason, self.ended, self.closure, self.rank, self.funding,
        )  # fmt: skip

    @property
    def open(self) -> bool:
        return self.ended is None

    @property
    def gpus(self) -> int:
        return len(self.slots)

    @property
    def namespace(self) -> str:
        return self.run.split("/", 1)[0]


@dataclass(frozen=True, slots=True)
class ConflictEntry:
    run: str
    probability: float
    since: int


@dataclass(slots=True)
class Reservation:
    run: str
    earliest_start: int | None  # None: nothing known makes the run startable (confidence unknown)
    created: int
    state: ResState = ResState.PENDING
    reason: str = ""  # the words of `why` and its numbers (§4.5), for people
    deficit: int = 0
    confidence: Confidence = Confidence.CONSERVATIVE
    remedies: tuple[Remedy, ...] = ()
    domains: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    paying: Payer | None = None
    basis: int | None = None  # the pass the forecast counts from: its creation, or a re-forecast
    conflicts: list[ConflictEntry] = field(default_factory=list)
    seed: str | None = None
    ended: int | None = None
    remedy_gpus: tuple[int, ...] = ()  # GPUs each remedy can free, in the order of `remedies`
    window: int | None = None  # the window start its ETA was aligned to: activation waits 10 s past it
    why: Wait | None = None  # the binding constraint (worked out again every pass; not stored)

    def copy(self) -> Reservation:
        """A copy the next pass may change (its own conflicts list; every other value is immutable)."""
        return Reservation(
            self.run, self.earliest_start, self.created, self.state, self.reason, self.deficit,
            self.confidence, self.remedies, self.domains, self.nodes, self.paying, self.basis,
            list(self.conflicts), self.seed, self.ended, self.remedy_gpus, self.window, self.why,
        )  # fmt: skip

    @property
    def since(self) -> int:
        """The instant the forecast counts from."""
        return self.basis if self.basis is not None else self.created


@dataclass(slots=True)
class RunRecord:
    """What the fleet remembers about a run between passes (its status, minus derived numbers)."""

    run: str
    submitted: int
    phase: Phase = Phase.PENDING
    message: str = ""
    started: int | None = None
    finished: int | None = None
    owned_hours: float = 0.0
    borrowed_hours: float = 0.0
    width: tuple[int, int, int] | None = None  # (min, max, desired) of the last valid spec
    cause: str = ""  # what put the run back in line (a cut, a node failure), said until it starts again
    next_group: int = 0  # the index its next new group takes: one above the highest it ever opened
    completed: int = 0  # GPUs of its groups that completed while the run went on (never re-grown)
    resized: int | None = None  # when its width last changed by a decision (start, growth, cut, shrink)
    invalid: bool = False  # its spec was invalid at the last pass (frozen)

    def copy(self) -> RunRecord:
        return RunRecord(
            self.run, self.submitted, self.phase, self.message, self.started, self.finished,
            self.owned_hours, self.borrowed_hours, self.width, self.cause, self.next_group,
            self.completed, self.resized, self.invalid,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class StatusChange:
    """A run's phase and message as a failure left them (what `Pass.set_status` wrote)."""

    run: str
    phase: Phase
    message: str
    cause: str = ""


@dataclass(frozen=True, slots=True)
class Failover:
    """What failure handling did at one instant (§4.8), as facts: the leases it closed (name and
    closure) and opened, the nodes it cordoned and the runs whose status it changed.

    The in-cluster agent carries one out ahead of Git and journals it under `entry` (§7.4); the next
    pass folds it in as observed (`World.journal`), before anything else, so it is never planned twice.
    """

    entry: str
    at: int
    closed: tuple[tuple[str, Closure], ...] = ()  # (lease name, closure)
    opened: tuple[Lease, ...] = ()
    cordon: tuple[str, ...] = ()
    status: tuple[StatusChange, ...] = ()


@dataclass(slots=True)
class EnvelopeMeter:
    """GPU-hours an envelope has paid for so far (integrated pass by pass)."""

    consumed: float = 0.0
    spare: float = 0.0
    lent: float = 0.0


@dataclass(slots=True)
class FleetState:
    """Everything one pass hands to the next; `state/` in Git is exactly this."""

    as_of: int | None = None
    leases: list[Lease] = field(default_factory=list)
    reservations: dict[str, Reservation] = field(default_factory=dict)
    runs: dict[str, RunRecord] = field(default_factory=dict)
    meters: dict[tuple[str, str], EnvelopeMeter] = field(default_factory=dict)
    cordoned: frozenset[str] = frozenset()  # nodes jobtree cordoned after a failure
    unfunded: frozenset[tuple[str, int]] = frozenset()  # groups charged to nobody since the last pass


@dataclass(frozen=True, slots=True)
class Settings:
    """FleetConfig numbers the planner needs, in seconds and fractions."""

    spare_rate: float = 0.5
    lookahead: int = 3600
    notice: int = 900
    min_runtime: int = 0
    retention: int = 86400
    lottery: bool = True  # False: structural cuts only, never `RandomPreempt`
    not_ready_grace: int | None = None
    tenants: tuple[tuple[str, str], ...] = ()  # (namespace, owner)
    fill_grace: int = 5  # fill.gracePeriodSeconds: a filler pod's termination grace


@dataclass(frozen=True, slots=True)
class World:
    """The snapshot one pass decides against."""

    now: int
    settings: Settings
    budgets: tuple[Budget, ...]
    runs: tuple[Run, ...]
    nodes: tuple[NodeObs, ...]
    state: FleetState
    workload: tuple[WorkloadEvent, ...] = ()
    # runs whose spec is invalid now -> the file to fix: keep, decide nothing, never start a lease
    frozen_runs: Mapping[str, str] = field(default_factory=dict)
    # budgets whose file is invalid now -> the file to fix: the last valid version (among `budgets`,
    # when the caller found one) keeps its claims funded
    frozen_budgets: Mapping[str, str] = field(default_factory=dict)
    # swaps the in-cluster agent carried out since the last pass, not yet in Git: folded in first
    journal: tuple[Failover, ...] = ()


def run_key(run: Run) -> str:
    return f"{run.metadata.namespace}/{run.metadata.name}"
