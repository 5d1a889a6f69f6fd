"""Contiguous slices of realized buffers are inputs of their own (schedule.contiguous_slice, walk_graph's `lift`): the
kernels that read a batch `x[i * n:(i + 1) * n]` are the same for every batch (each batch's offset was a constant of a
new kernel to compile, 70-170 ms), and every value is numpy's, with writes to the sliced buffer in the same or a later
schedule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hcq_runtime import CCompiler
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor, TinyJit, dtypes, nn
from uop_scheduler.realizer import done
from uop_scheduler.schedule import contiguous_slice, walk_graph

RNG = np.random.default_rng(5)


def _lifted(t: Tensor) -> list:
    return walk_graph((t.uop,), done, "CPU", lift=True).lifted


def test_batches_of_a_dataset_share_their_kernels_and_match_numpy():
    xn = RNG.standard_normal((96, 20)).astype(np.float32)
    x = Tensor(xn).realize()
    (x[0:8] * 2 + 1).numpy()
    compiles = CCompiler.invocations
    for i in range(1, 12):
        got = (x[i * 8:(i + 1) * 8] * 2 + 1).numpy()
        np.testing.assert_array_equal(got, xn[i * 8:(i + 1) * 8] * 2 + 1)
        row = (x[i] - 1).numpy()  # an int index: a run of one row
        np.testing.assert_array_equal(row, xn[i] - 1)
    assert CCompiler.invocations - compiles <= 1  # (the row's kernel, once)
    assert _lifted(x[8:16] * 2) and _lifted(x[3] + 0)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float64, np.uint16])
def test_unaligned_runs_of_every_width(dtype):
    """Runs starting at any element (offsets that are no multiple of a vector or a cache line), in 1-D and 3-D buffers."""
    vn = (RNG.standard_normal(301) * 20).astype(dtype)
    cn = (RNG.standard_normal((5, 7, 3)) * 20).astype(dtype)
    v, c = Tensor(vn).realize(), Tensor(cn).realize()
    for a, b in ((1, 2), (3, 300), (0, 17), (150, 301), (299, 300)):
        np.testing.assert_array_equal((v[a:b] + v[a:b]).numpy(), vn[a:b] + vn[a:b])
    for got, want in (((c[2:4] * 1).numpy(), cn[2:4] * 1), ((c[1, 3:6] + 0).numpy(), cn[1, 3:6] + 0),
                      ((c[4, 6, 1:] + 0).numpy(), cn[4, 6, 1:] + 0), ((c[3, 2] + c[0, 0]).numpy(), cn[3, 2] + cn[0, 0])):
        np.testing.assert_array_equal(got, want)
    assert all(contiguous_slice(s) is not None for s in _lifted(c[1, 3:6] + 0))


def test_what_is_not_a_contiguous_run_stays_a_view():
    """A column slice, a slice of a transposed view, a slice of a computed value and a slice that is itself the target
    are not lifted; their values are numpy's (a strided slice is a contiguous run viewed with a step: the run is lifted)."""
    xn = RNG.standard_normal((6, 5)).astype(np.float32)
    x = Tensor(xn).realize()
    for t, want in ((x[:, 1:3] * 2, xn[:, 1:3] * 2), (x.T[1:3] + 1, xn.T[1:3] + 1), ((x * 2)[2:4] + 1, xn[2:4] * 2 + 1)):
        assert not _lifted(t)
        np.testing.assert_array_equal(t.numpy(), want)
    assert not _lifted(x[2:4])
    np.testing.assert_array_equal(x[2:4].numpy(), xn[2:4])
    assert _lifted(x[1:5:2] + 1)
    np.testing.assert_array_equal((x[1:5:2] + 1).numpy(), xn[1:5:2] + 1)


def test_a_copy_of_a_slice_keeps_its_values_when_the_buffer_is_written():
    """A slice copied (`contiguous`, or a value computed from it) is a buffer of its own: a later write into the sliced
    buffer leaves it as it was, as in numpy."""
    xn = RNG.standard_normal((6, 5)).astype(np.float32)
    x = Tensor(xn.copy()).realize()
    copied, doubled, lazy = x[2:4].contiguous().realize(), (x[1:3] * 2).realize(), x[0:2] + 1
    x.assign(Tensor.zeros(6, 5)).realize()
    np.testing.assert_array_equal(copied.numpy(), xn[2:4])
    np.testing.assert_array_equal(doubled.numpy(), xn[1:3] * 2)
    np.testing.assert_array_equal(lazy.numpy(), xn[0:2] + 1)  # (computed after the write, from the version it read)
    np.testing.assert_array_equal(x.numpy(), np.zeros((6, 5), np.float32))


