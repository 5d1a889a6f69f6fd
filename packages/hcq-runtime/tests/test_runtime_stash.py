"""The linearizer's stash (`uopir.codegen.linearize`, `Linearizer.plan_stashes`) on hand-built row kernels: a costly
value a reduction's loop computes and a store computes again over its own loop of the same size is computed once.
Each kernel is compiled with the CPU renderer's stash on and off and run over the same inputs: the outputs agree bit
for bit, and with numpy. Kernels with two stores check that only the store the stash was planned for reads it."""

import shutil

import numpy as np
import pytest
from hcq_runtime import CCompiler, Device
from uopir import AxisType, CRenderer, Ops, Renderer, UOp, dtypes, to_program

COMPILERS = [found for names in (("clang", "clang-19", "clang-15"), ("gcc",)) if (found := next(filter(shutil.which, names), None))]
ROWS, N = 6, 48


def costly(v: UOp) -> UOp:
    """v^5 + v^4 + 2v^3 + 3v^2 + 4v by Horner's rule: 10 operations per element (a stash needs 8)."""
    t = v
    for c in (1.0, 2.0, 3.0, 4.0):
        t = t * v + c
    return t * v


def np_costly(v: np.ndarray) -> np.ndarray:
    t = v.copy()
    for c in (1.0, 2.0, 3.0, 4.0):
        t = t * v + c
    return t * v


def kernel(two_stores: str) -> UOp:
    """out0[i, j] = f(x[i, j]) / sum_k f(x[i, k]); with `two_stores`, out1[i, j'] = f(x[i, j']) * sum_k f(x[i, k]) too,
    over the same loop j ("same") or a loop of its own ("own")."""
    out0, out1 = UOp.param(0, dtypes.float32.ptr(ROWS * N)), UOp.param(1, dtypes.float32.ptr(ROWS * N))
    x = UOp.param(2, dtypes.float32.ptr(ROWS * N))
    i, j, k = UOp.range(ROWS, 0), UOp.range(N, 1), UOp.range(N, 2, AxisType.REDUCE)
    total = costly(x.index(i * N + k).load()).reduce(k, arg=Ops.ADD)
    stores = [out0.index(i * N + j).store(costly(x.index(i * N + j).load()) / total).end(j, i)]
    if two_stores:
        j2 = j if two_stores == "same" else UOp.range(N, 3)
        stores.append(out1.index(i * N + j2).store(costly(x.index(i * N + j2).load()) * total).end(j2, i))
    return UOp.sink(*stores)


_compilers: dict[str, CCompiler] = {}


def run(cc: str, ast: UOp, stash: bool, x: np.ndarray) -> tuple[str, list[np.ndarray]]:
    renderer = CRenderer(vector_width=16)
    renderer.stash = stash
    program = to_program(ast, renderer, n_cores=1)
    src = program.src[2].arg
    if cc not in _compilers:
        _compilers[cc] = CCompiler(cc=cc)
    prog = Device["CPU"].program(program.arg.function_name, _compilers[cc].compile(src))
    outs = [np.full(ROWS * N, np.nan, np.float32) for _ in range(2)]
    by_slot = [outs[0], outs[1], x]
    prog([by_slot[slot].ctypes.data for slot in program.arg.globals], [], n_cores=1)
    return src, outs


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("two_stores", ["", "same", "own"])
def test_a_stashed_value_is_computed_once_with_the_same_bits(rng, cc, two_stores):
    x = rng.uniform(-1, 1, ROWS * N).astype(np.float32)
    ast = kernel(two_stores)
    src_on, on = run(cc, ast, True, x)
    src_off, off = run(cc, ast, False, x)
    # the chain's last constant is 4.0f: once per place f is computed. Without the stash, the reduction's loop and each
    # store's vector block; with it, the reduction's loop, and the second store only when its loop is its own (the
    # stash was planned for the first store's loop: the same loop reads it too)
    assert src_off.count("4.0f") == 1 + (2 if two_stores else 1)
    assert src_on.count("4.0f") == (2 if two_stores == "own" else 1)
    written = 2 if two_stores else 1
    for a, b in zip(on[:written], off[:written]):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    f = np_costly(x.astype(np.float64)).reshape(ROWS, N)
    total = f.sum(1, keepdims=True)
    np.testing.assert_allclose(on[0].reshape(ROWS, N), f / total, rtol=1e-5, atol=1e-6)
    if two_stores:
        np.testing.assert_allclose(on[1].reshape(ROWS, N), f * total, rtol=1e-5, atol=1e-4)


def test_renderers_without_a_stack_keep_computing():
    """GPU renderers take no stash (a work-item's array of thousands of floats would spill): the base renderer's flag is
    off, the CPU's on."""
    assert CRenderer.stash and not Renderer.stash
