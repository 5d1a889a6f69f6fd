"""Creation, properties and conversion, against numpy."""

import os

import numpy as np
import pytest
from uop_scheduler import Context, Tensor, dtypes


def test_from_list_infers_dtype():
    assert Tensor([1, 2, 3]).dtype is dtypes.int32
    assert Tensor([1.0, 2]).dtype is dtypes.float32
    assert Tensor([True, False]).dtype is dtypes.bool
    assert Tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]


def test_from_scalar():
    assert Tensor(3).item() == 3 and Tensor(3).dtype is dtypes.weakint  # weakly typed, as tinygrad's
    assert Tensor(3).numpy().dtype == np.int32 and Tensor(2.5).numpy().dtype == np.float32  # read back at the defaults
    assert Tensor(2.5).item() == 2.5 and Tensor(2.5).shape == ()
    assert Tensor(True).item() is True
    assert Tensor(7, dtype=dtypes.int8).dtype is dtypes.int8


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint32, np.bool_])
def test_numpy_roundtrip(rng, np_dtype):
    arr = (rng.standard_normal((3, 4)) * 50).astype(np_dtype)
    t = Tensor(arr)
    assert t.shape == (3, 4) and t.ndim == 2 and t.numel() == 12
    np.testing.assert_array_equal(t.numpy(), arr)
    assert t.numpy().dtype == arr.dtype