def test_a_schedule_that_writes_the_sliced_buffer_reads_it_in_order():
    """A slice read by the schedule that writes its buffer (a row copied over another, a running update) sees the
    values before the write, as the sequence of numpy statements does."""
    xn = RNG.standard_normal((8, 4)).astype(np.float32)
    x, want = Tensor(xn.copy()).realize(), xn.copy()
    for i in range(1, 6):
        x[i:i + 2] = x[i - 1:i + 1] * 0.5 + x[i + 1:i + 3]
        want[i:i + 2] = want[i - 1:i + 1] * 0.5 + want[i + 1:i + 3]
        np.testing.assert_allclose(x.numpy(), want, rtol=1e-6)
    y = Tensor(xn.copy()).realize()
    y.assign(y * 2 + y[3:4].expand(8, 4)).realize()
    np.testing.assert_allclose(y.numpy(), xn * 2 + xn[3:4], rtol=1e-6)


def test_training_over_batches_compiles_once_and_matches_a_fixed_batch_run():
    """Eager Adam steps over a dataset's batches: after the first step nothing is compiled, and the losses are those of
    the same steps with each batch copied into a tensor of its own (no slices)."""
    xn = RNG.standard_normal((40, 12)).astype(np.float32)
    yn = RNG.integers(0, 3, 40).astype(np.int32)

    def run(sliced: bool) -> tuple[list[float], int]:
        x, y = Tensor(xn, requires_grad=False).realize(), Tensor(yn).realize()
        w = Tensor(np.linspace(-0.5, 0.5, 36, dtype=np.float32).reshape(3, 12), requires_grad=True)
        opt = nn.optim.Adam([w], lr=0.05)
        losses, compiles = [], 0
        for i in range(5):
            if i == 1:
                compiles = CCompiler.invocations
            xb = x[i * 8:(i + 1) * 8] if sliced else Tensor(xn[i * 8:(i + 1) * 8]).realize()
            yb = y[i * 8:(i + 1) * 8] if sliced else Tensor(yn[i * 8:(i + 1) * 8]).realize()
            Tensor.training = True
            opt.zero_grad()
            loss = xb.linear(w.T).sparse_categorical_crossentropy(yb)
            loss.backward()
            loss.realize(*opt.schedule_step())
            losses.append(float(loss.item()))
        return losses, CCompiler.invocations - compiles

    sliced, new = run(True)
    copied, _ = run(False)
    np.testing.assert_allclose(sliced, copied, rtol=1e-6)
    assert new == 0


def test_a_capture_does_not_lift_and_replays_the_batch_it_was_given():
    """Under TinyJit the slice stays a view (a replay runs what the capture recorded): the function of a batch tensor
    replays over new batches."""
    xn = RNG.standard_normal((32, 6)).astype(np.float32)
    x = Tensor(xn).realize()

    @TinyJit
    def f(batch: Tensor) -> Tensor:
        return (batch * 3).sum(1)

    for i in range(4):
        batch = x[i * 8:(i + 1) * 8].contiguous().realize()
        np.testing.assert_allclose(f(batch).numpy(), (xn[i * 8:(i + 1) * 8] * 3).sum(1), rtol=1e-6)
    assert f.cnt == 4
    assert Tensor(np.arange(4, dtype=np.int32)).dtype is dtypes.int32


def test_reading_a_run_back_copies_its_bytes():
    """`.numpy()` and `.item()` of a contiguous run (a row, a batch, one element, a slice of a slice) read its bytes
    from the buffer: no kernel, nothing compiled; a column still goes through a kernel. Values as numpy's."""
    from hcq_runtime import counters

    xn = RNG.standard_normal((9, 4, 3)).astype(np.float32)
    x = Tensor(xn).realize()
    kernels, compiles = counters.kernels, CCompiler.invocations
    for i in range(9):
        np.testing.assert_array_equal(x[i].numpy(), xn[i])
        np.testing.assert_array_equal(x[i:9].numpy(), xn[i:9])
        assert x[i, 3, 2].item() == xn[i, 3, 2] and x[i][1][0:2].numpy().tolist() == xn[i, 1, 0:2].tolist()
        np.testing.assert_array_equal(x[i, 1:3].numpy(), xn[i, 1:3])
    assert (counters.kernels, CCompiler.invocations) == (kernels, compiles)
    np.testing.assert_array_equal(x[:, 1, 2].numpy(), xn[:, 1, 2])
    assert counters.kernels > kernels


def _index(draw, shape: tuple[int, ...]) -> tuple:
    """A random basic index of `shape`: per axis an int, a slice (with a step sometimes) or the whole axis."""

    out = []
    for n in shape[:draw(st.integers(1, len(shape)))]:
        kind = draw(st.sampled_from(["int", "slice", "full", "step"]))
        if kind == "int":
            out.append(draw(st.integers(-n, n - 1)))
        elif kind == "full":
            out.append(slice(None))
        else:
            a = draw(st.integers(0, n - 1))
            b = draw(st.integers(a + 1, n))
            out.append(slice(a, b, draw(st.integers(2, 3)) if kind == "step" else None))
    return tuple(out)


