"""Kernel optimizations as data: `Opt(op, axis, arg)` applied to a kernel AST, and the heuristic that picks them.

Every opt is a change of loop structure only (split a range, mark part of it as registers or threads, pad it), so
results never depend on the opts: a kernel run with any valid opt list equals the unoptimized kernel.

Axes are numbered as `kernel_ranges` orders them: loop axes, then reduce axes, then register axes, by axis id. No
opt renumbers the axes before it: a split keeps the outer part at the old position (even with one iteration) and
the new register range goes to the end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, auto

from uopir.ops import AxisType, Ops
from uopir.uop import UOp

from .kernel import DERIVED_AXES, REDUCE_AXES, CodegenError, axis_type, kernel_ranges, kernel_stores, range_end, reduce_identity


class OptOps(Enum):
    UPCAST = auto()  # keep `arg` consecutive elements of a loop axis in registers (vectorizable)
    UNROLL = auto()  # unroll a reduce axis by `arg`
    THREAD = auto()  # split a loop axis across `arg` CPU cores
    PADTO = auto()  # round an axis up to a multiple of `arg`, gating the extra iterations
    LOCAL = auto()  # GPU: split `arg` work-items of a work group off a loop axis
    GROUP = auto()  # GPU: split a reduce axis across `arg` work-items, combined through local memory

    def __repr__(self) -> str:
        return f"OptOps.{self.name}"


@dataclass(frozen=True)
class Opt:
    op: OptOps
    axis: int
    arg: int

    def __repr__(self) -> str:
        return f"Opt({self.op!r}, {self.axis}, {self.arg})"


def _next_axis_id(ast: UOp) -> int:
    return 1 + max((r.arg[0] for r in ast.toposort() if r.op is Ops.RANGE), default=-1)


def replace_ranges(ast: UOp, subs: dict[UOp, tuple[UOp, tuple[UOp, ...]]]) -> UOp:
    """Substitute RANGEs: `subs[r] = (value, ranges)` puts `value` where r is used as a value and `ranges` where r
    is listed as a range closed by a REDUCE or an END."""
    memo: dict[UOp, UOp] = {}
    for node in ast.toposort():
        if node in subs:
            memo[node] = subs[node][0]
            continue
        if node.op in (Ops.REDUCE, Ops.END):
            closed: list[UOp] = []
            for r in node.src[1:]:
                closed.extend(subs[r][1] if r in subs else (memo[r],))
            memo[node] = node.replace(src=(memo[node.src[0]], *closed))
        else:
            memo[node] = node.replace(src=tuple(memo[s] for s in node.src))
    return memo[ast]


def _split(ast: UOp, r: UOp, amount: int, inner_type: AxisType) -> UOp:
    end = range_end(r)
    if amount <= 0 or end % amount:
        raise CodegenError(f"cannot split axis {r.arg[0]} of size {end} by {amount}: the size must be a multiple")
    new_id = _next_axis_id(ast)
    outer = UOp.range(end // amount, r.arg[0], axis_type(r), r.dtype)
    inner = UOp.range(amount, new_id, inner_type, r.dtype)
    # the outer range is kept even when it has one iteration, so axis numbers stay stable across opts
    return replace_ranges(ast, {r: (outer * amount + inner, (outer, inner))})


def _thread(ast: UOp, r: UOp, amount: int) -> UOp:
    end = range_end(r)
    if amount <= 1 or end % amount:
        raise CodegenError(f"cannot thread axis {r.arg[0]} of size {end} over {amount} cores: the size must be a multiple")
    core = UOp.special(amount, "core_id", r.dtype)
    inner = UOp.range(end // amount, r.arg[0], axis_type(r), r.dtype)
    return replace_ranges(ast, {r: (core * (end // amount) + inner, (inner,))})


def _padto(ast: UOp, r: UOp, amount: int) -> UOp:
    end = range_end(r)
    padded = math.ceil(end / amount) * amount
    if padded == end:
        return ast
    new = UOp.range(padded, r.arg[0], axis_type(r), r.dtype)
    ast = replace_ranges(ast, {r: (new, (new,))})
    valid = new < end
    memo: dict[UOp, UOp] = {}
    for node in ast.toposort():
        src = tuple(memo[s] for s in node.src)
        if node.op is Ops.INDEX and new in node.toposort():
            # gate every access that depends on the padded range: no load or store past the old end
            gate = valid if len(src) == 2 else src[2] & valid
            memo[node] = node.replace(src=(src[0], src[1], gate))
        elif node.op is Ops.REDUCE and new in node.src[1:]:
            # padded iterations contribute the reduce's identity
            memo[node] = node.replace(src=(valid.where(src[0], src[0].const_like(reduce_identity(node.arg, node.dtype))), *src[1:]))
        else:
            memo[node] = node.replace(src=src)
    return memo[ast]


def apply_opt(ast: UOp, opt: Opt) -> UOp:
    """The kernel with one more optimization applied (CodegenError when it does not apply)."""
    ranges = kernel_ranges(ast)
    if not 0 <= opt.axis < len(ranges):
        raise CodegenError(f"{opt} names axis {opt.axis}, but the kernel has {len(ranges)} axes")
    r = ranges[opt.axis]
    kind = axis_type(r)
    if kind in DERIVED_AXES:
        raise CodegenError(f"{opt}: axis {opt.axis} was split off by an earlier opt; apply opts to the kernel's own axes")
    is_reduce = kind in REDUCE_AXES
    if opt.op is OptOps.UPCAST:
        if is_reduce:
            raise CodegenError(f"{opt}: UPCAST applies to loop axes; use UNROLL for a reduce axis")
        return _split(ast, r, opt.arg or range_end(r), AxisType.UPCAST)
    if opt.op is OptOps.UNROLL:
        if not is_reduce:
            raise CodegenError(f"{opt}: UNROLL applies to reduce axes; use UPCAST for a loop axis")
        return _split(ast, r, opt.arg or range_end(r), AxisType.UNROLL)
    if opt.op is OptOps.THREAD:
        if is_reduce:
            raise CodegenError(f"{opt}: THREAD splits a loop axis, not a reduce axis")
        return _thread(ast, r, opt.arg)
    if opt.op is OptOps.PADTO:
        return _padto(ast, r, opt.arg)
    if opt.op is OptOps.LOCAL:
        if is_reduce:
            raise CodegenError(f"{opt}: LOCAL splits a loop axis; use GROUP for a reduce axis")
        return _split(ast, r, opt.arg, AxisType.LOCAL)
    if opt.op is OptOps.GROUP:
        if not is_reduce:
            raise CodegenError(f"{opt}: GROUP splits a reduce axis; use LOCAL for a loop axis")
        if any(axis_type(x) is AxisType.GROUP_REDUCE for x in ranges):
            raise CodegenError(f"{opt}: the kernel already has a grouped reduce axis")
        return _split(ast, r, opt.arg, AxisType.GROUP_REDUCE)
    raise CodegenError(f"unknown opt {opt}")


def apply_opts(ast: UOp, opts: list[Opt] | tuple[Opt, ...]) -> UOp:
    for opt in opts:
        ast = apply_opt(ast, opt)
    return ast


def stride(offset: UOp, r: UOp) -> int | None:
    """How much `offset` moves when the range `r` moves by one (None when that is not a constant)."""
    step = (replace_ranges(offset, {r: (r + 1, (r,))}) - offset).simplify()
    return int(step.arg) if step.op is Ops.CONST else None


def _contiguous_in(ast: UOp, r: UOp) -> bool:
    """True when the first store's index moves by exactly 1 as `r` does (so upcasting r gives vector stores)."""
    idx = kernel_stores(ast)[0].src[0]
    return idx.op is Ops.INDEX and len(idx.src) >= 2 and stride(idx.src[1], r) == 1


