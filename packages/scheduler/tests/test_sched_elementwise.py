"""Elementwise ops with broadcasting and dtype promotion, against numpy."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor, Variable, dtypes

FLOAT_BINOPS = [
    ("add", lambda a, b: a + b, np.add), ("sub", lambda a, b: a - b, np.subtract), ("mul", lambda a, b: a * b, np.multiply),
    ("div", lambda a, b: a / b, np.divide), ("max", lambda a, b: a.maximum(b), np.maximum), ("min", lambda a, b: a.minimum(b), np.minimum),
    ("lt", lambda a, b: a < b, np.less), ("gt", lambda a, b: a > b, np.greater), ("le", lambda a, b: a <= b, np.less_equal),
    ("ge", lambda a, b: a >= b, np.greater_equal), ("eq", lambda a, b: a == b, np.equal), ("ne", lambda a, b: a != b, np.not_equal),
]
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5,), ())]


@pytest.mark.parametrize("name,op,ref", FLOAT_BINOPS, ids=[n for n, _, _ in FLOAT_BINOPS])
@pytest.mark.parametrize("shapes", SHAPES)
def test_float_binops_broadcast(rng, close, name, op, ref, shapes):
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    close(op(Tensor(a), Tensor(b)), ref(a, b))


INT_DTYPES = [np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint32]


@pytest.mark.parametrize("np_dtype", INT_DTYPES)
def test_int_binops(rng, close, np_dtype):
    a = rng.integers(-50, 50, (4, 5)).astype(np_dtype)
    b = rng.integers(1, 20, (5,)).astype(np_dtype)
    ta, tb = Tensor(a), Tensor(b)
    close(ta + tb, a + b)
    close(ta * tb, a * b)
    close(ta - tb, a - b)
    close(ta // tb, a // b)
    close(ta % tb, a % b)
    close(ta & tb, a & b)
    close(ta | tb, a | b)
    close(ta ^ tb, a ^ b)
    close(ta.maximum(tb), np.maximum(a, b))
    close(ta.minimum(tb), np.minimum(a, b))
    close(ta < tb, a < b)


def test_promotion_rules():
    i8, u8 = Tensor([1], dtype=dtypes.int8), Tensor([1], dtype=dtypes.uint8)
    assert (i8 + 1).dtype is dtypes.int8  # weak int literal adopts the tensor's type
    assert (i8 + 1.5).dtype is dtypes.float32
    assert (i8 + u8).dtype is dtypes.int16
    assert (Tensor([1], dtype=dtypes.float16) + Tensor([1.0])).dtype is dtypes.float32
    assert (Tensor([1], dtype=dtypes.float16) * 2.0).dtype is dtypes.float16
    assert (Tensor([True]) + 1).dtype is dtypes.int32
    assert (Tensor([1, 2]) / 2).dtype is dtypes.float32
    assert (Tensor([1, 2]) < 2).dtype is dtypes.bool
    assert (Tensor([1], dtype=dtypes.int32) + Tensor([1], dtype=dtypes.int64)).dtype is dtypes.int64


def test_scalar_operands(close):
    x = np.array([[1.0, -2.0, 3.5]], np.float32)
    t = Tensor(x)
    close(t + 1, x + 1)
    close(2 - t, 2 - x)
    close(3 * t, 3 * x)
    close(1 / t, 1 / x)
    close(t ** 2, x ** 2)
    close(2 ** t, 2 ** x, rtol=1e-5)
    close(-t, -x)
    close(Tensor([7, -7]) // 2, np.array([3, -4], np.int32))
    close(Tensor([7, -7]) % 3, np.array([1, 2], np.int32))
    close(Tensor([7.5, -7.5]) % 2, np.array([1.5, 0.5], np.float32))


UNARY = [
    ("exp", lambda t: t.exp(), np.exp, (-5, 5)), ("log", lambda t: t.log(), np.log, (0.01, 50)),
    ("exp2", lambda t: t.exp2(), np.exp2, (-5, 5)), ("log2", lambda t: t.log2(), np.log2, (0.01, 50)),
    ("sqrt", lambda t: t.sqrt(), np.sqrt, (0, 50)), ("rsqrt", lambda t: t.rsqrt(), lambda x: 1 / np.sqrt(x), (0.1, 50)),
    ("sin", lambda t: t.sin(), np.sin, (-6, 6)), ("cos", lambda t: t.cos(), np.cos, (-6, 6)),
    ("tan", lambda t: t.tan(), np.tan, (-1.2, 1.2)), ("tanh", lambda t: t.tanh(), np.tanh, (-5, 5)),
    ("sigmoid", lambda t: t.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), (-8, 8)),
    ("relu", lambda t: t.relu(), lambda x: np.maximum(x, 0), (-3, 3)),
    ("leaky_relu", lambda t: t.leaky_relu(0.1), lambda x: np.where(x < 0, 0.1 * x, x), (-3, 3)),
    ("gelu", lambda t: t.gelu(), lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), (-4, 4)),
    ("silu", lambda t: t.silu(), lambda x: x / (1 + np.exp(-x)), (-6, 6)),
    ("softplus", lambda t: t.softplus(), lambda x: np.logaddexp(0, x), (-30, 30)),
    ("erf", lambda t: t.erf(), np.vectorize(math.erf), (-3, 3)),
    ("abs", lambda t: t.abs(), np.abs, (-3, 3)), ("sign", lambda t: t.sign(), np.sign, (-3, 3)),
    ("floor", lambda t: t.floor(), np.floor, (-5, 5)), ("ceil", lambda t: t.ceil(), np.ceil, (-5, 5)),
    ("trunc", lambda t: t.trunc(), np.trunc, (-5, 5)), ("round", lambda t: t.round(), np.round, (-5, 5)),
    ("reciprocal", lambda t: t.reciprocal(), lambda x: 1 / x, (0.5, 5)), ("square", lambda t: t.square(), np.square, (-3, 3)),
]


@pytest.mark.parametrize("name,op,ref,bounds", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float32(rng, close, name, op, ref, bounds):
    x = rng.uniform(*bounds, size=(4, 6)).astype(np.float32)
    if name == "round":
        x[0, :4] = [0.5, 1.5, 2.5, -0.5]  # ties go to even, as numpy
    close(op(Tensor(x)), ref(x).astype(np.float32), rtol=2e-5, atol=2e-6)


def test_unary_on_ints_and_float64(close):
    close(Tensor([1, 4, 9]).sqrt(), np.sqrt(np.array([1, 4, 9], np.float32)))
    x = np.linspace(-2, 2, 7)
    close(Tensor(x).exp(), np.exp(x), rtol=1e-12)
    close(Tensor([-3, 0, 5], dtype=dtypes.int8).abs(), np.array([3, 0, 5], np.int8))


def test_where_clip_isnan_isinf(close):
    x = np.array([1.0, -2.0, np.nan, np.inf, -np.inf, 0.5], np.float32)
    t = Tensor(x)
    close(t.isnan(), np.isnan(x))
    close(t.isinf(), np.isinf(x))
    close(t.isinf(detect_negative=False), np.isposinf(x))
    y = np.array([1.0, -2.0, 3.0, 4.0], np.float32)
    close(Tensor(y).clip(-1, 2), np.clip(y, -1, 2))
    close((Tensor(y) > 0).where(Tensor(y), 10.0), np.where(y > 0, y, 10.0))
    close((Tensor(y) > 0).where(1, 0), np.where(y > 0, 1, 0).astype(np.int32))


def test_bitwise_shift_and_logical(close):
    a = np.array([1, 6, 255, 16], np.uint8)
    close(Tensor(a) << 1, a << 1)
    close(Tensor(a) >> 2, a >> 2)
    close(~Tensor(a), ~a)
    close(~Tensor(np.array([3, -4], np.int32)), np.array([-4, 3], np.int32))
    b = np.array([True, False, True])
    close(Tensor(b).logical_not(), ~b)
    close(Tensor(b) & Tensor(~b), np.zeros(3, bool))
    with pytest.raises(RuntimeError):
        Tensor([1.0]) & Tensor([2.0])


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.lists(st.integers(1, 3), min_size=1, max_size=3), st.integers(0, 2**31))
def test_broadcast_property(shape_a, shape_b, seed):
    # numpy decides whether the shapes broadcast; when they do, the values must agree
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape_a).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32)
    try:
        expected = a * b + a
    except ValueError:
        with pytest.raises(IndexError):
            Tensor(a) * Tensor(b)
        return
    np.testing.assert_allclose((Tensor(a) * Tensor(b) + Tensor(a)).numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("np_dtype", [np.uint8, np.uint16, np.uint32, np.int32, np.int64])
def test_division_by_python_constant(close, np_dtype):
    a = np.array([0, 1, 7, 8, 100, 255], np_dtype)
    close(Tensor(a) // 3, a // 3)
    close(Tensor(a) % 3, a % 3)
    close(Tensor(a).idiv(4), a // 4)
    close(Tensor(a) / 2, (a / 2).astype(np.float32))


def test_shifts_by_tensor_amounts_broadcast():
    x = np.array([[1, 2, 3], [-8, 16, 255]], np.int32)
    s = np.array([0, 1, 3], np.int32)
    np.testing.assert_array_equal((Tensor(x) << Tensor(s)).numpy(), x << s)
    np.testing.assert_array_equal((Tensor(x) >> Tensor(s)).numpy(), x >> s)
    u = np.array([200, 7], np.uint8)
    np.testing.assert_array_equal(Tensor(u).rshift(Tensor(np.array([1, 2], np.int32))).numpy(), u >> np.array([1, 2], np.uint8))


def test_sign_of_infinities_zeros_and_nan():
    x = np.array([-np.inf, -2.5, -0.0, 0.0, 3.0, np.inf, np.nan], np.float32)
    np.testing.assert_array_equal(Tensor(x).sign().numpy(), np.sign(x))


def test_scalar_operands_keep_their_sign_type_and_nan():
    """Scalar operands are made once per (type, value bits, dtype, shape): 0.0 and -0.0, 1 and 1.0 and True, and NaN
    stay apart (as dict keys they would collide)."""
    a = np.array([1.0, -2.0, 0.0], np.float32)
    x = Tensor(a)
    for _ in range(2):  # the second round takes the cached constants
        np.testing.assert_array_equal(np.signbit((x * -0.0).numpy()), np.signbit(a * np.float32(-0.0)))
        np.testing.assert_array_equal(np.signbit((x * 0.0).numpy()), np.signbit(a * np.float32(0.0)))
        assert np.isnan((x + float("nan")).numpy()).all()
        i = Tensor(np.array([3, 4], np.int32))
        assert (i + 1).dtype == i.dtype and (i + 1.0).dtype != i.dtype
        np.testing.assert_array_equal((i + 1).numpy(), [4, 5])
        np.testing.assert_array_equal((i + 1.5).numpy(), [4.5, 5.5])
        np.testing.assert_array_equal((Tensor([True, False]) * True).numpy(), [True, False])


def _special_floats(np_dtype) -> np.ndarray:
    info = np.finfo(np_dtype)
    vals = [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, info.max, -info.max, info.tiny, info.tiny / 4, -info.smallest_subnormal,
            info.smallest_subnormal, 3.0e-3, 7.25]
    return np.array(vals, np_dtype)


@pytest.mark.parametrize("np_dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("exponent", [-20, -3, -1, 0, 1, 3, 14, 15, 100, 126, 127, 1022, 1023])
def test_division_by_a_power_of_two_is_exact(np_dtype, exponent):
    """x / 2**k is the division's result bit for bit (kernels multiply by the reciprocal when it is exact), over zeros,
    infinities, NaN, the largest and subnormal values, for divisors whose reciprocal is normal, subnormal or out of range."""
    info = np.finfo(np_dtype)
    if 2.0 ** abs(exponent) > float(info.max):
        pytest.skip("divisor not representable in this dtype")
    rng = np.random.default_rng(exponent + 200)
    x = np.concatenate([_special_floats(np_dtype), (rng.standard_normal(64) * 10.0 ** rng.integers(-3, 4, 64)).astype(np_dtype)])
    for c in (2.0**exponent, -(2.0**exponent), 2.0**-exponent):
        if not np.isfinite(np_dtype(c)) or np_dtype(c) == 0:
            continue
        got = (Tensor(x) / c).numpy()
        with np.errstate(over="ignore", under="ignore"):
            want = x / np_dtype(c)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        same = ~np.isnan(want)
        assert np.array_equal(got[same].view(np.uint8), want[same].view(np.uint8)), (c, got, want)


def _ulps(got: np.ndarray, want: np.ndarray) -> float:
    """The largest error in units of float32's spacing at the exact (float64) value."""
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return float((np.abs(got.astype(np.float64) - want) / spacing).max())


