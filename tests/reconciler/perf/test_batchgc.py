"""A batch runs with the cyclic collector paused, and the collector's state is restored after."""

from __future__ import annotations

import gc

import pytest

from reconciler.perf import batchgc


def test_the_collector_is_off_inside_and_back_on_after_even_on_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), batchgc.paused():
        assert not gc.isenabled()
        raise RuntimeError("a failing pass")
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    gc.disable()
    try:
        with batchgc.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_last_batch_leaves_the_collector_off_only_in_a_process_that_exits_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The console script (`exits_after`) skips the collection a re-enabled collector would make of
    everything a one-shot pass left; anyone else (a test, --interval, a batch that is not the last)
    gets the collector back."""
    assert gc.isenabled()
    with batchgc.paused(last=True):
        pass
    assert gc.isenabled()  # this process does not exit after: back on
    monkeypatch.setattr(batchgc, "_exits_after", False)
    batchgc.exits_after()
    try:
        with batchgc.paused():
            pass
        assert gc.isenabled()  # not the last batch: back on
        with batchgc.paused(last=True):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
