"""The cyclic garbage collector paused while one batch of work runs (a pass, a simulation).

A 100,000-GPU pass allocates millions of small, long-lived, acyclic objects (models, leases,
records); with the collector on, CPython rescans the survivors again and again (~0.5 s of a
simulate, ~1 s of the contended one). Paused, the few cycles a pass makes wait for the next
automatic collection after it. Knows nothing of what the batch does; never collects by itself.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
