"""Bind: a packing becomes Lease records on node-global slot numbers, one per (group, node, payer).

Pure bookkeeping of what `pack` decided; the pod manifests for these leases are `manifests`.
"""

from __future__ import annotations

from planner.context import Pass
from planner.pack import GroupPlan, Piece
from planner.world import Lease, Payer


def _payer(owner: str, piece: Piece) -> Payer:
    if piece.source is None:
        return Payer(owner)
    env = piece.source.env
    return Payer(env.owner, env.budget, env.name)


def bind(
    ctx: Pass, run: str, owner: str, groups: list[GroupPlan], reason: str, role: str = "Active"
) -> list[Lease]:
    """Open the leases of the planned groups (and their spares), debiting the paying envelopes."""
    out: list[Lease] = []
    for g in groups:
        for pieces, piece_role in ((g.pieces, role), (g.spares, "Spare")):
            for piece in pieces:
                node = ctx.topo.nodes[piece.node]
                slots = (
                    tuple(node.fill_slots()[: piece.gpus])
                    if role == "Borrowed"
                    else node.free_slots(piece.gpus)
                )
                lease = ctx.open_lease(
                    run, g.index, piece_role, piece.node, slots, _payer(owner, piece), reason
                )
                if piece.source is not None:
                    ctx.book.add(piece.source.env.key, piece.source.category, piece.gpus)
                out.append(lease)
    return out