def test_exp2_is_faithful_and_log2_within_a_few_ulps_over_every_exponent():
    """The CPU kernels' exp2 and log2 (built from a polynomial with fused multiply-adds) against float64 numpy, over the
    whole float32 range including subnormal results and inputs: exp2 within 1 ulp (faithful), log2 within 4."""
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-149, 127.9, 200001), rng.uniform(-1, 1, 10000)]).astype(np.float32)
    assert _ulps(Tensor(x).exp2().numpy(), np.exp2(x.astype(np.float64))) <= 1.0
    y = np.concatenate([np.exp2(rng.uniform(-149, 127, 200000)), rng.uniform(0.5, 2, 10000)]).astype(np.float32)
    y = y[y > 0]
    assert _ulps(Tensor(y).log2().numpy(), np.log2(y.astype(np.float64))) <= 4.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_relu_and_exp_build_the_tensor_ops_graph(rng, dtype, shape):
    """relu and exp of float32/float64 are built as UOps: the same nodes as their tensor-op forms (half goes through
    the tensor ops, in float32)."""
    x = Tensor(np.asarray(rng.standard_normal(shape) * 3).astype(dtype))
    assert x.relu().uop is (x > 0).where(x, 0).uop
    wide = x if dtype != np.float16 else x.cast(dtypes.float32)
    ref = wide.mul(1 / math.log(2)).exp2()
    assert x.exp().uop is (ref if dtype != np.float16 else ref.cast(dtypes.float16)).uop
    v = x.numpy().astype(np.float64)
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(x.relu().numpy(), np.maximum(v, 0), rtol=tol)
    np.testing.assert_allclose(x.exp().numpy(), np.exp(v), rtol=tol)


def test_relu_and_exp_over_a_symbolic_axis():
    v = Variable("i", 1, 10).bind(4)
    x = (Tensor.arange(30).reshape(3, 10).float() - 15).contiguous()[:, :v]
    want = np.arange(30, dtype=np.float64).reshape(3, 10)[:, :4] - 15
    np.testing.assert_allclose(x.relu().contiguous().numpy(), np.maximum(want, 0))
    np.testing.assert_allclose(x.exp().contiguous().numpy(), np.exp(want), rtol=1e-6)
