"""Cover: who may pay for a run — own envelopes, then family, then sponsors — and why not.

Produces funding sources in cover order and, when they fall short, the exact reason and remedy.
Places nothing (that is `pack`) and never counts physical capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.accounting import FAMILY, LOAN, OWN, Book, Env
from planner.pack import Source
from planner.topology import Topology
from schemas.common import format_time
from schemas.run import Run

REMEDY_BORROW = "Increase maxBorrowGPUs or shrink the run"
REMEDY_ACL = "Update the lending policy and re-submit"
REMEDY_HEADROOM = "Wait for budget headroom, add sponsors, or shrink the run"
REMEDY_WINDOW = "Wait for the budget window to open"


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why a run cannot be funded now: the reason string of the contract, the GPUs short, advice."""

    reason: str
    deficit: int
    remedy: str
    window: int | None = None  # the window start that would fund it, if any


def candidates(book: Book, run: Run) -> list[tuple[Env, str]]:
    """Every envelope that could ever pay for this run, in cover order, with its class."""
    f = run.spec.funding
    key = (run.spec.owner, run.spec.resources.gpuType, f.allowBorrow, tuple(f.sponsors))
    hit = book.cover_cache.get(key)
    if hit is None:
        hit = book.cover_cache[key] = _candidates(book, run)
    return hit


def _candidates(book: Book, run: Run) -> list[tuple[Env, str]]:
    owner = run.spec.owner
    flavor = run.spec.resources.gpuType
    out: list[tuple[Env, str]] = []
    seen: set[str] = set()

    def add(env: Env, cat: str) -> None:
        if env.flavor == flavor and env.key not in seen:
            seen.add(env.key)
            out.append((env, cat))

    for env in sorted(book.by_owner.get(owner, []), key=lambda e: e.key):
        add(env, OWN)
    for rel in book.relatives(owner):
        for env in sorted(book.by_owner.get(rel, []), key=lambda e: e.key):
            if env.sharing != "none":
                add(env, FAMILY)
    if run.spec.funding.allowBorrow:
        for sponsor in run.spec.funding.sponsors:
            for env in sorted(book.by_owner.get(sponsor, []), key=lambda e: e.key):
                if env.lends_to(owner):
                    add(env, LOAN)
    return out


def sources(book: Book, topo: Topology, run: Run, lookahead_hours: float) -> list[Source]:
    """Funding sources in cover order with their room now (possibly none) and the nodes they admit.

    Cached per funding shape until the book changes: most runs in a long line leave it untouched.
    """
    f = run.spec.funding
    key = (run.spec.owner, run.spec.resources.gpuType, f.allowBorrow, tuple(f.sponsors), lookahead_hours)
    hit = book.sources_cache.get(key)
    if hit is not None and hit[0] == book.version:
        return hit[1]  # type: ignore[return-value]
    out = [
        Source(env, cat, book.headroom(env, cat, lookahead_hours), topo.matching(env.flavor, env.selector))
        for env, cat in candidates(book, run)
    ]
    book.sources_cache[key] = (book.version, out)  # type: ignore[assignment]
    return out


def fundable(srcs: list[Source], max_borrow: int | None) -> int:
    own = sum(s.room for s in srcs if s.category != LOAN)
    loans = sum(s.room for s in srcs if s.category == LOAN)
    if max_borrow is not None:
        loans = min(loans, max_borrow)
    return own + loans


def shortfall(
    book: Book, run: Run, need: int, srcs: list[Source], lookahead_hours: float
) -> Shortfall | None:
    """None when `need` GPUs are fundable now; otherwise the funding reason (window, borrow, headroom)."""
    max_borrow = run.spec.funding.maxBorrowGPUs if run.spec.funding.allowBorrow else 0
    have = fundable(srcs, max_borrow)
    if have >= need:
        return None
    # a future window that would make it whole
    future = sorted(
        {env.start for env, _ in candidates(book, run) if env.start is not None and env.start > book.now}
    )
    for start in future:
        extra = sum(
            env.concurrency for env, cat in candidates(book, run) if env.start == start and cat != LOAN
        )
        if have + extra >= need:
            return Shortfall(
                f"budget window opens at {format_time(start)}", need - have, REMEDY_WINDOW, start
            )
    unlimited = fundable(srcs, None)
    if max_borrow is not None and unlimited > have:
        return Shortfall(
            f"borrow limit of {max_borrow} GPUs exhausted for requested width", need - have, REMEDY_BORROW
        )
    refused = run.spec.funding.allowBorrow and any(
        not any(
            env.lends_to(run.spec.owner) and env.flavor == run.spec.resources.gpuType
            for env in book.by_owner.get(s, [])
        )
        for s in run.spec.funding.sponsors
    )
    remedy = REMEDY_ACL if refused else REMEDY_HEADROOM
    return Shortfall(f"budget headroom short by {need - have} GPUs", need - have, remedy)
