"""The shape of `jobtree plan`'s report (JSON `version: 3`), as types: what `compare` returns and `render` reads.

One list of section keys (`SECTIONS`) drives what counts as a change and the order sections are
shown in. Entries are plain JSON-ready dicts (`json.dumps` of the report is its JSON view), typed
here so a reader sees every key in one place. Shapes only: no logic.
"""

from __future__ import annotations

from typing import Any, TypedDict

VERSION = 4  # 2: cuts and conflict sets both ways, a reservation's `was`, `waiting`, `widths`, `spareGPUs`,
# payers' owner, budget and envelope; 3: conflict-set entries are objects (reservation, probability);
# 4: a reservation's `earliestStart` may be null (confidence `unknown`), `remedyGPUs` beside `remedies`

# The sections of a report, in the order they are shown; any of them non-empty means `changes`.
SECTIONS = (
    "starts",
    "reserved",
    "cuts",
    "conflicts",
    "eta",
    "unfunded",
    "updated",
    "waiting",
    "widths",
    "budgets",
)


class Payer(TypedDict):
    payer: str  # "owner (budget/envelope, family)", or who lends
    owner: str | None
    budget: str | None
    envelope: str | None
    funding: str | None  # own, family or sponsor (None: a fill, or a lease opened before it was recorded)
    gpus: int


class StartRow(TypedDict, total=False):
    run: str
    gpus: int
    spareGPUs: int  # hot spares started with it (absent when none)
    domains: list[str]
    reason: str  # the lease's open reason ("Start", "Grow", ...)
    payers: list[Payer]


class ReservedRow(TypedDict, total=False):
    run: str
    earliestStart: str | None  # None: nothing known makes the run startable (confidence "unknown")
    confidence: str
    deficitGPUs: int
    reason: str
    remedies: list[str]
    remedyGPUs: list[int]  # per remedy, the GPUs it can free in scope (capacity deficits only)
    conflicts: int  # runs in its conflict set
    removed: bool  # the change removes this reservation
    was: dict[str, Any]  # reason, confidence and remedies before, when they moved


class CutRow(TypedDict, total=False):
    run: str
    reason: str  # closure reason
    gpus: int
    gpusBefore: int
    voluntary: bool  # a Shrink the change asks for (it lowers desiredTotalGPUs): not a cut


class ConflictEntry(TypedDict):
    reservation: str
    probability: float


class ConflictRow(TypedDict):
    run: str
    reservations: list[ConflictEntry]
    before: list[ConflictEntry]


# `from` (the ETA before) is a Python keyword: this one is declared in the functional form.
EtaRow = TypedDict(
    "EtaRow",
    {
        "run": str,
        "from": str | None,
        "to": str | None,
        "seconds": int | None,
        "text": str,  # `delays t/r2 by 2h`, or why it no longer starts now
    },
)


class UnfundedRow(TypedDict):
    run: str
    groupsBefore: int
    groupsAfter: int


class UpdatedRow(TypedDict):
    run: str
    pods: int
    changed: list[str]  # image, command, args, env, worldSize


class WaitingRow(TypedDict):
    run: str
    why: str


class WidthRow(TypedDict):
    run: str
    pending: str | None
    before: str | None


class BudgetRow(TypedDict):
    envelope: str  # "<budget>/<envelope>"
    before: dict[str, int] | None  # active, spare, lentOrShared, unfunded, headroom
    after: dict[str, int] | None


class Report(TypedDict):
    version: int
    base: str  # the base commit
    head: str  # the head commit
    now: str  # the instant planned
    merged: str | None  # the merge commit planned, when head has not merged the base
    stalled: list[str]  # files a side plans nothing without, and where
    diagnostics: list[str]  # problems this change brings (fail the check)
    diagnosticsOnBase: list[str]  # problems the base already has (shown, fail nothing)
    starts: list[StartRow]
    reserved: list[ReservedRow]
    cuts: list[CutRow]
    conflicts: list[ConflictRow]
    eta: list[EtaRow]
    unfunded: list[UnfundedRow]
    updated: list[UpdatedRow]
    waiting: list[WaitingRow]
    widths: list[WidthRow]
    budgets: list[BudgetRow]
    changes: bool  # any section above non-empty
