"""How a payer relates to a run's owner, in the words every view uses: own, family, sponsor (§4.2), or fill.

Own: the run owner's envelope; family: a relative's envelope that shares (`sharing` is not
`none`); sponsor: any other envelope, which lends (what `maxBorrowGPUs` caps); fill: opportunistic
GPUs on another run's spares, debiting no envelope. A lease opened since leases carry it says so
itself (the `rq.davidlangworthy.io/funding` label); older ones are classified from the budgets.
Words and classes only; decides nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from planner.accounting import Env
from reconciler.views.fleet import Fleet

OWN, FAMILY, SPONSOR, FILL = "own", "family", "sponsor", "fill"
ORDER = (OWN, FAMILY, SPONSOR)  # cover order (§4.2): how far cover went to pay
RANK = {kind: i for i, kind in enumerate((*ORDER, FILL))}


def source(fleet: Fleet, owner: str, payer: dict[str, Any]) -> str:
    """own, family or sponsor: how the paying envelope relates to the run's owner now."""
    if payer.get("owner") == owner:
        return OWN
    env = fleet.envelopes.get(f"{payer.get('budget')}/{payer.get('envelope')}")
    if env is not None and env.sharing != "none" and payer.get("owner") in fleet.relatives(owner):
        return FAMILY
    return SPONSOR


def relation(fleet: Fleet, owner: str, other: str) -> str:
    """`parent`, `sibling` or `relative`: what `other` is to `owner` in the budget family."""
    budgets = list(fleet.budgets.values())
    parents = {p for b in budgets if b.spec.owner == owner for p in b.spec.parents}
    if other in parents:
        return "parent"
    if any(b.spec.owner == other and set(b.spec.parents) & parents for b in budgets):
        return "sibling"
    return "relative"


def payer_words(fleet: Fleet, owner: str, payer: dict[str, Any], how: str | None = None) -> str:
    """`its owner's own envelope rai-sys/west-gb200`, `parent org:acme:rai's envelope rai/west-gb200
    (family sharing)`, `sponsor org:acme:media:vision's envelope … (lent)`."""
    env = f"{payer.get('budget')}/{payer.get('envelope')}"
    how = how or source(fleet, owner, payer)
    if how == OWN:
        return f"its owner's own envelope {env}"
    if how == FAMILY:
        return f"{relation(fleet, owner, payer['owner'])} {payer['owner']}'s envelope {env} (family sharing)"
    return f"sponsor {payer.get('owner')}'s envelope {env} (lent)"


def reaching(fleet: Fleet, flavor: str | None, domain: str, which: Callable[[Env], bool]) -> list[str]:
    """`budget/envelope` of the envelopes `which` picks whose flavor is `flavor` and whose selector
    reaches a node of `domain` (`region/cluster/fabric.domain`)."""
    labels = [
        n.labels
        for n in fleet.nodes.values()
        if "/".join(n.labels.get(k, "?") for k in ("region", "cluster", "fabric.domain")) == domain
    ]
    return sorted(
        e.key
        for e in fleet.envelopes.values()
        if which(e)
        and (flavor is None or e.flavor == flavor)
        and any(
            lab.get("gpu.flavor") == e.flavor
            and all(v == "*" or lab.get(k) == v for k, v in e.selector.items())
            for lab in labels
        )
    )
