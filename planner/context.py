"""One pass's working set: the snapshot being changed, with indexes and the events it emits.

Every module of a pass reads and changes state through this object, so a lease is opened or
closed in exactly one place (`open_lease`, `close_lease`), a run's phase and message are written in
exactly one place (`set_status`), and the ledger never misses an event. Decides nothing itself.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from planner import accounting
from planner.accounting import Book
from planner.reasons import Closure, Ledger, OpenReason, Phase, Role, closure_text
from planner.topology import Topology, is_fenced
from planner.world import Lease, Payer, Reservation, RunRecord, World, run_key
from schemas.run import Run

TimeText = Callable[[int], str]


@dataclass(slots=True)
class Event:
    """A lease opened (`Start`; reason: how it opened) or closed (`End`; reason: its closure)."""

    at: int
    event: Ledger  # Start | End
    lease: Lease
    reason: str
    closure: Closure | None = None  # the kind of an End (its reason may carry the lottery's seed)
    journal: str | None = None  # the agent's journal entry this fact was folded from (§7.5)

    def as_json(self, fmt_time: TimeText) -> dict[str, object]:
        lease = self.lease
        return {
            "at": fmt_time(self.at),
            "event": str(self.event),
            "lease": lease.name,
            "run": lease.run,
            "group": lease.group,
            "role": str(lease.role),
            "gpus": lease.gpus,
            "nodes": [f"{lease.node}#{s}" for s in lease.slots],
            "payer": lease.payer.as_dict(),
            "reason": self.reason,
        } | ({"journal": self.journal} if self.journal is not None else {})


@dataclass(frozen=True, slots=True)
class Moved:
    """A reservation's ETA moved (§4.5): when, from what, to what, and why it waits now."""

    at: int
    run: str
    earliest_start: int | None
    previous: int | None
    reason: str

    def as_json(self, fmt_time: TimeText) -> dict[str, object]:
        return {
            "at": fmt_time(self.at),
            "event": Ledger.MOVED.value,
            "run": self.run,
            "earliestStart": None if self.earliest_start is None else fmt_time(self.earliest_start),
            "previous": None if self.previous is None else fmt_time(self.previous),
            "reason": self.reason,
        }


def lease_name(run: str, group: int, role: str, node: str, payer: Payer, start: int) -> str:
    ns_name = run.split("/", 1)[1]
    text = f"{run}|{group}|{role}|{node}|{payer.owner}|{payer.budget}|{payer.envelope}|{start}"
    digest = hashlib.sha256(text.encode()).digest()[:4].hex()  # = hexdigest()[:8]
    return f"{ns_name[:40].rstrip('-')}-g{group}-{role[0].lower()}{digest}"


