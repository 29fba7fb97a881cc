"""The planner's vocabulary as typed constants: roles, phases, states, closures, reasons, remedies.

Every decision compares kinds from here, never the text of a message (Kueue's `errors.go`: "so
callers can identify the failure … instead of matching on the message text"). The words people
read are built here from a kind and its numbers, and never parsed back. Decides nothing itself.
"""

from __future__ import annotations

from enum import StrEnum

from schemas.common import format_time


class Role(StrEnum):
    """What a lease's slots do: run the workload, stand by as a hot spare, or fill a spare's slots."""

    ACTIVE = "Active"
    SPARE = "Spare"
    BORROWED = "Borrowed"


class Ledger(StrEnum):
    """What a ledger line records: a lease opening or closing, or a reservation's ETA moving."""

    START = "Start"
    END = "End"
    MOVED = "ReservationMoved"


class OpenReason(StrEnum):
    START = "Start"
    GROW = "Grow"
    SWAP = "Swap"
    FILL = "Fill"


class Phase(StrEnum):
    PENDING = "Pending"  # in line for admission (may hold a Reservation)
    WAITING = "Waiting"  # held by `after`: not in line
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class ResState(StrEnum):
    PENDING = "Pending"
    RELEASED = "Released"
    FAILED = "Failed"


class Confidence(StrEnum):
    CONSERVATIVE = "conservative"
    WINDOW = "window-aligned"
    UNKNOWN = "unknown"  # nothing known makes the run fundable: no earliestStart


class Closure(StrEnum):
    """Why a lease closed (§4.8, the complete list); `RandomPreempt` carries the lottery's seed."""

    COMPLETED = "Completed"
    NODE_FAILURE = "NodeFailure"
    SWAP = "Swap"
    RECLAIMED_BY_SPARE = "ReclaimedBySpare"
    RUN_FAILED = "RunFailed"
    SHRINK = "Shrink"
    DROP_SPARE = "DropSpare"
    RECLAIM_UNFUNDED = "ReclaimUnfunded"
    RANDOM_PREEMPT = "RandomPreempt"
    WORKLOAD_FAILED = "WorkloadFailed"
    RUN_DELETED = "RunDeleted"


def closure_text(kind: Closure, seed: str | None = None) -> str:
    """The closure as written on the lease: `RandomPreempt(<seed>)` for the lottery, else the kind."""
    return f"{kind.value}({seed})" if kind == Closure.RANDOM_PREEMPT else kind.value


class Wait(StrEnum):
    """Why a reserved run waits: the binding constraint, which names its reason sentence (§4.5)."""

    CLUSTER_SHORT = "cluster short"
    HEADROOM = "headroom"
    SPONSOR_REFUSED = "sponsor refused"  # reads as a headroom shortfall; its remedy differs
    BORROW_LIMIT = "borrow limit"
    WINDOW = "window"
    GROUPING = "grouping"  # no domain its funding reaches holds a group (or the run kept together)
    NO_FLAVOR = "no flavor"  # no node of its GPU flavor in the fleet
    OUT_OF_REACH = "out of reach"  # more GPUs than the fleet its funding reaches, even empty
    REQUEUED = "requeued"  # cut at this instant, it fits and starts at a later pass
    DELETED = "deleted"


GROUPING = "no single domain satisfies run grouping"
# what no capacity can change (§4.5): the infeasible form, with no ETA and no funding advice
INFEASIBLE = frozenset({Wait.GROUPING, Wait.NO_FLAVOR, Wait.OUT_OF_REACH})


def wait_text(
    kind: Wait,
    deficit: int,
    *,
    window: int | None = None,
    borrow_limit: int = 0,
    flavor: str = "",
    reach: int = 0,
) -> str:
    """The reservation's `status.reason`, as §4.5 words it."""
    if kind == Wait.CLUSTER_SHORT:
        return f"cluster short by {deficit} GPUs in scope"
    if kind in (Wait.HEADROOM, Wait.SPONSOR_REFUSED):
        return f"budget headroom short by {deficit} GPUs"
    if kind == Wait.BORROW_LIMIT:
        return f"borrow limit of {borrow_limit} GPUs exhausted for requested width"
    if kind == Wait.WINDOW:
        assert window is not None
        return f"budget window opens at {format_time(window)}"
    if kind == Wait.GROUPING:
        return GROUPING
    if kind == Wait.NO_FLAVOR:
        return f"no GPU of flavor {flavor} in the fleet"
    if kind == Wait.OUT_OF_REACH:
        return f"needs {deficit} GPUs; its funding reaches {reach}"
    if kind == Wait.REQUEUED:
        return "requeued by a cut at this pass; it fits and starts at a later pass"
    return "run deleted"


