"""Symbolic shapes: slices bounded by a bound Variable run for every value with one plan and one compile."""

from __future__ import annotations

import numpy as np
import pytest
from hcq_runtime import counters
from uop_scheduler import Tensor, Variable, dtypes
from uopir import Ops

AN = np.arange(30, dtype=np.float32).reshape(3, 10) / 7


@pytest.mark.parametrize("fn, ref", [(lambda t: (t + 1).sum(), lambda n: (n + 1).sum()), (lambda t: t.max(1), lambda n: n.max(1)),
                                     (lambda t: t.exp().sum(0), lambda n: np.exp(n).sum(0)), (lambda t: t.T * 2, lambda n: n.T * 2),
                                     (lambda t: t.mean(), lambda n: n.mean()), (lambda t: t.mean(1), lambda n: n.mean(1))])
def test_symbolic_slices_match_numpy_for_every_value(fn, ref):
    a = Tensor(AN).realize()
    for i in (1, 4, 10, 7):
        out = fn(a[:, :Variable("i", 1, 10).bind(i)])
        np.testing.assert_allclose(out.numpy(), ref(AN[:, :i]), rtol=1e-5)


def test_new_values_reuse_the_plan_and_the_kernels():
    a = Tensor(AN).realize()
    (a[:, :Variable("i", 1, 10).bind(2)] * 3).sum().numpy()
    counters.reset()
    for i in (3, 9, 5):
        np.testing.assert_allclose((a[:, :Variable("i", 1, 10).bind(i)] * 3).sum().numpy(), (AN[:, :i] * 3).sum(), rtol=1e-5)
    assert counters.compiles == 0


def test_symbolic_start_and_shape():
    a = Tensor(AN).realize()
    v = Variable("s", 0, 9).bind(6)
    x = a[1, v:]
    assert x.shape[0] is not None and x.numpy().shape == (4,)
    np.testing.assert_allclose(x.numpy(), AN[1, 6:], rtol=1e-6)


def test_binding_outside_the_range_is_refused():
    with pytest.raises(Exception, match="outside its range"):
        Variable("i", 1, 10).bind(11)


def test_slicing_an_axis_of_symbolic_size_with_int_bounds():
    # tinygrad's test_tiny test_symbolic: `ret.contiguous()[:s]` raised TypeError from slice.indices
    i = Variable("i", 1, 10)
    base = np.arange(10, dtype=np.float32)
    for s in (2, 5, 10):
        ret = Tensor(base).contiguous()[:i.bind(s)] + 1
        np.testing.assert_array_equal(ret.contiguous()[:s].numpy(), base[:s] + 1)
        np.testing.assert_array_equal(ret.contiguous()[:-1].numpy(), base[:s - 1] + 1)
        np.testing.assert_array_equal(ret[1:].numpy(), base[1:s] + 1)


def test_a_pad_by_a_symbolic_amount_keeps_a_fixed_size_kv_cache():
    # tinygrad's test_assign_kv_cache: `pad` took int() of a symbolic amount (TypeError)
    from uop_scheduler import TinyJit
    bsz, ctx = 2, 8

    class Attn:
        @TinyJit
        def __call__(self, xk, start_pos):
            if not hasattr(self, "cache"):
                self.cache = Tensor.zeros(bsz, ctx, 1).contiguous()
            keys = self.cache.shrink((None, (0, start_pos), None)).cat(xk, dim=1).contiguous() if start_pos > 0 else xk
            self.cache.assign(keys.pad((None, (0, ctx - start_pos - xk.shape[1]), None)).contiguous()).realize()

    attn, want = Attn(), np.zeros((bsz, ctx, 1), np.float32)
    attn(Tensor.full((bsz, 3, 1), 1.0).contiguous(), 0)
    want[:, :3] = 1
    for i in range(3, 7):
        attn(Tensor.full((bsz, 1, 1), float(i)).contiguous(), Variable("start_pos", 1, ctx).bind(i))
        want[:, i] = i
        np.testing.assert_array_equal(attn.cache.numpy(), want)
    v = Variable("p", 0, 4).bind(2)
    np.testing.assert_array_equal(Tensor([1.0, 2.0]).pad(((0, v),), value=5.0).contiguous()[:4].numpy(), [1, 2, 5, 5])


