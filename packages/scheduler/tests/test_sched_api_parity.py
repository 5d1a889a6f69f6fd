"""The tinygrad 0.14 Tensor methods added for API parity (issue #6 follow-up), against numpy, math or Python loops."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import ArgumentError, ShapeError, Tensor, TensorRuntimeError, TensorTypeError, dtypes

EDGE = np.array([0.0, -0.0, np.nan, np.inf, -np.inf], dtype=np.float32)


def _with_edges(rng, lo, hi, n=19):
    return np.concatenate([rng.uniform(lo, hi, n).astype(np.float32), EDGE])


# ---- elementwise math ----
UNARY = [  # name, numpy reference, input range
    ("asin", np.arcsin, (-1.2, 1.2)), ("acos", np.arccos, (-1.2, 1.2)), ("atan", np.arctan, (-50, 50)),
    ("asinh", np.arcsinh, (-50, 50)), ("acosh", np.arccosh, (0.5, 50)), ("atanh", np.arctanh, (-1.2, 1.2)),
    ("sinh", np.sinh, (-10, 10)), ("cosh", np.cosh, (-10, 10)), ("log10", np.log10, (-1, 1e6)),
]


@pytest.mark.parametrize("name,ref,rng_range", UNARY, ids=[u[0] for u in UNARY])
def test_unary_math_float(rng, name, ref, rng_range):
    x = _with_edges(rng, *rng_range)
    got = getattr(Tensor(x), name)()
    assert got.dtype is dtypes.float32
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got.numpy(), ref(x.astype(np.float64)), rtol=2e-5, atol=2e-6)


def test_unary_math_small_values_keep_relative_precision():
    x = np.array([1e-30, -1e-6, 3e-4, -0.05, 0.0999, 0.1001, -0.3], dtype=np.float32)
    for name, ref in (("asin", np.arcsin), ("atan", np.arctan), ("sinh", np.sinh), ("asinh", np.arcsinh), ("atanh", np.arctanh)):
        np.testing.assert_allclose(getattr(Tensor(x), name)().numpy(), ref(x.astype(np.float64)), rtol=2e-6, atol=0, err_msg=name)


def test_unary_math_int_promotes_to_float():
    x = np.array([[-1, 0, 1], [1, 0, -1]], dtype=np.int32)
    for name, ref in (("acos", np.arccos), ("asin", np.arcsin), ("atan", np.arctan), ("sinh", np.sinh), ("log10", np.log10)):
        got = getattr(Tensor(x), name)()
        assert got.dtype is dtypes.float32, name
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(got.numpy(), ref(x.astype(np.float64)), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("shapes", [((3, 4), (4,)), ((2, 1, 3), (4, 1))])
def test_binary_math_broadcast(rng, shapes):
    a = (rng.standard_normal(shapes[0]) * 5).astype(np.float32)
    b = (rng.standard_normal(shapes[1]) * 3).astype(np.float32)
    b[np.abs(b) < 0.1] = 0.5
    np.testing.assert_allclose(Tensor(a).copysign(Tensor(b)).numpy(), np.copysign(a, b))
    np.testing.assert_allclose(Tensor(a).fmod(Tensor(b)).numpy(), np.fmod(a, b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(Tensor(a).logaddexp(Tensor(b)).numpy(), np.logaddexp(a, b), rtol=1e-5, atol=1e-6)


def test_binary_math_edges_and_ints():
    a = np.array([1.5, -2.0, 0.0, np.inf, -np.inf, np.inf, -np.inf, 3.0], dtype=np.float32)
    b = np.array([-0.0, 0.0, -1.0, 2.0, -np.inf, np.inf, 5.0, np.nan], dtype=np.float32)
    np.testing.assert_array_equal(Tensor(a).copysign(Tensor(b)).numpy(), np.copysign(a, np.abs(b) * np.where(np.signbit(b), -1, 1)))
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(Tensor(a).logaddexp(Tensor(b)).numpy(), np.logaddexp(a, b), rtol=1e-6)
    ai = np.array([7, -7, 7, -7, 0], dtype=np.int32)
    bi = np.array([3, 3, -3, -3, 5], dtype=np.int32)
    got = Tensor(ai).fmod(Tensor(bi))
    assert got.dtype is dtypes.int32
    np.testing.assert_array_equal(got.numpy(), np.fmod(ai, bi))
    ci = Tensor(ai).copysign(-1)
    assert ci.dtype is dtypes.int32
    np.testing.assert_array_equal(ci.numpy(), -np.abs(ai))
    np.testing.assert_allclose(Tensor([1.0, 2.0]).fmod(0.75).numpy(), np.fmod([1.0, 2.0], 0.75), rtol=1e-6)


def test_isfinite_isclose_allclose():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0, 1e-9], dtype=np.float32)
    y = np.array([1.0 + 1e-6, np.nan, np.inf, np.inf, 1e-7, 0.0], dtype=np.float32)
    np.testing.assert_array_equal(Tensor(x).isfinite().numpy(), np.isfinite(x))
    assert Tensor(np.arange(3, dtype=np.int32)).isfinite().numpy().all()
    for equal_nan in (False, True):
        np.testing.assert_array_equal(Tensor(x).isclose(Tensor(y), equal_nan=equal_nan).numpy(), np.isclose(x, y, equal_nan=equal_nan))
    np.testing.assert_array_equal(Tensor(x).isclose(Tensor(y), rtol=0.1, atol=1e-6).numpy(), np.isclose(x, y, rtol=0.1, atol=1e-6))
    np.testing.assert_array_equal(Tensor(x).isclose(1.0).numpy(), np.isclose(x, 1.0))
    a = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    assert Tensor(a).allclose(Tensor(a + 1e-7)).item() is True
    assert Tensor(a).allclose(Tensor(a[0] + 1e-2)).item() is False
    assert Tensor(x).allclose(Tensor(x), equal_nan=True).item() is np.allclose(x, x, equal_nan=True)


# ---- activations ----
def _np_softplus(x):
    return np.logaddexp(0, x)


ACTIVATIONS = [
    ("elu", lambda t: t.elu(), lambda x: np.where(x > 0, x, np.expm1(x))),
    ("elu_alpha", lambda t: t.elu(0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x))),
    ("celu", lambda t: t.celu(2.0), lambda x: np.maximum(x, 0) + np.minimum(0, 2.0 * np.expm1(x / 2.0))),
    ("selu", lambda t: t.selu(), lambda x: 1.0507 * np.where(x >= 0, x, 1.67326 * np.expm1(x))),
    ("relu6", lambda t: t.relu6(), lambda x: np.clip(x, 0, 6)),
    ("hardsigmoid", lambda t: t.hardsigmoid(), lambda x: np.clip(x / 6 + 0.5, 0, 1)),
    ("hardswish", lambda t: t.hardswish(), lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("hardtanh", lambda t: t.hardtanh(-2, 3), lambda x: np.clip(x, -2, 3)),
    ("mish", lambda t: t.mish(), lambda x: x * np.tanh(_np_softplus(x))),
    ("logsigmoid", lambda t: t.logsigmoid(), lambda x: -_np_softplus(-x)),
    ("softsign", lambda t: t.softsign(), lambda x: x / (1 + np.abs(x))),
]


@pytest.mark.parametrize("name,op,ref", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activations(rng, name, op, ref):
    x = np.concatenate([rng.uniform(-8, 8, 20), [0.0, -30.0, 30.0, -np.inf, np.inf]]).astype(np.float32).reshape(5, 5)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(op(Tensor(x)).numpy(), ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_activation_dtypes_and_softmin(rng):
    xi = np.array([-9, -1, 0, 3, 7, 12], dtype=np.int32)
    for t in (Tensor(xi).relu6(), Tensor(xi).hardtanh()):
        assert t.dtype is dtypes.int32
    np.testing.assert_array_equal(Tensor(xi).relu6().numpy(), np.clip(xi, 0, 6))
    assert Tensor(xi).elu().dtype is dtypes.float32
    x = rng.standard_normal((3, 5)).astype(np.float32)
    for axis in (0, -1):
        e = np.exp(-x - (-x).max(axis, keepdims=True))
        np.testing.assert_allclose(Tensor(x).softmin(axis).numpy(), e / e.sum(axis, keepdims=True), rtol=1e-5, atol=1e-7)


def test_masked_fill_and_casts(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    m = rng.random((4,)) > 0.5
    np.testing.assert_array_equal(Tensor(x).masked_fill(Tensor(m), -1.5).numpy(), np.where(m, np.float32(-1.5), x))
    v = rng.standard_normal((3, 1)).astype(np.float32)
    np.testing.assert_array_equal(Tensor(x).masked_fill(Tensor(m), Tensor(v)).numpy(), np.where(m, v, x))
    ints = Tensor(np.arange(4, dtype=np.int32)).masked_fill(Tensor(m), 0.5)
    assert ints.dtype is dtypes.float32
    with pytest.raises(TensorRuntimeError, match="bool mask"):
        Tensor(x).masked_fill(Tensor(np.ones(4, np.int32)), 0)
    xs = np.array([1.7, -2.5, 300.0], dtype=np.float32)
    for name, dt, npdt in (("double", dtypes.float64, np.float64), ("long", dtypes.int64, np.int64), ("short", dtypes.int16, np.int16)):
        t = getattr(Tensor(xs), name)()
        assert t.dtype is dt
        np.testing.assert_array_equal(t.numpy(), xs.astype(npdt))
    bf = Tensor(xs).bfloat16()
    assert bf.dtype is dtypes.bfloat16
    np.testing.assert_allclose(bf.numpy(), xs, rtol=2**-8)
    assert Tensor(xs).is_floating_point() and bf.is_floating_point() and not Tensor([1, 2]).is_floating_point()


# ---- reductions and scans ----
def test_cumprod_cummin_logcumsumexp(rng):
    x = rng.uniform(0.5, 1.5, (3, 5)).astype(np.float32)
    for axis in (0, -1):
        np.testing.assert_allclose(Tensor(x).cumprod(axis).numpy(), np.cumprod(x, axis), rtol=1e-6)
        np.testing.assert_allclose(Tensor(x).logcumsumexp(axis).numpy(), np.logaddexp.accumulate(x.astype(np.float64), axis), rtol=1e-5)
    xi = np.array([[2, -3, 1], [4, 4, -1]], dtype=np.int8)
    got = Tensor(xi).cumprod(1)
    assert got.dtype is dtypes.int8
    np.testing.assert_array_equal(got.numpy(), np.cumprod(xi, 1).astype(np.int8))
    # large and infinite values neither overflow nor turn into NaN
    big = np.array([1000.0, 1000.0, -np.inf, 999.0], dtype=np.float32)
    np.testing.assert_allclose(Tensor(big).logcumsumexp().numpy(), np.logaddexp.accumulate(big.astype(np.float64)), rtol=1e-6)
    lows = np.array([-np.inf, -np.inf, 0.0], dtype=np.float32)
    np.testing.assert_array_equal(Tensor(lows).logcumsumexp().numpy(), np.logaddexp.accumulate(lows))
    assert Tensor(np.arange(4, dtype=np.int32)).logcumsumexp().dtype is dtypes.float32


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_cummin(rng, dtype):
    x = rng.integers(-3, 4, (4, 6)).astype(dtype)
    for axis in (0, 1):
        values, indices = Tensor(x).cummin(axis)
        np.testing.assert_array_equal(values.numpy(), np.minimum.accumulate(x, axis))
        assert indices.dtype is dtypes.int32
        moved = np.moveaxis(x, axis, -1)
        want = np.zeros(moved.shape, np.int32)
        for row in itertools.product(*map(range, moved.shape[:-1])):
            best = 0
            for i in range(moved.shape[-1]):
                best = i if moved[row][i] < moved[row][best] else best  # the first position of the running min
                want[row][i] = best
        np.testing.assert_array_equal(indices.numpy(), np.moveaxis(want, -1, axis))


def test_var_std_mean_normalize_argsort(rng):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    var, mean = Tensor(x).var_mean((0, 2), True, 0)
    std, mean2 = Tensor(x).std_mean(1, correction=1)
    np.testing.assert_allclose(var.numpy(), x.var((0, 2), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(mean.numpy(), x.mean((0, 2), keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std.numpy(), x.std(1, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(mean2.numpy(), x.mean(1), rtol=1e-5, atol=1e-6)
    norm = (np.abs(x) ** 3).sum(0, keepdims=True) ** (1 / 3)
    np.testing.assert_allclose(Tensor(x).normalize(3.0, 0).numpy(), x / np.maximum(norm, 1e-12), rtol=1e-5, atol=1e-7)
    z = np.array([[0.0, 0.0], [3.0, 0.0]], dtype=np.float32)
    np.testing.assert_allclose(Tensor(z).normalize(0, 1).numpy(), z / np.maximum((z != 0).sum(1, keepdims=True), 1e-12))
    np.testing.assert_allclose(Tensor(z).normalize().numpy(), z / np.maximum(np.sqrt((z**2).sum(1, keepdims=True)), 1e-12))
    ties = rng.integers(0, 3, (4, 7)).astype(np.float32)
    got = Tensor(ties).argsort(0)
    assert got.dtype is dtypes.int32
    np.testing.assert_array_equal(got.numpy(), np.argsort(ties, 0, kind="stable"))
    np.testing.assert_array_equal(Tensor(ties).argsort(descending=True).numpy(), np.argsort(-ties, -1, kind="stable"))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=6, max_size=6), st.integers(-8, 8))
def test_argsort_and_roll_property(values, shift):
    x = np.array(values, dtype=np.int32)
    np.testing.assert_array_equal(Tensor(x).argsort().numpy(), np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(Tensor(x).roll(shift, 0).numpy(), np.roll(x, shift))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(-100, 100, width=32), min_size=4, max_size=4), st.lists(st.floats(-100, 100, width=32), min_size=4, max_size=4))
def test_logaddexp_property(a, b):
    a, b = np.array(a, np.float32), np.array(b, np.float32)
    np.testing.assert_allclose(Tensor(a).logaddexp(Tensor(b)).numpy(), np.logaddexp(a.astype(np.float64), b), rtol=1e-5, atol=1e-6)


# ---- movement and indexing ----
def test_roll_diag_diagonal_meshgrid(rng):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    for shifts, dims in (((1, 7), (0, -1)), (4, None)):
        np.testing.assert_array_equal(Tensor(x).roll(shifts, dims).numpy(), np.roll(x, shifts, dims))
    with pytest.raises(TensorRuntimeError, match="one shift per dim"):
        Tensor(x).roll((1, 2), 0)
    v = np.array([3, -1, 2], dtype=np.int16)
    np.testing.assert_array_equal(Tensor(v).diag().numpy(), np.diag(v))
    with pytest.raises(ShapeError, match="1-D"):
        Tensor(x).diag()
    for offset, d1, d2 in ((-2, 1, 2), (9, 0, 1), (1, -1, 0)):
        np.testing.assert_array_equal(Tensor(x).diagonal(offset, d1, d2).numpy(), np.diagonal(x, offset, d1, d2))
    with pytest.raises(TensorRuntimeError, match="different dims"):
        Tensor(x).diagonal(0, 1, -2)
    a, b, c = np.arange(3), np.arange(4) * 10, np.arange(2) * 100
    for indexing in ("ij", "xy"):
        got = Tensor(a).meshgrid(Tensor(b), Tensor(c), indexing=indexing)
        for g, w in zip(got, np.meshgrid(a, b, c, indexing=indexing)):
            np.testing.assert_array_equal(g.numpy(), w)
    gx, gy = Tensor.meshgrid(Tensor(a), Tensor(b), indexing="xy")
    np.testing.assert_array_equal(gy.numpy(), np.meshgrid(a, b)[1])
    with pytest.raises(TensorRuntimeError, match="indexing"):
        Tensor(a).meshgrid(Tensor(b), indexing="yx")


def test_unfold_pad_to_shrink_to(rng):
    x = rng.standard_normal((3, 8, 2)).astype(np.float32)
    for dim, size, step in ((1, 3, 2), (1, 2, 5), (-1, 2, 1)):
        moved = np.moveaxis(x, dim, -1)
        n = (moved.shape[-1] - size) // step + 1
        want = np.stack([moved[..., i * step:i * step + size] for i in range(n)], axis=-2)  # (..., n, size)
        want = np.moveaxis(want, -2, dim if dim >= 0 else x.ndim + dim)
        np.testing.assert_array_equal(Tensor(x).unfold(dim, size, step).numpy(), want)
    with pytest.raises(TensorRuntimeError, match="step > 0"):
        Tensor(x).unfold(1, 2, 0)
    with pytest.raises(TensorRuntimeError, match="larger than"):
        Tensor(x).unfold(0, 4, 1)
    got = Tensor(x).pad_to(4, None, 5, value=-1.0)
    np.testing.assert_array_equal(got.numpy(), np.pad(x, ((0, 1), (0, 0), (0, 3)), constant_values=-1.0))
    assert Tensor(x).pad_to(x.shape).shape == x.shape
    with pytest.raises(ShapeError, match="pad_to"):
        Tensor(x).pad_to(2, 8, 2)
    np.testing.assert_array_equal(Tensor(x).shrink_to((2, None, 1)).numpy(), x[:2, :, :1])
    with pytest.raises(ShapeError):
        Tensor(x).shrink_to(4, 8, 2)


def _scatter_loop(base, dim, index, src, combine):
    out = base.copy()
    touched = set()
    for pos in itertools.product(*map(range, index.shape)):
        target = list(pos)
        target[dim] = index[pos]
        target = tuple(target)
        out[target] = combine(out[target], src[pos], target in touched)
        touched.add(target)
    return out, touched


def test_scatter(rng):
    base = rng.standard_normal((3, 5)).astype(np.float32)
    src = rng.standard_normal((4, 6)).astype(np.float32)
    for dim, index in ((0, np.array([[0, 1, 2, 0], [2, 2, 0, 1]])), (1, np.array([[0, 4, 4], [1, 0, 3]]))):
        want, _ = _scatter_loop(base, dim, index, src, lambda old, new, seen: new)  # the last write wins
        np.testing.assert_array_equal(Tensor(base).scatter(dim, Tensor(index), Tensor(src)).numpy(), want)
    index = np.array([[2], [3]])
    full = np.full((2, 4), 2.0, np.float32)
    for reduce, combine in ((None, lambda o, n, s: n), ("add", lambda o, n, s: o + n), ("multiply", lambda o, n, s: o * n)):
        want, _ = _scatter_loop(full, 1, index, np.full(index.shape, 1.25, np.float32), combine)
        np.testing.assert_allclose(Tensor(full).scatter(1, Tensor(index), 1.25, reduce=reduce).numpy(), want)
    bools = Tensor(np.zeros((2, 3), bool)).scatter(1, Tensor([[2], [0]]), True)
    np.testing.assert_array_equal(bools.numpy(), [[False, False, True], [True, False, False]])
    with pytest.raises(TensorTypeError, match="reduce"):
        Tensor(full).scatter(1, Tensor(index), 1.0, reduce="max")
    with pytest.raises(TensorTypeError, match="scatter_reduce"):
        Tensor(full).scatter(1, Tensor(index), Tensor(full), reduce="add")
    with pytest.raises(TensorRuntimeError, match="dtype"):
        Tensor(full).scatter(1, Tensor(index), Tensor(np.ones((2, 4), np.int32)))
    with pytest.raises(ShapeError, match="equal ranks"):
        Tensor(full).scatter(1, Tensor([1, 2]), Tensor(full))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(rng, reduce, include_self):
    base = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    src = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    index = np.array([[0, 0, 2, 1], [0, 2, 2, 1]])
    ops = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum, "mean": np.add}
    counts = np.ones_like(base) if include_self else np.zeros_like(base)

    def combine(old, new, seen):
        return ops[reduce](old, new) if include_self or seen else new
    want, touched = _scatter_loop(base, 0, index, src, combine)
    if reduce == "mean":
        for pos in itertools.product(*map(range, index.shape)):
            counts[index[pos], pos[1]] += 1
        want = np.where(counts > 0, want / np.maximum(counts, 1), base)
    got = Tensor(base).scatter_reduce(0, Tensor(index), Tensor(src), reduce, include_self=include_self)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_scatter_reduce_ints_and_errors():
    base = np.array([[1, 2, 3]], dtype=np.int32)
    got = Tensor(base).scatter_reduce(1, Tensor([[0, 0, 2]]), Tensor([[5, 6, 7]], dtype=dtypes.int32), "sum")
    assert got.dtype is dtypes.int32
    np.testing.assert_array_equal(got.numpy(), [[12, 2, 10]])
    with pytest.raises(TensorRuntimeError, match="reduce"):
        Tensor(base).scatter_reduce(1, Tensor([[0]]), Tensor(base), "median")


def test_masked_select(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    m = rng.random((3, 4)) > 0.5
    np.testing.assert_array_equal(Tensor(x).masked_select(Tensor(m)).numpy(), x[m])
    row = np.array([True, False, False, True])
    np.testing.assert_array_equal(Tensor(x).masked_select(Tensor(row)).numpy(), x[np.broadcast_to(row, x.shape)])
    assert Tensor(x).masked_select(Tensor(np.zeros((3, 4), bool))).shape == (0,)
    want = np.concatenate([x[m], np.full(12, -1.0, np.float32)])[:10]
    np.testing.assert_array_equal(Tensor(x).masked_select(Tensor(m), size=10, fill_value=-1).numpy(), want)
    np.testing.assert_array_equal(Tensor(x).masked_select(Tensor(m), size=2).numpy(), x[m][:2])
    with pytest.raises(TensorRuntimeError, match="bool mask"):
        Tensor(x).masked_select(Tensor(x))


def test_rearrange(rng):
    x = rng.standard_normal((2, 6, 3)).astype(np.float32)
    cases = [
        ("b n c -> b c n", {}, x.transpose(0, 2, 1)),
        ("b (h w) c -> b h w c", {"h": 2}, x.reshape(2, 2, 3, 3)),
        ("b (h w) c -> (b c) w h", {"w": 3}, x.reshape(2, 2, 3, 3).transpose(0, 3, 2, 1).reshape(6, 3, 2)),
        ("b ... -> (...) b", {}, x.reshape(2, 18).T),
        ("... c -> c ...", {}, x.transpose(2, 0, 1)),
        ("b n c -> b 1 n c ()", {}, x.reshape(2, 1, 6, 3, 1)),
        ("b n c -> (b n c)", {}, x.reshape(36)),
    ]
    for formula, sizes, want in cases:
        np.testing.assert_array_equal(Tensor(x).rearrange(formula, **sizes).numpy(), want, err_msg=formula)
    np.testing.assert_array_equal(Tensor(x[:, :1]).rearrange("b 1 c -> b c").numpy(), x[:, 0])
    for formula, sizes in (("b n c -> b n", {}), ("b n c b -> b n c", {}), ("b (h w) c -> b h w c", {}),
                           ("b (h w) c -> b h w c", {"h": 4}), ("b n -> n b", {}), ("b n c", {}), ("b n c -> c n b", {"q": 2})):
        with pytest.raises(ShapeError):
            Tensor(x).rearrange(formula, **sizes)


# ---- losses ----
def _log_softmax(x, axis):
    s = x - x.max(axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis, keepdims=True))


def _reduce(v, reduction):
    return {"none": v, "sum": v.sum(), "mean": v.mean()}[reduction]


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_binary_losses(rng, reduction):
    p = rng.uniform(0.05, 0.95, (4, 3)).astype(np.float32)
    y = (rng.random((4, 3)) > 0.5).astype(np.float32)
    want = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    np.testing.assert_allclose(Tensor(p).binary_crossentropy(Tensor(y), reduction).numpy(), _reduce(want, reduction), rtol=1e-5)
    z = rng.normal(0, 4, (4, 3)).astype(np.float32)
    pw = np.array([1.0, 2.0, 0.5], np.float32)
    sig = 1 / (1 + np.exp(-z.astype(np.float64)))
    want = -(pw * y * np.log(sig) + (1 - y) * np.log(1 - sig))
    got = Tensor(z).binary_crossentropy_logits(Tensor(y), reduction, pos_weight=Tensor(pw))
    np.testing.assert_allclose(got.numpy(), _reduce(want, reduction), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_categorical_losses(rng, reduction):
    logits = rng.standard_normal((5, 4)).astype(np.float32)
    labels = np.array([0, 3, 1, 3, 2], dtype=np.int32)
    logp = _log_softmax(logits.astype(np.float64), 1)
    picked = logp[np.arange(5), labels]
    for ls in (0.0, 0.2) if reduction == "mean" else (0.1,):
        per_row = -((1 - ls) * picked + ls * logp.mean(1))
        got = Tensor(logits).sparse_categorical_crossentropy(Tensor(labels), label_smoothing=ls, reduction=reduction)
        np.testing.assert_allclose(got.numpy(), _reduce(per_row, reduction), rtol=1e-5, atol=1e-6)
        onehot = np.eye(4)[labels] * (1 - ls) + ls / 4
        want = _reduce(-(logp * onehot).sum(1), reduction)
        np.testing.assert_allclose(Tensor(logits).cross_entropy(Tensor(labels), reduction, ls).numpy(), want, rtol=1e-5, atol=1e-6)
    probs = rng.dirichlet(np.ones(4), 5).astype(np.float32)
    np.testing.assert_allclose(Tensor(logits).cross_entropy(Tensor(probs), reduction).numpy(), _reduce(-(logp * probs).sum(1), reduction),
                               rtol=1e-5, atol=1e-6)
    weight = np.array([1.0, 2.0, 0.5, 3.0], np.float32)
    w = weight[labels] * (labels != 3)
    nll = -picked * w
    want = nll.sum() / w.sum() if reduction == "mean" else _reduce(nll, reduction)
    got = Tensor(logp.astype(np.float32)).nll_loss(Tensor(labels), Tensor(weight), ignore_index=3, reduction=reduction)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_loss_ignore_index_and_errors(rng):
    logits = rng.standard_normal((4, 3)).astype(np.float32)
    labels = np.array([2, 0, 1, 0], dtype=np.int32)
    logp = _log_softmax(logits.astype(np.float64), 1)
    keep = labels != 0
    want = -logp[np.arange(4), labels][keep].sum() / keep.sum()
    np.testing.assert_allclose(Tensor(logits).sparse_categorical_crossentropy(Tensor(labels), ignore_index=0).numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(Tensor(logp.astype(np.float32)).nll_loss(Tensor(labels)).numpy(), -logp[np.arange(4), labels].mean(), rtol=1e-5)
    logits3 = rng.standard_normal((2, 3, 5)).astype(np.float32)  # classes on axis 1, as PyTorch
    labels3 = rng.integers(0, 3, (2, 5)).astype(np.int32)
    lp3 = _log_softmax(logits3.astype(np.float64), 1)
    want3 = -np.take_along_axis(lp3, labels3[:, None], 1).mean()
    np.testing.assert_allclose(Tensor(logits3).cross_entropy(Tensor(labels3)).numpy(), want3, rtol=1e-5)
    with pytest.raises(ArgumentError, match="reduction"):
        Tensor(logits).cross_entropy(Tensor(labels), reduction="avg")
    with pytest.raises(ArgumentError, match="label_smoothing"):
        Tensor(logits).sparse_categorical_crossentropy(Tensor(labels), label_smoothing=1.5)
    with pytest.raises(TensorRuntimeError, match="shape mismatch"):
        Tensor(logits).cross_entropy(Tensor([1, 2]))
    with pytest.raises(ValueError):  # ArgumentError is a ValueError, as tinygrad raises
        Tensor(logits).binary_crossentropy(Tensor(logits), reduction="avg")


# ---- init and random ----
def test_initializers():
    Tensor.manual_seed(3)
    shape = (64, 8, 3)
    fan_in = 8 * 3
    for name, bound in (("scaled_uniform", math.prod(shape) ** -0.5), ("glorot_uniform", math.sqrt(6 / (64 + fan_in))),
                        ("kaiming_uniform", math.sqrt(6 / (1 + 0.01**2) / fan_in))):
        v = getattr(Tensor, name)(*shape).numpy()
        assert v.shape == shape and v.dtype == np.float32
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.9 * bound, name
        assert abs(v.mean()) < 0.05 * bound, name
    v = Tensor.kaiming_normal(256, 16, a=0.5).numpy()
    std = math.sqrt(2 / (1 + 0.25) / 16)
    assert abs(v.std() / std - 1) < 0.05 and abs(v.mean()) < 0.05 * std
    assert Tensor.glorot_uniform(3, 4, dtype=dtypes.float16).dtype is dtypes.float16


def test_randperm():
    Tensor.manual_seed(11)
    perms = [Tensor.randperm(12).numpy() for _ in range(3)]
    for p in perms:
        assert p.dtype == np.int32
        np.testing.assert_array_equal(np.sort(p), np.arange(12))
    assert any((a != b).any() for a, b in itertools.combinations(perms, 2))
    assert Tensor.randperm(5, dtype=dtypes.int64).dtype is dtypes.int64


def test_multinomial():
    Tensor.manual_seed(5)
    one_hot = Tensor([[0.0, 0.0, 1.0, 0.0], [3.0, 0.0, 0.0, 0.0]])
    for replacement in (True, False):
        got = one_hot.multinomial(1, replacement=replacement)
        assert got.dtype is dtypes.int32 and got.shape == (2, 1)
        np.testing.assert_array_equal(got.numpy(), [[2], [0]])
    np.testing.assert_array_equal(one_hot.multinomial(50, replacement=True).numpy(), [[2] * 50, [0] * 50])
    draws = Tensor([1.0, 1.0, 0.0, 1.0, 1.0]).multinomial(4, replacement=False).numpy()
    assert draws.shape == (4,) and sorted(draws.tolist()) == [0, 1, 3, 4]
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    counts = np.bincount(Tensor(weights.astype(np.float32)).multinomial(4000, replacement=True).numpy(), minlength=4)
    expected = 4000 * weights / weights.sum()
    assert ((counts - expected) ** 2 / expected).sum() < 16.3  # chi-square, 3 dof, p = 0.001
    with pytest.raises(ArgumentError, match="distinct"):
        Tensor([1.0, 2.0]).multinomial(3)
    with pytest.raises(ArgumentError, match="num_samples"):
        Tensor([[[1.0]]]).multinomial(1)


# ---- nn ----
def _interp_axis(x, out, axis, mode, align_corners):
    """An independent 1-D resampling along `axis` in float64 (PyTorch's definitions)."""
    n = x.shape[axis]
    slices = []
    for i in range(out):
        if mode == "nearest":
            slices.append(np.take(x, min(n - 1, math.floor(i * n / out)), axis))
        elif mode == "nearest-exact":
            slices.append(np.take(x, min(n - 1, math.floor((i + 0.5) * n / out)), axis))
        else:
            src = i * (n - 1) / (out - 1) if align_corners and out > 1 else 0.0 if align_corners else max(0.0, (i + 0.5) * n / out - 0.5)
            lo = min(int(math.floor(src)), n - 1)
            hi, frac = min(lo + 1, n - 1), src - lo
            slices.append(np.take(x, lo, axis) * (1 - frac) + np.take(x, hi, axis) * frac)
    return np.stack(slices, axis)


@pytest.mark.parametrize("mode,align_corners", [("linear", False), ("linear", True), ("nearest", False), ("nearest-exact", False)])
def test_interpolate(rng, mode, align_corners):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    for size in ((7, 3), (2, 9), (1,)):
        want = x.astype(np.float64)
        for axis, out in zip(range(x.ndim - len(size), x.ndim), size):
            want = _interp_axis(want, out, axis, mode, align_corners)
        got = Tensor(x).interpolate(size, mode=mode, align_corners=align_corners)
        assert got.dtype is dtypes.float32
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_interpolate_dtypes_and_errors():
    xi = np.array([[1, 2, 3, 4], [21, 22, 23, 24]], dtype=np.int32)
    got = Tensor(xi).interpolate((4, 8), mode="nearest")
    assert got.dtype is dtypes.int32
    np.testing.assert_array_equal(got.numpy(), xi.repeat(2, 0).repeat(2, 1))
    inf = Tensor(np.array([1.0, np.inf, 3.0], np.float32)).interpolate((6,), mode="nearest").numpy()
    np.testing.assert_array_equal(inf, [1.0, 1.0, np.inf, np.inf, 3.0, 3.0])
    with pytest.raises(ArgumentError, match="mode"):
        Tensor(xi).interpolate((3,), mode="cubic")
    with pytest.raises(ArgumentError, match="align_corners"):
        Tensor(xi).interpolate((3,), mode="nearest", align_corners=True)
    with pytest.raises(ShapeError, match="size"):
        Tensor(xi).interpolate((3, 3, 3))


def test_max_unpool2d(rng):
    x = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
    for kernel, stride in (((2, 2), None), ((2, 3), (2, 3))):
        pooled, idx = Tensor(x).max_pool2d(kernel, stride, return_indices=True)
        got = Tensor(pooled.numpy()).max_unpool2d(Tensor(idx.numpy()), kernel, stride)
        want = np.zeros_like(x)
        flat_in, flat_out = x.reshape(2, 3, -1), want.reshape(2, 3, -1)
        for b, c, k in itertools.product(range(2), range(3), range(idx.numel() // 6)):
            pos = idx.numpy().reshape(2, 3, -1)[b, c, k]
            flat_out[b, c, pos] = flat_in[b, c, pos]
        np.testing.assert_array_equal(got.numpy(), want)
    pooled, idx = Tensor(x[..., :5, :5]).max_pool2d(2, return_indices=True)
    assert pooled.max_unpool2d(idx, 2, output_size=(5, 5)).shape == (2, 3, 5, 5)
    with pytest.raises(ShapeError):
        pooled.max_unpool2d(idx[0])


# ---- gradients and errors ----
def _numeric_grad(f, x, eps=1e-3):
    g = np.zeros_like(x, dtype=np.float64)
    for i in np.ndindex(x.shape):
        hi, lo = x.astype(np.float64), x.astype(np.float64)
        hi[i] += eps
        lo[i] -= eps
        g[i] = (f(hi) - f(lo)) / (2 * eps)
    return g


@pytest.mark.parametrize("name,op,ref", [
    ("elu", lambda t: t.elu().sum(), lambda x: np.where(x > 0, x, np.expm1(x)).sum()),
    ("asinh", lambda t: t.asinh().sum(), lambda x: np.arcsinh(x).sum()),
    ("atan", lambda t: t.atan().mul(t).sum(), lambda x: (np.arctan(x) * x).sum()),
    ("logcumsumexp", lambda t: t.logcumsumexp(1).sum(), lambda x: np.logaddexp.accumulate(x, 1).sum()),
    ("cross_entropy", lambda t: t.cross_entropy(Tensor([1, 0])), lambda x: -_log_softmax(x, 1)[[0, 1], [1, 0]].mean()),
])
def test_gradients(rng, name, op, ref):
    x = rng.uniform(-2, 2, (2, 3)).astype(np.float32)
    t = Tensor(x, requires_grad=True)
    op(t).backward()
    np.testing.assert_allclose(t.grad.numpy(), _numeric_grad(ref, x), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("ignore_index", [-1, 2])
def test_sparse_crossentropy_of_a_class_with_minus_infinity_logit_is_finite(ignore_index):
    """A logit of -inf on a class no label picks: the loss and its gradient are finite (as PyTorch's), and the gradient
    is softmax - onehot over the counted rows. Without label smoothing no mean of the log-probabilities enters (it was
    multiplied by 0, and 0 * -inf is NaN)."""
    logits = np.array([[0.5, -np.inf, 1.0, 0.0], [2.0, -np.inf, -1.0, 0.25], [0.0, 0.0, 0.0, 0.0]], np.float32)
    labels = np.array([0, 3, 2], np.int32)
    x = Tensor(logits, requires_grad=True)
    loss = x.sparse_categorical_crossentropy(Tensor(labels), ignore_index=ignore_index)
    loss.backward()
    keep = labels != ignore_index
    logp = _log_softmax(logits.astype(np.float64), 1)
    want = -logp[np.arange(3), labels][keep].sum() / keep.sum()
    grad = (np.exp(logp) - np.eye(4)[labels]) * keep[:, None] / keep.sum()
    np.testing.assert_allclose(loss.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-5, atol=1e-7)


def _sparse_ce_by_tensor_ops(x: Tensor, y: Tensor, reduction: str) -> Tensor:
    """sparse_categorical_crossentropy without ignore_index or smoothing, written with tensor ops: the reference graph
    of its UOp-built path."""
    target = y.unsqueeze(-1)._one_hot_along(x.shape[-1], -1)
    unreduced = target.where(x.log_softmax(), 0).sum(-1)
    if reduction == "mean":
        return unreduced.sum().div(y.numel()).neg()
    return unreduced._do_reduction(reduction).neg()


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 7), (6,)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_sparse_crossentropy_builds_the_tensor_ops_graph(rng, shape, dtype, reduction):
    logits = rng.standard_normal(shape).astype(dtype)
    labels = rng.integers(0, shape[-1], shape[:-1]).astype(np.int32)
    x, y = Tensor(logits), Tensor(labels)
    got = x.sparse_categorical_crossentropy(y, reduction=reduction)
    assert got.uop is _sparse_ce_by_tensor_ops(x, y, reduction).uop  # hash-consed: the same node is the same graph
    logp = _log_softmax(logits.astype(np.float64), -1)
    picked = -np.take_along_axis(logp, labels[..., None].astype(np.int64), -1)[..., 0]
    want = {"mean": picked.mean(), "sum": picked.sum(), "none": picked}[reduction]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    # int64 labels take the tensor ops (the class index is int32): the same values
    np.testing.assert_allclose(x.sparse_categorical_crossentropy(Tensor(labels.astype(np.int64)), reduction=reduction).numpy(), want,
                               rtol=1e-5, atol=1e-6)
