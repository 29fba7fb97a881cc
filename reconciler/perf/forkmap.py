"""Fork-parallel map for the CPU-bound pure steps of a big pass (parsing, rendering); serial otherwise.

A first pass at 100k GPUs parses 5,000 spec files and writes 12,000 state files in pure Python,
one core busy and the other idle. On Linux with more than one CPU, big batches are split into
striped chunks (item i goes to chunk i mod n, since neighbours tend to cost alike): forked children
compute theirs (they share the parent's memory copy-on-write)
and send marshal data back through a pipe while the parent computes the first chunk; or, with
`start`, one child works while the parent goes on (the work tree is written while a commit is
made). A child never outlives the parent. A child that fails for any reason only costs its chunk
being computed again in the parent, and every chunk is computed by the same function, so results
never depend on whether a child ran. Knows nothing of what it computes; never forks while other
threads run (their locks would be copied mid-use).
"""

from __future__ import annotations

import ctypes
import gc
import marshal
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
MIN_ITEMS = 2_000  # below this a fork costs more than it saves
_OK, _FAILED = b"+", b"-"
_PR_SET_PDEATHSIG = 1  # prctl(2)


def workers() -> int:
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except OSError:
        return 1


def map_chunks(work: Callable[[Sequence[T]], list[Any]], items: Sequence[T]) -> list[Any]:
    """`work(items)`, computed in up to `workers()` processes; `work` must return marshal data,
    one result per item, and touch nothing but its arguments (it may run in a child)."""
    n = min(workers(), len(items) // (MIN_ITEMS // 2) or 1)
    if n < 2 or not _may_fork():
        return work(items)
    chunks = [items[i::n] for i in range(n)]  # striped: neighbouring items often cost alike
    children = [Running(work, chunk, fork=True) for chunk in chunks[1:]]
    results = [list(work(chunks[0])), *(child.wait() for child in children)]
    out: list[Any] = [None] * len(items)
    for i, result in enumerate(results):
        out[i::n] = result
    return out


class Running:
    """`work(items)` under way in one forked child (`start`), or not started (`fork=False`): `wait`
    gives the results, computing them here when no child ran or the child failed."""

    def __init__(self, work: Callable[[Sequence[T]], list[Any]], items: Sequence[T], fork: bool) -> None:
        self._work, self._items = work, items
        self._child = _fork(work, items) if fork else None

    def wait(self) -> list[Any]:
        """The results, in order. Call once; it may be called from another thread than the one that
        started the work."""
        if self._child is not None:
            got = _collect(*self._child)
            if got is not None and len(got) == len(self._items):
                return got
        return list(self._work(self._items))


def start(work: Callable[[Sequence[T]], list[Any]], items: Sequence[T], least: int = MIN_ITEMS) -> Running:
    """`work(items)` started in one forked child while the caller goes on: for work that waits on the
    kernel (creating files), where a second process would only contend for the same locks. A batch
    of fewer than `least` items, or one while other threads run, forks nothing: then `wait`
    computes it all."""
    return Running(work, items, fork=len(items) >= max(least, 1) and workers() > 1 and _may_fork())


def _may_fork() -> bool:
    """Only while this is the process's one thread: another's locks would be copied mid-use."""
    return threading.active_count() == 1


def _fork(work: Callable[[Sequence[T]], list[Any]], chunk: Sequence[T]) -> tuple[int, int]:
    read, write = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, and leave without running any of the parent's cleanup
        code = 1
        try:
            _die_with(parent)
            os.close(read)
            gc.disable()  # a collection would touch (and so copy) every page of the shared heap
            payload = _OK + marshal.dumps(work(chunk))
            code = 0
        except BaseException:  # noqa: B036 - any failure at all: the parent recomputes the chunk
            payload = _FAILED
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(write, view) :]
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def _die_with(parent: int) -> None:
    """A child never outlives its parent (killed with it): its work may write files, and whoever
    repairs what a killed parent left must not race with a child still writing."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # pragma: no cover - not glibc: the pipe still ends it soon
        pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _collect(pid: int, fd: int) -> list[Any] | None:
    parts = []
    try:
        while True:
            part = os.read(fd, 1 << 20)
            if not part:
                break
            parts.append(part)
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    payload = b"".join(parts)
    if not payload.startswith(_OK):
        return None
    try:
        result = marshal.loads(payload[1:])
    except (EOFError, ValueError, TypeError):
        return None
    return result if isinstance(result, list) else None