def test_properties():
    t = Tensor.ones(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.device == "CPU" and t.dtype is dtypes.float32
    assert t.size() == (2, 3, 4) and t.size(-1) == 4 and len(t) == 2
    assert t.element_size() == 4 and t.nbytes() == 96
    with pytest.raises(TypeError):
        bool(t)


def test_creation_functions(close):
    close(Tensor.zeros(2, 3), np.zeros((2, 3), np.float32))
    close(Tensor.ones((3,), dtype=dtypes.int16), np.ones(3, np.int16))
    close(Tensor.full((2, 2), 7), np.full((2, 2), 7, np.int32))
    close(Tensor.full((2, 2), 1.5), np.full((2, 2), 1.5, np.float32))
    close(Tensor.arange(5), np.arange(5, dtype=np.int32))
    close(Tensor.arange(2, 11, 3), np.arange(2, 11, 3, dtype=np.int32))
    close(Tensor.arange(0, 1, 0.25), np.arange(0, 1, 0.25, dtype=np.float32))
    close(Tensor.arange(5, 0, -2), np.arange(5, 0, -2, dtype=np.int32))
    close(Tensor.linspace(-1, 1, 5), np.linspace(-1, 1, 5, dtype=np.float32))
    close(Tensor.eye(3), np.eye(3, dtype=np.float32))
    close(Tensor.eye(2, 4), np.eye(2, 4, dtype=np.float32))
    assert Tensor.empty(4, 5).shape == (4, 5)


def test_like_functions(close):
    t = Tensor([[1, 2, 3]], dtype=dtypes.int16)
    close(t.zeros_like(), np.zeros((1, 3), np.int16))
    close(t.ones_like(), np.ones((1, 3), np.int16))
    close(t.full_like(9), np.full((1, 3), 9, np.int16))
    assert t.empty_like().shape == (1, 3) and t.empty_like().dtype is dtypes.int16


def test_cast_and_bitcast(close):
    x = np.array([-1.5, 0.25, 3.75, 100.0], np.float32)
    close(Tensor(x).cast(dtypes.int32), x.astype(np.int32))
    close(Tensor(x).cast(dtypes.float16), x.astype(np.float16))
    close(Tensor(x).bitcast(dtypes.uint32), x.view(np.uint32))
    close(Tensor(x).int().float(), x.astype(np.int32).astype(np.float32))
    close(Tensor(x).bitcast(dtypes.uint8), x.view(np.uint8))
    close(Tensor(x).bitcast(dtypes.int16), x.view(np.int16))
    close(Tensor(x).bitcast(dtypes.float64), x.view(np.float64))
    b = (np.arange(16, dtype=np.uint8) * 17).reshape(2, 8)
    close(Tensor(b).bitcast(dtypes.int32), b.view(np.int32))
    close(Tensor(b).bitcast(dtypes.uint64), b.view(np.uint64))
    with pytest.raises(RuntimeError, match="unsupported size in bitcast"):
        Tensor(x[:3]).bitcast(dtypes.float64)


def test_bad_dtype_is_rejected():
    with pytest.raises(ValueError, match="unknown dtype name"):
        Tensor([1]).cast("float33")


def test_contiguous_clone_detach(close, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = Tensor(x)
    close(t.T.contiguous(), x.T)
    close(t.clone(), x)
    close(t.detach() * 2, x * 2)


def test_context_sets_and_restores_knobs():
    before = os.environ.get("DEBUG")
    with Context(DEBUG=0, SOME_KNOB="x"):
        assert os.environ["SOME_KNOB"] == "x" and os.environ["DEBUG"] == "0"
    assert os.environ.get("DEBUG") == before and "SOME_KNOB" not in os.environ


def test_realize_rebinds_and_keeps_value(close):
    a = Tensor([1.0, 2.0])
    b = a + 1
    b.realize()
    close(b, [2.0, 3.0])
    close(b * 2, [4.0, 6.0])


def test_to_other_device_copies(close):
    a = Tensor([1.0, 2.0, 3.0])
    b = (a * 2).to("CPU:1")
    assert b.device == "CPU:1"
    close(b + 1, [3.0, 5.0, 7.0])
    close(b.to("CPU") - a, [1.0, 2.0, 3.0])


def test_random_is_reproducible_and_in_range():
    Tensor.manual_seed(42)
    a = Tensor.rand(1000).numpy()
    Tensor.manual_seed(42)
    b = Tensor.rand(1000).numpy()
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0 and a.max() < 1
    assert abs(a.mean() - 0.5) < 0.05 and not np.array_equal(a, Tensor.rand(1000).numpy())
    n = Tensor.randn(4000).numpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    r = Tensor.randint(500, low=3, high=7).numpy()
    assert set(np.unique(r)) == {3, 4, 5, 6}
    u = Tensor.uniform(300, low=-2.0, high=-1.0).numpy()
    assert u.min() >= -2 and u.max() < -1


def test_random_like_takes_shape_device_and_float_dtype():
    h = Tensor.zeros(3, 500, dtype=dtypes.float16, device="CPU:1")
    for sample in (h.rand_like(), h.randn_like()):
        assert sample.shape == (3, 500) and sample.dtype is dtypes.float16 and sample.device == "CPU:1"
    n = h.randn_like().numpy().astype(np.float32)
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1 and len(np.unique(n)) > 100
    u = Tensor.zeros(2000, dtype=dtypes.int32).rand_like().numpy()  # an int tensor's samples are floats in [0, 1)
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.05


def test_bfloat16_and_fp8_values():
    # oracle: bfloat16 keeps the top 16 bits of float32 (round to nearest even); these inputs need no rounding
    vals = np.array([1.0, -2.5, 3.25, 0.0078125], np.float32)
    b = Tensor(vals, dtype=dtypes.bfloat16)
    assert b.dtype is dtypes.bfloat16
    np.testing.assert_array_equal(b.numpy(), vals)
    np.testing.assert_array_equal((b * 2).float().numpy(), vals * 2)
    np.testing.assert_array_equal(Tensor.linspace(0, 1, 5, dtype=dtypes.bfloat16).numpy(), np.linspace(0, 1, 5, dtype=np.float32))
    f = Tensor([0.5, -1.25, 448.0], dtype=dtypes.fp8e4m3)  # all exactly representable in e4m3
    np.testing.assert_array_equal(f.float().numpy(), np.array([0.5, -1.25, 448.0], np.float32))


@pytest.mark.parametrize("make", [Tensor.zeros, Tensor.ones, Tensor.rand, Tensor.randn, Tensor.empty])
def test_shape_arguments_as_tinygrad_takes_them(make):
    for args, shape in [((), ()), ((1,), (1,)), ((2, 3), (2, 3)), (([],), ()), (([2, 3],), (2, 3)), (((),), ()), (((2, 3),), (2, 3))]:
        assert make(*args).shape == shape
    with pytest.raises(ValueError, match="not both"):  # a tuple and separate ints mixed
        make((2, 2), 2, 2)
    with pytest.raises(ValueError, match="not both"):
        Tensor.ones(2, 2).reshape((2, 2), 1)


@pytest.mark.parametrize("scalar, other, want", [(2, dtypes.int8, dtypes.int8), (2, dtypes.uint16, dtypes.uint16),
                                                 (2.5, dtypes.float16, dtypes.float16), (2.5, dtypes.bfloat16, dtypes.bfloat16),
                                                 (2, dtypes.float16, dtypes.float16), (2.5, dtypes.int8, dtypes.weakfloat),
                                                 (True, dtypes.int8, dtypes.int8)])
def test_python_scalars_take_the_other_operands_dtype(scalar, other, want):
    # a tensor of a Python number is weakly typed: combined with a typed tensor it takes that tensor's dtype (a float
    # number with an int tensor: a weak float, read back as the default float), in either order, as tinygrad's do
    base = np.array([1, 3], np.float64)
    t = Tensor(base.astype(np.float32)).cast(other)
    for out, ref in ((Tensor(scalar) + t, base + scalar), (t * Tensor(scalar), base * scalar)):
        assert out.dtype is want
        if want is dtypes.weakfloat:
            assert out.numpy().dtype == np.float32
        np.testing.assert_allclose(out.cast(dtypes.float32).numpy(), ref)


def test_context_sets_the_default_dtypes():
    with Context(DEFAULT_FLOAT=dtypes.float16, DEFAULT_INT="int16"):
        assert dtypes.default_float is dtypes.float16 and dtypes.default_int is dtypes.int16
        assert Tensor([1.5, 2.0]).dtype is dtypes.float16 and Tensor([1, 2]).dtype is dtypes.int16
        assert Tensor(2.5).numpy().dtype == np.float16  # a weak float realized alone: the default float
        np.testing.assert_array_equal(Tensor([1, 2]).numpy(), np.array([1, 2], np.int16))
    assert dtypes.default_float is dtypes.float32 and dtypes.default_int is dtypes.int32
    with pytest.raises(ValueError, match="DEFAULT_FLOAT must be a float dtype"):
        Context(DEFAULT_FLOAT=dtypes.int8)
    with pytest.raises(ValueError, match="not a dtype"):
        Context(DEFAULT_INT="int17")


@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float32])
def test_narrow_float_rand_stays_below_one(dtype):
    # 128*128*2 samples: in half, float32 draws within 2**-12 of 1 rounded up to 1.0 (53 of them here before)
    Tensor.manual_seed(0)
    x = Tensor.rand(2, 128, 128, dtype=dtype)
    n = x.cast(dtypes.float32).numpy()
    assert x.dtype is dtype and n.min() >= 0 and n.max() < 1
    # uniform over a grid j * step in [0, 1): mean 0.5 - step / 2, every grid point drawn (0 too) where the grid is coarse
    step = np.diff(np.unique(n)).min()
    assert abs(n.mean() - (0.5 - step / 2)) < 0.01
    assert dtype is dtypes.float32 or len(np.unique(n)) == round(1 / step)


