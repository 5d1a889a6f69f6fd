"""Writes into slices of a buffer start at bound variables (writes._written_view, schedule.OFFSET_VAR), scheduled by
their order in the graph (schedule.scheduled_variables): a loop writing `out[i * n:(i + 1) * n]` runs one kernel for
every offset (each offset was a constant of a new kernel to compile, 60-70 ms a step). Every value is numpy's."""

from __future__ import annotations

import numpy as np
import pytest
from hcq_runtime import CCompiler
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor, TinyJit, Variable
from uop_scheduler.errors import ArgumentError
from uop_scheduler.realizer import done
from uop_scheduler.schedule import OFFSET_VAR, scheduled_variables, walk_graph
from uopir import Ops

RNG = np.random.default_rng(11)


def test_a_loop_writing_moving_slices_compiles_once_and_matches_numpy():
    dn = RNG.standard_normal((96, 6)).astype(np.float32)
    data = Tensor(dn).realize()
    out, want = Tensor.zeros(96, 6).contiguous().realize(), np.zeros((96, 6), np.float32)
    rows, want_rows = Tensor.zeros(12, 6).contiguous().realize(), np.zeros((12, 6), np.float32)
    out[0:8] = data[0:8] * 2
    rows[0] = data[0] + 1
    out.realize(rows)
    compiles = CCompiler.invocations
    for i in range(1, 12):
        out[i * 8:(i + 1) * 8] = data[i * 8:(i + 1) * 8] * 2
        rows[i] = data[i] + 1  # an int index: a slice of one row
        out.realize(rows)
    assert CCompiler.invocations == compiles
    want[:] = dn * 2
    want_rows[:] = dn[:12] + 1
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(rows.numpy(), want_rows)


def test_offsets_are_keyed_by_their_order_not_their_names():
    """Two graphs writing other slices of the same shapes have the same walk key when offsets are keyed by order, and
    their variables are scheduled under the same names; keyed by name (a TinyJit capture's walk) they differ."""
    graphs = []
    buffers = [Tensor.zeros(8, 4).contiguous().realize() for _ in range(2)]  # (a realize runs every pending write)
    for t, (a, b) in zip(buffers, ((0, 3), (5, 1))):
        t[a:a + 2] = Tensor.ones(2, 4)
        t[b] = Tensor.full((4,), 2.0)
        graphs.append(t.uop)
    walks = [walk_graph((g,), done, "CPU", by_order=True) for g in graphs]
    assert walks[0].key == walks[1].key
    named = [scheduled_variables([n for n in w.marked if n.op is Ops.BIND], True) for w in walks]
    assert [v.arg for v in named[0].values()] == [v.arg for v in named[1].values()]
    assert all(v.arg[0].startswith(OFFSET_VAR) for v in named[0].values()) and len(named[0]) == 2
    assert walk_graph((graphs[0],), done, "CPU").key != walk_graph((graphs[1],), done, "CPU").key


def test_several_slice_writes_in_one_realize_in_program_order():
    """Writes into overlapping and disjoint slices, one reading the buffer itself (a shift), realized together: each
    sees the value the ones before it left, as the numpy statements in order do."""
    xn = RNG.standard_normal((10, 3)).astype(np.float32)
    x, want = Tensor(xn.copy()).realize(), xn.copy()
    for _ in range(3):
        x[1:5] = x[0:4] * 2  # reads the version before this write
        want[1:5] = want[0:4] * 2
        x[3:7] = Tensor.full((4, 3), 1.5)
        want[3:7] = 1.5
        x[9] = x[2] - x[8]
        want[9] = want[2] - want[8]
        x[2:3, 1:] = Tensor.full((1, 2), -4.0)  # two cut axes
        want[2:3, 1:] = -4.0
        np.testing.assert_array_equal(x.numpy(), want)


def test_a_value_read_before_a_slice_write_keeps_the_old_values():
    xn = RNG.standard_normal((6, 4)).astype(np.float32)
    x = Tensor(xn.copy()).realize()
    before, copied = x[2:4] + 0, x[1:3].contiguous()
    for k in range(3):
        x[k * 2:k * 2 + 2] = Tensor.full((2, 4), float(k))
    np.testing.assert_array_equal(before.numpy(), xn[2:4])
    np.testing.assert_array_equal(copied.numpy(), xn[1:3])
    np.testing.assert_array_equal(x.numpy(), np.repeat(np.arange(3, dtype=np.float32), 2)[:, None] * np.ones(4, np.float32))