def test_full_with_buffer_true_materializes_the_same_values():
    a = Tensor.full((2, 3), 7, buffer=True)
    assert a.uop.op is not Ops.EXPAND and a.tolist() == [[7] * 3] * 2
    b = Tensor.zeros(2).contiguous().realize()
    b.assign(Tensor.ones(2, buffer=False))
    assert b.tolist() == [1.0, 1.0]


def test_bound_values_walk_the_graph_once_and_schedule_once(monkeypatch):
    # the walk keys a bound variable by the variable, not its value: one walk per realize, one schedule for every value
    from uop_scheduler import clear_schedule_cache, realizer, schedule_rewrites

    walks, passes = [], []
    walk, run_passes = realizer.walk_graph, schedule_rewrites.schedule_rewrites
    monkeypatch.setattr(realizer, "walk_graph", lambda *a, **k: walks.append(1) or walk(*a, **k))
    monkeypatch.setattr(schedule_rewrites, "schedule_rewrites", lambda *a: passes.append(1) or run_passes(*a))
    clear_schedule_cache()
    a = Tensor(AN).realize()
    for i in (2, 9, 5):
        out = (a[:, :Variable("i", 1, 10).bind(i)] * 3).sum(1).contiguous()
        out.realize()
        np.testing.assert_allclose(out.numpy(), (AN[:, :i] * 3).sum(1), rtol=1e-5)
    assert len(passes) == 1
    assert len(walks) == 3  # each realize walks once (numpy() of a realized tensor reads its buffer)


# ---- bound Variables as values: operands, fill values, arange bounds, pad amounts, causal masks ----

def test_variables_combine_with_tensors_as_weak_ints():
    for i in (2, 7):
        v = Variable("a", 1, 10).bind(i)
        assert (Tensor.ones(3, dtype=dtypes.int8) * v).tolist() == [i] * 3
        assert (Tensor.ones(3, dtype=dtypes.int8) * v).dtype is dtypes.int8  # the concrete side's dtype
        assert (Tensor(3) * (v * 4)).item() == 12 * i
        assert Tensor(v * 4).item() == 4 * i  # a read commits the weak int to the default int
        assert Tensor(v).dtype is dtypes.weakint
        assert Tensor.full((3,), v).tolist() == [i] * 3
        # the variable on the left leaves the operation to the tensor
        t = Tensor([1, 5, 9], dtype=dtypes.int32)
        assert (v * t).tolist() == [i, 5 * i, 9 * i] and (v - t).tolist() == [i - 1, i - 5, i - 9]
        assert (v < t).tolist() == [i < 1, i < 5, i < 9] and (v >= t).tolist() == [i >= 1, i >= 5, i >= 9]


def test_variable_dtype_and_large_values():
    big = Variable("b", 0, 2**40, dtype=dtypes.int64).bind(2**35)
    assert big.dtype is dtypes.int64
    assert (Tensor(big) * 2).item() == 2**36


def test_unbound_variable_is_named_in_the_error():
    with pytest.raises(RuntimeError, match="u is unbound"):
        Tensor(Variable("u", 1, 10)).item()


@pytest.mark.parametrize("bounds", [lambda v: (0, v), lambda v: (v, 12), lambda v: (1, 12, v), lambda v: (v, v + 9, 2)])
def test_arange_with_variable_bounds(bounds):
    for i in (1, 2, 3):
        args = bounds(Variable("k", 1, 3).bind(i))
        ref = np.arange(*[_value(a) for a in args])
        got = Tensor.arange(*args)[:len(ref)].numpy()
        np.testing.assert_array_equal(got, ref)


