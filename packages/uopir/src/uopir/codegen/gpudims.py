"""GPU launch dimensions: the innermost output loops become workgroup and work-item indices.

Up to three output axes, innermost first, map to dimensions x, y, z. The innermost one is split into workgroups of
`local_size` work-items when the size allows (the largest power of two up to local_size that divides it); the others
get one work-item per workgroup. Remaining output axes stay loops inside each work-item.
"""

from __future__ import annotations

from uopir.ops import Ops
from uopir.uop import UOp

from .kernel import REDUCE_AXES, REGISTER_AXES, axis_type, kernel_ranges
from .opts import replace_ranges


def add_gpu_dims(ast: UOp, local_size: int) -> UOp:
    loops = [r for r in kernel_ranges(ast) if axis_type(r) not in REDUCE_AXES | REGISTER_AXES and r.src[0].op is Ops.CONST]
    subs: dict[UOp, tuple[UOp, tuple[UOp, ...]]] = {}
    for dim, r in enumerate(reversed(loops[-3:])):
        end = int(r.src[0].arg)
        local = next((size for size in _powers_of_two_down(local_size) if end % size == 0), 1) if dim == 0 else 1
        group = UOp.special(end // local, f"gidx{dim}", r.dtype)
        value = group * local + UOp.special(local, f"lidx{dim}", r.dtype) if local > 1 else group
        subs[r] = (value, ())
    return replace_ranges(ast, subs) if subs else ast


def _powers_of_two_down(n: int) -> list[int]:
    out = []
    while n >= 1:
        out.append(n)
        n //= 2
    return out


def launch_dims(linear: list[UOp]) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(global size in workgroups, local size in work-items) of a linear program; THREAD's core_id counts as x."""
    grid, local = [1, 1, 1], [1, 1, 1]
    for u in linear:
        if u.op is not Ops.SPECIAL:
            continue
        size = int(u.src[0].arg)
        if u.arg == "core_id":
            grid[0] = size
        elif u.arg.startswith("gidx"):
            grid[int(u.arg[4:])] = size
        elif u.arg.startswith("lidx"):
            local[int(u.arg[4:])] = size
    return (grid[0], grid[1], grid[2]), (local[0], local[1], local[2])
