"""Float constants that change between realizes of one graph structure are read from memory (schedule.varying_constants,
walk_graph's `constants`): a loop scaling by a new Python float at each step compiles its kernels twice, not once per
value (60-170 ms each). Constants that do not change stay constants. Every value is numpy's."""

from __future__ import annotations

import numpy as np
import pytest
from hcq_runtime import CCompiler
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor, TinyJit, dtypes
from uop_scheduler.realizer import done
from uop_scheduler.schedule import varying_constants, walk_graph

RNG = np.random.default_rng(21)


def test_a_loop_over_python_floats_compiles_twice_and_matches_numpy():
    """A sampler's update `x * a_t + e * b_t` with new floats at every step, and the same with a float16 value."""
    xn, en = RNG.standard_normal((64, 32)).astype(np.float32), RNG.standard_normal((64, 32)).astype(np.float32)
    x, e, want = Tensor(xn).realize(), Tensor(en).realize(), xn.copy()
    h, want_h = Tensor(xn.astype(np.float16)).realize(), xn.astype(np.float16)
    compiles = []
    for i in range(8):
        before = CCompiler.invocations
        a, b = 1.0 - 0.013 * i, 0.1 / (i + 1)
        x = (x * a + e * b).realize()
        h = (h * a).realize()
        want = want * np.float32(a) + en * np.float32(b)
        want_h = want_h * np.float16(a)
        compiles.append(CCompiler.invocations - before)
    np.testing.assert_array_equal(x.numpy(), want)
    np.testing.assert_array_equal(h.numpy(), want_h)
    assert sum(compiles[2:]) == 0, compiles  # (the first value baked in, then one schedule reading the values)


def test_constants_that_do_not_change_stay_constants():
    x = Tensor(RNG.standard_normal(16).astype(np.float32)).realize()
    for _ in range(3):
        (x * 0.5 + 2.0).realize()
    walk = walk_graph(((x * 0.5 + 2.0).uop,), done, "CPU")
    assert not varying_constants(walk) and not walk.constants
    varied = [(x * c + 2.0).realize() for c in (0.25, 0.75)][-1]
    np.testing.assert_array_equal(varied.numpy(), x.numpy() * np.float32(0.75) + 2)
    walk = walk_graph(((x * 1.5 + 2.0).uop,), done, "CPU")
    changed = varying_constants(walk)
    assert [c.arg for c in changed] == [1.5]  # the scale varies, 2.0 does not
    assert walk_graph(((x * 1.5 + 2.0).uop,), done, "CPU", constants=frozenset(changed)).constants == list(changed)


def test_a_jitted_step_keeps_the_values_it_captured():
    """Under a capture constants stay in the kernels (tinygrad's rule: a Python number is part of the captured step)."""
    step = TinyJit(lambda t: (t * 3.0 + 1.0).realize())
    for k in range(4):
        got = step(Tensor(np.full(5, float(k), np.float32)).realize()).numpy()
        np.testing.assert_array_equal(got, np.full(5, 3.0 * k + 1, np.float32))


def test_a_scalar_and_a_full_tensor_of_a_changing_value():
    for v in (1.5, -2.25, 7.0, 0.0):
        np.testing.assert_array_equal(Tensor(v).realize().numpy(), np.float32(v))
        np.testing.assert_array_equal((Tensor.full((3, 2), v) * 2).numpy(), np.full((3, 2), v * 2, np.float32))


_UNARY = {
    "pow": (lambda t, c: t.abs() ** c, lambda a, c: np.abs(a) ** c),
    "max": (lambda t, c: t.maximum(c), lambda a, c: np.maximum(a, c)),
    "where": (lambda t, c: (t > c).where(t, c * 2), lambda a, c: np.where(a > c, a, c * 2)),
    "div": (lambda t, c: t / (abs(c) + 1), lambda a, c: a / (abs(c) + 1)),
    "clip": (lambda t, c: t.clip(-abs(c), abs(c)), lambda a, c: np.clip(a, -abs(c), abs(c))),
    "lt": (lambda t, c: (t < c).float(), lambda a, c: (a < c).astype(np.float32)),
    "affine": (lambda t, c: t * c - (c + 1), lambda a, c: a * c - (c + 1)),
}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(_UNARY)), min_size=1, max_size=3),
       st.lists(st.floats(-4, 4, allow_nan=False, width=32), min_size=3, max_size=5))
def test_generated_programs_with_changing_constants_match_numpy(ops, values):
    """One structure of 1 to 3 ops run with 3 to 5 values of its constants in turn, each against numpy (float64)."""
    an = RNG.standard_normal((4, 8)).astype(np.float32) * 3
    a = Tensor(an).realize()
    for c in values:
        t, want = a, an.astype(np.float64)
        for op in ops:
            t, want = _UNARY[op][0](t, c), _UNARY[op][1](want, c)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(t.numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [dtypes.float64, dtypes.float16])
def test_other_float_dtypes(dtype):
    an = RNG.standard_normal(10)
    a = Tensor(an, dtype=dtype).realize()
    host = np.float64 if dtype is dtypes.float64 else np.float16
    for c in (0.1, 0.2, 0.3):
        np.testing.assert_array_equal((a * c).numpy(), an.astype(host) * host(c))



def test_a_constant_graph_realized_with_varying_values_is_not_read_on_another_device():
    """A graph of constants alone realized on CPU with its constant read from memory belongs to no device: the same
    graph in a CPU:1 kernel is computed there, not loaded from the CPU buffer (the CONST node is one hash-consed node)."""
    nodes = []  # (kept alive: a realized node's buffer is remembered while the node lives)
    for v in (0.5, 1.5, 2.5, 3.5):
        t = Tensor.full((4,), v)
        nodes.append(t.uop)
        np.testing.assert_array_equal(t.realize().numpy(), np.full(4, v, np.float32))
    x = np.array([-1, 2, -3, 4], np.float32)
    b = Tensor(x, device="CPU:1")
    np.testing.assert_array_equal((b + Tensor.full((4,), 3.5, device="CPU:1")).numpy(), x + 3.5)
    np.testing.assert_array_equal(b.maximum(3.5).numpy(), np.maximum(x, 3.5))  # (the CONST 3.5 node a scalar realized)


def test_a_graph_that_copies_between_devices_keeps_its_constants():
    """A constant read on one device of a graph that copies to another stays a constant (its buffer would be made on
    the realize's device)."""
    xn = np.arange(4, dtype=np.float32)
    x = Tensor(xn).realize()
    for c in (1.0, 2.0, 3.0, 4.0):
        np.testing.assert_array_equal((x * c).to("CPU:1").numpy(), xn * c)
        np.testing.assert_array_equal((x.to("CPU:1") * c + x.to("CPU:1")).numpy(), xn * c + xn)
