"""Which agent replica acts (§7.4): leader election through a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does.

The holder renews the Lease every `retry_period` with an update conditioned on the resourceVersion
it last saw (a 409 means someone else wrote: it re-reads and may have lost). A candidate takes the
Lease over when it is absent (create), released (no holder), or unchanged for the holder's
`leaseDurationSeconds` by the candidate's *own* clock since it first saw that version (client-go's
observedTime): no replica ever compares its clock with another's, or with the record's times. A
holder counts its term from the moment it *sent* its last successful write and stops acting after
`renew_deadline` (< duration), so it has stopped before any candidate can see the Lease expire.
The record's arithmetic is pure (`Record`, `successor`, `released`, `held_by_other`); `Elector`
does the requests. Decides nothing about swaps and logs nothing (the core's callbacks do).
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.cluster import retry
from reconciler.cluster.api import Api
from reconciler.cluster.errors import AlreadyExists, ClusterError
from reconciler.cluster.kinds import COORDINATION_LEASE

Obj = dict[str, Any]
MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"  # metav1.MicroTime: RFC 3339, UTC, exactly six fractional digits
JITTER = 1.2  # a candidate waits retry_period * (1 + up to 1.2), as client-go's acquire loop
SHORTEST_REQUEST = 0.05  # seconds: the least time a request near the renew deadline is given
# One try per request: a stale resourceVersion stays stale (retrying a 409 cannot help here), and a
# holder must learn within its renew deadline whether it still holds the Lease.
ONCE = retry.Backoff(attempts=1, unreachable=1)


def micro_time(moment: datetime) -> str:
    """`moment` as a MicroTime on the wire: `2026-03-02T09:00:00.000000Z`."""
    return moment.astimezone(UTC).strftime(MICRO_TIME)


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Record:
    """A Lease's election record: its `spec`, as client-go's LeaderElectionRecord."""

    holder: str  # holderIdentity; "" when released
    duration: int  # leaseDurationSeconds the holder promises to renew within
    acquired: str  # acquireTime (MicroTime)
    renewed: str  # renewTime (MicroTime)
    transitions: int  # leaseTransitions: how many times the Lease changed hands

    def spec(self) -> Obj:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration,
            "acquireTime": self.acquired,
            "renewTime": self.renewed,
            "leaseTransitions": self.transitions,
        }


def record(lease: Obj) -> Record:
    """The election record of a Lease as the server returned it."""
    spec = lease.get("spec") or {}
    return Record(
        str(spec.get("holderIdentity") or ""),
        int(spec.get("leaseDurationSeconds") or 0),
        str(spec.get("acquireTime") or ""),
        str(spec.get("renewTime") or ""),
        int(spec.get("leaseTransitions") or 0),
    )


def successor(old: Record | None, identity: str, duration: int, now: str) -> Record:
    """The record `identity` writes at `now`: a renewal of its own term keeps acquireTime and the
    transition count; taking over a Lease another held (or nobody holds) counts one transition."""
    if old is None:
        return Record(identity, duration, now, now, 0)
    if old.holder == identity:
        return Record(identity, duration, old.acquired or now, now, old.transitions)
    return Record(identity, duration, now, now, old.transitions + 1)


def released(old: Record, now: str) -> Record:
    """The record a holder leaves on a clean shutdown: no holder, one second, so a successor takes
    over at once (client-go's release)."""
    return Record("", 1, now, now, old.transitions)


def held_by_other(observed: Record, observed_at: float, now: float, identity: str, fallback: float) -> bool:
    """Whether another replica holds the Lease: a holder is named, it is not `identity`, and the
    record has changed less than its duration ago by this replica's clock (`observed_at` is when
    this replica first saw this version). `fallback`: the duration when the record names none."""
    if not observed.holder or observed.holder == identity:
        return False
    duration = observed.duration if observed.duration > 0 else fallback
    return now < observed_at + duration


class Elector:
    """One replica's candidacy for the Lease `namespace/name`, as `identity`.

    `identity` must be unique to the process (a pod name and a random suffix, as client-go
    advises): a record naming it counts as this process's own term.
    `clock` is this replica's monotonic clock (seconds); `wall` gives the times written into the
    record, for people: neither replica's expiry judgment reads them. Thread-safe: `is_leader` may
    be asked from any thread while `run` campaigns on another.
    """

    def __init__(
        self,
        api: Api,
        namespace: str,
        name: str,
        identity: str,
        duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = _utc_now,
    ) -> None:
        if not identity:
            raise ValueError("a leader election identity must not be empty")
        if not 0 < retry_period < renew_deadline < duration:
            raise ValueError(
                f"leader election needs 0 < retry period ({retry_period}) < renew deadline "
                f"({renew_deadline}) < lease duration ({duration})"
            )
        self.api, self.namespace, self.name, self.identity = api, namespace, name, identity
        self.duration, self.renew_deadline, self.retry_period = duration, renew_deadline, retry_period
        self.clock, self.wall = clock, wall
        self.why = "not tried yet"  # why this replica does not lead (or last failed to renew), for people
        self._seconds = math.ceil(duration)  # leaseDurationSeconds written: never shorter than our promise
        self._observed: Record | None = None
        self._version = ""  # the resourceVersion of `_observed`
        self._observed_at = 0.0  # our clock when we first saw `_observed` at `_version`
        self._term: float | None = None  # our clock when our last successful write was sent
        self._state = threading.Lock()
        self._turn = threading.Lock()  # one request sequence at a time (run's thread, release)

    # ------------------------------------------------------------------------------ queries

    @property
    def is_leader(self) -> bool:
        """Whether this replica may act now: it holds the Lease and renewed it within the renew deadline."""
        with self._state:
            return self._leads(self.clock())

    @property
    def deadline(self) -> float | None:
        """Our clock's time at which this replica's term ends (it stops leading then unless it renews),
        also once past; None when it has no term (never won, lost to another, or released)."""
        with self._state:
            return None if self._term is None else self._term + self.renew_deadline

    def _leads(self, now: float) -> bool:
        return self._term is not None and now < self._term + self.renew_deadline

    # ------------------------------------------------------------------------------- writes

    def try_acquire_or_renew(self) -> bool:
        """One attempt to acquire or renew the Lease; whether this replica leads afterwards. Never
        raises a `ClusterError`: a failed request leaves the term running out (see `why`)."""
        with self._turn:
            if self.is_leader and self._fast_renew():
                return True
            return self._read_and_write()

    def release(self) -> bool:
        """Give the Lease up on a clean shutdown so a successor takes over at once; stops leading
        first. True when released or not held; False when the write failed (it then expires). A
        replica whose term already ran out writes nothing: the Lease may be another's by now."""
        with self._turn:
            with self._state:
                leads = self._leads(self.clock())
                self._term = None
                observed, version = self._observed, self._version
            if not leads or observed is None or observed.holder != self.identity:
                return True
            try:
                written = self._patch(version, released(observed, micro_time(self.wall())))
            except ClusterError as err:
                self.why = f"release failed: {err}"
                return False
            self._observe(written, self.clock())
            self.why = "released"
            return True

    def _fast_renew(self) -> bool:
        """Renew with the version we hold, without reading first; False to read and decide again."""
        with self._state:
            observed, version = self._observed, self._version
        if observed is None:
            return False
        sent = self.clock()
        try:
            written = self._patch(version, successor(observed, self.identity, self._seconds, self._now()))
        except ClusterError as err:
            self.why = f"renew failed: {err}"
            return False
        return self._won(written, version, sent)

    def _read_and_write(self) -> bool:
        try:
            live = self._view().get(COORDINATION_LEASE, self.name, self.namespace)
        except ClusterError as err:
            self.why = f"reading the lease failed: {err}"
            return self.is_leader
        seen = self.clock()  # after the answer: never earlier than the write it shows
        if live is None:
            return self._create(seen)
        self._observe(live, seen)
        with self._state:
            observed, version, observed_at = self._observed, self._version, self._observed_at
        assert observed is not None
        if held_by_other(observed, observed_at, seen, self.identity, self.duration):
            with self._state:
                self._term = None
            self.why = f"held by {observed.holder}"
            return False
        sent = self.clock()
        try:
            written = self._patch(version, successor(observed, self.identity, self._seconds, self._now()))
        except ClusterError as err:  # a 409: another replica wrote since we read; the next try decides
            self.why = f"writing the lease failed: {err}"
            return self.is_leader
        return self._won(written, version, sent)

    def _create(self, seen: float) -> bool:
        body = {
            "apiVersion": COORDINATION_LEASE.api_version,
            "kind": COORDINATION_LEASE.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": successor(None, self.identity, self._seconds, self._now()).spec(),
        }
        sent = self.clock()
        try:
            created = self._view().create(COORDINATION_LEASE, body)
        except AlreadyExists:  # another replica's create, or our own whose answer was lost and retried
            try:
                live = self._view().get(COORDINATION_LEASE, self.name, self.namespace)
            except ClusterError:
                live = None
            if live is not None and record(live) == record(body):
                return self._won(live, "", sent)
            self.why = "another replica created the lease first"
            return False
        except ClusterError as err:
            self.why = f"creating the lease failed: {err}"
            return False
        return self._won(created, "", sent)

    def _won(self, written: Obj, before: str, sent: float) -> bool:
        """Take the server's answer to our write sent at `sent`: a new version starts a new term.
        An answer with the version we sent changed nothing others can see, so it renews nothing."""
        self._observe(written, self.clock())
        with self._state:
            changed = self._version != before
            if changed:
                self._term = sent
            leads = self._leads(self.clock())
        self.why = (
            ""
            if leads
            else "the write came back after the renew deadline"
            if changed
            else "the lease did not change"
        )
        return leads

    def _observe(self, lease: Obj, at: float) -> None:
        """Remember the record a read or write returned; a new version restarts its observed time."""
        found = record(lease)
        version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        with self._state:
            if (found, version) != (self._observed, self._version):
                self._observed, self._version, self._observed_at = found, version, at

    def _patch(self, version: str, new: Record) -> Obj:
        """Write `new` if the Lease is still at `version` (a 409 otherwise)."""
        patch = {"metadata": {"resourceVersion": version}, "spec": new.spec()}
        return self._view().merge_patch(COORDINATION_LEASE, self.name, patch, self.namespace)

    def _view(self) -> Api:
        """The API with one try per request and a timeout that ends by our renew deadline, so a
        hung request cannot keep a holder acting past it."""
        timeout = min(self.api.timeout, self.renew_deadline)
        with self._state:
            if self._term is not None:
                left = self._term + self.renew_deadline - self.clock()
                timeout = min(timeout, max(SHORTEST_REQUEST, left))
        view = Api(self.api.client, self.api.cluster, ONCE, timeout, self.api.manager)
        view.counts = self.api.counts
        return view

    def _now(self) -> str:
        return micro_time(self.wall())

    # --------------------------------------------------------------------------------- loop

    def run(
        self,
        stop: threading.Event,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
        chance: random.Random | None = None,
    ) -> None:
        """Campaign until `stop` is set: acquire (a try every retry period, jittered), call
        `on_started`, renew every retry period; on losing the Lease (another holds it, or no renewal
        within the renew deadline) call `on_stopped` and campaign again. On `stop`: `on_stopped`,
        then `release`. Both callbacks run on this thread and must return at once; the core's own
        writes are fenced by `deadline` (`reconciler.cluster.api.Api.fence`)."""
        rolls = chance or random.Random()
        try:
            while not stop.is_set():
                if not self._acquire(stop, rolls):
                    return
                on_started()
                try:
                    self._renew(stop)
                finally:
                    on_stopped()
        finally:
            self.release()

    def _acquire(self, stop: threading.Event, rolls: random.Random) -> bool:
        while not stop.is_set():
            if self.try_acquire_or_renew():
                return True
            stop.wait(self.retry_period * (1 + rolls.random() * JITTER))
        return False

    def _renew(self, stop: threading.Event) -> None:
        """Renew every retry period while leading; returns on `stop` or once no longer leading."""
        while True:
            end = self.deadline
            if end is None:
                return
            if stop.wait(max(0.0, min(self.retry_period, end - self.clock()))):
                return
            if not self.is_leader:  # the renew deadline passed without a renewal
                return
            if not self.try_acquire_or_renew() and not self.is_leader:
                return