@pytest.mark.parametrize("default", [dtypes.float16, dtypes.bfloat16])
def test_randn_under_a_narrow_default_float_is_finite(default):
    # randn's uniform draws are float32 whatever the default: log(1 - u) with u rounded to 1.0 was -inf
    with Context(DEFAULT_FLOAT=default):
        Tensor.manual_seed(1)
        n = Tensor.randn(256, 256).cast(dtypes.float32).numpy()
    assert np.isfinite(n).all() and abs(n.std() - 1) < 0.05


def test_random_argument_errors():
    from uop_scheduler import ArgumentError, TensorTypeError

    for kwargs in ({"low": 0.1, "high": 3}, {"low": 0, "high": 3.5}, {"low": 1, "high": 3, "dtype": "float"}):
        with pytest.raises(TensorTypeError):
            Tensor.randint((3, 4), **kwargs)
    for call in (lambda: Tensor.randint(3, low=10, high=5), lambda: Tensor.randint(3, low=10, high=10),
                 lambda: Tensor.uniform(3, low=5.0, high=3.0), lambda: Tensor.normal(3, std=-1)):
        with pytest.raises(ArgumentError):
            call()
    for device in (("CPU:0", "CPU:1"), ["CPU:0", "CPU:1"]):  # several devices: one error line, no ShardedTensor traceback
        with pytest.raises(ArgumentError, match="drawn on one device"):
            Tensor.randn(4, 3, device=device)
    np.testing.assert_array_equal(Tensor.randint(16, low=np.int64(5), high=6).numpy(), np.full(16, 5))


def test_a_numpy_scalar_in_a_list_is_a_runtime_error():
    # a list holds Python numbers (its dtype is inferred from them); tinygrad and torch raise a RuntimeError here
    with pytest.raises(RuntimeError, match="np.array"):
        Tensor([np.int32(1)])
    np.testing.assert_array_equal(Tensor(np.array([np.int32(1)])).numpy(), np.array([1], np.int32))


def test_a_python_numbers_tensor_is_written_in_the_targets_dtype():
    t = Tensor(np.zeros(4, np.float16))
    t.assign(Tensor(2.5).expand(4))
    t[1:3] = Tensor(7)
    i = Tensor(np.zeros(3, np.int8))
    i.assign(Tensor(5).expand(3))
    np.testing.assert_array_equal(t.numpy(), np.array([2.5, 7, 7, 2.5], np.float16))
    np.testing.assert_array_equal(i.numpy(), np.full(3, 5, np.int8))
    assert t.dtype is dtypes.float16 and i.dtype is dtypes.int8