def _value(d):
    """The value of an int or an expression of bound variables."""
    return d if isinstance(d, int) else int(d.substitute({b: b.src[1] for b in d.toposort() if b.op is Ops.BIND}).simplify().arg)


def test_pad_by_variable_amounts():
    for i in (1, 2):
        t = Tensor.ones(2, 2).pad([Variable("a", 1, 3).bind(i)] * 4)
        total = (2 + 2 * i) ** 2
        assert t.mean().item() == pytest.approx(4 / total)


@pytest.mark.parametrize("start_pos", [0, 1, 3])
def test_causal_mask_with_a_variable_start(start_pos):
    # the mask a KV-cache decoder builds: rows t, columns start_pos + t, tril at start_pos + 1
    t = Variable("t", 1, 10).bind(4)
    pos = Variable("start_pos", 0, 5).bind(start_pos)
    mask = Tensor.full((1, 1, t, pos + t), float("-inf")).tril(pos + 1)
    got = mask.shrink(((0, 1), (0, 1), (0, 4), (0, start_pos + 4))).numpy()
    np.testing.assert_array_equal(got, np.tril(np.full((1, 1, 4, start_pos + 4), float("-inf")), k=start_pos + 1))
    upper = Tensor.full((1, 1, t, pos + t), 1.0).triu(pos + 1).shrink(((0, 1), (0, 1), (0, 4), (0, start_pos + 4))).numpy()
    np.testing.assert_array_equal(upper, np.triu(np.ones((1, 1, 4, start_pos + 4)), k=start_pos + 1))


def test_chunk_along_a_symbolic_dim_is_refused():
    t = Tensor.ones(10, 8).contiguous()[:Variable("a", 1, 10).bind(4), :]
    assert [c.shape[1] for c in t.chunk(2, dim=-1)] == [4, 4]
    with pytest.raises(ValueError, match="symbolic"):
        t.chunk(2, dim=0)


def test_arange_with_a_large_variable_takes_int64():
    v = Variable("big", 1, 2**40, dtype=dtypes.int64).bind(2**33)
    t = Tensor.arange(v, v + 3)
    assert t.dtype is dtypes.int64 and t[:3].tolist() == [2**33, 2**33 + 1, 2**33 + 2]
    assert Tensor.arange(Variable("a", 1, 10).bind(3)).dtype is dtypes.int32


# ---- values of a symbolic shape realized as they are (their kernels store (3, i) elements, flattened) ----
B3 = np.arange(60, dtype=np.float32).reshape(3, 20) / 11 - 2


@pytest.mark.parametrize("fn, ref", [(lambda t: t + 1, lambda n: n + 1), (lambda t: t.T.contiguous(), lambda n: n.T),
                                     (lambda t: t.var(1), lambda n: n.var(1, ddof=1)), (lambda t: t.var(0), lambda n: n.var(0, ddof=1)),
                                     (lambda t: t.var(), lambda n: n.var(ddof=1)), (lambda t: t.std(1), lambda n: n.std(1, ddof=1)),
                                     (lambda t: t.reshape(3, 1, t.shape[1]) * 2, lambda n: n.reshape(3, 1, -1) * 2),
                                     (lambda t: t[:, -3:-1], lambda n: n[:, -3:-1]), (lambda t: t[:, -1], lambda n: n[:, -1])])
def test_symbolic_values_realized_whole_match_numpy(fn, ref):
    a = Tensor(B3.reshape(-1)).realize().reshape(3, 20)  # a view of a flat buffer, as a realized value is
    for i in (3, 8, 20, 5):
        out, want = fn(a[:, :Variable("i", 1, 20).bind(i)]), ref(B3[:, :i])
        np.testing.assert_allclose(out.numpy()[tuple(slice(0, n) for n in want.shape)], want, rtol=1e-5, atol=1e-6)
        # the realized symbolic value read back through a concrete slice
        np.testing.assert_allclose(out.shrink(tuple((0, n) for n in want.shape)).numpy(), want, rtol=1e-5, atol=1e-6)


