"""Small kernel ASTs and call builders the runtime tests share (importable from every test: `tests` is on pytest's path)."""

import shutil
from typing import Any

from hcq_runtime import LANE_VARIABLE, CCompiler, Device
from uopir import AxisType, CRenderer, Ops, UOp, dtypes, to_program

#: the C compilers CPU kernel tests compile with: a clang and GCC, those on PATH
C_COMPILERS = [found for names in (("clang", "clang-19", "clang-15"), ("gcc",)) if (found := next(filter(shutil.which, names), None))]
_c_compilers: dict[str, CCompiler] = {}


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


def float_matmul(n: int, m: int, k: int, accumulate: bool = False, transposed: bool = False) -> UOp:
    """out[n, m] = a[n, k] @ b[k, m] in float32 (slots 0, 1, 2); b stored (m, k) with `transposed`; `accumulate` adds
    out[n, m] (a kernel that reads the buffer it writes)."""
    out, a, b = UOp.param(0, dtypes.float32.ptr(n * m)), UOp.param(1, dtypes.float32.ptr(n * k)), UOp.param(2, dtypes.float32.ptr(k * m))
    i, j, r = UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    value = (a.index(i * k + r).load() * b.index(j * k + r if transposed else r * m + j).load()).reduce(r)
    if accumulate:
        value = value + out.index(i * m + j).load()
    return UOp.sink(out.index(i * m + j).store(value).end(i, j))


def gather_rows(rows: int, width: int, picks: int, cmp_dtype: Any = dtypes.int32, index_dtype: Any = dtypes.int32, other: float = 0.0) -> UOp:
    """out[i, j] = sum over r of (idx[i] == r ? table[r, j] : other), the kernel `table[idx]` lowers to (slots: out,
    table, idx); `cmp_dtype` None compares the index with the range itself, else with the range cast to it."""
    out = UOp.param(0, dtypes.float32.ptr(picks * width))
    table = UOp.param(1, dtypes.float32.ptr(rows * width))
    idx = UOp.param(2, index_dtype.ptr(picks))
    i, j, r = UOp.range(picks, 0), UOp.range(width, 1), UOp.range(rows, 2, AxisType.REDUCE)
    e = idx.index(i).load()
    hit = e.alu(Ops.CMPEQ, r.cast(cmp_dtype)) if cmp_dtype is not None else e.alu(Ops.CMPEQ, r)
    value = hit.where(table.index(r * width + j).load(), UOp.const(other, dtypes.float32)).reduce(r)
    return UOp.sink(out.index(i * width + j).store(value).end(i, j))


def cpu_kernel(cc: str, ast: UOp, opts: Any = None, cores: int = 2, vector_width: int = 16) -> tuple[Any, int, str]:
    """`ast` compiled by `cc` for the CPU device (opts None: the heuristic's for `cores` and `vector_width`): the loaded
    program, the parts it runs on (its core count) and its source."""
    program = to_program(ast, CRenderer(vector_width=vector_width), opts=opts, n_cores=cores)
    if cc not in _c_compilers:
        _c_compilers[cc] = CCompiler(cc=cc)
    src = program.src[2].arg
    return Device["CPU"].program(program.arg.function_name, _c_compilers[cc].compile(src)), program.arg.global_size[0], src
