"""Autodiff: analytic gradients from the rules checked against finite differences of independent numpy functions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor


def numeric_grad(fn, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of sum(fn(x) * w) in float64 (w fixed inside fn)."""
    x = x.astype(np.float64)
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[idx] += eps
        minus[idx] -= eps
        grad[idx] = (fn(plus) - fn(minus)) / (2 * eps)
    return grad


def check(tensor_fn, numpy_fn, *inputs: np.ndarray, rtol: float = 2e-3, atol: float = 2e-4) -> None:
    rng = np.random.default_rng(len(inputs))
    out_shape = numpy_fn(*[x.astype(np.float64) for x in inputs]).shape
    weight = rng.standard_normal(out_shape)  # a random projection, so every output element matters differently
    tensors = [Tensor(x.astype(np.float32), requires_grad=True) for x in inputs]
    (tensor_fn(*tensors) * Tensor(weight.astype(np.float32))).sum().backward()
    for i, (t, x) in enumerate(zip(tensors, inputs)):
        def scalar(v, i=i):
            args = [v if j == i else inputs[j].astype(np.float64) for j in range(len(inputs))]
            return float((numpy_fn(*args) * weight).sum())
        np.testing.assert_allclose(t.grad.numpy(), numeric_grad(scalar, x), rtol=rtol, atol=atol, err_msg=f"input {i}")


UNARY = {
    "exp": (lambda t: t.exp(), np.exp, (-2, 2)),
    "log": (lambda t: t.log(), np.log, (0.5, 3)),
    "sqrt": (lambda t: t.sqrt(), np.sqrt, (0.5, 3)),
    "sin": (lambda t: t.sin(), np.sin, (-3, 3)),
    "cos": (lambda t: t.cos(), np.cos, (-3, 3)),
    "tanh": (lambda t: t.tanh(), np.tanh, (-2, 2)),
    "sigmoid": (lambda t: t.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), (-3, 3)),
    "relu": (lambda t: t.relu(), lambda x: np.maximum(x, 0), (0.1, 2)),
    "reciprocal": (lambda t: t.reciprocal(), lambda x: 1 / x, (0.5, 2)),
    "square": (lambda t: t.square(), np.square, (-2, 2)),
    "silu": (lambda t: t.silu(), lambda x: x / (1 + np.exp(-x)), (-3, 3)),
}


@pytest.mark.parametrize("name", list(UNARY))
@settings(max_examples=4, deadline=None, derandomize=True)
@given(shape=st.sampled_from([(3,), (2, 3)]))
def test_unary_ops(name, shape):
    tensor_fn, numpy_fn, (lo, hi) = UNARY[name]
    x = np.random.default_rng(list(UNARY).index(name)).uniform(lo, hi, shape)
    check(tensor_fn, numpy_fn, x)


BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "maximum": (lambda a, b: a.maximum(b), np.maximum),
    "pow": (lambda a, b: a.pow(b), np.power),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_ops_with_broadcasting(name):
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0.5, 2, (2, 3)), rng.uniform(0.5, 2, (3,))
    check(*BINARY[name], a, b)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reductions(axis):
    x = np.random.default_rng(6).permutation(12).reshape(3, 4).astype(np.float64)  # distinct: no max ties
    check(lambda t: t.sum(axis), lambda v: np.sum(v, axis=axis), x)
    check(lambda t: t.max(axis), lambda v: np.max(v, axis=axis), x)
    check(lambda t: t.mean(axis), lambda v: np.mean(v, axis=axis), x)


def test_movement_ops():
    x = np.random.default_rng(7).standard_normal((2, 3, 4))
    check(lambda t: t.reshape(6, 4), lambda v: v.reshape(6, 4), x)
    check(lambda t: t.permute(2, 0, 1), lambda v: v.transpose(2, 0, 1), x)
    check(lambda t: t.pad(((0, 0), (1, 2), (0, 1))), lambda v: np.pad(v, ((0, 0), (1, 2), (0, 1))), x)
    check(lambda t: t[:, 1:, ::2], lambda v: v[:, 1:, ::2], x)
    check(lambda t: t.flip(1), lambda v: v[:, ::-1], x)
    check(lambda t: t.expand(5, 2, 3, 4), lambda v: np.broadcast_to(v, (5, 2, 3, 4)), x)


def test_composite_ops_against_analytic_numpy():
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    check(lambda x, y: x @ y, lambda x, y: x @ y, a, b)

    def np_softmax(v):
        e = np.exp(v - v.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    check(lambda t: t.softmax(-1), np_softmax, a)
    check(lambda t: t.log_softmax(-1), lambda v: np.log(np_softmax(v)), a)


def test_detach_stops_gradients_and_backward_accumulates():
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x.detach()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1, 2, 3])  # d/dx of x*c is c: the detached factor is a constant
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3, 4, 5])
    y = Tensor([1.0, 2.0])
    np.testing.assert_array_equal((x * 2).sum().gradient(y)[0].numpy(), [0, 0])  # tinygrad: zeros for an unused target
    with pytest.raises(RuntimeError, match="non-scalar"):
        (x * 2).gradient(x)


def test_backward_after_reading_the_value():
    # .item() realizes y into a buffer; backward must still see the graph that computed it
    xv, wv = np.array([[1, 2], [3, 4]], np.float32), np.array([[1, -1], [2, 0.5]], np.float32)
    x, w = Tensor(xv), Tensor(wv, requires_grad=True)
    y = (x @ w).relu().sum()
    assert y.item() == np.maximum(xv @ wv, 0).sum()
    y.backward()
    np.testing.assert_allclose(w.grad.numpy(), xv.T @ ((xv @ wv) > 0).astype(np.float32))
    z = (x @ w).sum()
    z.realize()
    (gw,) = z.gradient(w)
    np.testing.assert_allclose(gw.numpy(), xv.T @ np.ones((2, 2), np.float32))


_SHAPED_PROGRAMS = {
    "matmul + bias + relu": lambda x, w, b: (x @ w.T + b).relu(),
    "conv + pool": lambda x, w, b: x.reshape(2, 1, 6, 4).conv2d(w.reshape(3, 1, 2, 2)[:, :, :2, :2], padding=1).max_pool2d(2) * b.sum(),
    "softmax, log_softmax": lambda x, w, b: x.softmax(-1) @ w.T + x.log_softmax(0).sum(1, keepdim=True) * b,
    "pad, shrink, flip, expand": lambda x, w, b: x.pad(((1, 0), (0, 2))).flip(0)[1:, :4].expand(2, 12, 4) * w[:, :4].sum(),
    "where, max, sqrt, exp": lambda x, w, b: (x > 0).where(x.exp(), (x * x + 1).sqrt()).max(1) * b[:1],
}


@pytest.mark.parametrize("name", list(_SHAPED_PROGRAMS))
def test_a_gradient_graph_node_given_its_shape_has_the_shape_inference_gives_it(name):
    """compute_gradient gives each node's gradient the node's shape instead of inferring it: every gradient node that
    has a shape must have the one the inference rules give (a rule returning another shape would be hidden)."""
    from uopir.shapes import infer_shape

    rng = np.random.default_rng(0)
    x, w, b = (Tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in ((12, 4), (3, 4), (3,)))
    _SHAPED_PROGRAMS[name](x, w, b).sum().backward()
    assert x.grad is not None
    for t in (x, w, b):
        if t.grad is None:  # (not every program reads every tensor)
            continue
        assert t.grad.shape == t.shape
        for node in t.grad.uop.toposort():
            if hasattr(node, "_shape"):
                assert node._shape == infer_shape(node), (name, node.op)