@dataclass(slots=True)
class Pass:
    world: World
    topo: Topology
    book: Book
    specs: dict[str, Run]
    records: dict[str, RunRecord]
    reservations: dict[str, Reservation]
    leases: list[Lease]
    events: list[Event] = field(default_factory=list)
    by_run: dict[str, list[Lease]] = field(default_factory=lambda: defaultdict(list))
    started: set[str] = field(default_factory=set)  # runs (re)started this pass
    cordon: set[str] = field(default_factory=set)
    messages: dict[str, str] = field(default_factory=dict)
    closures: int = 0  # leases closed so far this pass (accounting snapshots compare against it)
    fill_lost: set[str] = field(default_factory=set)  # opportunistic runs that lost fill leases
    closed_log: list[Lease] = field(default_factory=list)  # leases closed this pass, in order
    _allocated: dict[str, int] = field(default_factory=dict)  # run -> working GPUs, until a lease moves
    _fills: dict[str, list[Lease]] = field(default_factory=lambda: defaultdict(list))  # node -> fill leases

    @property
    def now(self) -> int:
        return self.world.now

    def index(self) -> None:
        self._allocated.clear()
        self.by_run = defaultdict(list)
        self._fills = defaultdict(list)
        for lease in self.leases:
            if lease.open:
                self.by_run[lease.run].append(lease)
                if lease.role == Role.BORROWED:
                    self._fills[lease.node].append(lease)

    def open_leases(self, run: str) -> list[Lease]:
        return [lease for lease in self.by_run.get(run, []) if lease.open]

    def owner_of(self, run: str) -> str:
        spec = self.specs.get(run)
        if spec is not None:
            return spec.spec.owner
        ns = run.split("/", 1)[0]
        return dict(self.world.settings.tenants).get(ns, "")

    def rank(self, run: str) -> tuple[int, str]:
        rec = self.records.get(run)
        return (rec.submitted if rec else self.now, run)

    # -- leases: one opener, one closer ----------------------------------------------------------
    def open_lease(
        self,
        run: str,
        group: int,
        role: Role,
        node: str,
        slots: tuple[int, ...],
        payer: Payer,
        reason: OpenReason,
        rank: int | None = None,
        funding: str | None = None,
    ) -> Lease:
        name = lease_name(run, group, role, node, payer, self.now)
        lease = Lease(
            name, run, group, role, node, slots, payer, self.now, reason, rank=rank, funding=funding
        )
        self._take(lease, Event(self.now, Ledger.START, lease, reason.value))
        return lease

    def _take(self, lease: Lease, opened: Event) -> None:
        """A lease opened now or adopted from the journal: held, its slots occupied, its event logged."""
        self.leases.append(lease)
        self.by_run[lease.run].append(lease)
        if lease.role == Role.BORROWED:
            self._fills[lease.node].append(lease)
        self._allocated.pop(lease.run, None)
        self.topo.occupy(lease)
        self.events.append(opened)
        rec = self.records.get(lease.run)
        if rec is not None and lease.group >= rec.next_group:
            rec.next_group = lease.group + 1

    def close_lease(
        self,
        lease: Lease,
        kind: Closure,
        seed: str | None = None,
        *,
        at: int | None = None,
        journal: str | None = None,
    ) -> None:
        """Close a lease now (or, folding the agent's journal, at the instant it was closed)."""
        if not lease.open:
            return
        text = closure_text(kind, seed)
        when = self.now if at is None else at
        lease.ended, lease.closure = when, text
        self._allocated.pop(lease.run, None)
        self.closures += 1
        self.closed_log.append(lease)
        self.topo.release(lease)
        self.events.append(Event(when, Ledger.END, lease, text, kind, journal))
        if lease.role == Role.BORROWED and kind in (Closure.RECLAIMED_BY_SPARE, Closure.NODE_FAILURE):
            self.fill_lost.add(lease.run)
        if lease.role == Role.SPARE:  # opportunistic work on these slots loses its host with it (§4.8)
            why = Closure.NODE_FAILURE if self.failed(lease.node) else Closure.RECLAIMED_BY_SPARE
            for fill in self.fills_on(lease.node, lease.slots):
                self.close_lease(fill, why)

    def adopt_lease(self, lease: Lease, journal: str) -> bool:
        """A lease the in-cluster agent opened ahead of Git (§7.5), taken into the pass as it was
        opened; False when the pass already holds it (the entry was folded before)."""
        if any(x.name == lease.name for x in self.leases if x.run == lease.run):
            return False
        self._take(lease, Event(lease.start, Ledger.START, lease, str(lease.reason), None, journal))
        return True

    def fills_on(self, node: str, slots: tuple[int, ...]) -> list[Lease]:
        """Open fill (Borrowed) leases overlaying any of these slots of a node."""
        mine = set(slots)
        return [x for x in self._fills.get(node, ()) if x.open and mine.intersection(x.slots)]

    def failed(self, node: str) -> bool:
        """The node failed: fenced, or gone from the cluster."""
        n = self.topo.nodes.get(node)
        return n is None or n.fenced

    def close_run(self, run: str, kind: Closure) -> None:
        """Close every open lease of a run (fill leases included); a lease on a failed node ends
        `NodeFailure` whatever ended the run (§4.8)."""
        for lease in sorted(
            self.open_leases(run), key=lambda x: (x.group, x.role != Role.ACTIVE, x.node, x.name)
        ):
            self.close_lease(lease, Closure.NODE_FAILURE if self.failed(lease.node) else kind)
        self.by_run[run] = []

    # -- run status: one writer ------------------------------------------------------------------
    def set_status(
        self, run: str, message: str, phase: Phase | None = None, *, cause: str | None = None
    ) -> None:
        """The one writer of a run's phase and message (and what goes with a phase: when it started,
        when it finished, what put it back in line)."""
        rec = self.records[run]
        if phase is not None and phase != rec.phase:
            if phase == Phase.RUNNING:
                rec.started, rec.cause = self.now, ""
            elif phase in (Phase.PENDING, Phase.WAITING):
                rec.started = None
            else:
                rec.finished, rec.cause = self.now, ""
            rec.phase = phase
        elif phase == Phase.RUNNING:  # started again within the pass
            rec.started, rec.cause = self.now, ""
        if cause is not None:
            rec.cause = cause
        self.messages[run] = message

    def keep_messages(self) -> None:
        """The pass's last word on each run becomes its status message for the next pass."""
        for key, rec in self.records.items():
            if key in self.messages:
                rec.message = self.messages[key]

    def resized(self, run: str) -> None:
        """A decision changed the run's width now: it takes no other growth step at this instant."""
        rec = self.records.get(run)
        if rec is not None:
            rec.resized = self.now

    # -- reading ---------------------------------------------------------------------------------
    def groups(self, run: str, role: Role = Role.ACTIVE) -> dict[int, list[Lease]]:
        out: dict[int, list[Lease]] = defaultdict(list)
        for lease in self.open_leases(run):
            if lease.role == role:
                out[lease.group].append(lease)
        return dict(sorted(out.items()))

    def allocated(self, run: str) -> int:
        """GPUs the run works on (Active and fill leases), remembered until one of its leases moves."""
        hit = self._allocated.get(run)
        if hit is None:
            hit = self._allocated[run] = sum(x.gpus for x in self.open_leases(run) if x.role != Role.SPARE)
        return hit

    def counted(self, run: str) -> int:
        """The width held against the run's minimum: what it works on plus its completed groups."""
        rec = self.records.get(run)
        return self.allocated(run) + (rec.completed if rec is not None else 0)


