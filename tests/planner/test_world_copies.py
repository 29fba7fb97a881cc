"""A pass works on copies of the previous state: every field carried over, nothing shared it may change."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from planner.reasons import Confidence, OpenReason, Phase, Remedy, ResState, Role, Wait
from planner.world import ConflictEntry, Lease, Payer, Reservation, RunRecord


def every_default_overridden(obj: Any) -> bool:
    """The fixture sets each defaulted field, so a copy that fell back to a default would differ."""
    return all(
        getattr(obj, f.name) != (f.default if f.default is not MISSING else f.default_factory())  # type: ignore[misc]  # dataclasses types default_factory loosely
        for f in fields(obj)
        if f.default is not MISSING or f.default_factory is not MISSING
    )


def test_a_lease_copy_keeps_every_field() -> None:
    lease = Lease(
        "n", "t/r", 2, Role.SPARE, "node-1", (3, 4), Payer("org:a", "b", "e"), 10, OpenReason.GROW, 20,
        "Completed", 7, "family",
    )  # fmt: skip
    copied = lease.copy()
    assert every_default_overridden(lease)
    assert copied == lease and copied is not lease


def test_a_reservation_copy_keeps_every_field_and_owns_its_conflicts() -> None:
    res = Reservation(
        "t/r", 100, 50, ResState.RELEASED, "why", 8, Confidence.WINDOW, (Remedy.SPARES,), ("d",), ("n",),
        Payer("org:a"), 90, [ConflictEntry("t/x", 0.5, 60)], "0xabc", 120, (32,), 80, Wait.CLUSTER_SHORT,
    )  # fmt: skip
    assert every_default_overridden(res)
    copied = res.copy()
    assert copied == res and copied.conflicts is not res.conflicts
    copied.conflicts.append(ConflictEntry("t/y", 1.0, 70))
    assert len(res.conflicts) == 1, "changing the copy's conflicts leaves the previous state alone"


def test_a_run_record_copy_keeps_every_field() -> None:
    rec = RunRecord(
        "t/r", 5, Phase.RUNNING, "bound 8 GPUs", 6, 9, 1.5, 2.5, (8, 32, 16), "requeued", 3, 8, 7, True
    )
    assert every_default_overridden(rec)
    copied = rec.copy()
    assert copied == rec and copied is not rec
