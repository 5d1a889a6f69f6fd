"""The one-hot collapse (`uopir.codegen.onehot`): a sum over r of WHERE(e == r, v(r), 0) becomes a read of v(e) gated by
0 <= e < n, checked on kernel ASTs built by hand (what indexing by a tensor lowers to) and by the kernel's values when run
through the C renderer on the CPU against numpy; the forms it must leave alone stay reductions."""

import ctypes

import numpy as np
import pytest
from uopir import AxisType, CRenderer, Ops, UOp, dtypes, operand_packs, to_program
from uopir.codegen.onehot import collapse_onehot, pm_collapse_onehot
from uopir.rewrite import graph_rewrite


def gather_rows(rows: int, width: int, picks: int, cmp_dtype=dtypes.int32, index_dtype=dtypes.int32, other: float = 0.0) -> UOp:
    """out[i, j] = sum_r (idx[i] == r ? table[r, j] : other): the kernel `table[idx]` lowers to."""
    out = UOp.param(0, dtypes.float32.ptr(picks * width))
    table = UOp.param(1, dtypes.float32.ptr(rows * width))
    idx = UOp.param(2, index_dtype.ptr(picks))
    i, j, r = UOp.range(picks, 0), UOp.range(width, 1), UOp.range(rows, 2, AxisType.REDUCE)
    e = idx.index(i).load()
    hit = e.alu(Ops.CMPEQ, r.cast(cmp_dtype)) if cmp_dtype is not None else e.alu(Ops.CMPEQ, r)
    value = hit.where(table.index(r * width + j).load(), UOp.const(other, dtypes.float32)).reduce(r)
    return UOp.sink(out.index(i * width + j).store(value).end(i, j))


def reduces(ast: UOp) -> list[UOp]:
    return [u for u in ast.toposort() if u.op is Ops.REDUCE]


def test_a_one_hot_sum_becomes_a_gated_read_of_the_indexed_row():
    ast = graph_rewrite(gather_rows(1000, 16, 8), pm_collapse_onehot)
    assert reduces(ast) == []
    (table_load,) = [u for u in ast.toposort() if u.op is Ops.LOAD and u.src[0].src[0].arg.slot == 1]
    assert len(table_load.src[0].src) == 3  # gated: an index out of range reads nothing
    assert not any(u.op is Ops.RANGE and u.src[0].arg == 1000 for u in ast.toposort())


@pytest.mark.parametrize("cmp_dtype", [dtypes.int32, None])
def test_other_ranges_of_the_reduce_stay_reduced(cmp_dtype):
    table, idx = UOp.param(1, dtypes.float32.ptr(100 * 4)), UOp.param(2, dtypes.int32.ptr(3))
    i, r, s = UOp.range(3, 0), UOp.range(100, 1, AxisType.REDUCE), UOp.range(4, 2, AxisType.REDUCE)
    e = idx.index(i).load().cast(dtypes.weakint) if cmp_dtype is None else idx.index(i).load()
    hit = e.alu(Ops.CMPEQ, r if cmp_dtype is None else r.cast(cmp_dtype))
    red = hit.where(table.index(r * 4 + s).load(), UOp.const(0.0, dtypes.float32)).reduce(r, s)
    out = collapse_onehot(red)
    assert out is not None and out.op is Ops.REDUCE and out.src[1:] == (s,)


