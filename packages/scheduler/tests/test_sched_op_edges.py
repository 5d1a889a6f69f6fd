"""Ops at the edges of their domains, against numpy and the derivatives' definitions: the extreme values of int dtypes,
0-d tensors reduced over axis 0 or -1, gradients at zeros (abs, prod, pow) and at inputs large enough that a naive
formula overflows (sigmoid and the activations built on it), bounds reached exactly (clip), and arange's dtype.
Found by running tinygrad's own op tests (test/backend/test_ops.py) against this package."""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
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
@example(seed=1048575, axis=0)  # w - sum(w * s) cancels to 0.019: float32 is 1.3e-7 off there, a few ulps of w's scale
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
                               s * (w - (w * s).sum(axis, keepdims=True)), rtol=1e-6, atol=5e-7)
    np.testing.assert_allclose(grad_of(lambda t: t.log_softmax(axis) * Tensor(w32), x)[0],
                               w - s * w.sum(axis, keepdims=True), rtol=1e-6, atol=5e-7)


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

def test_abs_at_zero_and_infinities():
    assert grad_of(lambda t: t.abs(), [-2.0, -0.0, 0.0, 3.0, math.inf, -math.inf])[0].tolist() == [-1.0, 0.0, 0.0, 1.0, 1.0, -1.0]
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


# ---- arguments refused with the builtin errors tinygrad's and torch's callers catch ----

@pytest.mark.parametrize("make", [Tensor.empty, Tensor.zeros, Tensor.ones, Tensor.rand, Tensor.randn, Tensor.randint,
                                  Tensor.uniform, Tensor.normal, Tensor.scaled_uniform, Tensor.glorot_uniform,
                                  lambda *s: Tensor.full(s, 2.0)])
@pytest.mark.parametrize("shape", [(-3, 2), (2, -3, 0)])
def test_negative_dimensions_are_refused(make, shape):
    with pytest.raises(ValueError, match="negative"):
        make(*shape)


def test_shape_errors_are_runtime_errors_too():
    # torch raises RuntimeError where numpy raises ValueError: a shape error is both
    with pytest.raises(RuntimeError):
        Tensor.ones(1, 1, 6, 7).conv2d(Tensor.ones(6, 1, 3, 3), dilation=3)
    with pytest.raises(ValueError):
        Tensor.ones(2, 3).reshape(4, 2)


def test_flip_refuses_an_axis_listed_twice():
    for axes in [(0, 0), (1, -1)]:
        with pytest.raises(RuntimeError, match="twice"):
            Tensor.ones(3, 4).flip(axes)
    assert Tensor([[1, 2], [3, 4]]).flip((0, 1)).tolist() == [[4, 3], [2, 1]]


def test_shift_amounts_must_be_ints():
    t = Tensor([1, 2], dtype=dtypes.uint32)
    with pytest.raises(RuntimeError):
        t << 1.0
    with pytest.raises(RuntimeError):
        t << Tensor([1.0, 2.0])
    assert (t << 31).cast(dtypes.int32).tolist() == [-(2**31), 0]


def test_stack_takes_a_sequence():
    a, b = Tensor([1, 2]), Tensor([3, 4])
    for dim in (0, 1, -1):
        np.testing.assert_array_equal(Tensor.stack((a, b), dim=dim).numpy(), np.stack([[1, 2], [3, 4]], dim))
    np.testing.assert_array_equal(Tensor.stack([a, b, a]).numpy(), np.stack([[1, 2], [3, 4], [1, 2]]))
    with pytest.raises(ValueError):
        Tensor.stack((a, b), Tensor([5, 6]))
    with pytest.raises(IndexError):
        Tensor.stack(a, b, dim=3)
    assert Tensor.stack(Tensor(3.5), Tensor(1.5)).tolist() == [3.5, 1.5]


def test_int_power_to_a_negative_constant_is_refused():
    x = np.array([-2, 0, 2, 3], dtype=np.int32)
    with pytest.raises(RuntimeError, match="negative power"):
        Tensor(x) ** -2
    for e in (0, 1, 2, 7, 29):
        np.testing.assert_array_equal((Tensor(x) ** e).numpy(), x ** e)
    assert (Tensor(x) ** 0.5).dtype is dtypes.float32


# ---- reflect and replicate with negative amounts: element j is the input's at j - before, reflected or clamped ----

