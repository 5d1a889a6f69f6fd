"""Property: kernels of several stores, each under its own choice of loops (shared with other stores or not), compute
what numpy computes, through the path a user's hand-written kernel takes: the device's own heuristic opts, on every
core of the CPU (and on the emulated AMD GPU). A kernel of one loop per output once ran its other loops on every core,
each core writing them again (a two-loop kernel's in-place +1 gave +2)."""

import math

import numpy as np
import pytest
from hcq_runtime import buffer_for, run_linear
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uopir import AxisType, Ops, OptOps, UOp, dtypes, heuristic_opts
from uopir.codegen.program import lower_kernel

# an in-place store shows a store that ran twice (the others write the same values again), so it comes up most
KINDS = ("scale", "in place", "in place", "sum")


@st.composite
def structures(draw, sizes_from: list[int], reduce_from: list[int]):
    """Loop sizes by loop id, then 1-3 stores: (the loop ids it runs under, its kind, its reduce length)."""
    sizes = [draw(st.sampled_from(sizes_from)) for _ in range(3)]
    stores = []
    for _ in range(draw(st.integers(1, 3))):
        loops = sorted(draw(st.lists(st.sampled_from([0, 1, 2]), min_size=1, max_size=2, unique=True)))
        kind = draw(st.sampled_from(KINDS))
        stores.append((tuple(loops), kind, draw(st.sampled_from(reduce_from)) if kind == "sum" else 1))
    return sizes, stores


def build(sizes: list[int], stores: list[tuple]) -> tuple[UOp, list[tuple[int, int]]]:
    """The kernel and, per store, (output elements, input elements): store s writes PARAM 2s from PARAM 2s + 1."""
    ends, shapes = [], []
    for s, (loops, kind, red) in enumerate(stores):
        ranges = [UOp.range(sizes[a], a) for a in loops]
        n = math.prod(sizes[a] for a in loops)
        out, x = UOp.param(2 * s, dtypes.float32.ptr(n)), UOp.param(2 * s + 1, dtypes.float32.ptr(n * red))
        idx = ranges[0]
        for r, a in zip(ranges[1:], loops[1:]):
            idx = idx * sizes[a] + r
        if kind == "scale":
            value = x.index(idx).load() * 2.0 + 1.0
        elif kind == "in place":
            value = out.index(idx).load() + x.index(idx).load()
        else:  # a reduce range of its own per store
            k = UOp.range(red, 3 + s, AxisType.REDUCE)
            value = x.index(idx * red + k).load().reduce(k)
        ends.append(out.index(idx).store(value).end(*ranges))
        shapes.append((n, n * red))
    return UOp.sink(*ends), shapes


def check(sizes: list[int], stores: list[tuple], device: str) -> None:
    ast, shapes = build(sizes, stores)
    rng = np.random.default_rng(sum(sizes) * 7 + len(stores))
    buffers, starts, inputs = [], [], []
    for n_out, n_in in shapes:
        start, x = rng.standard_normal(n_out, dtype=np.float32), rng.standard_normal(n_in, dtype=np.float32)
        out_buf, in_buf = UOp.new_buffer(device, n_out, dtypes.float32), UOp.new_buffer(device, n_in, dtypes.float32)
        buffer_for(out_buf).copyin(start)
        buffer_for(in_buf).copyin(x)
        buffers += [out_buf, in_buf]
        starts.append(start)
        inputs.append(x)
    run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (ast, *buffers)),)))
    for s, ((_, kind, red), start, x) in enumerate(zip(stores, starts, inputs)):
        got = buffer_for(buffers[2 * s]).numpy()
        if kind == "scale":
            want = x * np.float32(2.0) + np.float32(1.0)
        elif kind == "in place":
            want = start + x
        else:
            want = x.reshape(-1, red).sum(axis=1, dtype=np.float32)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"store {s} of {stores} over loop sizes {sizes}")


def _need_amd_compiler() -> None:
    from hcq_runtime import AMDCompiler, CompileError

    try:
        AMDCompiler("gfx1100")
    except CompileError:
        pytest.skip("clang-15 and ld.lld-15 are needed to build AMD kernels")


# sizes whose products pass the CPU heuristic's threshold for using every core (65536 elements of work)
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(structures([1, 3, 16, 64, 256, 300], [4, 17]))
def test_stores_under_their_own_loops_compute_numpys_values_on_the_cpu(case):
    check(*case, device="CPU")


def test_the_two_loop_kernels_that_raced():
    # what the properties found before the fix: an in-place store under a loop the cores did not split ran on both
    check([1000, 300_000, 1], [((0,), "scale", 1), ((1,), "in place", 1)], device="CPU")
    check([1, 256, 256], [((2,), "in place", 1), ((0, 1), "scale", 1)], device="CPU")
    check([256, 256, 3], [((0, 1), "sum", 4), ((2,), "in place", 1), ((0,), "in place", 1)], device="CPU")
    # each nest splits its own loop across the cores (each store runs under exactly one split loop) and vectorizes it
    ast, _ = build([1000, 300_000, 1], [((0,), "scale", 1), ((1,), "in place", 1)])
    opts = heuristic_opts(lower_kernel(ast), n_cores=2, vector_width=16)
    assert sorted(o.axis for o in opts if o.op is OptOps.THREAD) == [0, 1]
    assert {o.axis for o in opts if o.op is OptOps.UPCAST} == {0, 1}
    # nests that overlap split only a loop every store runs under (splitting 0 too would split the first store twice)
    ast, _ = build([256, 256, 3], [((0, 1), "scale", 1), ((1,), "in place", 1)])
    assert [o.axis for o in heuristic_opts(lower_kernel(ast), n_cores=2, vector_width=16) if o.op is OptOps.THREAD] == [1]
    check([256, 256, 3], [((0, 1), "scale", 1), ((1,), "in place", 1)], device="CPU")


def test_the_two_loop_kernel_that_ran_per_workgroup_on_mockamd():
    # and on the GPU, where each store's loop was a workgroup index: the in-place store ran once per index of the other
    _need_amd_compiler()
    check([3, 1, 1], [((1,), "in place", 1), ((0,), "scale", 1)], device="MOCKAMD")


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(structures([1, 3, 8], [4]))
def test_stores_under_their_own_loops_compute_numpys_values_on_mockamd(case):
    _need_amd_compiler()
    check(*case, device="MOCKAMD")