def test_forms_that_are_not_a_one_hot_sum_are_left_alone():
    table, idx = UOp.param(1, dtypes.float32.ptr(100)), UOp.param(2, dtypes.float32.ptr(3))
    i, r = UOp.range(3, 0), UOp.range(100, 1, AxisType.REDUCE)
    zero = UOp.const(0.0, dtypes.float32)
    v = table.index(r).load()
    fidx = idx.index(i).load()
    iidx = fidx.cast(dtypes.int32)
    assert collapse_onehot(fidx.alu(Ops.CMPEQ, r.cast(dtypes.float32)).where(v, zero).reduce(r)) is None  # a float index
    assert collapse_onehot(iidx.alu(Ops.CMPEQ, r.cast(dtypes.int32)).where(v, UOp.const(1.0, dtypes.float32)).reduce(r)) is None
    assert collapse_onehot(iidx.alu(Ops.CMPEQ, r.cast(dtypes.int32)).where(v, UOp.const(-0.0, dtypes.float32)).reduce(r)) is None
    assert collapse_onehot(iidx.alu(Ops.CMPEQ, r.cast(dtypes.int32)).where(v, zero).reduce(r, arg=Ops.MAX)) is None
    assert collapse_onehot(iidx.alu(Ops.CMPLT, r.cast(dtypes.int32)).where(v, zero).reduce(r)) is None  # not an equality
    # a comparison that cannot hold every r (int8 wraps past 127) matched by wrapped values: kept as it is
    big = UOp.range(300, 2, AxisType.REDUCE)
    small = idx.index(i).load().cast(dtypes.int8)
    assert collapse_onehot(small.alu(Ops.CMPEQ, big.cast(dtypes.int8)).where(table.index(big % 100).load(), zero).reduce(big)) is None
    # ... also behind a wider cast
    through = idx.index(i).load().cast(dtypes.int8)
    wrapped = big.cast(dtypes.int32).cast(dtypes.int8)
    assert collapse_onehot(through.alu(Ops.CMPEQ, wrapped).where(table.index(big % 100).load(), zero).reduce(big)) is None
    # the index reads the reduced range itself
    assert collapse_onehot((r.cast(dtypes.int32) * 2).alu(Ops.CMPEQ, r.cast(dtypes.int32)).where(v, zero).reduce(r)) is None


def test_indexing_kernels_are_not_packed_as_matmuls():
    assert operand_packs(gather_rows(4096, 1024, 512), CRenderer.packed_operand_bytes)[1] == ()


def _run(ast: UOp, *arrays: np.ndarray) -> None:
    """Compile `ast` with the C renderer and the system compiler and run it on one core over `arrays` (slot order)."""
    import subprocess
    import tempfile

    program = to_program(ast, CRenderer(), n_cores=1)
    src, name = program.src[2].arg, program.arg.function_name
    with tempfile.TemporaryDirectory() as tmp:
        c, so = f"{tmp}/k.c", f"{tmp}/k.so"
        with open(c, "w") as f:
            f.write(src)
        for cc in ("clang", "cc", "gcc"):
            try:
                if subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", so, c], capture_output=True).returncode == 0:
                    break
            except FileNotFoundError:
                continue
        else:
            pytest.skip("no C compiler")
        fn = getattr(ctypes.CDLL(so), name)
        bufs = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        fn(bufs, (ctypes.c_longlong * 1)(), 0, 1)


@pytest.mark.parametrize("index_dtype,rows", [(dtypes.int32, 200), (dtypes.int64, 200), (dtypes.uint8, 200), (dtypes.int8, 128)])
def test_collapsed_kernel_values_match_numpy_with_out_of_range_indices(index_dtype, rows):
    rng = np.random.default_rng(0)
    width, picks = 16, 64
    table = rng.standard_normal((rows, width)).astype(np.float32)
    np_dtype = {dtypes.int32: np.int32, dtypes.int64: np.int64, dtypes.uint8: np.uint8, dtypes.int8: np.int8}[index_dtype]
    info = np.iinfo(np_dtype)
    idx = rng.integers(max(info.min, -50), min(info.max, rows + 50) + 1, picks).astype(np_dtype)
    out = np.full((picks, width), np.nan, np.float32)
    ast = gather_rows(rows, width, picks, cmp_dtype=index_dtype, index_dtype=index_dtype)
    assert reduces(graph_rewrite(ast, pm_collapse_onehot)) == []
    _run(ast, out, table, idx)
    inside = (idx.astype(np.int64) >= 0) & (idx.astype(np.int64) < rows)
    want = np.where(inside[:, None], table[np.clip(idx.astype(np.int64), 0, rows - 1)], 0.0)
    np.testing.assert_array_equal(out, want)