def _padded_reference(x, pad, mode):
    pairs = [(0, 0)] * (x.ndim - len(pad) // 2) + list(zip(pad[-2::-2], pad[::-2]))
    if mode == "circular":  # cut first, then wrap around what is left (torch's order)
        x = x[tuple(slice(-min(b, 0), n + min(e, 0)) for (b, e), n in zip(pairs, x.shape))]
        pairs = [(max(b, 0), max(e, 0)) for b, e in pairs]
    out = x
    for axis, (before, after) in enumerate(pairs):
        if not before and not after:
            continue
        n = x.shape[axis]
        src = np.arange(n + before + after) - before
        if mode == "reflect":
            period = 2 * n - 2
            src = np.abs((src % period + period) % period)
            src = np.where(src >= n, period - src, src)
        elif mode == "replicate":
            src = np.clip(src, 0, n - 1)
        else:
            src = src % n
        out = np.take(out, src, axis=axis)
    return out


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", [((1, 1, 5, 5), (0, 2, 3, 2)), ((3, 3, 3, 3), (-1, 2, 2, -1)), ((1, 1, 5, 5), (3, -3, 0, -3)),
                                       ((1, 1, 5, 5), (3, -5, 1, -5)), ((1, 1, 5, 5), (0, 0, 0, -5)), ((1, 1, 5, 5), (4, 4, 0, 4)),
                                       ((2, 3, 4), (-2, 3)), ((2, 3, 4), (3, -2)), ((1, 1, 5, 5), (1, -2, 2, -1))])
def test_pad_modes_with_negative_amounts(mode, shape, pad):
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    if mode == "circular" and pad in ((3, -3, 0, -3), (3, -5, 1, -5), (-2, 3), (3, -2)):  # wraps more than once around what is left
        with pytest.raises(ValueError, match="more than once"):
            Tensor(x).pad(pad, mode=mode)
        return
    np.testing.assert_array_equal(Tensor(x).pad(pad, mode=mode).numpy(), _padded_reference(x, pad, mode))


def test_reflect_pad_limit_is_the_input_size():
    with pytest.raises(ValueError):
        Tensor.ones(1, 1, 5, 5).pad((3, 5, 0, 0), mode="reflect")
    assert Tensor.ones(1, 1, 5, 5).pad((3, 11, 0, 30), mode="replicate").shape == (1, 1, 35, 19)


# ---- einsum: "..." and repeated letters, against numpy ----

@pytest.mark.parametrize("formula,shapes", [
    ("...id,...jd->...ij", [(3, 8, 9), (3, 8, 9)]), ("...id,...jd", [(3, 8, 9), (3, 8, 9)]),
    ("i...j,ji...->...", [(2, 3, 4, 5), (5, 2, 4)]),
    ("...,...", [(2, 3), (3,)]), ("b...,b...->...", [(2, 1, 4), (2, 3, 1)]), ("ii->i", [(4, 4)]), ("ii->", [(4, 4)]),
    ("...ii->...i", [(3, 5, 5)]), ("...ii->...", [(3, 5, 5)]), ("i,i", [(5,), (5,)]), ("i...->...", [(2, 3, 4)])])
def test_einsum_ellipsis_and_diagonals(formula, shapes):
    rng = np.random.default_rng(len(formula))
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    np.testing.assert_allclose(Tensor.einsum(formula, [Tensor(x) for x in xs]).numpy(), np.einsum(formula, *xs), rtol=1e-5, atol=1e-5)


