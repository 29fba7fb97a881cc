"""SIGINT and SIGTERM for every verb: both stop it as Ctrl-C does (`with` blocks unwind, so the
clone's writer lock is let go), and the signal is remembered, so a loop that Python kept running
(a signal raised where it cannot propagate, such as a weakref callback) still stops at its next
safe point, and the process exits as the signal says (128 + its number). No other process state.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

_received: list[int] = []


def install() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _stop)
    sys.unraisablehook = _unraisable


def _unraisable(info: Any) -> None:
    """The stop raised where it cannot propagate (a validator being built, a weakref callback) is
    remembered (`stopped`): not a traceback for people. Anything else as Python reports it."""
    if info.exc_type is KeyboardInterrupt and _received:
        return
    sys.__unraisablehook__(info)


def _stop(signum: int, frame: object) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


def stopped() -> int | None:
    """The first signal received, if any."""
    return _received[0] if _received else None
