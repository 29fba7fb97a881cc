"""The cyclic garbage collector paused while one batch of work runs (a pass, a simulation).

A 100,000-GPU pass allocates millions of small, long-lived, acyclic objects (models, leases,
records); with the collector on, CPython rescans the survivors again and again (~0.5 s of a
simulate, ~1 s of the contended one). Paused, the few cycles a pass makes wait for the next
automatic collection after it. Knows nothing of what the batch does; never collects by itself.

A process that leaves through `os._exit` once its command is done (the console script: `exits_after`)
keeps the collector off after its last batch: re-enabled, it would scan every object the batch left
(0.16 s after a 100k-GPU warm pass) to free what the exit frees anyway.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_exits_after = False  # set once, by the console script, before its command runs


def exits_after() -> None:
    """This process ends with `os._exit` once its command returns (nothing waits for the collector)."""
    global _exits_after
    _exits_after = True


@contextmanager
def paused(last: bool = False) -> Iterator[None]:
    """The collector off while the batch runs; `last`: the command's last batch, after which, in a
    process that `exits_after`, it stays off."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was and not (last and _exits_after):
            gc.enable()