def test_symbolic_jit_steps_match_numpy():
    from uop_scheduler import TinyJit

    a, b = Tensor(B3.reshape(-1)).realize().reshape(3, 20), Tensor(B3.T.copy()).realize()
    plus = TinyJit(lambda x: (x + 1).realize())
    mm = TinyJit(lambda x, y: (x @ y).realize())
    for i in (1, 2, 3, 4, 7):
        v = Variable("i", 1, 20).bind(i)
        np.testing.assert_allclose(plus(a[:, :v])[:3, :i].numpy(), B3[:, :i] + 1, rtol=1e-6)
        np.testing.assert_allclose(mm(a[:, :v], b[:v, :]).numpy(), B3[:, :i] @ B3.T[:i, :], rtol=1e-5)


def test_symbolic_ones_and_zeros():
    for i in (2, 5):
        v = Variable("i", 1, 10).bind(i)
        np.testing.assert_allclose((Tensor.ones(v, 3).contiguous() * 2).numpy()[:i], np.full((i, 3), 2.0))
        np.testing.assert_allclose(Tensor.zeros(2, v).contiguous().numpy()[:, :i], np.zeros((2, i)))


def test_symbolic_shapes_refused_where_they_cannot_hold():
    from uop_scheduler import ArgumentError, ShapeError

    v = Variable("i", 1, 10).bind(3)
    with pytest.raises(ShapeError, match=r"\(30,\) -> \(3, i\)"):
        Tensor(np.zeros(30, np.float32)).reshape(3, v)  # a concrete size is no symbolic one
    with pytest.raises(ArgumentError, match="concrete shape"):
        Tensor.rand(2, v)
    with pytest.raises(ShapeError, match="smallest size 1"):  # a window of 3 does not fit the Variable's minimum
        Tensor.ones(1, 2, 10)[:, :, :v].conv2d(Tensor.ones(4, 2, 3))
    with pytest.raises(IndexError, match="out of bounds with size=3"):
        Tensor(B3)[:, :v][:, 3]



def _conv1d_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad)))
    n = (xp.shape[2] - w.shape[2]) // stride + 1
    return np.stack([np.einsum("bck,ock->bo", xp[:, :, t * stride:t * stride + w.shape[2]], w) for t in range(n)], axis=-1)


def test_convolution_and_pooling_over_a_symbolic_axis_match_numpy():
    # the windows repeat the axis as often as its smallest size needs; tinygrad's test_conv2d_ceildiv_edge_case (79)
    from uopir import sym_infer

    rng = np.random.default_rng(3)
    xn, wn = rng.standard_normal((1, 8, 100)).astype(np.float32), rng.standard_normal((16, 8, 12)).astype(np.float32)
    pn = rng.standard_normal((2, 3, 20, 8)).astype(np.float32)
    x, w, p = Tensor(xn).realize(), Tensor(wn).realize(), Tensor(pn).realize()
    for val in (79, 11, 40):
        out = x[:, :, :Variable("v", 11, 100).bind(val)].conv2d(w, stride=6, padding=(3, 3))
        want = _conv1d_ref(xn[:, :, :val], wn, 6, 3)
        assert tuple(sym_infer(d, {"v": val}) for d in out.shape) == want.shape
        np.testing.assert_allclose(out[:, :, :want.shape[2]].numpy(), want, rtol=1e-4, atol=1e-4)
    for val in (4, 7, 20):
        v = Variable("r", 4, 20).bind(val)
        rows = val // 2
        pooled = p[:, :, :v].max_pool2d(2)
        np.testing.assert_array_equal(pooled[:, :, :rows].numpy(), pn[:, :, :rows * 2].reshape(2, 3, rows, 2, 4, 2).max(axis=(3, 5)))
