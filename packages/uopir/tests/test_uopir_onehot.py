"""The one-hot collapse (`uopir.codegen.onehot`): a sum over r of WHERE(e == r, v(r), 0) becomes a read of v(e) gated by
0 <= e < n, checked on kernel ASTs built by hand (what indexing by a tensor lowers to); the forms it must leave alone
stay reductions. The collapsed kernels' values, compiled and run, are checked in hcq-runtime's test_runtime_onehot_reads."""

import pytest
from kernel_asts import gather_rows
from uopir import AxisType, CRenderer, Ops, UOp, dtypes, operand_packs
from uopir.codegen.onehot import collapse_onehot, pm_collapse_onehot
from uopir.rewrite import graph_rewrite


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
