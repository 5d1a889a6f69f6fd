"""The seed's test_kernel_opts and test_tensor_cores cases as Tensor programs on MOCKAMD: each program's kernel is
captured (TinyJit), lowered again with the case's opts, run on the mock GPU and compared with the unoptimized run
and with numpy."""

import shutil

import numpy as np
import pytest
from hcq_runtime import Device, buffer_for, run_linear
from uop_scheduler import Tensor, TinyJit, dtypes
from uopir import Ops, Opt, OptOps, UOp, to_program

pytestmark = pytest.mark.skipif(shutil.which("clang-15") is None or shutil.which("ld.lld-15") is None,
                                reason="clang-15 and ld.lld-15 are needed to build AMD kernels")
RNG = np.random.default_rng(7)


def run_with_opts(fn, arrays: list[np.ndarray], opts: list[Opt] | None) -> tuple[np.ndarray, str]:
    """fn(*tensors) on MOCKAMD with its one kernel lowered with `opts` (None: the GPU heuristic); returns the result
    and the kernel's source."""
    jit = TinyJit(fn)
    tensors = [Tensor(a, device="MOCKAMD") for a in arrays]
    jit(*tensors)
    out = jit(*tensors)  # the second call captures the kernels
    assert jit.captured is not None
    kernels = [call for call in jit.captured.linear.src if call.src[0].op is Ops.SINK]
    assert len(kernels) == 1, "each case is one kernel"
    program = to_program(kernels[0].src[0], Device["MOCKAMD"].renderer, opts=opts)
    result = jit.captured.buffers[-1]
    buffer_for(result).copyin(np.zeros(result.arg.size, buffer_for(result).numpy().dtype))  # the capture already filled it
    run_linear(UOp(Ops.LINEAR, dtypes.void, (kernels[0].replace(src=(program, *kernels[0].src[1:])),)))
    return buffer_for(result).numpy().reshape(out.shape), program.src[2].arg


def check(fn, arrays: list[np.ndarray], expected: np.ndarray, opts: list[Opt], tol: float = 1e-5) -> str:
    plain, _ = run_with_opts(fn, arrays, [])
    optimized, source = run_with_opts(fn, arrays, opts)
    np.testing.assert_allclose(plain, expected, rtol=tol, atol=tol)
    np.testing.assert_allclose(optimized, plain, rtol=tol, atol=tol)
    return source


def test_grouped_reduce_with_local_upcast_padto():
    a = RNG.random((7, 11, 13), dtype=np.float32) - 2  # all negative: a padded lane that read 0 would win the max
    # axes: 0 the rows, 1-2 the max's reduce, 3-4 the sum's (by range id); 5 the local, 6 the unroll, 7 the group
    source = check(lambda t: t.sum((1, 2)) + t.max((1, 2)), [a], a.sum((1, 2)) + a.max((1, 2)),
                   [Opt(OptOps.LOCAL, 0, 0), Opt(OptOps.UNROLL, 1, 0), Opt(OptOps.GROUPTOP, 2, 0), Opt(OptOps.PADTO, 7, 32)])
    assert "__builtin_amdgcn_s_barrier" in source
    b = RNG.random((17, 19), dtype=np.float32)
    check(lambda t: t.flip(0).pad(((2, 3), (0, 0))).sum(0), [b], np.pad(b[::-1], ((2, 3), (0, 0))).sum(0),
          [Opt(OptOps.GROUPTOP, 1, 0), Opt(OptOps.PADTO, 0, 8), Opt(OptOps.UPCAST, 0, 12), Opt(OptOps.LOCAL, 0, 0)])
    x, w = RNG.random((1, 3, 15, 15), dtype=np.float32), RNG.random((4, 3, 3, 3), dtype=np.float32)
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x[0], ((0, 0), (1, 1), (1, 1))), (3, 3), axis=(1, 2))[:, ::2, ::2]
    check(lambda t, u: t.conv2d(u, padding=1, stride=2), [x, w], np.einsum("cyxab,ocab->oyx", windows, w)[None],
          [Opt(OptOps.GROUPTOP, 5, 0), Opt(OptOps.LOCAL, 1, 0)])


def test_unrolled_padded_cumsum():
    a = RNG.random((13, 17), dtype=np.float32)
    check(lambda t: t.cumsum(1), [a], np.cumsum(a, 1), [Opt(OptOps.UNROLL, 2, 0), Opt(OptOps.UPCAST, 0, 0), Opt(OptOps.PADTO, 1, 4)])


@pytest.mark.parametrize("opts", [[Opt(OptOps.TC, 0, 2)], [Opt(OptOps.TC, 0, 2), Opt(OptOps.PADTO, 0, 4), Opt(OptOps.UPCAST, 0, 0)]],
                         ids=["tc_shape_padded", "tc_padto_full_upcast"])
def test_tensor_core_matmul_with_padding(opts):
    a, b = RNG.random((17, 23)).astype(np.float16), RNG.random((23, 29)).astype(np.float16)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    source = check(lambda t, u: t @ u, [a, b], expected, opts, tol=3e-3)
    assert "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32" in source


def test_half_matmuls_use_tensor_cores_by_default():
    a, b = RNG.random((32, 48)).astype(np.float16), RNG.random((48, 32)).astype(np.float16)
    got, source = run_with_opts(lambda t, u: t.matmul(u, dtype=dtypes.float16), [a, b], None)
    assert "__builtin_amdgcn_wmma_" in source
    np.testing.assert_allclose(got.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32), rtol=3e-3, atol=3e-3)
    # and the ordinary path (realize) picks the same kernel
    np.testing.assert_allclose((Tensor(a, device="MOCKAMD") @ Tensor(b, device="MOCKAMD")).numpy(), got, rtol=1e-3, atol=1e-3)


def test_half_convolutions_use_tensor_cores_by_default():
    # the longest reduce axis (input channels) is tiled; the kernel window stays a loop around the WMMAs
    x, w = RNG.random((2, 16, 10, 20)).astype(np.float16), RNG.random((16, 16, 3, 3)).astype(np.float16)
    got, source = run_with_opts(lambda t, u: t.conv2d(u), [x, w], None)
    assert "__builtin_amdgcn_wmma_" in source
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(2, 3))  # b, ci, oy, ox, ky, kx
    expected = np.einsum("bcyxij,ocij->boyx", windows, w.astype(np.float64))
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=2e-3, atol=2e-3)