def test_a_jitted_step_writes_where_it_was_captured():
    """Inside a capture the offsets stay constants; a write made before a capture that runs inside it (a step with no
    tensor inputs) replays at its recorded offset."""
    out = Tensor.zeros(8, 4).contiguous().realize()

    @TinyJit
    def step(x: Tensor) -> Tensor:
        out[2:4] = x
        return (out * 1).realize()

    for k in range(4):
        got = step(Tensor(np.full((2, 4), float(k), np.float32)).realize()).numpy()
        want = np.zeros((8, 4), np.float32)
        want[2:4] = k
        np.testing.assert_array_equal(got, want)
    state = Tensor.zeros(8, 4).contiguous().realize()
    read = TinyJit(lambda: (state * 1).realize(), warmup=0)
    for _ in range(3):
        state[5:7] = Tensor.full((2, 4), 5.0)
        want = np.zeros((8, 4), np.float32)
        want[5:7] = 5
        np.testing.assert_array_equal(read().numpy(), want)
    assert read.captured is not None and list(read.captured.offsets.values()) == [5]


_SHAPES = [(12,), (5, 7), (3, 4, 5)]


@st.composite
def _programs(draw):
    shape = draw(st.sampled_from(_SHAPES))
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        index = []
        for d in shape[:draw(st.integers(1, len(shape)))]:
            if draw(st.booleans()):
                index.append(draw(st.integers(-d, d - 1)))
            else:
                a = draw(st.integers(0, d - 1))
                index.append(slice(a, draw(st.integers(a + 1, d)), draw(st.sampled_from([1, 1, 2]))))
        steps.append((tuple(index), draw(st.sampled_from(["const", "self", "data"])), draw(st.booleans())))
    return shape, steps


@settings(max_examples=60, deadline=None)
@given(_programs())
def test_generated_slice_writes_match_numpy(program):
    """Writes of constants, of the buffer's own elements and of another buffer's into basic-index slices, some realized
    at once and some together with the next, against numpy."""
    shape, steps = program
    xn = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    dn = RNG.standard_normal(shape).astype(np.float32)
    x, data, want = Tensor(xn.copy()).realize(), Tensor(dn).realize(), xn.copy()
    for index, source, now in steps:
        region = want[index].shape
        if source == "const":
            value, value_n = Tensor.full(region, 3.5), np.full(region, 3.5, np.float32)
        elif source == "self":
            value, value_n = x[index] * 2 + 1, want[index] * 2 + 1
        else:
            value, value_n = data[index] - x[index], dn[index] - want[index]
        x[index] = value
        want[index] = value_n
        if now:
            x.realize()
    np.testing.assert_array_equal(x.numpy(), want)


@pytest.mark.parametrize("dtype", [np.int16, np.float64])
def test_other_dtypes(dtype):
    xn = (RNG.standard_normal(40) * 50).astype(dtype)
    x, want = Tensor(xn.copy()).realize(), xn.copy()
    for i in range(5):
        x[i * 7:i * 7 + 3] = x[i * 7 + 1:i * 7 + 4] + x[0:3]
        want[i * 7:i * 7 + 3] = want[i * 7 + 1:i * 7 + 4] + want[0:3]
    np.testing.assert_array_equal(x.numpy(), want)


def test_the_offset_prefix_is_reserved_for_writes():
    """A user Variable named like a write's offset would be replayed by TinyJit with its recorded value (the capture
    passes offsets by name): the name is refused with a clear error; other names are as before."""
    with pytest.raises(ArgumentError, match="reserved"):
        Variable(f"{OFFSET_VAR}0", 0, 8)
    i = Variable("slice_start", 0, 8).bind(3)
    x = Tensor(np.arange(12, dtype=np.float32))
    np.testing.assert_array_equal(x[i:i + 4].numpy(), np.arange(3, 7, dtype=np.float32))
