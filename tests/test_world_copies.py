"""A pass works on copies of the previous state: every field carried over, nothing shared it may change."""

from __future__ import annotations

from dataclasses import fields

from planner.world import ConflictEntry, Lease, Payer, Reservation, RunRecord


def test_a_lease_copy_keeps_every_field() -> None:
    lease = Lease(
        "n", "t/r", 2, "Spare", "node-1", (3, 4), Payer("org:a", "b", "e"), 10, "Grow", 20, "Completed", 7
    )
    copied = lease.copy()
    assert copied == lease and copied is not lease
    assert all(getattr(copied, f.name) != f.default for f in fields(Lease) if f.default is not None)


def test_a_reservation_copy_keeps_every_field_and_owns_its_conflicts() -> None:
    res = Reservation(
        "t/r", 100, 50, "Released", "why", 8, "window-aligned", ("a",), ("d",), ("n",), Payer("org:a"), 90,
        [ConflictEntry("t/x", 0.5, 60)], "0xabc", 120,
    )  # fmt: skip
    copied = res.copy()
    assert copied == res and copied.conflicts is not res.conflicts
    copied.conflicts.append(ConflictEntry("t/y", 1.0, 70))
    assert len(res.conflicts) == 1, "changing the copy's conflicts leaves the previous state alone"


def test_a_run_record_copy_keeps_every_field() -> None:
    rec = RunRecord("t/r", 5, "Running", "bound 8 GPUs", 6, 9, 1.5, 2.5)
    copied = rec.copy()
    assert copied == rec and copied is not rec
