"""Tensor.realize pauses Python's cyclic garbage collector while it runs and leaves it as it found it: enabled again
after a realize (one that raises too), still disabled when the caller had disabled it."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from uop_scheduler import Tensor
from uop_scheduler import tensor as tensor_module


@pytest.fixture
def gc_state():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_no_collection_runs_inside_a_realize_and_the_collector_is_enabled_again(gc_state, monkeypatch):
    gc.enable()
    seen, collections, inside = [], [], []
    original = tensor_module.realize_uops

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        before = len(collections)
        try:
            return original(*args, **kwargs)
        finally:
            inside.append(len(collections) - before)

    monkeypatch.setattr(tensor_module, "realize_uops", watched)
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    callback = lambda phase, info: collections.append(phase)  # noqa: E731
    gc.callbacks.append(callback)
    try:
        # enough graph for the collector's first threshold (700 objects alive at once) several times over
        out = sum(((Tensor(a) + i).exp().sum(1) * 2 for i in range(40)), Tensor.zeros(4)).realize()
    finally:
        gc.callbacks.remove(callback)
    np.testing.assert_allclose(out.numpy(), sum(np.exp(a + i).sum(1) * 2 for i in range(40)), rtol=1e-5)
    assert seen and not any(seen) and sum(inside) == 0
    assert gc.isenabled()


def test_a_realize_that_raises_enables_the_collector_again(gc_state, monkeypatch):
    gc.enable()

    def failing(*args, **kwargs):
        raise RuntimeError("a kernel failed")

    monkeypatch.setattr(tensor_module, "realize_uops", failing)
    with pytest.raises(RuntimeError, match="a kernel failed"):
        (Tensor([1.0, 2.0]) * 3).realize()
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled(gc_state):
    gc.disable()
    np.testing.assert_allclose((Tensor([1.0, 2.0]) * 3).realize().numpy(), [3.0, 6.0])
    assert not gc.isenabled()
