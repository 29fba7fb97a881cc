"""Metering: GPU-hours each envelope paid between two passes, exactly, and when a cap will be spent.

Integrates claims over time under the funding classes of the last pass: the part of a claim past
the instant its envelope's GPU-hour cap (or, for a loan, the lender's `lending.maxGPUHours`) was
spent is charged to nobody, even when no pass ran then (§4.1). Classifies nothing (`accounting`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from planner.accounting import LOAN, Book
from planner.reasons import Role
from planner.world import EnvelopeMeter, Lease


def meter(
    meters: dict[tuple[str, str], EnvelopeMeter],
    book: Book,
    leases: Sequence[Lease],
    owner_of: Callable[[str], str],
    since: int | None,
    spare_rate: float,
) -> tuple[dict[tuple[str, str], EnvelopeMeter], dict[str, Cutoff]]:
    """GPU-hours paid between the last pass and now, under the funding classes of the last pass.

    Metered exactly (§4.1): the part of a claim past the instant its envelope's GPU-hour cap (or,
    for a loan, the lender's `lending.maxGPUHours`) was spent is charged to nobody, even when no
    pass ran at that instant. Returns the meters and, per envelope whose cap was spent between the
    passes, those instants (the runs' own hours stop there too)."""
    out = {k: EnvelopeMeter(m.consumed, m.spare, m.lent) for k, m in meters.items()}
    if since is None or book.now <= since:
        return out, {}
    spans: dict[str, list[tuple[Lease, int, int, bool]]] = defaultdict(list)  # env -> (lease, from, to, loan)
    for lease in leases:
        env_key = lease.payer.env_key
        if env_key is None or lease.role == Role.BORROWED or (lease.run, lease.group) in book.unfunded:
            continue
        start = max(lease.start, since)
        end = lease.ended if lease.ended is not None else book.now
        if end <= start:
            continue
        env = book.envs.get(env_key)
        loan = env is not None and book.category(owner_of(lease.run), env) == LOAN
        spans[env_key].append((lease, start, end, loan))
    cutoffs: dict[str, Cutoff] = {}
    for env_key, rows in spans.items():
        env = book.envs.get(env_key)
        key = (rows[0][0].payer.budget or "", rows[0][0].payer.envelope or "")
        m = out.setdefault(key, EnvelopeMeter())
        capped = env is not None and env_key not in book.frozen
        rate = [(a, b, x.gpus * (spare_rate if x.role == Role.SPARE else 1.0)) for x, a, b, _ in rows]
        spent = _spent_at(rate, m.consumed + m.spare, env.max_hours if capped and env else None)
        loans = [
            (a, min(b, spent) if spent is not None else b, float(x.gpus)) for x, a, b, loan in rows if loan
        ]
        lent_spent = _spent_at(loans, m.lent, env.lend_hours if capped and env else None)
        if spent is not None or lent_spent is not None:
            cutoffs[env_key] = Cutoff(spent, lent_spent)
        for x, a, b, loan in rows:
            stop = min(float(b), spent) if spent is not None else float(b)
            if stop > a:
                if x.role == Role.SPARE:
                    m.spare += x.gpus * ((stop - a) / 3600) * spare_rate
                else:
                    m.consumed += x.gpus * ((stop - a) / 3600)
            if loan:
                stop = min(stop, lent_spent) if lent_spent is not None else stop
                if stop > a:
                    m.lent += x.gpus * ((stop - a) / 3600)
        if spent is not None and env is not None and env.max_hours is not None:
            m.consumed = env.max_hours - m.spare  # exactly the cap, whatever the float sums gave
        if lent_spent is not None and env is not None and env.lend_hours is not None:
            m.lent = env.lend_hours
    return out, cutoffs


@dataclass(frozen=True, slots=True)
class Cutoff:
    """When an envelope's GPU-hour cap, and its lending cap, were spent between two passes."""

    spent: float | None
    lent: float | None

    def end(self, end: float, loan: bool) -> float:
        """A claim's metered end: nothing past the instant its payer's cap was spent."""
        if self.spent is not None:
            end = min(end, self.spent)
        if loan and self.lent is not None:
            end = min(end, self.lent)
        return end


_EPSILON = 1e-9  # GPU-hours: a cap reached within float error is reached


def _spent_at(spans: Sequence[tuple[float, float, float]], used: float, cap: float | None) -> float | None:
    """The instant GPU-hours `used` plus these (from, to, GPUs) spans reach `cap`, if they do."""
    if cap is None or not spans:
        return None
    if used >= cap - _EPSILON:
        return float(min(a for a, _, _ in spans))
    steps: dict[float, float] = defaultdict(float)
    for a, b, gpus in spans:
        if b > a:
            steps[a] += gpus
            steps[b] -= gpus
    rate = 0.0
    at: float | None = None
    for t in sorted(steps):
        if at is not None and rate > 0:
            gain = rate * (t - at) / 3600
            if used + gain >= cap - _EPSILON:
                return at + (cap - used) * 3600 / rate
            used += gain
        rate += steps[t]
        at = t
    return None


def spent_when(book: Book, leases: Sequence[Lease], spare_rate: float) -> list[int]:
    """Instants after now at which a running claim spends an envelope's GPU-hour cap, at the rate
    the open funded claims burn it now (a pass is due then: those claims become unfunded)."""
    burn: dict[str, float] = defaultdict(float)
    for lease in leases:
        env_key = lease.payer.env_key
        if not lease.open or env_key is None or lease.role == Role.BORROWED:
            continue
        if (lease.run, lease.group) in book.unfunded:
            continue
        burn[env_key] += lease.gpus * (spare_rate if lease.role == Role.SPARE else 1.0)
    out = []
    for env_key, rate in sorted(burn.items()):
        env = book.envs.get(env_key)
        if env is None or env.max_hours is None or rate <= 0 or env_key in book.frozen:
            continue
        left = env.max_hours - book.consumed[env_key]
        if left > 0:
            out.append(book.now + math.ceil(left * 3600 / rate))
    return out
