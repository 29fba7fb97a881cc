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