def test_einsum_sums_an_ellipsis_left_out_of_the_output():
    # as torch (numpy refuses the formula): the ellipsis' axes are summed like any letter missing from the output
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 4, 3, 2, 5)).astype(np.float32)
    np.testing.assert_allclose(Tensor.einsum("ij...,ij...->ij", Tensor(a), Tensor(b)).numpy(), (a * b).sum((2, 3)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("formula,shapes,error", [("...ik...,...jk->", [(2, 3, 4), (2, 3, 4)], IndexError),
                                                  ("i...j,ji...->...", [(2, 3, 4), (2, 3, 4)], RuntimeError),
                                                  ("pqrs,tuqvr->pstuv", [(3, 8, 10, 5), (11, 5, 13, 16, 8)], RuntimeError)])
def test_einsum_refuses_what_numpy_refuses(formula, shapes, error):
    with pytest.raises(error):
        Tensor.einsum(formula, [Tensor.ones(*s) for s in shapes])
    with pytest.raises(ValueError):
        np.einsum(formula, *[np.ones(s) for s in shapes])


def _linear_resample(x, axis, out):
    """numpy's reference: half-pixel centers, source positions clamped to the input, as torch's bilinear."""
    n = x.shape[axis]
    src = np.clip((np.arange(out) + 0.5) * n / out - 0.5, 0, n - 1)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    w = (src - lo).reshape([-1 if k == axis else 1 for k in range(x.ndim)])
    return np.take(x, lo, axis=axis) * (1 - w) + np.take(x, hi, axis=axis) * w


def test_int_interpolation_rounds_to_nearest():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 40, (1, 2, 12, 9)).astype(np.uint8)
    out = Tensor(x).interpolate((7, 20), mode="linear").numpy().astype(np.int64)
    ref = _linear_resample(_linear_resample(x.astype(np.float64), 2, 7), 3, 20)
    assert np.abs(out - ref).max() <= 0.5 + 1e-4


# ---- transcendentals of narrow floats are rounded once, not after each step of their formula ----

@pytest.mark.parametrize("dtype,rtol", [(dtypes.float16, 2e-3), (dtypes.bfloat16, 1e-2)])
@pytest.mark.parametrize("name,fn,lo,hi", [("exp", np.exp, -8.0, 11.0), ("log", np.log, 0.01, 1000.0), ("cos", np.cos, -3.0, 3.0),
                                           ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), -8.0, 8.0), ("tanh", np.tanh, -3.0, 3.0),
                                           ("sinh", np.sinh, -5.0, 5.0), ("atan", np.arctan, -4.0, 4.0), ("log10", np.log10, 0.1, 500.0)])
def test_narrow_float_transcendentals(dtype, rtol, name, fn, lo, hi):
    x = np.linspace(lo, hi, 97).astype(np.float32)
    t = Tensor(x).cast(dtype)
    inputs = t.cast(dtypes.float32).numpy().astype(np.float64)  # the values the narrow dtype holds
    out = getattr(t, name)()
    assert out.dtype is dtype
    np.testing.assert_allclose(out.cast(dtypes.float32).numpy(), fn(inputs), rtol=rtol, atol=2e-3)


# ---- an int arange is computed where it is read: no buffer of its elements ----

def test_arange_is_not_materialized():
    t = Tensor.arange(2**40)  # 8 TiB as a buffer
    assert t.dtype is dtypes.int64
    assert t[2**39:2**39 + 3].tolist() == [2**39, 2**39 + 1, 2**39 + 2]
    assert (Tensor.arange(2**33) * 2)[-2:].tolist() == [2**34 - 4, 2**34 - 2]


def test_index_into_a_huge_expand():
    # a tensor index compares against an arange of the indexed axis: 2**31 + 3 elements, never stored
    big = Tensor([7]).expand(2**31 + 3)
    assert big[Tensor([0, 2**31 + 2])].tolist() == [7, 7]


@given(st.integers(-300, 300), st.integers(-300, 300), st.integers(-40, 40).filter(bool),
       st.sampled_from([None, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint32, dtypes.float32]))
@settings(max_examples=60, deadline=None)
def test_arange_matches_numpy(start, stop, step, dtype):
    ref = np.arange(start, stop, step)
    if dtype is not None and ref.size and dtypes.is_int(dtype) and not dtype.min <= min(ref[0], ref[-1]) <= max(ref[0], ref[-1]) <= dtype.max:
        with pytest.raises(OverflowError):
            Tensor.arange(start, stop, step, dtype=dtype)
        return
    t = Tensor.arange(start, stop, step, dtype=dtype)
    assert t.dtype is (dtype or dtypes.int32)
    np.testing.assert_array_equal(t.numpy(), ref.astype(t.numpy().dtype))


def test_half_variance_over_more_elements_than_half_can_count():
    # 70000 elements: the count is inf in float16, so the sum and the division run in the accumulation dtype
    x = np.tile(np.array([[0.0, 1.0]], np.float16), (35000, 1))
    t = Tensor(x)
    np.testing.assert_allclose(t.var().numpy(), x.astype(np.float64).var(ddof=1), rtol=1e-3)
    np.testing.assert_allclose(t.std(0).numpy(), x.astype(np.float64).std(0, ddof=1), atol=1e-3)
    assert t.var().dtype is dtypes.float16
