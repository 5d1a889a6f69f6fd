"""What a kernel computes and touches, estimated from its lowered AST (before optimization): the `ops` and `mem` of a
`ProgramInfo`, summed by the runtime into `counters.ops` / `counters.mem` (tinygrad's GlobalCounters.global_ops and
global_mem) and shown per kernel by `DEBUG=2` as GFLOP/s and GB/s.

ops: every arithmetic op on values (not on indices) once per iteration of the loops it depends on, each lane of a
vector counted, and one accumulation per iteration of a reduce. mem: the bytes of the buffers the kernel loads from
or stores to, each buffer counted once (its footprint, not every access: reads a cache serves again are not memory
traffic). Symbolic loop bounds count at their maximum.
"""

from __future__ import annotations

import math

from uopir.dtypes import dtypes
from uopir.ops import GroupOp, Ops
from uopir.uop import UOp

from .kernel import strip_index


def kernel_estimates(ast: UOp) -> tuple[int, int]:
    """(ops, mem) of a lowered kernel AST (see the module docstring)."""
    loops: dict[UOp, frozenset[UOp]] = {}
    ops = 0
    buffers: dict[UOp, int] = {}
    for node in ast.toposort():
        inner = frozenset().union(*(loops[s] for s in node.src)) if node.src else frozenset()
        if node.op is Ops.RANGE:
            inner = inner | {node}
        elif node.op is Ops.REDUCE:
            ops += _trips(loops[node.src[0]]) * max(node.dtype.count, 1)
            inner = inner - set(node.src[1:])
        elif node.op in GroupOp.ALU and node.dtype.scalar() is not dtypes.index and not dtypes.is_bool(node.dtype):
            ops += _trips(inner) * max(node.dtype.count, 1)
        elif node.op in (Ops.LOAD, Ops.STORE):
            param = strip_index(node.src[0])
            if param.op is Ops.PARAM and isinstance(size := getattr(param.dtype, "size", None), int) and size > 0:
                buffers[param] = size * param.dtype.base.itemsize
        loops[node] = inner
    return ops, sum(buffers.values())


def _trips(ranges: frozenset[UOp]) -> int:
    return math.prod(int(r.src[0].vmax) for r in ranges)
