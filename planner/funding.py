"""Funding classes kept current through a pass: re-derived from scratch once, then only for the
envelopes whose leases opened or closed since (`accounting.reclassify`), with the funding that
reservations in line hold put back where it was cleared.

Decides nothing: `accounting` says what funds what; this module says when to work it out again.
"""

from __future__ import annotations

from collections.abc import Iterable

from planner import accounting
from planner.context import Pass

FundingHold = tuple[str, str, int]  # (envelope, class, GPUs) a reservation in line keeps


def everything(ctx: Pass) -> None:
    """Every envelope's funding classes from the pass's leases (the start of a pass)."""
    ctx.book.unfunded = set()
    accounting.classify(ctx.book, ctx.leases, ctx.owner_of, ctx.rank)
    ctx.book.closures_at, ctx.book.closed_seen = ctx.closures, len(ctx.closed_log)


def changed(ctx: Pass, also: Iterable[str] = ()) -> set[str]:
    """Funding classes as `everything` derives them, settling again only the envelopes whose leases
    opened or closed since the last refresh (and `also`); every other envelope's claims are as that
    refresh left them. Returns the envelopes settled again."""
    book = ctx.book
    moved = [*ctx.closed_log[book.closed_seen :], *ctx.leases[book.seen :]]
    touched = {k for x in moved if (k := x.payer.env_key) is not None} | set(also)
    accounting.reclassify(book, ctx.leases, ctx.owner_of, ctx.rank, touched)
    book.closures_at, book.closed_seen = ctx.closures, len(ctx.closed_log)
    return touched


def after_failures(ctx: Pass) -> None:
    """Once failures and voluntary shrinks closed leases (nothing is held yet)."""
    changed(ctx)


def after_cuts(ctx: Pass, holds: Iterable[FundingHold]) -> None:
    """After an activation's cuts; the funding held for reservations in line is put back on the
    envelopes settled again."""
    touched = changed(ctx)
    for env_key, category, gpus in holds:
        if env_key in touched:
            ctx.book.hold(env_key, category, gpus)


def after_line(ctx: Pass, holds: list[FundingHold]) -> None:
    """Once the line and growth are done: the line's funding holds dropped."""
    changed(ctx, {env_key for env_key, _, _ in holds})
    holds.clear()
