"""One pass's working set: the snapshot being changed, with indexes and the events it emits.

Every module of a pass reads and changes state through this object, so a lease is opened or
closed in exactly one place (`open_lease`, `close_lease`) and the ledger never misses an event.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field

from planner.accounting import Book
from planner.topology import Topology
from planner.world import Lease, Payer, Reservation, RunRecord, World, run_key
from schemas.run import Run


@dataclass(slots=True)
class Event:
    at: int
    event: str  # Start | End
    lease: Lease
    reason: str

    def as_json(self, fmt_time: object) -> dict[str, object]:
        lease = self.lease
        return {
            "at": fmt_time(self.at),  # type: ignore[operator]
            "event": self.event,
            "lease": lease.name,
            "run": lease.run,
            "group": lease.group,
            "role": lease.role,
            "gpus": lease.gpus,
            "nodes": [f"{lease.node}#{s}" for s in lease.slots],
            "payer": lease.payer.as_dict(),
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
    cut: set[str] = field(default_factory=set)  # runs cut or shrunk this pass: no re-admission or growth now
    started: set[str] = field(default_factory=set)  # runs (re)started this pass
    cordon: set[str] = field(default_factory=set)
    messages: dict[str, str] = field(default_factory=dict)
    closures: int = 0  # leases closed so far this pass (accounting snapshots compare against it)
    fill_lost: set[str] = field(default_factory=set)  # opportunistic runs that lost fill leases
    closed_log: list[Lease] = field(default_factory=list)  # leases closed this pass, in order
    _allocated: dict[str, int] = field(default_factory=dict)  # run -> working GPUs, until a lease moves

    @property
    def now(self) -> int:
        return self.world.now

    def index(self) -> None:
        self._allocated.clear()
        self.by_run = defaultdict(list)
        for lease in self.leases:
            if lease.open:
                self.by_run[lease.run].append(lease)

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

    def open_lease(
        self,
        run: str,
        group: int,
        role: str,
        node: str,
        slots: tuple[int, ...],
        payer: Payer,
        reason: str,
        rank: int | None = None,
    ) -> Lease:
        name = lease_name(run, group, role, node, payer, self.now)
        lease = Lease(name, run, group, role, node, slots, payer, self.now, reason, rank=rank)
        self.leases.append(lease)
        self.by_run[run].append(lease)
        self._allocated.pop(run, None)
        self.topo.occupy(lease)
        self.events.append(Event(self.now, "Start", lease, reason))
        return lease

    def close_lease(self, lease: Lease, closure: str) -> None:
        if not lease.open:
            return
        lease.ended, lease.closure = self.now, closure
        self._allocated.pop(lease.run, None)
        self.closures += 1
        self.closed_log.append(lease)
        self.topo.release(lease)
        self.events.append(Event(self.now, "End", lease, closure))
        if lease.role == "Borrowed" and closure in ("ReclaimedBySpare", "NodeFailure"):
            self.fill_lost.add(lease.run)
        if lease.role == "Spare":  # opportunistic work on these slots loses its host with it (§4.8)
            node = self.topo.nodes.get(lease.node)
            why = "NodeFailure" if node is None or node.fenced else "ReclaimedBySpare"
            for fill in self.leases:
                if (
                    fill.open
                    and fill.role == "Borrowed"
                    and fill.node == lease.node
                    and set(fill.slots) & set(lease.slots)
                ):
                    self.close_lease(fill, why)

    def close_run(
        self, run: str, closure: str, *, first: Lease | None = None, first_closure: str | None = None
    ) -> None:
        """Close every open lease of a run (fill leases included), `first` with its own reason."""
        for lease in sorted(
            self.open_leases(run), key=lambda x: (x.group, x.role != "Active", x.node, x.name)
        ):
            self.close_lease(lease, first_closure if lease is first and first_closure else closure)
        self.by_run[run] = []

    def groups(self, run: str, role: str = "Active") -> dict[int, list[Lease]]:
        out: dict[int, list[Lease]] = defaultdict(list)
        for lease in self.open_leases(run):
            if lease.role == role:
                out[lease.group].append(lease)
        return dict(sorted(out.items()))

    def allocated(self, run: str) -> int:
        """GPUs the run works on (Active and fill leases), remembered until one of its leases moves."""
        hit = self._allocated.get(run)
        if hit is None:
            hit = self._allocated[run] = sum(
                x.gpus for x in self.open_leases(run) if x.role in ("Active", "Borrowed")
            )
        return hit


def ranked(runs: dict[str, Run], records: dict[str, RunRecord], now: int) -> list[str]:
    return sorted(runs, key=lambda k: (records[k].submitted if k in records else now, k))


__all__ = ["Event", "Pass", "lease_name", "ranked", "run_key"]
