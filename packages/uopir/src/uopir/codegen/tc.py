"""Tensor cores: the TC opt rewrites a matmul-shaped reduction into 16x16x16 WMMA tiles, one tile per wave.

A matmul-shaped reduction is `REDUCE(ADD, a * b, k, ...)` over a reduce range `k` both operands read, where `a`
depends on a loop range `m` that `b` does not, `b` on a loop range `n` that `a` does not, and both read a tensor-core
input dtype (casts to the accumulator dtype are looked through); further reduce ranges stay loops. The opt splits m,
n and k into 16-wide tiles and lays each 16x16 output tile over the 32 lanes of a wave the way RDNA3's WMMA holds it
(the RDNA3 ISA guide's wave32 layouts):

- A operand: lane l holds row l % 16 of the A tile, all 16 k values (lanes 16-31 repeat lanes 0-15);
- B operand: lane l holds column l % 16 of the B tile, all 16 k values;
- C/D accumulator: lane l holds column l % 16, rows 2*i + l // 16 for its 8 registers i.

After the opt the reduction reads `REDUCE(ADD, WMMA(A, B, i), k_tile, ...)`: A and B are STACKs of the lane's 16 operand
values and `i` (an UPCAST range of 8) names the accumulator register, so as a value the WMMA is this lane's element i
of the tile product, and the linearizer updates all 8 registers with one instruction. The lane index is a WARP range
(work-item dimension 0, see `gpudims`). Shapes that are not multiples of 16 are padded when the opt allows it: operand
values past the end are 0 (their loads gated off) and stores past the end are gated, so a tile whose operand lies
entirely in the padding still contributes exactly 0.
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass

from uopir.dtypes import DType, dtypes
from uopir.ops import AxisType, Ops
from uopir.uop import UOp

from .kernel import DERIVED_AXES, CodegenError, add_gate, axis_type, kernel_ranges, next_axis_id, replace_ranges

#: the tile edge and the wave size of every RDNA3 WMMA
TILE, WAVE = 16, 32
#: accumulator registers per lane: a 16x16 tile over 32 lanes
REGISTERS = TILE * TILE // WAVE
#: the levels of the TC opt's argument (tinygrad's tc_opt): 2 and above pad shapes up to the tile
PAD_LEVEL = 2


@dataclass(frozen=True)
class TensorCore:
    """One WMMA instruction: D = A @ B + C on 16x16 tiles, A and B of `dtype_in`, C and D of `dtype_out`, computed by
    the `builtin` of clang for a wave of 32 lanes."""

    dtype_in: DType
    dtype_out: DType
    builtin: str

    def __repr__(self) -> str:
        return f"TensorCore({self.dtype_in.name}->{self.dtype_out.name})"


RDNA3_TENSOR_CORES = (
    TensorCore(dtypes.float16, dtypes.float32, "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32"),
    TensorCore(dtypes.float16, dtypes.float16, "__builtin_amdgcn_wmma_f16_16x16x16_f16_w32"),
    TensorCore(dtypes.bfloat16, dtypes.float32, "__builtin_amdgcn_wmma_f32_16x16x16_bf16_w32"),
    TensorCore(dtypes.bfloat16, dtypes.bfloat16, "__builtin_amdgcn_wmma_bf16_16x16x16_bf16_w32"),
)


@dataclass(frozen=True)
class Matmul:
    """A matmul-shaped reduction of a kernel: `reduce` sums `a * b` over `k`; `a` depends on `m`, `b` on `n`."""

    reduce: UOp
    a: UOp
    b: UOp
    m: UOp
    n: UOp
    k: UOp
    tc: TensorCore


def _look_through_cast(x: UOp, acc: DType) -> UOp:
    return x.src[0] if x.op is Ops.CAST and x.dtype == acc else x


def _ranges(x: UOp) -> set[UOp]:
    return {u for u in x.toposort() if u.op is Ops.RANGE}


def _is_tileable(r: UOp, kinds: tuple[AxisType, ...]) -> bool:
    return axis_type(r) in kinds and r.src[0].op is Ops.CONST


def find_matmuls(ast: UOp, tensor_cores: tuple[TensorCore, ...]) -> list[Matmul]:
    """The kernel's matmul-shaped reductions that one of `tensor_cores` computes, in graph order. A reduction over
    several ranges tiles the longest one both operands read; the others stay loops around the tensor cores."""
    found = []
    for red in ast.toposort():
        # products formed in the accumulator dtype, or in the input dtype and then cast (the tensor core's are exact)
        product = _look_through_cast(red.src[0], red.dtype) if red.op is Ops.REDUCE else red
        if red.op is not Ops.REDUCE or red.arg is not Ops.ADD or product.op is not Ops.MUL:
            continue
        a, b = (_look_through_cast(x, red.dtype) for x in product.src)
        tc = next((tc for tc in tensor_cores if tc.dtype_in == a.dtype == b.dtype and tc.dtype_out == red.dtype), None)
        in_a, in_b = _ranges(a), _ranges(b)
        ks = sorted((r for r in red.src[1:] if r in in_a and r in in_b and _is_tileable(r, (AxisType.REDUCE,))),
                    key=lambda r: (int(r.src[0].arg), r.arg[0]))
        loops = (AxisType.LOOP, AxisType.GLOBAL)
        ms = sorted((r for r in in_a - in_b if _is_tileable(r, loops)), key=lambda r: r.arg[0])
        ns = sorted((r for r in in_b - in_a if _is_tileable(r, loops)), key=lambda r: r.arg[0])
        if tc is not None and ks and ms and ns:
            found.append(Matmul(red, a, b, ms[-1], ns[-1], ks[-1], tc))
    return found


def _below(index: UOp, size: int) -> UOp | None:
    return None if size % TILE == 0 else index < size


def _all(*conditions: UOp | None) -> UOp | None:
    """The conjunction of the conditions that are not None (None when all are)."""
    present = [c for c in conditions if c is not None]
    return functools.reduce(operator.and_, present) if present else None


def _gated(value: UOp, valid: UOp | None) -> UOp:
    """`value` with every access gated by `valid`, and 0 where it is false."""
    if valid is None:
        return value
    memo: dict[UOp, UOp] = {}
    for node in value.toposort():
        src = tuple(memo[s] for s in node.src)
        memo[node] = add_gate(node.replace(src=src), valid) if node.op is Ops.INDEX else node.replace(src=src)
    return valid.where(memo[value], memo[value].const_like(0))


def apply_tc(ast: UOp, which: int, level: int, tensor_cores: tuple[TensorCore, ...]) -> UOp:
    """The kernel with its `which`-th matmul-shaped reduction computed by tensor cores (see the module docstring);
    `level` >= PAD_LEVEL pads shapes that are not multiples of the tile."""
    if any(axis_type(r) in DERIVED_AXES for r in kernel_ranges(ast)):
        raise CodegenError("TC must be the first opt: apply it before opts that split axes")
    if not tensor_cores:
        raise CodegenError("TC: this renderer has no tensor cores")
    matmuls = find_matmuls(ast, tensor_cores)
    if not 0 <= which < len(matmuls):
        raise CodegenError(f"TC: the kernel has {len(matmuls)} matmul-shaped reductions with tensor-core dtypes, not one numbered {which}")
    mm = matmuls[which]
    size_m, size_n, size_k = (int(r.src[0].arg) for r in (mm.m, mm.n, mm.k))
    if level < PAD_LEVEL and (size_m % TILE or size_n % TILE or size_k % TILE):
        raise CodegenError(f"TC: shape {size_m}x{size_n}x{size_k} is not a multiple of {TILE}; use arg {PAD_LEVEL} to pad it")
    tile_m, tile_n, tile_k = (UOp.range(math.ceil(int(r.src[0].arg) / TILE), r.arg[0], axis_type(r), r.dtype) for r in (mm.m, mm.n, mm.k))
    first = next_axis_id(ast)
    lane = UOp.range(WAVE, first, AxisType.WARP, mm.m.dtype)
    register = UOp.range(REGISTERS, first + 1, AxisType.UPCAST, mm.m.dtype)
    # the operand layout: this lane's row of A and column of B (the output layout holds its column and 8 rows of D)
    row_in, col = tile_m * TILE + lane % TILE, tile_n * TILE + lane % TILE
    operands = []
    for value, outer, outer_index, outer_size in ((mm.a, mm.m, row_in, size_m), (mm.b, mm.n, col, size_n)):
        elements = []
        for kk in range(TILE):
            k_index = tile_k * TILE + kk
            element = replace_ranges(value, {outer: (outer_index, ()), mm.k: (k_index, ())})
            elements.append(_gated(element, _all(_below(outer_index, outer_size), _below(k_index, size_k))))
        operands.append(UOp(Ops.STACK, mm.tc.dtype_in.vec(TILE), tuple(elements)))
    wmma = UOp(Ops.WMMA, mm.tc.dtype_out, (*operands, register), mm.tc).reduce(tile_k, *(r for r in mm.reduce.src[1:] if r is not mm.k))
    # outside the reduction every access of a padded output axis is gated by that axis' end; the gates are written on
    # m and n, so the substitution below turns them into conditions on the output layout
    gates = {mm.m: _below(mm.m, size_m), mm.n: _below(mm.n, size_n)}
    depends: dict[UOp, frozenset[UOp]] = {}
    memo: dict[UOp, UOp] = {}
    for node in ast.toposort():
        depends[node] = frozenset({node} & gates.keys()).union(*(depends[s] for s in node.src))
        if node is mm.reduce:
            memo[node] = wmma
            continue
        memo[node] = node.replace(src=tuple(memo[s] for s in node.src))
        valid = _all(*(gates[r] for r in sorted(depends[node], key=lambda r: r.arg[0])))
        if node.op is Ops.INDEX and valid is not None:
            memo[node] = add_gate(memo[node], valid)
    row_out = tile_m * TILE + register * 2 + lane // TILE
    return replace_ranges(memo[ast], {mm.m: (row_out, (tile_m, register, lane)), mm.n: (col, (tile_n,))})