class Remedy(StrEnum):
    """What would clear a reservation's deficit, in the words of §4.5."""

    RECLAIM = "Reclaim unfunded capacity in scope"
    SPARES = "Drop spares in scope"
    SHRINK = "Shrink elastic runs by step size"
    LOTTERY = "Run fair lottery if deficit remains"
    BORROW = "Increase maxBorrowGPUs or shrink the run"
    SPONSOR = "Update the lending policy and re-submit"
    HEADROOM = "Wait for budget headroom, add sponsors, or shrink the run"
    WINDOW = "Wait for the budget window to open"


CAPACITY_REMEDIES = (Remedy.RECLAIM, Remedy.SPARES, Remedy.SHRINK, Remedy.LOTTERY)
# a funding shortfall's remedy per binding kind; the others that apply follow in this order
FUNDING_REMEDY = {
    Wait.BORROW_LIMIT: Remedy.BORROW,
    Wait.SPONSOR_REFUSED: Remedy.SPONSOR,
    Wait.HEADROOM: Remedy.HEADROOM,
    Wait.WINDOW: Remedy.WINDOW,
}


# -- what people read on a run (`status.message`), built from the kind of event and its numbers --


def bound(gpus: int) -> str:
    return f"bound {gpus} GPUs"


def grew(gpus: int) -> str:
    return f"grew to {gpus} GPUs"


def shrunk(gpus: int, reservation: str | None = None) -> str:
    return f"shrunk to {gpus} GPUs" + (f" for reservation {reservation}" if reservation else "")


def requeued(closure: str, reservation: str) -> str:
    return f"requeued after {closure} for reservation {reservation}"


def swapped(group: int) -> str:
    return f"group {group} swapped to spare after node failure"


def lost_group(group: int, node: str) -> str:
    return f"group {group} lost to node failure on {node}"


def continuing(group: int, node: str, gpus: int) -> str:
    return f"{lost_group(group, node)}; continuing at {gpus} GPUs"


def failed_no_spare(group: int, node: str) -> str:
    return f"{lost_group(group, node)} with no usable spare"


FILL_RECLAIMED = "fill leases reclaimed by spares"
WAITING_TO_FILL = "waiting for spare capacity to fill"
ALL_COMPLETED = "all groups completed"
DEPENDENCIES_SUCCEEDED = "dependencies succeeded"
SPEC_VALID_AGAIN = "spec valid again"


def running_with(gpus: int) -> str:
    return f"{FILL_RECLAIMED}; running with {gpus} GPUs"


def workload_failed(group: int | None) -> str:
    return "workload failed" if group is None else f"workload of group {group} failed"


def dependency_failed(dep: str) -> str:
    return f"dependency {dep} failed"


def dependency_deleted(dep: str) -> str:
    return f"dependency {dep} was deleted"


def waiting_for(deps: list[str]) -> str:
    return "waiting for " + ", ".join(deps)


def spec_invalid(path: str) -> str:
    return f"spec invalid: fix {path}"


def reserved(reason: str, cause: str = "", capacity_deficit: int | None = None) -> str:
    """A reserved run's message: why it waits, after what put it back in line when something did."""
    if not cause:
        return f"reserved: {reason}"
    if capacity_deficit is not None:
        return f"{cause}; waiting for {capacity_deficit} GPUs"
    return f"{cause}; waiting: {reason}"


def held_back(reason: str, cause: str = "") -> str:
    """A run that cannot be placed on any fleet its funding reaches: no reservation is held."""
    return f"{cause}; {reason}" if cause else f"cannot start: {reason}"
