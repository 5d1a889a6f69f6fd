"""The CPU heuristic and the C renderer's unroll plan, read from the opts and the rendered source (the kernels' results
are checked against numpy in hcq-runtime's test_runtime_kernels)."""

import math
import re

import pytest
from uopir import AxisType, CRenderer, Opt, OptOps, UOp, dtypes, heuristic_opts, to_program
from uopir.codegen.linearize import MAX_UNROLL
from uopir.codegen.opts import MATVEC_ROWS
from uopir.renderer.cstyle import UNROLL_BUDGET


def matvec(k: int, n: int) -> UOp:
    out, x, w = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(k)), UOp.param(2, dtypes.float16.ptr(k * n))
    j, r = UOp.range(n, 0), UOp.range(k, 1, AxisType.REDUCE)
    value = (x.index(r).load() * w.index(r * n + j).load().cast(dtypes.float32)).reduce(r)
    return UOp.sink(out.index(j).store(value).end(j))


def matmul(n: int, m: int, k: int) -> UOp:
    out, a, b = (UOp.param(i, dtypes.float32.ptr(s)) for i, s in enumerate((n * m, n * k, k * m)))
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    return UOp.sink(out.index(i * m + j).store((a.index(i * k + r).load() * b.index(r * m + j).load()).reduce(r)).end(i, j))


def unroll_pragmas(src: str) -> list[int]:
    return [int(x) for x in re.findall(r"GCC unroll (\d+)", src)]


@pytest.mark.parametrize("k, rows", [(512, MATVEC_ROWS), (510, None)])
def test_matvec_keeps_the_accumulator_row_and_reads_several_weight_rows_per_pass(k, rows):
    opts = heuristic_opts(matvec(k, 4608), n_cores=2, vector_width=16)
    # the row is split into 32-lane vectors and two cores; each core keeps its remaining 72 vectors as accumulators
    assert opts[:3] == [Opt(OptOps.UPCAST, 0, 32), Opt(OptOps.THREAD, 0, 2), Opt(OptOps.UPCAST, 0, 72)]
    assert opts[3:] == ([Opt(OptOps.UNROLL, 1, rows)] if rows else [])


def test_matmuls_get_a_register_tile_and_no_row_unroll():
    opts = heuristic_opts(matmul(64, 64, 64), vector_width=8)
    assert opts == [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 4)]


def test_a_long_accumulator_loop_is_not_unrolled_and_runs_outside_the_row_unroll():
    src = to_program(matvec(512, 4608), CRenderer(vector_width=16), n_cores=2).src[2].arg
    assert all(n <= MAX_UNROLL for n in unroll_pragmas(src)) and f"< {72}" in src
    # the 72-iteration accumulator loop opens before the unrolled rows so each accumulator is updated 4 times per load
    assert src.index("< 72") < src.index(f"GCC unroll {MATVEC_ROWS}")


def test_nested_scalar_unrolls_stay_within_the_budget():
    # a transposed 4x24x32 read cannot be vectorized: unrolling the whole nest would copy its body 3072 times
    n0, n1, n2 = 4, 24, 32
    out, a = UOp.param(0, dtypes.float32.ptr(n0 * n1 * n2)), UOp.param(1, dtypes.float32.ptr(n0 * n1 * n2))
    i, j, k = UOp.range(n0, 0), UOp.range(n1, 1), UOp.range(n2, 2)
    ast = UOp.sink(out.index((i * n1 + j) * n2 + k).store(a.index((k * n1 + j) * n0 + i).load()).end(i, j, k))
    opts = [Opt(OptOps.UPCAST, 0, n0), Opt(OptOps.UPCAST, 1, n1), Opt(OptOps.UPCAST, 2, n2)]
    src = to_program(ast, CRenderer(vector_width=8), opts=opts).src[2].arg
    assert "vector_size" not in src and math.prod(unroll_pragmas(src)) <= UNROLL_BUDGET
    # a GPU-style renderer without SIMD lanes unrolls every register loop up to MAX_UNROLL
    assert sorted(unroll_pragmas(to_program(ast, CRenderer(vector_width=1), opts=opts).src[2].arg)) == [n0, n1, n2]
