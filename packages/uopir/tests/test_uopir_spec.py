"""type_verify: good graphs pass each spec; a bad node fails with a message naming it and why."""

import pytest
from uopir import Ops, ProgramInfo, SpecError, UOp, dtypes, spec_kernel, spec_program, spec_tensor, type_verify


def kernel():
    out, inp = UOp.param(0, dtypes.float.ptr(16), ()), UOp.param(1, dtypes.float.ptr(16), ())
    r = UOp.range(16, 0)
    return UOp.sink(out.index(r).store(inp.index(r).load() * 2.0).end(r))


def test_good_graphs_pass():
    type_verify(kernel(), spec_kernel)
    t = UOp.param(0, dtypes.float, (4, 4))
    type_verify(UOp.sink(t.permute((1, 0)).reshape((16,)).r(Ops.ADD, (0,))), spec_tensor)
    k = kernel()
    linear = UOp(Ops.LINEAR, dtypes.void, tuple(k.toposort()))
    prog = UOp(Ops.PROGRAM, dtypes.void, (k, linear, UOp(Ops.SOURCE, dtypes.void, (), "void k(){}")), ProgramInfo("k", (0, 1)))
    type_verify(prog, spec_program)


def test_bad_nodes_are_named():
    x = UOp.param(0, dtypes.int, ())
    f = UOp.param(1, dtypes.float, ())
    mixed = UOp(Ops.ADD, dtypes.int, (x, f))  # built raw, bypassing promotion
    with pytest.raises(SpecError, match=r"Ops.ADD .*mixes"):
        type_verify(UOp.sink(mixed))
    with pytest.raises(SpecError, match="WHERE condition"):
        type_verify(UOp(Ops.WHERE, dtypes.int, (x, x, x)))
    with pytest.raises(SpecError, match="outside the range"):
        type_verify(UOp(Ops.CONST, dtypes.int8, (), 300))
    with pytest.raises(SpecError, match="only opaque bodies"):
        type_verify(UOp(Ops.CALL, dtypes.void, (x + 1, x)))
    with pytest.raises(SpecError, match="must be lowered"):
        type_verify(UOp.sink(UOp.param(0, dtypes.float, (4,)).reshape((2, 2))), spec_kernel)
    with pytest.raises(SpecError, match="no rule"):
        type_verify(UOp.sink(UOp(Ops.THREEFRY, dtypes.uint64, ()).copy_to_device("CPU").alu(Ops.BARRIER)), spec_tensor)
