"""Small kernel ASTs and call builders the runtime tests share (importable from every test: `tests` is on pytest's path)."""

from hcq_runtime import LANE_VARIABLE
from uopir import Ops, UOp, dtypes


def scale_add(n: int, scale: float) -> UOp:
    """out[i] = a[i] * scale + b[i] for i < n (float32 buffers at slots 0, 1, 2)."""
    out, a, b = (UOp.param(s, dtypes.float32.ptr(n)) for s in range(3))
    i = UOp.range(n, 0)
    return UOp.sink(out.index(i).store(a.index(i).load() * scale + b.index(i).load()).end(i))


def prefix(n: int) -> UOp:
    """out[i] = a[i] for i < len, else -1 (len is a variable)."""
    out, a = (UOp.param(s, dtypes.float32.ptr(n)) for s in range(2))
    length = UOp.variable("len", 1, n)
    i = UOp.range(n, 0)
    return UOp.sink(out.index(i).store((i < length).where(a.index(i).load(), -1.0)).end(i))


def lane_kernel(n: int) -> UOp:
    """out[i] = a[i] * 2 + _device_num (which lane of a multi-device call this is)."""
    out, a = (UOp.param(s, dtypes.float32.ptr(n)) for s in range(2))
    lane = UOp.variable(LANE_VARIABLE, 0, 7)
    i = UOp.range(n, 0)
    return UOp.sink(out.index(i).store(a.index(i).load() * 2.0 + lane.cast(dtypes.float32)).end(i))


def call(body: UOp, *args: UOp) -> UOp:
    """CALL of `body` over the buffers `args`."""
    return UOp(Ops.CALL, dtypes.void, (body, *args))


def linear(*calls: UOp) -> UOp:
    """A LINEAR of `calls`, run in order."""
    return UOp(Ops.LINEAR, dtypes.void, calls)
