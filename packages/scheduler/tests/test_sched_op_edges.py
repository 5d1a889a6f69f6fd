"""Ops at the edges of their domains, against numpy and the derivatives' definitions: the extreme values of int dtypes,
0-d tensors reduced over axis 0 or -1, gradients at zeros (abs, prod, pow) and at inputs large enough that a naive
formula overflows (sigmoid and the activations built on it), bounds reached exactly (clip), and arange's dtype.
Found by running tinygrad's own op tests (test/backend/test_ops.py) against this package."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import DTypeOverflowError, Tensor, dtypes

INT_DTYPES = [(np.int8, dtypes.int8), (np.int16, dtypes.int16), (np.int32, dtypes.int32), (np.int64, dtypes.int64),
              (np.uint8, dtypes.uint8), (np.uint32, dtypes.uint32)]


def grad_of(fn, *values, dtype=dtypes.float32):
    """The gradients of sum(fn(*tensors)) with respect to each tensor made from `values`."""
    ts = [Tensor(np.asarray(v, dtype=np.float32), dtype=dtype, requires_grad=True) for v in values]
    fn(*ts).sum().backward()
    return [t.grad.numpy() for t in ts]


# ---- the lowest value of an int dtype: min through negation overflowed (-INT_MIN is INT_MIN) ----

@pytest.mark.parametrize("np_dtype,dtype", INT_DTYPES)
@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_int_min_argmin_minimum_at_extremes(np_dtype, dtype, data):
    info = np.iinfo(np_dtype)
    values = st.one_of(st.sampled_from([info.min, info.max, 0, 1]), st.integers(int(info.min), int(info.max)))
    x = np.array(data.draw(st.lists(values, min_size=1, max_size=7)), dtype=np_dtype)
    y = np.array(data.draw(st.lists(values, min_size=len(x), max_size=len(x))), dtype=np_dtype)
    t, u = Tensor(x, dtype=dtype), Tensor(y, dtype=dtype)
    assert t.min().item() == x.min()
    assert t.argmin().item() == x.argmin()
    np.testing.assert_array_equal(t.minimum(u).numpy(), np.minimum(x, y))
    np.testing.assert_array_equal(t.maximum(u).numpy(), np.maximum(x, y))
    np.testing.assert_array_equal(t.cummin(0)[0].numpy(), np.minimum.accumulate(x))


def test_bool_min_and_argmin():
    assert Tensor([True, False]).min().item() is False
    assert Tensor([False, True]).argmin().item() == 0
    assert Tensor([True, False, False]).argmin().item() == 1


# ---- 0-d tensors take axis 0 and -1, as torch's do ----

@pytest.mark.parametrize("op", ["sum", "max", "min", "mean", "prod", "logsumexp", "softmax", "log_softmax", "cumsum",
                                "cumprod"])
@pytest.mark.parametrize("axis", [0, -1])
def test_scalar_reductions_over_axis_zero(op, axis):
    x = 1.5
    expected = {"softmax": 1.0, "log_softmax": 0.0}.get(op, x)
    out = getattr(Tensor(x), op)(axis)
    assert out.shape == ()
    assert out.item() == pytest.approx(expected)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_scalar_running_extremes(op):
    values, index = getattr(Tensor(-2.0), op)(0)
    assert (values.item(), index.item()) == (-2.0, 0)


@pytest.mark.parametrize("op", ["sum", "max", "softmax", "log_softmax", "cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("axis", [1, -2])
def test_scalar_other_axes_are_index_errors(op, axis):
    with pytest.raises(IndexError):
        getattr(Tensor(1.0), op)(axis)


def test_scalar_log_softmax_gradient():
    assert grad_of(lambda t: t.reshape(()).log_softmax(0), [3.0])[0].tolist() == [0.0]


# ---- softmax: the max it subtracts carries no gradient ----

@given(st.integers(0, 2**31 - 1), st.sampled_from([0, 1, -1]))
@settings(max_examples=20, deadline=None)
def test_softmax_gradients_match_float64(seed, axis):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (4, 6)).astype(np.float32)
    w32 = rng.uniform(-1, 1, (4, 6)).astype(np.float32)
    x64, w = x.astype(np.float64), w32.astype(np.float64)
    e = np.exp(x64 - x64.max(axis, keepdims=True))
    s = e / e.sum(axis, keepdims=True)
    # d/dx sum(w * softmax(x)) = s * (w - sum(w * s)); d/dx sum(w * log_softmax(x)) = w - s * sum(w)
    np.testing.assert_allclose(grad_of(lambda t: t.softmax(axis) * Tensor(w32), x)[0],
                               s * (w - (w * s).sum(axis, keepdims=True)), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grad_of(lambda t: t.log_softmax(axis) * Tensor(w32), x)[0],
                               w - s * w.sum(axis, keepdims=True), rtol=1e-6, atol=2e-7)


# ---- sigmoid and what is built on it, at inputs where e**-x overflows ----

EXTREME = [-400.0, -300.0, -100.0, -20.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 20.0, 100.0, 300.0, 400.0]


def test_sigmoid_values_and_gradients_everywhere():
    x = np.array(EXTREME)
    s = 1 / (1 + np.exp(-x))
    t = Tensor(x.astype(np.float32), requires_grad=True)
    out = t.sigmoid()
    out.sum().backward()
    np.testing.assert_allclose(out.numpy(), s, rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(t.grad.numpy(), s * (1 - s), rtol=1e-5, atol=1e-30)
    assert math.isnan(Tensor([math.nan]).sigmoid().item())
    assert Tensor([math.inf, -math.inf]).sigmoid().tolist() == [1.0, 0.0]


@pytest.mark.parametrize("name,derivative", [
    ("tanh", lambda x: 1 - np.tanh(x) ** 2),
    ("silu", lambda x: (s := 1 / (1 + np.exp(-x))) * (1 + x * (1 - s))),
    ("quick_gelu", lambda x: (s := 1 / (1 + np.exp(-1.702 * x))) * (1 + 1.702 * x * (1 - s))),
])
def test_activation_gradients_at_extremes(name, derivative):
    x = np.array(EXTREME)
    with np.errstate(over="ignore"):
        expected = derivative(x)
    got = grad_of(lambda t: getattr(t, name)(), x)[0]
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_gradients_at_extremes_are_finite(approximate):
    big = np.array([-400.0, -300.0, 300.0, 400.0])
    np.testing.assert_array_equal(grad_of(lambda t: t.gelu(approximate), big)[0], [0.0, 0.0, 1.0, 1.0])


# ---- gradients at zero ----

def test_abs_at_zero():
    assert grad_of(lambda t: t.abs(), [-2.0, -0.0, 0.0, 3.0])[0].tolist() == [-1.0, 0.0, 0.0, 1.0]
    out = Tensor([-0.0, 0.0, -1.5, math.nan, -math.inf]).abs().numpy()
    assert not np.signbit(out[:2]).any() and out[2] == 1.5 and math.isnan(out[3]) and out[4] == math.inf


SPECIAL = [-1.0, -0.0, 0.0, 1.0, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("y", SPECIAL)
def test_copysign_at_signed_zeros_and_specials(y):
    x = np.array(SPECIAL, dtype=np.float32)
    out = Tensor(x).copysign(Tensor(np.full_like(x, y))).numpy()
    ref = np.copysign(x, np.float32(y))
    np.testing.assert_array_equal(out, ref)
    assert (np.signbit(out) == np.signbit(ref))[~np.isnan(ref)].all()
    # the magnitude's derivative: 1 or -1 by the signs of x and y, 0 at x = 0
    finite = np.array([-1.0, -0.0, 0.0, 1.0])
    expected = np.where(finite == 0, 0.0, np.sign(finite) * np.where(np.signbit(np.float32(y)), -1.0, 1.0))
    got = grad_of(lambda t: t.copysign(Tensor(np.full(4, y, dtype=np.float32))), finite)[0]
    np.testing.assert_array_equal(got, expected)


@given(st.lists(st.sampled_from([0.0, 0.0, 0.5, -2.0, 1.5, 3.0, -1.0]), min_size=1, max_size=6),
       st.integers(1, 3))
@settings(max_examples=40, deadline=None)
def test_prod_gradient_with_zeros(values, rows):
    x = np.array(values * rows, dtype=np.float32).reshape(rows, len(values))
    # the product of the others, by definition
    others = np.array([[np.prod(np.delete(row, j)) for j in range(row.size)] for row in x.astype(np.float64)])
    np.testing.assert_allclose(grad_of(lambda t: t.prod(1), x)[0], others, rtol=1e-6)
    whole = np.array([np.prod(np.delete(x.astype(np.float64).ravel(), j)) for j in range(x.size)]).reshape(x.shape)
    np.testing.assert_allclose(grad_of(lambda t: t.prod(), x)[0], whole, rtol=1e-6)


def test_pow_gradients_at_zero():
    # x ** 0 is the constant 1: gradient 0 wherever x is (0 * 0**-1 was NaN at 0)
    assert grad_of(lambda t: t ** 0.0, [0.0, -1.0, 2.0, math.inf, -math.inf])[0].tolist() == [0.0] * 5
    # 0 ** e is 0 around every e > 0 (gradient 0), 1 at e = 0, and infinite for e < 0
    assert grad_of(lambda e: Tensor([0.0] * 4) ** e, [-2.0, 0.0, 0.5, 3.0])[0].tolist() == [-math.inf, 0.0, 0.0, 0.0]
    base, exp = grad_of(lambda b, e: b ** e, [0.0, 0.0, 0.0], [0.0, 0.3, -0.3])
    assert base.tolist() == [0.0, math.inf, -math.inf] and exp.tolist() == [0.0, 0.0, -math.inf]
    assert grad_of(lambda t: t ** 2.0, [0.0, -1.0, 2.0])[0].tolist() == [0.0, -2.0, 4.0]


@given(st.floats(0.1, 4.0), st.floats(-3.0, 3.0))
@settings(max_examples=25, deadline=None)
def test_pow_gradients_away_from_zero(b, e):
    base, exp = grad_of(lambda x, y: x ** y, [b], [e])
    b64, e64 = np.float64(np.float32(b)), np.float64(np.float32(e))
    np.testing.assert_allclose(base, [e64 * b64 ** (e64 - 1)], rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(exp, [b64 ** e64 * np.log(b64)], rtol=2e-5, atol=1e-6)


# ---- clip: a bound reached exactly passes the gradient ----

def test_clip_bounds_and_gradient():
    x = [-3.0, -2.5, 0.0, 1.5, 2.0]
    assert grad_of(lambda t: t.clip(-2.5, 1.5), x)[0].tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
    assert Tensor(x).clip(3, 0).tolist() == [0.0] * 5  # min above max: max everywhere, as numpy.clip
    assert Tensor(x).clip(None, 0).tolist() == np.clip(x, None, 0).tolist()
    assert math.isnan(Tensor([math.nan]).clip(0, 1).item())
    assert Tensor([0, 1, 2, 3], dtype=dtypes.int32).clip(1.5, None).tolist() == [1.5, 1.5, 2.0, 3.0]


# ---- arange: the dtype holds the range, or the call is refused ----

def test_arange_dtype_fits_its_values():
    t = Tensor.arange(2**31, 2**31 + 3)
    assert t.dtype is dtypes.int64 and t.tolist() == [2**31, 2**31 + 1, 2**31 + 2]
    assert Tensor.arange(-(2**31) - 2, -(2**31)).dtype is dtypes.int64
    assert Tensor.arange(10).dtype is dtypes.int32
    assert Tensor.arange(-128, 128, dtype=dtypes.int8).tolist() == list(range(-128, 128))
    assert Tensor.arange(127, -129, -1, dtype=dtypes.int8).tolist() == list(range(127, -129, -1))


@pytest.mark.parametrize("args,dtype", [((2**33,), dtypes.int32), ((129,), dtypes.int8), ((-129, 128), dtypes.int8),
                                        ((128, 0, -1), dtypes.int8), ((127, -130, -1), dtypes.int8), ((-1, 3), dtypes.uint8)])
def test_arange_outside_its_dtype_is_refused(args, dtype):
    with pytest.raises(DTypeOverflowError, match="outside the range"):
        Tensor.arange(*args, dtype=dtype)
    with pytest.raises(OverflowError):
        Tensor.arange(*args, dtype=dtype)
