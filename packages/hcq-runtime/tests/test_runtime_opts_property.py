"""Property: a kernel's result does not depend on the opts applied to it (random kernels, random valid opt lists)."""

import numpy as np
from hcq_runtime import buffer_for, run_linear
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uopir import AxisType, CRenderer, Ops, Opt, OptOps, UOp, dtypes, to_program

DIVISORS = [1, 2, 3, 4, 6, 8, 12, 16, 24]


@st.composite
def kernels_and_opts(draw):
    rows, cols, red = draw(st.sampled_from([4, 6, 8, 12, 16, 24])), draw(st.sampled_from([4, 8, 12, 16, 32])), draw(st.sampled_from([1, 4, 6, 8]))
    opts: list[Opt] = []
    sizes = {0: rows, 1: cols, 2: red}
    for _ in range(draw(st.integers(0, 3))):
        axis = draw(st.sampled_from([0, 1, 2]))
        kind = draw(st.sampled_from([OptOps.UPCAST, OptOps.THREAD, OptOps.PADTO] if axis < 2 else [OptOps.UNROLL, OptOps.PADTO]))
        if kind is OptOps.PADTO:
            opts.append(Opt(kind, axis, sizes[axis] + draw(st.integers(1, 5))))
            sizes[axis] = -1  # padded: nothing divides it predictably any more
            continue
        amounts = [d for d in DIVISORS if sizes[axis] > 0 and sizes[axis] % d == 0 and d > 1]
        if not amounts or (kind is OptOps.THREAD and any(o.op is OptOps.THREAD for o in opts)):
            continue
        amount = draw(st.sampled_from(amounts))
        opts.append(Opt(kind, axis, amount))
        sizes[axis] //= amount
    return rows, cols, red, opts


def kernel(rows: int, cols: int, red: int) -> UOp:
    """out[i, j] = sum_k (a[i, k] * b[k, j]) + max(a[i, 0], 0.5) * c[j]  -- a reduce, broadcasts and an elementwise tail."""
    out, a, b, c = UOp.param(0, dtypes.float32.ptr(rows * cols)), UOp.param(1, dtypes.float32.ptr(rows * red)), \
        UOp.param(2, dtypes.float32.ptr(red * cols)), UOp.param(3, dtypes.float32.ptr(cols))
    i, j, k = UOp.range(rows, 0), UOp.range(cols, 1), UOp.range(red, 2, AxisType.REDUCE)
    total = (a.index(i * red + k).load() * b.index(k * cols + j).load()).reduce(k)
    tail = a.index(i * red).load().maximum(0.5) * c.index(j).load()
    return UOp.sink(out.index(i * cols + j).store(total + tail).end(i, j))


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(kernels_and_opts())
def test_opts_never_change_results(case):
    rows, cols, red, opts = case
    rng = np.random.default_rng(rows * 1000 + cols * 10 + red)
    a, b, c = (rng.standard_normal(shape, dtype=np.float32) for shape in ((rows, red), (red, cols), (cols,)))
    program = to_program(kernel(rows, cols, red), CRenderer(), opts=opts)
    bufs = [UOp.new_buffer("CPU", rows * cols, dtypes.float32)] + [UOp.new_buffer("CPU", x.size, dtypes.float32) for x in (a, b, c)]
    for buf, x in zip(bufs[1:], (a, b, c)):
        buffer_for(buf).copyin(x)
    run_linear(UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (program, *bufs)),)))
    expected = a @ b + np.maximum(a[:, :1], 0.5) * c
    np.testing.assert_allclose(buffer_for(bufs[0]).numpy().reshape(rows, cols), expected, rtol=1e-4, atol=1e-4)
