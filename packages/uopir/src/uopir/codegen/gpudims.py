"""GPU launch dimensions: output loops become workgroup indices, LOCAL and GROUP axes become work-item indices.

Up to three output loop axes, innermost first, map to workgroup dimensions x, y, z; remaining output axes stay loops
inside each work-item. Work-item dimensions come from the opts: the WARP axis of tensor cores (dimension 0, so its 32
work-items are one wave), LOCAL axes (split off loop axes) and the GROUP axis (split off a reduce axis; its REDUCE
keeps the work-item index in its range list, and the linearizer combines the work-items' partial results through
local memory). Without any of them, the innermost output axis is split into work-groups of up to `local_size`
work-items (the largest power of two that divides it).
With a GROUP axis every work-item of a group computes the same outputs, so only work-item 0 stores them.
"""

from __future__ import annotations

from uopir.ops import AxisType, Ops
from uopir.uop import UOp

from .kernel import DERIVED_AXES, REDUCE_AXES, CodegenError, add_gate, axis_type, kernel_ranges, replace_ranges, store_ranges


def add_gpu_dims(ast: UOp, local_size: int) -> UOp:
    ranges = kernel_ranges(ast)
    # only loops every store runs under become workgroup indices: a loop of one store alone (a kernel of one loop per
    # output) would run that store once per index of the other loops; it stays a loop inside each work-item
    under = store_ranges(ast)
    loops = [r for r in ranges if axis_type(r) not in REDUCE_AXES | DERIVED_AXES and r.src[0].op is Ops.CONST
             and all(r in nodes for nodes in under)]
    lanes = [r for r in ranges if axis_type(r) is AxisType.WARP] + [r for r in reversed(ranges) if axis_type(r) is AxisType.LOCAL] + \
        [r for r in ranges if axis_type(r) is AxisType.GROUP_REDUCE]
    if len(lanes) > 3:
        raise CodegenError(f"a GPU kernel has at most 3 work-item dimensions, these opts make {len(lanes)}")
    subs: dict[UOp, tuple[UOp, tuple[UOp, ...]]] = {}
    for dim, r in enumerate(reversed(loops[-3:])):
        end = int(r.src[0].arg)
        local = 1
        if dim == 0 and not lanes:
            local = next((size for size in _powers_of_two_down(local_size) if end % size == 0), 1)
        group = UOp.special(end // local, f"gidx{dim}", r.dtype)
        subs[r] = (group * local + UOp.special(local, "lidx0", r.dtype) if local > 1 else group, ())
    group_lanes = []
    for dim, r in enumerate(lanes):
        lane = UOp.special(int(r.src[0].arg), f"lidx{dim}", r.dtype)
        is_group = axis_type(r) is AxisType.GROUP_REDUCE
        subs[r] = (lane, (lane,) if is_group else ())
        if is_group:
            group_lanes.append(lane)
    ast = replace_ranges(ast, subs) if subs else ast
    return _store_from_first_lane(ast, group_lanes[0]) if group_lanes else ast


def _store_from_first_lane(ast: UOp, lane: UOp) -> UOp:
    first = lane.eq(0)

    def gate(node: UOp) -> UOp:
        if node.op is Ops.END:
            return node.replace(src=(gate(node.src[0]), *node.src[1:]))
        return node.replace(src=(add_gate(node.src[0], first), *node.src[1:]))

    return ast.replace(src=tuple(gate(store) for store in ast.src))


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
