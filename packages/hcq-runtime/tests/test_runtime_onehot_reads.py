"""Kernels of one-hot sums (`table[idx]` as indexing by a tensor lowers it), collapsed by `uopir.codegen.onehot` into
gated reads of the indexed rows, compiled by every C compiler on PATH and run: their values against numpy, with indices
out of range (which read nothing and give 0, as the sum did), of several int dtypes, an int8 index of a 128-row axis
among them (a range check `e < 128` does not fit int8)."""

import numpy as np
import pytest
from kernel_asts import C_COMPILERS as COMPILERS
from kernel_asts import cpu_kernel, gather_rows
from uopir import Ops, dtypes
from uopir.codegen.onehot import pm_collapse_onehot
from uopir.rewrite import graph_rewrite

_NUMPY = {dtypes.int32: np.int32, dtypes.int64: np.int64, dtypes.uint8: np.uint8, dtypes.int8: np.int8}


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("index_dtype,rows", [(dtypes.int32, 200), (dtypes.int64, 200), (dtypes.uint8, 200), (dtypes.int8, 128)])
def test_collapsed_kernel_values_match_numpy_with_out_of_range_indices(cc, index_dtype, rows):
    rng = np.random.default_rng(0)
    width, picks = 16, 64
    table = rng.standard_normal((rows, width)).astype(np.float32)
    info = np.iinfo(_NUMPY[index_dtype])
    idx = rng.integers(max(info.min, -50), min(info.max, rows + 50) + 1, picks).astype(_NUMPY[index_dtype])
    ast = gather_rows(rows, width, picks, cmp_dtype=index_dtype, index_dtype=index_dtype)
    assert not any(u.op is Ops.REDUCE for u in graph_rewrite(ast, pm_collapse_onehot).toposort())
    prog, parts, _ = cpu_kernel(cc, ast, None, 2, 16)
    out = np.full((picks, width), np.nan, np.float32)
    prog([out.ctypes.data, table.ctypes.data, idx.ctypes.data], [], n_cores=parts)
    inside = (idx.astype(np.int64) >= 0) & (idx.astype(np.int64) < rows)
    want = np.where(inside[:, None], table[np.clip(idx.astype(np.int64), 0, rows - 1)], 0.0)
    np.testing.assert_array_equal(out, want)
