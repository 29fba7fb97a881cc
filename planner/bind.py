"""Bind: a packing becomes Lease records on node-global slot numbers, one per (group, node, payer).

Pure bookkeeping of what `pack` decided; the pod manifests for these leases are `manifests`.
"""

from __future__ import annotations

from planner.accounting import SOURCE_WORDS
from planner.context import Pass
from planner.pack import GroupPlan, Piece
from planner.reasons import OpenReason, Role
from planner.world import Lease, Payer


def _payer(owner: str, piece: Piece, payers: dict[int, Payer]) -> Payer:
    """The piece's payer; `payers` keeps one per envelope for the call (a run's pieces share a few)."""
    if piece.source is None:
        return Payer(owner)
    env = piece.source.env
    payer = payers.get(id(env))
    if payer is None:
        payer = payers[id(env)] = Payer(env.owner, env.budget, env.name)
    return payer


def bind(
    ctx: Pass, run: str, owner: str, groups: list[GroupPlan], reason: OpenReason, role: Role = Role.ACTIVE
) -> list[Lease]:
    """Open the leases of the planned groups (and their spares), debiting the paying envelopes.

    Each working lease records the first rendezvous rank its GPUs serve: a new group takes the lowest
    block of ranks no open group serves (blocks of the group size; or after the groups before it),
    pieces in placement order. A swap moves these ranks to the spare; nothing else renumbers them."""
    out: list[Lease] = []
    payers: dict[int, Payer] = {}
    taken = sorted((x.rank, x.rank + x.gpus) for x in ctx.open_leases(run) if x.rank is not None)
    for g in groups:
        rank = _free_block(taken, g.gpus)
        taken = sorted([*taken, (rank, rank + g.gpus)])
        for pieces, piece_role in ((g.pieces, role), (g.spares, Role.SPARE)):
            for piece in pieces:
                node = ctx.topo.nodes[piece.node]
                slots = (
                    tuple(node.fill_slots()[: piece.gpus])
                    if role == Role.BORROWED
                    else node.free_slots(piece.gpus)
                )
                working = piece_role != Role.SPARE
                lease = ctx.open_lease(
                    run, g.index, piece_role, piece.node, slots, _payer(owner, piece, payers), reason,
                    rank if working else None,
                    SOURCE_WORDS[piece.source.category] if piece.source is not None else None,
                )  # fmt: skip
                if working:
                    rank += piece.gpus
                if piece.source is not None:
                    ctx.book.add(piece.source.env.key, piece.source.category, piece.gpus)
                out.append(lease)
    return out


def _free_block(taken: list[tuple[int, int]], size: int) -> int:
    """The lowest rank b such that [b, b + size) overlaps none of the sorted `taken` ranges."""
    base = 0
    for low, high in taken:
        if base + size <= low:
            break
        base = max(base, high)
    return base