def snapshot(world: World) -> Pass:
    """The working set a pass decides against: copies of the last state's leases, runs and
    reservations, the topology with every open lease on its slots, and the envelopes. Every verb
    module works on it; `plan` runs them all, the in-cluster agent only the failure handling."""
    now, settings = world.now, world.settings
    prev = world.state
    leases = [x.copy() for x in prev.leases]
    topo = Topology(world.nodes, now, settings.not_ready_grace, kept_cordons_of(world))
    for lease in leases:
        if lease.open:
            topo.occupy(lease)
    topo.recount()
    envs = accounting.envelopes(world.budgets)
    book = accounting.Book(envs, accounting.family_order(world.budgets), now)
    book.frozen = {k for k, e in envs.items() if e.budget in world.frozen_budgets}
    ctx = Pass(
        world, topo, book, {run_key(r): r for r in world.runs},
        {k: v.copy() for k, v in prev.runs.items()},
        {k: v.copy() for k, v in prev.reservations.items()},
        leases,
    )  # fmt: skip
    ctx.index()
    return ctx


def kept_cordons_of(world: World) -> frozenset[str]:
    """jobtree's own cordons hold while the node is down; once it is observed healthy again the
    cluster's cordon flag decides (an operator uncordons a repaired node)."""
    down = {n.name for n in world.nodes if is_fenced(n, world.now, world.settings.not_ready_grace)}
    present = {n.name for n in world.nodes}
    return frozenset(n for n in world.state.cordoned if n in down or n not in present)


__all__ = ["Event", "Moved", "Pass", "kept_cordons_of", "lease_name", "run_key", "snapshot"]