@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_random_slices_reads_and_writes_match_numpy(dtype):
    """Generated programs over a realized buffer: two basic indexes read (each often a contiguous run), combined, reduced
    and read back, with writes into the buffer in between (through a slice, whole): every value as numpy's."""

    @settings(max_examples=40, deadline=None, derandomize=True)
    @given(data=st.data())
    def check(data):
        shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
        xn = (np.arange(np.prod(shape)).reshape(shape) % 23 - 11).astype(dtype)
        x = Tensor(xn.copy()).realize()
        want = xn.copy()
        for _ in range(data.draw(st.integers(1, 3))):
            i, j = _index(data.draw, shape), _index(data.draw, shape)
            a, b = x[i], x[j]
            got_a = (a * 2 + 1).numpy()
            np.testing.assert_array_equal(got_a, want[i] * 2 + 1)
            np.testing.assert_array_equal(a.numpy(), want[i])
            if b.shape == a.shape:
                np.testing.assert_array_equal((a + b).numpy(), want[i] + want[j])
            if a.ndim:
                np.testing.assert_array_equal(a.sum(-1).numpy(), want[i].sum(-1, dtype=np.int32 if dtype == np.int16 else dtype))
            lazy = a + 0  # read before the write below, realized after it
            keep = want[i] + 0
            what = data.draw(st.sampled_from(["slice", "whole", "none"]))
            if what == "slice":
                k = _index(data.draw, shape)
                x[k] = x[k] * 3 - 1
                want[k] = want[k] * 3 - 1
            elif what == "whole":
                x.assign(x + 5).realize()
                want += 5
            np.testing.assert_array_equal(lazy.numpy(), keep)
            np.testing.assert_array_equal(x.numpy(), want)

    check()


def test_an_int_index_is_the_view_the_general_index_builds():
    """`x[i]` (taken by a shortcut, `_basic_view`) is the view the general index builds: the same node and view steps,
    writes through it land in x, and an index out of range is the same error."""
    from uop_scheduler.errors import TensorIndexError

    xn = RNG.standard_normal((4, 3)).astype(np.float32)
    x = Tensor(xn.copy()).realize()
    for i in range(-4, 4):
        fast, general = x[i], x._index_general(i)
        assert fast.uop is general.uop and fast._chain == general._chain and fast._root is general._root
    x[1] = x[1] * 10
    xn[1] *= 10
    np.testing.assert_array_equal(x.numpy(), xn)
    for bad in (4, -5):
        with pytest.raises(TensorIndexError) as fast_error:
            x[bad]
        with pytest.raises(TensorIndexError) as general_error:
            x._index_general(bad)
        assert str(fast_error.value) == str(general_error.value)


def test_a_slice_of_rows_is_the_view_the_general_index_builds():
    """`x[a:b]` (taken by a shortcut) is the view the general index builds, for every start and stop (negative,
    clamped, empty, whole); writes through it land in x."""
    xn = RNG.standard_normal((5, 3)).astype(np.float32)
    x = Tensor(xn.copy()).realize()
    for a in (None, -7, -2, 0, 1, 4, 6):
        for b in (None, -6, -1, 0, 2, 5, 9):
            fast, general = x[a:b], x._index_general(slice(a, b))
            assert fast.uop is general.uop and fast._chain == general._chain and fast._root is general._root
            assert fast.shape == xn[a:b].shape
            if fast.numel():
                np.testing.assert_array_equal(fast.numpy(), xn[a:b])
    x[1:3] = x[1:3] * 10
    xn[1:3] *= 10
    np.testing.assert_array_equal(x.numpy(), xn)
    y = Tensor(xn.copy())[1:4]  # a slice of a value not in a buffer yet
    np.testing.assert_array_equal((y + 1).numpy(), xn[1:4] + 1)


@st.composite
def _basic_indexes(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    index = []
    for d in shape[:draw(st.integers(0, len(shape)))]:
        if draw(st.booleans()):
            index.append(draw(st.integers(-d, d - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-d - 2, d + 2))
            index.append(slice(draw(bound), draw(bound)))
    return shape, tuple(index)


@settings(max_examples=150, deadline=None)
@given(_basic_indexes())
def test_basic_indexes_are_the_views_the_general_index_builds(case):
    """Tuples of ints and step-1 slices (`_basic_view`): the general path's node and view steps, numpy's values."""
    shape, index = case
    xn = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    x = Tensor(xn).realize()
    fast, general = x[index], x._index_general(index)
    assert fast.uop is general.uop and fast._chain == general._chain and fast._root is general._root
    np.testing.assert_array_equal(fast.numpy(), xn[index])
