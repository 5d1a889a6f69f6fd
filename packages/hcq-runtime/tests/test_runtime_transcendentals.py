"""Transcendentals decomposed into simple ALU ops (for renderers that lack them), run on the CPU against numpy."""

import numpy as np
import pytest
from hcq_runtime import buffer_for, run_linear
from uopir import CRenderer, Ops, UOp, dtypes, to_program


class BareCRenderer(CRenderer):
    """The C renderer pretending it has no exp2, log2, sin or pow, so the codegen must build them."""

    code_for_op = CRenderer.code_for_op - {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW}


def run_unary(op: Ops, x: np.ndarray, dtype=dtypes.float32, y: np.ndarray | None = None) -> tuple[np.ndarray, str]:
    n = x.size
    out, a, b = UOp.param(0, dtype.ptr(n)), UOp.param(1, dtype.ptr(n)), UOp.param(2, dtype.ptr(n))
    i = UOp.range(n, 0)
    value = a.index(i).load().alu(op, b.index(i).load()) if y is not None else a.index(i).load().alu(op)
    program = to_program(UOp.sink(out.index(i).store(value).end(i)), BareCRenderer(), opts=[])
    bufs = [UOp.new_buffer("CPU", n, dtype) for _ in range(3 if y is not None else 2)]
    buffer_for(bufs[1]).copyin(x)
    if y is not None:
        buffer_for(bufs[2]).copyin(y)
    run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (program, *bufs)),)))
    return buffer_for(bufs[0]).numpy(), program.src[2].arg


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in float32 units in the last place (both NaN or equal infinities count as 0)."""
    got, want = got.astype(np.float32), want.astype(np.float32)
    same = (np.isnan(got) & np.isnan(want)) | (got == want)
    spacing = np.spacing(np.abs(want).astype(np.float32))
    with np.errstate(invalid="ignore"):
        return np.where(same, 0, np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing)


RNG = np.random.default_rng(11)


def test_exp2_is_decomposed_and_accurate():
    x = np.concatenate([RNG.uniform(-140, 127, 4000), [0, -0.0, 1, -1, 0.5, 127.9, 128.5, -149.5, -160, np.inf, -np.inf, np.nan]])
    x = x.astype(np.float32)
    got, source = run_unary(Ops.EXP2, x)
    # rounded by adding and subtracting 1.5 * 2**23, not by a select and a truncation
    assert "exp2" not in source and "trunc" not in source
    with np.errstate(over="ignore"):
        want = np.exp2(x.astype(np.float64)).astype(np.float32)
    normal = np.abs(want) >= np.finfo(np.float32).tiny
    assert ulps(got[normal], want[normal]).max() <= 3
    np.testing.assert_allclose(got[~normal], want[~normal], atol=2e-44)  # the subnormal range: within a few subnormal steps


def test_log2_is_decomposed_and_accurate():
    x = np.concatenate([np.exp2(RNG.uniform(-149, 127, 4000)), [1, 2, 0.5, 3, 1e-45, 1e-40, 0, -0.0, -1, np.inf, np.nan]]).astype(np.float32)
    got, source = run_unary(Ops.LOG2, x)
    assert "log2" not in source
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log2(x.astype(np.float64)).astype(np.float32)
    assert ulps(got, want).max() <= 3 or np.abs(got - want)[np.isfinite(want)].max() < 1e-6


def test_sin_is_decomposed_and_accurate():
    x = np.concatenate([RNG.uniform(-1000, 1000, 4000), RNG.uniform(-4, 4, 1000), [0, -0.0, np.pi, np.inf, -np.inf, np.nan]]).astype(np.float32)
    got, source = run_unary(Ops.SIN, x)
    assert "sin" not in source
    with np.errstate(invalid="ignore"):
        want = np.sin(x.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(want)
    assert np.abs(got[finite] - want[finite]).max() < 2e-6
    assert np.isnan(got[~finite]).all()


def test_pow_follows_c_rules():
    a = np.array([2, 2, 0, 0, 0, -2, -2, -2, 9, 1.5, np.nan, 4], dtype=np.float32)
    b = np.array([10, -1, 3, 0, -1, 3, 2, 0.5, 0.5, 2.5, 0, np.nan], dtype=np.float32)
    got, source = run_unary(Ops.POW, a, y=b)
    assert "pow" not in source
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.power(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=3e-6)


@pytest.mark.parametrize("op", [Ops.EXP2, Ops.LOG2, Ops.SIN])
def test_float16_goes_through_float32(op):
    x = np.linspace(0.25, 8, 64, dtype=np.float16)
    got, _ = run_unary(op, x, dtypes.float16)
    want = {Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin}[op](x.astype(np.float64)).astype(np.float16)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3, atol=1e-3)


def ulps64(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in float64 units in the last place (both NaN or equal infinities count as 0)."""
    same = (np.isnan(got) & np.isnan(want)) | (got == want)
    with np.errstate(invalid="ignore"):
        return np.where(same, 0, np.abs(got - want) / np.spacing(np.abs(want)))


@pytest.mark.parametrize("op, ref, x", [
    (Ops.EXP2, np.exp2, np.concatenate([RNG.uniform(-1070, 1023, 3000), [0, 1, -1, 0.5, 1023.9, 1024.5, -1080, np.inf, -np.inf, np.nan]])),
    (Ops.LOG2, np.log2, np.concatenate([np.exp2(RNG.uniform(-1070, 1023, 3000)), [1, 2, 0.5, 3, 5e-324, 0, -1, np.inf, np.nan]])),
    (Ops.SIN, np.sin, np.concatenate([RNG.uniform(-1e4, 1e4, 3000), RNG.uniform(-4, 4, 1000), [0, np.pi, -np.pi / 2, np.inf, np.nan]])),
])
def test_float64_decompositions_are_accurate(op, ref, x):
    got, source = run_unary(op, x.astype(np.float64), dtypes.float64)
    assert "exp2" not in source and "log2" not in source and "sin(" not in source
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        want = ref(x.astype(np.float64))
    normal = ~np.isfinite(want) | (np.abs(want) >= np.finfo(np.float64).tiny)
    if op is Ops.SIN:  # near a zero of sin the absolute error of the reduction is what counts
        assert np.nanmax(np.abs(got - want)) < 1e-12
        assert ulps64(got[np.abs(want) > 1e-3], want[np.abs(want) > 1e-3]).max() <= 8
    else:
        assert ulps64(got[normal], want[normal]).max() <= 4


def test_float64_exp2_is_decomposed_and_accurate():
    x = np.concatenate([RNG.uniform(-1070, 1023, 4000), RNG.uniform(-3, 3, 1000), [0, 0.5, -0.5, 1.5, 2.5, -2.5, 1023.9, -1074.5, -1100,
                                                                                  np.inf, -np.inf, np.nan]])
    got, source = run_unary(Ops.EXP2, x, dtype=dtypes.float64)
    assert "exp2" not in source and "trunc" not in source
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.exp2(x)
        normal = np.abs(want) >= np.finfo(np.float64).tiny
        rel = np.abs(got[normal] - want[normal]) / np.where(np.isinf(want[normal]), 1, np.abs(want[normal]))
    assert (np.isinf(want[normal]) == np.isinf(got[normal])).all() and rel[np.isfinite(rel)].max() < 4 * np.finfo(np.float64).eps
    np.testing.assert_allclose(got[~normal], want[~normal], atol=1e-321)
    assert np.isnan(got[np.isnan(x)]).all()
