"""Symbolic shapes: slices bounded by a bound Variable run for every value with one plan and one compile."""

from __future__ import annotations

import numpy as np
import pytest
from hcq_runtime import counters
from uop_scheduler import Tensor, Variable
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
    monkeypatch.setattr(realizer, "walk_graph", lambda *a: walks.append(1) or walk(*a))
    monkeypatch.setattr(schedule_rewrites, "schedule_rewrites", lambda *a: passes.append(1) or run_passes(*a))
    clear_schedule_cache()
    a = Tensor(AN).realize()
    for i in (2, 9, 5):
        out = (a[:, :Variable("i", 1, 10).bind(i)] * 3).sum(1).contiguous()
        out.realize()
        np.testing.assert_allclose(out.numpy(), (AN[:, :i] * 3).sum(1), rtol=1e-5)
    assert len(passes) == 1
    assert len(walks) == 3  # each realize walks once (numpy() of a realized tensor reads its buffer)
