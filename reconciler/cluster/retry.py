"""Retries with backoff for one API request: temporary errors again after a delay, permanent ones at once.

Exponential backoff with jitter from `base` up to `cap`; a server's `Retry-After` is honoured (up
to `longest`) in place of the backoff. Writes are safe to repeat: jobtree only applies (server-side
apply is idempotent), deletes (a second delete finds nothing) and patches one flag. Owns the one
sleep of the cluster room; decides nothing about what to send.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from reconciler.cluster.errors import ClusterError, Unreachable

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Backoff:
    attempts: int = 6  # tries in all, the first included
    base: float = 0.2  # seconds before the second try; doubles every try
    cap: float = 5.0  # the longest backoff between two tries
    longest: float = 60.0  # the longest Retry-After honoured (a server asking more is asked again sooner)
    unreachable: int = 3  # tries in all while the server does not answer at all (the next pass retries)

    def delay(self, attempt: int, asked: float, chance: random.Random) -> float:
        """Seconds to wait after failed try number `attempt` (from 1); `asked`: the server's Retry-After."""
        if asked > 0:
            return min(asked, self.longest)
        step = min(self.cap, self.base * 2 ** (attempt - 1))
        return step * (
            0.5 + chance.random() / 2
        )  # jitter: clients that failed together do not return together


_CHANCE = random.Random()  # the jitter's rolls (a client's own: nothing to replay)


def call(request: Callable[[], T], policy: Backoff) -> T:
    """`request()`, again after a delay while it raises a temporary `ClusterError`, at most
    `policy.attempts` times; the last error (temporary or not) is raised as it came."""
    attempt = 1
    while True:
        try:
            return request()
        except ClusterError as err:
            last = policy.unreachable if isinstance(err, Unreachable) else policy.attempts
            if not err.temporary or attempt >= last:
                raise
            time.sleep(policy.delay(attempt, err.delay, _CHANCE))
            attempt += 1
