"""Realized values keep the graph gradients flow through: a target of a realize that reads a gradient leaf keeps its
graph, one that reads none drops it. `Tensor._settle` answers from the realize's walk when every leaf the walk met
comes after the target (a training step's loss and gradients), and walks the target's graph otherwise; these check
the cases where the answer must be yes, against numpy, and that a training step takes the shortcut."""

import numpy as np
import pytest
from uop_scheduler import Tensor, nn
from uop_scheduler import tensor as tensor_module


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_a_value_realized_with_a_write_keeps_its_graph_to_the_leaf():
    # the value reads the leaf w, listed by the walk before the value; the write is listed after it
    wv = _rng().standard_normal(6).astype(np.float32)
    w = Tensor(wv, requires_grad=True)
    a = w * 3
    b = Tensor.zeros(6).contiguous().realize()
    b.assign(b + 1)
    Tensor.realize(a, b)
    (a * a).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 18 * wv, rtol=1e-6)
    np.testing.assert_array_equal(b.numpy(), np.ones(6, np.float32))


def test_a_value_reading_a_slice_of_the_leaf_keeps_its_graph():
    # x[i:j] of a buffer is an input of its own to the walk (a lifted slice): the leaf is below what the walk listed
    wv = _rng(1).standard_normal((4, 5)).astype(np.float32)
    w = Tensor(wv, requires_grad=True)
    a = w[1:3] * 2
    a.realize()
    a.sum().backward()
    expected = np.zeros_like(wv)
    expected[1:3] = 2
    np.testing.assert_allclose(w.grad.numpy(), expected)


def test_a_value_listed_after_a_leaf_of_another_target_keeps_its_graph():
    # two values realized together: the second reads the leaf the first's graph listed first
    wv, xv = (_rng(2).standard_normal(5).astype(np.float32) for _ in range(2))
    w, x = Tensor(wv, requires_grad=True), Tensor(xv)
    first, second = (w + x).relu(), w.exp() * 2
    Tensor.realize(first, second)
    (first.sum() + second.sum()).backward()
    np.testing.assert_allclose(w.grad.numpy(), (wv + xv > 0) + 2 * np.exp(wv), rtol=1e-5)


def test_a_value_over_a_value_realized_earlier_keeps_its_graph():
    # the walk stops at the realized value (its buffer is an input) and does not see the leaf under it
    wv = _rng(3).standard_normal(5).astype(np.float32)
    w = Tensor(wv, requires_grad=True)
    h = w * 2
    c = h.exp()
    h.realize()
    b = Tensor.zeros(5).contiguous().realize()
    b.assign(b + 1)
    Tensor.realize(c, b)
    c.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.exp(2 * wv), rtol=1e-5)


@pytest.mark.parametrize("opt_class", [nn.optim.Adam, nn.optim.SGD])
def test_training_steps_take_the_shortcut_and_train_as_numpy_does(opt_class, monkeypatch):
    walked: list[int] = []
    original = tensor_module._reads_any
    monkeypatch.setattr(tensor_module, "_reads_any", lambda *a: walked.append(1) or original(*a))
    rng = _rng(4)
    xv, wv = rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal((3, 2)).astype(np.float32)
    yv = rng.integers(0, 2, 8)
    x, y, w = Tensor(xv), Tensor(yv), Tensor(wv.copy(), requires_grad=True)
    opt = opt_class([w], lr=0.1)
    ref = wv.astype(np.float64)
    m = v = np.zeros_like(ref)
    for step in range(1, 4):
        opt.zero_grad()
        loss = (x @ w).sparse_categorical_crossentropy(y)
        loss.backward()
        loss.realize(*opt.schedule_step())
        logits = xv.astype(np.float64) @ ref
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        np.testing.assert_allclose(loss.item(), -np.log(p[np.arange(8), yv]).mean(), rtol=1e-5)
        p[np.arange(8), yv] -= 1
        g = xv.astype(np.float64).T @ p / 8
        if opt_class is nn.optim.SGD:
            ref = ref - 0.1 * g
        else:
            m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
            ref = ref - 0.1 * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
        np.testing.assert_allclose(w.numpy(), ref, rtol=1e-4, atol=1e-5)
    assert walked == []  # the loss and the gradients were answered from the walk


@pytest.mark.parametrize("with_leaf", [False, True])
def test_a_realize_keeps_no_node_of_its_graph_alive(with_leaf):
    # the walk the shortcut reads is the realize's own: a walk kept after it (until the next realize with gradient
    # leaves) held the graph, and with it the realized value, so the same expression built again was not computed
    import gc
    import weakref

    keep = Tensor([1.0], requires_grad=True) if with_leaf else None
    a, b = Tensor(np.arange(6, dtype=np.float32)), Tensor(np.ones(6, np.float32))
    t = (a * 2 + b).exp()
    node = weakref.ref(t.uop)
    t.realize()
    del t
    gc.collect()
    assert node() is None
    del keep  # (alive until here: a gradient leaf exists during the realize)