def heuristic_opts(ast: UOp, n_cores: int = 1, vector_width: int = 8) -> list[Opt]:
    """Opts that make a kernel fast on a CPU: vectorize the contiguous output axis, register-tile matmul-like
    reductions, unroll short reduce loops, and spread the outermost loop axis across cores."""
    opts: list[Opt] = []
    ranges = kernel_ranges(ast)
    if any(r.src[0].op is not Ops.CONST for r in ranges):
        return opts
    loops = [i for i, r in enumerate(ranges) if axis_type(r) not in REDUCE_AXES]
    reduces = [i for i, r in enumerate(ranges) if axis_type(r) in REDUCE_AXES]
    sizes = {i: range_end(ranges[i]) for i in range(len(ranges))}
    work = math.prod(sizes.values())
    # the contiguous output axis gets a vector-sized upcast (two vectors per row of a register tile; one vector for
    # elementwise kernels, where a wider unroll measured slower)
    inner = next((i for i in reversed(loops) if _contiguous_in(ast, ranges[i])), None)
    if inner is not None:
        for amount in ((2 * vector_width, vector_width, 4) if reduces else (vector_width, 4)):
            if sizes[inner] % amount == 0 and sizes[inner] > amount:
                opts.append(Opt(OptOps.UPCAST, inner, amount))
                sizes[inner] //= amount
                break
    # matmul-like: a reduce plus a second loop axis -> a register tile of rows that share each loaded vector
    # (8 rows of 2 vectors are 16 accumulators: half of AVX-512's 32 registers; AVX2's 16 registers take 4 rows)
    rows = 8 if vector_width >= 16 else 4
    if reduces and inner is not None:
        other = next((i for i in reversed(loops) if i != inner and sizes[i] % rows == 0 and sizes[i] > rows), None)
        if other is not None:
            opts.append(Opt(OptOps.UPCAST, other, rows))
            sizes[other] //= rows
    # cores: split the outermost loop axis that divides evenly, when there is enough work to pay for the threads
    if n_cores > 1 and work >= 1 << 16:
        threaded = next(((i, c) for i in loops for c in range(n_cores, 1, -1) if sizes[i] % c == 0), None)
        if threaded is not None:
            opts.append(Opt(OptOps.THREAD, *threaded))
            sizes[threaded[0]] //= threaded[1]
    # matrix-vector: with one output row, keep the whole row's accumulators (up to 16 KiB of them) so the reduce loop
    # runs outside and each step streams one contiguous weight row, instead of striding across rows per output tile
    if reduces and inner is not None and all(sizes[i] == 1 for i in loops if i != inner) and 1 < sizes[inner] <= 128:
        opts.append(Opt(OptOps.UPCAST, inner, sizes[inner]))
    return opts


def gpu_heuristic_opts(ast: UOp, local_size: int = 32) -> list[Opt]:
    """Opts for GPU kernels: a reduction over many elements feeding few outputs is split across a work group."""
    ranges = kernel_ranges(ast)
    if any(r.src[0].op is not Ops.CONST for r in ranges):
        return []
    outputs = math.prod(range_end(r) for r in ranges if axis_type(r) not in REDUCE_AXES)
    for i, r in reversed(list(enumerate(ranges))):
        if axis_type(r) is AxisType.REDUCE and outputs <= 4096:
            for group in (local_size, 16, 8):
                if range_end(r) % group == 0 and range_end(r) >= 4 * group:
                    return [Opt(OptOps.GROUP, i, group)]
    return []
