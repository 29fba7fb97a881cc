"""The files jobtree writes under `state/` beside Leases and Reservations: run and budget status, the fleet file, observed clusters, ledger lines.

Published (`make schemas`) so a tool reading a fleet repository's `state/` has a contract, and
tested against every file the passes write (tests/reconciler/state/test_state_schemas.py). The
writers are `planner.status`, `reconciler.state.codec` and `reconciler.state.observed`; nothing
here is used at run time, and these models decide nothing. Leases and Reservations are their
kinds' own documents (`schemas.lease`, `schemas.reservation`); the pictures are SVG.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, RootModel

from schemas.common import RUN_KEY_PATTERN, Model, NonNegInt, NonNegNumber, Owner, RunKey, Timestamp
from schemas.lease import CLOSURE_REASONS, LOTTERY_CLOSURE, OpenReason, Payer, Role

Phase = Literal["Pending", "Waiting", "Running", "Succeeded", "Failed"]  # planner.reasons.Phase asserts it
# why a lease opened (Start, Grow, Swap, Fill) or closed (a closure reason, or the lottery's draw)
LEASE_REASON = (
    "^(" + "|".join(dict.fromkeys((*get_args(OpenReason), *CLOSURE_REASONS, LOTTERY_CLOSURE))) + ")$"
)


class Width(Model):
    """GPUs the run's spec asks for and holds; min/max/desired are absent until a spec was ever valid."""

    min: NonNegInt | None = None
    max: NonNegInt | None = None
    desired: NonNegInt | None = None
    allocated: NonNegInt
    pending: str | None = None  # a width change not yet carried out, in words


class Sponsor(Model):
    owner: Owner
    gpus: NonNegInt


class Funding(Model):
    """Who pays for the run's active GPUs now, and the GPU-hours it has used of each kind.

    Own, family and sponsors apart (§4.2): `familyGPUs` paid by relatives' envelopes that share,
    `sponsoredGPUs` lent by sponsors (what `maxBorrowGPUs` caps); `borrowedGPUs` is their sum (paid
    by any other owner); `family` and `sponsors` name each paying owner of that kind. A status
    written before the split has neither `familyGPUs` nor `family`, and its `sponsors` lists every
    other paying owner."""

    ownedGPUs: NonNegInt
    familyGPUs: NonNegInt | None = None
    sponsoredGPUs: NonNegInt | None = None
    borrowedGPUs: NonNegInt
    unfundedGPUs: NonNegInt
    fillGPUs: NonNegInt
    family: list[Sponsor] | None = None
    sponsors: list[Sponsor]
    ownedGPUHours: NonNegNumber
    borrowedGPUHours: NonNegNumber


class Hours(Model):
    owned: NonNegNumber
    borrowed: NonNegNumber


class Waiting(Model):
    """The run's pending Reservation: its name and when it is expected to start (null: not known)."""

    name: str
    earliestStart: Timestamp | None


class Conflict(Model):
    """A pending reservation that may cut this run when it comes due."""

    reservation: RunKey
    probability: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
    earliestStart: Timestamp


class RunStatus(Model):
    phase: Phase
    message: str
    submittedAt: Timestamp
    width: Width
    funding: Funding
    hours: Hours
    started: Timestamp | None
    finished: Timestamp | None
    startedAt: Timestamp | None = None
    reservation: Waiting | None = None
    conflicts: list[Conflict] | None = None
    conflictsTotal: NonNegInt | None = None
    cause: str | None = None  # why the run ended or was last cut
    nextGroup: NonNegInt | None = None  # the index the run's next new group gets
    completedGPUs: NonNegInt | None = None
    resized: Timestamp | None = None
    specInvalid: bool | None = None  # its file does not validate now: planned from the last valid one


class RunStatusFile(Model):
    """`state/status/runs/<namespace>/<run>.yaml`."""

    run: RunKey
    status: RunStatus


class EnvelopeUsage(Model):
    activeGPUs: NonNegInt
    spareGPUs: NonNegInt
    borrowedOutGPUs: NonNegInt
    unfundedGPUs: NonNegInt


class EnvelopeStatus(Model):
    name: str
    usage: EnvelopeUsage
    lentGPUs: NonNegInt
    headroom: NonNegInt
    consumedGPUHours: NonNegNumber
    spareGPUHours: NonNegNumber


class BudgetStatus(Model):
    envelopes: list[EnvelopeStatus] = Field(default_factory=list)
    message: str | None = None  # the budget's file does not validate now


class Meter(Model):
    """An envelope's GPU-hours so far in its window: consumed, on spares, lent to sponsored runs."""

    consumed: NonNegNumber
    spare: NonNegNumber
    lent: NonNegNumber


class BudgetStatusFile(Model):
    """`state/status/budgets/<budget>.yaml`."""

    budget: str
    status: BudgetStatus
    meters: dict[str, Meter]


class FleetStateFile(Model):
    """`state/fleet.yaml`: the instant the state was planned at, cordoned nodes, unfunded groups."""

    asOf: Timestamp | None
    cordoned: list[str]
    unfunded: list[
        Annotated[str, Field(pattern=RUN_KEY_PATTERN[:-1] + "#[0-9]+$")]
    ]  # <namespace>/<run>#<group>


class ObservedNode(Model):
    name: str
    gpus: NonNegInt
    labels: dict[str, str]
    ready: Literal[False] | None = None  # absent: Ready
    notReadySince: Timestamp | None = None
    cordoned: Literal[True] | None = None
    outOfService: Literal[True] | None = None
    deleted: Literal[True] | None = None


class ObservedName(Model):
    name: str


class ObservedCluster(Model):
    """`state/observed/<cluster>.yaml`: a configured cluster's nodes as the pass observed them."""

    apiVersion: Literal["rq.davidlangworthy.io/v1"]
    kind: Literal["ObservedCluster"]
    metadata: ObservedName
    nodes: list[ObservedNode]


class LeaseEvent(Model):
    """A lease opened (`Start`) or closed (`End`); `journal` names the agent's entry it folds in."""

    at: Timestamp
    event: Literal["Start", "End"]
    lease: str
    run: RunKey
    group: NonNegInt
    role: Role
    gpus: NonNegInt
    nodes: list[Annotated[str, Field(pattern=r"^.+#[0-9]+$")]]  # <node>#<GPU slot>
    payer: Payer
    reason: Annotated[str, Field(pattern=LEASE_REASON)]
    journal: str | None = None


class ReservationMoved(Model):
    """A reservation's ETA moved: from `previous` to `earliestStart` (null: not known), and why it waits."""

    at: Timestamp
    event: Literal["ReservationMoved"]
    run: RunKey
    earliestStart: Timestamp | None
    previous: Timestamp | None
    reason: str


class Workload(Model):
    """A workload outcome a cluster showed (its pods succeeded, failed, or were disrupted: evicted,
    refused by a kubelet, drained), which the pass acted on, with the Kubernetes reason."""

    at: Timestamp
    event: Literal["Workload"]
    run: RunKey
    outcome: Literal["Succeeded", "Failed", "Disrupted"]
    cluster: str
    group: NonNegInt | None = None
    node: str | None = None  # where the pod that ended was (a failed or disrupted one)
    reason: str | None = None  # its Kubernetes reason: Evicted, OutOfnvidia.com/gpu, Error (exit code 1), ...


class LedgerLine(
    RootModel[Annotated[LeaseEvent | ReservationMoved | Workload, Field(discriminator="event")]]
):
    """One line of `state/ledger/<YYYY-MM-DD>.jsonl` (append-only JSON lines), told apart by `event`."""

    model_config = {"frozen": True}
