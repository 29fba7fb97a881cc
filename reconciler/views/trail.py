"""`explain`: a run's decision trail in words, from its ledger events, its status and the reservations in `state/`.

When it was submitted; each start, growth, swap, shrink, cut and end with its reason (a cut names
the reservation whose activation made it, and a lottery cut its published seed and the code that
replays the draw); who pays for each group now and why (its owner's own envelope, family, a
sponsor, or nobody), where each group runs and why that domain; why it waits and what would change
that; which reservations may cut it. Every kind is decided on typed values (roles, closures,
phases, remedies), never on message text. Decides nothing.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby
from typing import Any

from planner.reasons import CAPACITY_REMEDIES, Closure, Ledger, OpenReason, Phase, Remedy, ResState, Role
from planner.world import Lease, Reservation
from reconciler.views import draws, runs
from reconciler.views import funding as sources
from reconciler.views.fleet import Fleet
from schemas.common import format_duration, format_time, parse_time

CUT_BY_RESOLVER = {Closure.RECLAIM_UNFUNDED.value, Closure.DROP_SPARE.value}
ENDED = {
    Closure.COMPLETED.value: "completed",
    Closure.NODE_FAILURE.value: "lost to a node failure",
    Closure.SWAP.value: "its spare was taken to replace a failed node's GPUs",
    Closure.RECLAIMED_BY_SPARE.value: "fill reclaimed: the spare it ran on was needed",
    Closure.RUN_FAILED.value: "ended with the run, which failed",
    Closure.WORKLOAD_FAILED.value: "its workload failed",
    Closure.RUN_DELETED.value: "the run's file was deleted",
}


def explain(fleet: Fleet, run: str, now: int) -> dict[str, Any]:
    st = runs.status(fleet, run)
    leases = fleet.leases(run)
    events = fleet.events(run)
    reservations = fleet.reservations()
    own = reservations.get(run)
    lotteries = draws.lotteries_that_cut(fleet, run)
    trail = [
        *_submitted(fleet, run, st),
        *_reserved(fleet, own),
        *_events(fleet, run, events, reservations, lotteries),
    ]
    trail.sort(key=lambda e: (e["at"], e["order"]))
    for e in trail:
        del e["order"]
    res = own if own is not None and own.state == ResState.PENDING else None
    return runs.header("RunExplain", fleet, now) | {
        "run": run,
        "phase": st.get("phase"),
        "message": st.get("message", ""),
        "problems": _problems(fleet, run),
        "trail": trail,
        "funding": _funding(fleet, run, leases),
        "placement": _placement(fleet, run, leases),
        "waiting": _waiting(fleet, st, res, now),
        "conflicts": _conflicts(st, now),
        "lotteries": [lot.as_json() for lot in lotteries],
    }


def _problems(fleet: Fleet, run: str) -> list[str]:
    """What the validator says about the run's file when it does not validate (none when it does)."""
    if run in fleet.specs:
        return []
    path = fleet.spec.rejected.get(f"Run {run}")
    if path is None:
        held = fleet.run_file(run)
        path = held[0] if held is not None else None
    return [str(d) for d in sorted(fleet.spec.diagnostics) if path is not None and d.path == path]


# -- the trail ----------------------------------------------------------------------------------------


def _entry(at: str, kind: str, text: str, order: float, **more: Any) -> dict[str, Any]:
    return {"at": at, "kind": kind, "text": text, "order": order, **more}


def _submitted(fleet: Fleet, run: str, st: dict[str, Any]) -> list[dict[str, Any]]:
    if not st.get("submittedAt"):
        return []
    spec = fleet.specs.get(run)
    asks = ""
    if spec is not None:
        s = spec.spec
        asks = f": asks for {s.resources.totalGPUs} {s.resources.gpuType} GPUs"
        if s.locality.groupGPUs:
            asks += f" in groups of {s.locality.groupGPUs}"
        if s.malleable is not None:
            m = s.malleable
            asks += f", elastic {m.minTotalGPUs}..{m.maxTotalGPUs} by {m.stepGPUs}"
        if s.sparesPerGroup:
            asks += f", {s.sparesPerGroup} spare GPUs per group"
        if s.funding.allowBorrow and s.funding.sponsors:
            asks += f", may borrow from {', '.join(s.funding.sponsors)}"
    return [_entry(st["submittedAt"], "Submitted", f"submitted{asks}", 0)]


def _made_room(fleet: Fleet, res: Reservation, at: int) -> str:
    """`; to make room it ended groups of team-b/b1 (RandomPreempt(...)), team-c/c1 (Shrink)`: what
    the activation at `at` ended of the runs in its conflict set (from that day's ledger)."""
    members = {c.run for c in res.conflicts}
    when = format_time(at)
    ended: dict[str, str] = {}
    for e in fleet.events(day=when[:10]):
        if e.get("at") == when and e.get("event") == Ledger.END.value and e.get("run") in members:
            ended.setdefault(e["run"], e["reason"])
    if not ended:
        return ""
    return "; to make room it ended groups of " + ", ".join(
        f"{r} ({why})" for r, why in sorted(ended.items())
    )


