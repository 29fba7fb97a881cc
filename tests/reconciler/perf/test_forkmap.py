"""Fork-parallel map: the same results as a plain call, whichever processes computed them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from reconciler.perf import forkmap

PARENT = os.getpid()
ITEMS = list(range(forkmap.MIN_ITEMS * 2))
parallel = pytest.mark.skipif(forkmap.workers() < 2, reason="needs Linux and two CPUs")


def squares_and_pids(items: Sequence[int]) -> list[tuple[int, int]]:
    return [(i * i, os.getpid()) for i in items]


def fails_in_children(items: Sequence[int]) -> list[int]:
    if os.getpid() != PARENT:
        raise RuntimeError("a child broke")
    return [i + 1 for i in items]


def test_a_small_batch_is_computed_in_this_process() -> None:
    got = forkmap.map_chunks(squares_and_pids, ITEMS[:10])
    assert got == [(i * i, PARENT) for i in range(10)]


@parallel
def test_a_big_batch_is_split_across_processes_and_comes_back_in_order() -> None:
    got = forkmap.map_chunks(squares_and_pids, ITEMS)
    assert [v for v, _ in got] == [i * i for i in ITEMS]
    assert len({pid for _, pid in got}) > 1 and got[0][1] == PARENT


@parallel
def test_a_child_that_fails_only_costs_its_chunk_computed_here() -> None:
    assert forkmap.map_chunks(fails_in_children, ITEMS) == [i + 1 for i in ITEMS]


@parallel
def test_a_child_result_that_cannot_be_sent_or_has_the_wrong_length_is_recomputed() -> None:
    def odd_in_children(items: Sequence[int]) -> list[object]:
        if os.getpid() != PARENT:
            return [object()] if items[0] % 2 else [1, 2, 3]
        return [str(i) for i in items]

    assert forkmap.map_chunks(odd_in_children, ITEMS) == [str(i) for i in ITEMS]


def test_no_fork_while_another_thread_runs() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        got = forkmap.map_chunks(squares_and_pids, ITEMS)
    finally:
        stop.set()
        other.join()
    assert {pid for _, pid in got} == {PARENT}


@parallel
def test_a_started_batch_runs_in_one_child_while_this_process_goes_on() -> None:
    running = forkmap.start(squares_and_pids, ITEMS)
    got = running.wait()
    assert [v for v, _ in got] == [i * i for i in ITEMS]
    assert len({pid for _, pid in got}) == 1 and got[0][1] != PARENT


def test_a_started_small_batch_is_computed_here_when_waited_for() -> None:
    running = forkmap.start(squares_and_pids, ITEMS[:10])
    assert running.wait() == [(i * i, PARENT) for i in range(10)]


@parallel
def test_a_started_child_that_fails_costs_its_work_done_here() -> None:
    assert forkmap.start(fails_in_children, ITEMS).wait() == [i + 1 for i in ITEMS]


@parallel
def test_a_started_child_is_killed_with_its_parent(tmp_path: Path) -> None:
    """The child may be writing files: it must not outlive a parent killed with kill -9."""
    marker = tmp_path / "child"
    code = (
        "import os, time\n"
        "from reconciler.perf import forkmap\n"
        "def slow(items):\n"
        f"    open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n"
        "    return list(items)\n"
        f"forkmap.start(slow, list(range({forkmap.MIN_ITEMS})))\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        child = int(marker.read_text())
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if not _running(child):
                return
            time.sleep(0.02)
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the child outlived its parent")
    finally:
        proc.kill()
        proc.wait()


def _running(pid: int) -> bool:
    """Alive and not a zombie: a dead child nobody has reaped yet still answers `kill(pid, 0)`."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"