@pytest.mark.parametrize("dtype, np_dtype", [(dtypes.float32, np.float32), (dtypes.int16, np.int16), (dtypes.uint8, np.uint8),
                                             (dtypes.float64, np.float64)])
def test_bytes_are_the_storage_of_their_dtype(dtype, np_dtype):
    raw = np.random.default_rng(0).standard_normal(6).astype(np.float64).tobytes()[:48]
    np.testing.assert_array_equal(Tensor(raw, dtype=dtype).numpy(), np.frombuffer(raw, np_dtype))
    with pytest.raises(RuntimeError, match="not a whole number"):
        Tensor(raw[:47], dtype=dtypes.float32)


def test_const_and_data_forms():
    from uopir import UOp

    assert Tensor.const(2.5).dtype is dtypes.weakfloat and Tensor.const(3, dtypes.int8).dtype is dtypes.int8
    assert Tensor.const(UOp.const(1.0, dtypes.float32), dtypes.int8).dtype is dtypes.int8
    assert Tensor.const(UOp.variable("x", 1, 10).bind(5), dtypes.int32).item() == 5
    empty = Tensor(np.zeros((0, 2), np.int32)).data()
    assert empty.itemsize == 4 and empty.shape == (0,) and list(empty) == []
    two = Tensor(np.array([[1, 2.5], [3, 4]], np.float32)).data()
    assert two.shape == (2, 2) and two[0, 1] == 2.5


def test_a_weak_tensor_stays_weak_through_ops_with_numbers():
    # Tensor(2).exp() is a weak float (it was float32): combined with a half tensor it is half, as tinygrad's
    import math

    half = Tensor(np.array([1.0], np.float16))
    for out, want in ((Tensor(2).exp(), math.exp(2)), (Tensor(2).cos(), math.cos(2)), (Tensor(2.5) * 3, 7.5),
                      (Tensor(2).sigmoid(), 1 / (1 + math.exp(-2)))):
        assert out.dtype is dtypes.weakfloat and (out + half).dtype is dtypes.float16
        np.testing.assert_allclose(out.item(), want, rtol=1e-6)
    assert (Tensor(2) * 3).dtype is dtypes.weakint and (Tensor(2) * 3 + Tensor(np.array([1], np.int8))).dtype is dtypes.int8


def _uniform_reference(seed: int, call: int, n: int) -> np.ndarray:
    """float32 `Tensor.rand(n)` for the call-th random tensor after manual_seed(seed), in numpy: the key
    seed * A + call * B, each element's counter times the golden ratio plus the key, a murmur3 finalizer, and the top 24
    bits over 2**24 (random.py's constants; the arithmetic is uint32)."""
    from uop_scheduler.random import _GOLDEN, _MUL_CALL, _MUL_SEED

    key = np.uint32((seed * _MUL_SEED + call * _MUL_CALL) & 0xFFFFFFFF)
    with np.errstate(over="ignore"):
        x = np.arange(n, dtype=np.uint32) * np.uint32(_GOLDEN) + key
        x = (x ^ (x >> np.uint32(16))) * np.uint32(0x85EBCA6B)
        x = (x ^ (x >> np.uint32(13))) * np.uint32(0xC2B2AE35)
        x = x ^ (x >> np.uint32(16))
    return (x >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / (1 << 24))


def test_eager_random_calls_share_one_kernel_and_draw_the_reference_numbers():
    """Each eager random call has its own key, which the kernel reads from memory: calls of one shape share one
    compiled kernel (the key as a constant in the kernel's source compiled a new kernel per call, 80-170 ms each, so an
    eager training step with dropout compiled every step), and the numbers are the reference stream's."""
    from hcq_runtime import CCompiler

    Tensor.manual_seed(3)
    first = Tensor.rand(37).numpy()
    both = [(Tensor.rand(37) + Tensor.rand(37)).numpy()]  # two keys in one schedule
    compiles = CCompiler.invocations
    later = [Tensor.rand(37).numpy() for _ in range(3)]
    both.append((Tensor.rand(37) + Tensor.rand(37)).numpy())
    assert CCompiler.invocations == compiles
    for call, got in zip((1, 4, 5, 6), [first, *later]):
        np.testing.assert_array_equal(got, _uniform_reference(3, call, 37))
    for (a, b), got in zip(((2, 3), (7, 8)), both):
        np.testing.assert_array_equal(got, _uniform_reference(3, a, 37) + _uniform_reference(3, b, 37))
    with Context(TRAINING=1):
        x = Tensor.ones(37)
        x.dropout(0.5).realize()
        compiles = CCompiler.invocations
        masks = [x.dropout(0.5).numpy() for _ in range(3)]
    assert CCompiler.invocations == compiles
    assert len({m.tobytes() for m in masks}) == 3