def _reserved(fleet: Fleet, res: Reservation | None) -> list[dict[str, Any]]:
    if res is None:
        return []
    out = [
        _entry(format_time(res.created), "Reserved", "could not start then: reserved, waiting in line", 2.5)
    ]
    if res.state == ResState.FAILED and res.ended is not None:
        out.append(
            _entry(format_time(res.ended), "ReservationFailed", f"reservation dropped: {res.reason}", 2.5)
        )
    elif res.state == ResState.RELEASED and res.ended is not None:
        waited = format_duration(res.ended - res.created)
        text = f"its reservation activated after {waited} in line; it had waited because: {res.reason}"
        text += _made_room(fleet, res, res.ended)
        out.append(_entry(format_time(res.ended), "Activated", text, 2.6, reason=res.reason))
    return out


def _activated_at(reservations: dict[str, Reservation], at: str, run: str) -> Reservation | None:
    """The reservation that activated at `at` and may have cut `run` (its conflict set names it first)."""
    when = parse_time(at)
    found = [r for r in reservations.values() if r.state == ResState.RELEASED and r.ended == when]
    found.sort(key=lambda r: (run not in {c.run for c in r.conflicts}, r.run))
    return found[0] if found else None


def _where(fleet: Fleet, batch: list[dict[str, Any]]) -> str:
    """`in us-west/gpu-a/A: group 0 on A-n03 (8), group 1 on A-n04 (8)`: lease events by domain."""
    held: dict[str, dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    for e in batch:
        for slot in e["nodes"]:
            node = slot.rsplit("#", 1)[0]
            held[runs.domain_of(fleet, node)][e["group"]][node] += 1
    parts = []
    for domain, groups in sorted(held.items()):
        listed = [
            f"group {g} on {', '.join(f'{n} ({k})' for n, k in sorted(nodes.items()))}"
            for g, nodes in sorted(groups.items())
        ]
        parts.append(f"in {domain}: {', '.join(listed)}")
    return "; ".join(parts)


def _events(
    fleet: Fleet,
    run: str,
    events: list[dict[str, Any]],
    reservations: dict[str, Reservation],
    lotteries: list[draws.Lottery],
) -> list[dict[str, Any]]:
    out = []
    by_closure = {lot.closure: lot for lot in lotteries}
    owner = fleet.owner_of(run) or ""
    swapped = {
        (e["at"], e["group"])
        for e in events
        if e["event"] == Ledger.START.value and e["reason"] == OpenReason.SWAP.value
    }
    for (at, kind, reason), grouped in groupby(events, key=lambda e: (e["at"], e["event"], e["reason"])):
        batch = list(grouped)
        if (
            kind == Ledger.END.value and reason == Closure.SWAP.value
        ):  # the spare that took over: told by the swap
            batch = [e for e in batch if (at, e["group"]) not in swapped]
            if not batch:
                continue
        if kind == Ledger.MOVED.value:
            e = batch[0]
            text = f"ETA moved from {e['previous'] or 'unknown'} to {e['earliestStart'] or 'unknown'}: {e['reason']}"
            out.append(_entry(at, "ReservationMoved", text, 4))
            continue
        active = [e for e in batch if e["role"] != Role.SPARE.value]
        spares = sum(e["gpus"] for e in batch if e["role"] == Role.SPARE.value)
        gpus = sum(e["gpus"] for e in active)
        if kind == Ledger.START.value:
            out.append(_started(fleet, owner, at, reason, active, gpus, spares))
            continue
        what = f"{gpus} GPUs {_where(fleet, active)}" if active else f"{spares} spare GPUs"
        lottery = by_closure.get(reason)
        if lottery is not None:
            how = "replayed below" if lottery.reproduced else "not reproducible from what state/ still holds"
            text = (
                f"cut by the fair lottery of reservation {lottery.reservation}, seed {lottery.seed}: {what} "
                f"ended ({how})"
            )
            out.append(_entry(at, "Cut", text, 2, reservation=lottery.reservation, seed=lottery.seed))
        elif reason in CUT_BY_RESOLVER or reason == Closure.SHRINK.value:
            res = _activated_at(reservations, at, run)
            verb = {
                Closure.RECLAIM_UNFUNDED.value: "reclaimed as unfunded",
                Closure.DROP_SPARE.value: "spares dropped",
            }
            said = verb.get(reason, "shrunk by whole groups")
            if res is not None and run in {c.run for c in res.conflicts}:
                text = f"{said} for reservation {res.run} (it was in its conflict set): {what} ended"
                out.append(_entry(at, "Cut", text, 2, reservation=res.run, closure=reason))
            elif reason == Closure.SHRINK.value:
                out.append(_entry(at, "Shrink", f"shrunk to its desired width: {what} ended", 2))
            else:
                out.append(_entry(at, "Cut", f"{said}: {what} ended", 2, closure=reason))
        else:
            text = f"{what} ended: {ENDED.get(reason, reason)}"
            out.append(_entry(at, "End", text, 2, closure=reason))
    return out


def _started(
    fleet: Fleet, owner: str, at: str, reason: str, active: list[dict[str, Any]], gpus: int, spares: int
) -> dict[str, Any]:
    payers = sorted({sources.payer_words(fleet, owner, e["payer"]) for e in active})
    paid = f"; paid by {', '.join(payers)}" if payers else ""
    extra = f" (+{spares} spare GPUs)" if spares else ""
    where = _where(fleet, active)
    if reason == OpenReason.SWAP.value:
        text = f"swapped onto its hot spare after a node failure: {where}{paid}"
    elif reason == OpenReason.GROW.value:
        text = f"grew by {gpus} GPUs: {where}{paid}"
    elif reason == OpenReason.FILL.value:
        text = f"filled {gpus} spare GPUs of other runs (opportunistic): {where}"
    elif not active:
        text = f"{spares} spare GPUs held again"
    else:
        text = f"started {gpus} GPUs{extra}: {where}{paid}"
    return _entry(at, reason, text, 3)


# -- who pays and where ------------------------------------------------------------------------------


def _funding(fleet: Fleet, run: str, leases: list[Lease]) -> list[dict[str, Any]]:
    owner = fleet.owner_of(run) or ""
    spec = fleet.specs.get(run)
    flavor = spec.spec.resources.gpuType if spec is not None else None
    out = []
    for g in runs.groups(fleet, run, leases):
        if g["role"] == Role.BORROWED.value:
            kinds = [sources.FILL]
            why = "opportunistic fill on another run's spare GPUs: metered to its owner, debits no envelope"
        elif g["unfunded"]:
            kinds = ["unfunded"]
            why = (
                "charged to nobody: its envelope no longer covers it (concurrency, window or GPU-hours); "
                "it keeps running and is the first capacity reclaimed when funded work needs it"
            )
        else:
            kinds = [p["funding"] for p in g["payers"]]
            paid = ", ".join(
                f"{p['gpus']} GPUs by {sources.payer_words(fleet, owner, p, p['funding'])}"
                for p in g["payers"]
            )
            why = f"{paid}: {_cover_went(fleet, owner, flavor, g['domain'], kinds)}"
        out.append(
            {
                "group": g["group"],
                "role": g["role"],
                "gpus": g["gpus"],
                "sources": kinds,
                "payers": g["payers"],
                "why": why,
            }
        )
    return out


def _cover_went(fleet: Fleet, owner: str, flavor: str | None, domain: str, kinds: list[str]) -> str:
    """Why cover went as far as the furthest source a group uses (§4.2), saying whether the nearer
    sources had no envelope there at all or were full."""
    furthest = max(kinds, key=sources.ORDER.index)
    if furthest == sources.OWN:
        return "cover pays from the owner's own envelopes first"
    what = f"{flavor or 'its flavor'} in {domain}"
    own = sources.reaching(fleet, flavor, domain, lambda e: e.owner == owner)
    if own:
        first = (
            f"the owner's own envelope{'s' * (len(own) > 1)} there ({', '.join(own)}) had no headroom left"
        )
    else:
        first = f"the owner has no envelope of its own for {what}"
    if furthest == sources.FAMILY:
        rest = "paid the rest" if sources.OWN in kinds else "paid"
        return f"{first}, so family headroom (envelopes that share) {rest}"
    kin = set(fleet.relatives(owner))
    family = sources.reaching(fleet, flavor, domain, lambda e: e.owner in kin and e.sharing != "none")
    second = "family envelopes there were full" if family else "no relative's envelope shares " + what
    return (
        f"{first} and {second}; the run allows borrowing and names this sponsor, whose lending policy "
        "admits its owner"
    )


def _reach(fleet: Fleet, payer: dict[str, Any], flavor: str | None) -> list[str]:
    """Domains whose nodes the paying envelope's flavor and selector reach."""
    budget = fleet.budgets.get(payer.get("budget") or "")
    env = (
        next((e for e in budget.spec.envelopes if e.name == payer.get("envelope")), None) if budget else None
    )
    if env is None:
        return []
    found = set()
    for node in fleet.nodes.values():
        labels = node.labels
        if labels.get("gpu.flavor") != env.flavor or (flavor and flavor != env.flavor):
            continue
        if all(v == "*" or labels.get(k) == v for k, v in env.selector.items()):
            found.add(runs.domain_of(fleet, node.name))
    return sorted(found)


def _placement(fleet: Fleet, run: str, leases: list[Lease]) -> list[dict[str, Any]]:
    spec = fleet.specs.get(run)
    flavor = spec.spec.resources.gpuType if spec is not None else None
    held = runs.groups(fleet, run, leases)
    domains_before: dict[str, list[int]] = defaultdict(list)
    out = []
    for g in held:
        swapped = sorted(
            {x.node for x in leases if x.group == g["group"] and x.open and x.reason == OpenReason.SWAP}
        )
        if g["role"] == Role.BORROWED.value:
            why = "on GPUs held as another run's spares (opportunistic fill)"
        elif g["role"] == Role.SPARE.value:
            why = "spares stay in their group's domain, on the nodes with the most free GPUs"
        elif swapped and g["role"] == Role.ACTIVE.value:
            why = f"its hot spare on {', '.join(swapped)} stands in for a failed node (a spare is kept in its group's domain)"
        elif domains_before.get(g["domain"]):
            why = "with the run's other groups: pack prefers a domain the run already uses"
        else:
            reach = _reach(fleet, g["payers"][0], flavor) if g["payers"] else []
            if reach == [g["domain"]]:
                why = f"the only domain its paying envelope reaches ({g['payers'][0]['budget']}/{g['payers'][0]['envelope']})"
            elif reach:
                why = (
                    f"one of {len(reach)} domains its paying envelope reaches: pack takes the domain its "
                    "nearest funding covers, then the one with the most free GPUs (ties by name)"
                )
            else:
                why = "pack's choice: nearest funding first, then the most free GPUs (ties by name)"
        if g["role"] == Role.ACTIVE.value:
            domains_before[g["domain"]].append(g["group"])
        out.append(
            {"group": g["group"], "role": g["role"], "domain": g["domain"], "nodes": g["nodes"], "why": why}
        )
    return out


# -- why it waits, and who may cut it ----------------------------------------------------------------


_RESOLVER = {  # a capacity remedy as what activation itself does, in its fixed order (§4.6)
    Remedy.RECLAIM: "reclaim unfunded capacity in scope",
    Remedy.SPARES: "drop spares in scope",
    Remedy.SHRINK: "shrink elastic runs by whole groups",
    Remedy.LOTTERY: "the fair lottery for what is still short",
}


def _waiting(fleet: Fleet, st: dict[str, Any], res: Reservation | None, now: int) -> dict[str, Any] | None:
    """Why it waits, what activation will do about it (`atActivation`: the resolver's steps, each
    with the GPUs it can free; empty for a funding shortfall, which never cuts anyone), and what a
    person could change (`wouldChange`)."""
    phase = st.get("phase")
    if phase not in (Phase.PENDING, Phase.WAITING):
        return None
    if res is None:
        why = st.get("message", "")
        alone = (
            "the runs it waits for (after) succeeding"
            if phase == Phase.WAITING
            else "a change to the run or the fleet (see the message): it holds no reservation"
        )
        return {"reason": why, "reservation": None, "atActivation": [], "wouldChange": [alone]}
    doc = runs.reservation_doc(fleet, res, now)
    steps = [
        f"{_RESOLVER[Remedy(r['remedy'])]} ({r['gpus']} GPUs)"
        if r["gpus"]
        else _RESOLVER[Remedy(r["remedy"])]
        for r in doc["remedies"]
        if Remedy(r["remedy"]) in CAPACITY_REMEDIES
    ]
    change = [r["remedy"] for r in doc["remedies"] if Remedy(r["remedy"]) not in CAPACITY_REMEDIES]
    if steps:
        scope = ", ".join(res.domains) or "its scope"
        change.append(f"capacity freeing up in {scope} (runs there ending)")
        ahead = (doc["inLine"] or {}).get("aheadInScope") or []
        if ahead:
            change.append(
                f"the {len(ahead)} run{'s' * (len(ahead) > 1)} ahead of it in line there starting first"
            )
        spec = fleet.specs.get(res.run)
        narrower = (
            " (or a lower minTotalGPUs, to start narrower)"
            if spec is not None and spec.spec.malleable
            else ""
        )
        change.append(f"a smaller run{narrower}: it is short by {res.deficit} GPUs there")
    if not doc["remedies"]:
        change = ["a change to the run: nothing its funding reaches can hold it, even empty"]
    return {"reason": res.reason, "reservation": doc, "atActivation": steps, "wouldChange": change}


def _conflicts(st: dict[str, Any], now: int) -> list[dict[str, Any]]:
    return [runs.threat(c, now) for c in st.get("conflicts") or []]
