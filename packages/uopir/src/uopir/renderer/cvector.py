"""Which register loops the C renderer writes with GCC vector types, and the vector type names it uses.

An UPCAST register loop of 2..64 lanes becomes one block of vector code when every value in it that depends on the
lane is built from contiguous loads (index stride exactly 1 in the lane), or loads whose lanes read each element twice
(`r // 2`: a 2x2 pooling's gradient, gathered lane by lane), with vectorizable ops and dtypes, and every store that
depends on the lane is contiguous (stride 1). Index math that depends on the lane is then evaluated once, at lane
0, as the block's base offsets. A gated access (an axis padded to a multiple of the lanes, PADTO) is a vector access
when its gate holds for the first and the last lane, and lane by lane otherwise: its gate is a conjunction of
comparisons linear in the lane, so the lanes where it holds are one run and the two ends decide "all of them".
Index math read as data (an argmax's position, compared or selected) that steps by a constant per lane is a vector
too: its value at lane 0 plus the lanes' steps. A gate that a select takes as its condition is a mask built lane by
lane.
Anything else (gathers, other lane-dependent gates, selects or comparisons, emulated dtypes) keeps the plain unrolled
loop, which is always correct.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, field

from uopir.dtypes import DType, PtrDType, dtypes
from uopir.ops import AxisType, GroupOp, Ops
from uopir.uop import UOp

from ..codegen.opts import repeats_in_pairs, stride

#: computed with as vectors (GCC vector ops keep narrow lanes narrow; signed ones are computed as unsigned vectors so
#: they wrap, see cstyle)
VECTOR_DTYPES = frozenset({dtypes.float32, dtypes.float64, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32,
                           dtypes.uint32, dtypes.int64, dtypes.uint64})
#: loaded, stored and converted as vectors, but not computed with (each op would need its own rounding to half)
STORAGE_ONLY_DTYPES = frozenset({dtypes.float16})
_FLOAT_OPS = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.NEG, Ops.MULACC, Ops.RECIPROCAL, Ops.MAX, Ops.TRUNC, Ops.SQRT})
_INT_OPS = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.MAX})
#: the integer lanes of a mask over values of each width
MASK_INTS = {1: dtypes.int8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}
_LANES = (2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class VectorBlock:
    """A register loop rendered as vector code: `lane` is its RANGE, `width` its lane count, `values` the nodes that
    are vectors, `accesses` the INDEXes read or written as vectors (everything else in the block is a scalar;
    lane-dependent index math is evaluated at lane 0)."""

    lane: UOp
    width: int
    values: frozenset[UOp]
    accesses: frozenset[UOp]
    masks: Mapping[UOp, DType] = field(default_factory=dict)  # the bool values among `values`: their lanes' integer dtype
    # the scalar nodes that depend on the lane: index math (evaluated at lane 0 as the base offsets) and the gates of
    # gated accesses, which the renderer evaluates again at other lanes
    lane_scalars: frozenset[UOp] = frozenset()
    # index math read as a value too (an argmax's position, a one-hot's row number): its step per lane; the vector is
    # its value at lane 0 plus the lane times the step
    lifted: Mapping[UOp, int] = field(default_factory=dict)
    # the INDEXes of loads whose lanes read each element twice (`opts.repeats_in_pairs`: a 2x2 pooling's gradient), read
    # lane by lane into a vector, each lane's offset and gate the lane-dependent scalars evaluated at that lane
    gathers: frozenset[UOp] = frozenset()
    # the gates a select takes as its condition (a padded row's columns, cropped again): masks made lane by lane
    lane_masks: frozenset[UOp] = frozenset()


def element_dtype(index: UOp) -> DType:
    buf = index.src[0]
    return buf.dtype.base if isinstance(buf.dtype, PtrDType) else buf.dtype


def find_vector_block(linear: list[UOp], start: int) -> tuple[VectorBlock, int] | None:
    """The vector block opened by the RANGE at `linear[start]` and the index of its END, or None to keep the loop."""
    lane = linear[start]
    if lane.arg[1] is not AxisType.UPCAST or lane.src[0].op is not Ops.CONST or int(lane.src[0].arg) not in _LANES:
        return None
    end = next((i for i in range(start + 1, len(linear)) if linear[i].op in (Ops.RANGE, Ops.END)), None)
    if end is None or linear[end].op is not Ops.END or linear[end].src[0] is not lane:
        return None  # not the innermost loop
    body = linear[start + 1:end]
    kind: dict[UOp, str] = {lane: "index"}  # lane-dependent nodes: "index" (int math on the lane) or "value" (a vector)
    masks: dict[UOp, DType] = {}  # lane-dependent bools: the integer dtype of their mask lanes
    lifted: dict[UOp, int] = {}  # index math a value reads: its step per lane
    for node in body:
        if not any(s in kind for s in node.src):
            continue
        gate = _gate_kind(node, kind, lane) if node.dtype == dtypes.bool else None
        if node.op not in (Ops.INDEX, Ops.LOAD, Ops.STORE) and gate is None and not _index_math(node, kind) and \
                (indexes := [s for s in node.src if kind.get(s) == "index"]):
            # a value of index math (a position compared or selected as data): a vector of the lanes' values, when it
            # steps by a constant per lane
            steps = [stride(s, lane) for s in indexes]
            if any(st is None or vector_dtype(s.dtype) not in VECTOR_DTYPES for s, st in zip(indexes, steps)):
                return None
            lifted.update(zip(indexes, steps))  # type: ignore[arg-type]
        seen = ChainMap({s: "value" for s in node.src if s in lifted}, kind) if lifted else kind
        if node.op is Ops.INDEX:
            if len(node.src) not in (2, 3) or node.src[0] in kind or kind.get(node.src[1]) != "index":
                return None
            if len(node.src) == 3 and (kind.get(node.src[2]) not in (None, "gate", "monotone") or element_dtype(node) not in VECTOR_DTYPES):
                return None
            if stride(node.src[1], lane) == 1:
                kind[node] = "access"
            elif element_dtype(node) in VECTOR_DTYPES and repeats_in_pairs(node.src[1], lane):
                kind[node] = "gather"  # read lane by lane (a store must be contiguous)
            else:
                return None
        elif node.op is Ops.LOAD:
            if kind.get(node.src[0]) not in ("access", "gather") or node.dtype not in VECTOR_DTYPES | STORAGE_ONLY_DTYPES or len(node.src) != 1:
                return None
            kind[node] = "value"
        elif node.op is Ops.CAST and node.src[0] in masks and node.dtype in VECTOR_DTYPES:
            kind[node] = "value"  # a comparison's mask as 1 and 0 (a max's gradient: where the maxima are)
        elif node.op is Ops.STORE:
            if kind.get(node.src[0]) != "access" or element_dtype(node.src[0]) not in VECTOR_DTYPES | STORAGE_ONLY_DTYPES:
                return None
            kind[node] = "store"
        elif _index_math(node, kind):
            kind[node] = "index"
        elif gate is not None:
            kind[node] = gate
        elif node.dtype == dtypes.bool or node.op is Ops.WHERE:
            if (mask := _mask_op(node, seen, masks)) is None:
                return None
            kind[node] = "value"
            if node.dtype == dtypes.bool:
                masks[node] = mask
        elif not _vectorizable(node, seen) or any(s in masks for s in node.src):
            return None
        else:
            kind[node] = "value"
    # lane-dependent index math may only feed index math, gates and INDEX offsets, where lane 0 gives the base; a
    # gate only other gates, INDEX gates and the conditions of selects (as a mask evaluated lane by lane)
    lane_masks: set[UOp] = set()
    for node in body:
        for i, s in enumerate(node.src):
            if kind.get(s) == "index" and not (kind.get(node) in ("index", "gate", "monotone") or (node.op is Ops.INDEX and i == 1)) \
                    and s not in lifted:
                return None
            if kind.get(s) in ("gate", "monotone") and not (kind.get(node) in ("gate", "monotone") or (node.op is Ops.INDEX and i == 2)):
                if not (node.op is Ops.WHERE and i == 0 and kind.get(node) == "value"):
                    return None
                lane_masks.add(s)  # a select's condition: a mask of the gate at each lane
            if kind.get(s) == "access" and node.op not in (Ops.LOAD, Ops.STORE):
                return None
            if kind.get(s) == "gather" and node.op is not Ops.LOAD:
                return None
    if not any(k == "store" for k in kind.values()):
        return None
    values = frozenset(n for n, k in kind.items() if k == "value")
    scalars = frozenset(n for n, k in kind.items() if k in ("index", "gate", "monotone") and n is not lane)
    return VectorBlock(lane, int(lane.src[0].arg), values, frozenset(n for n, k in kind.items() if k == "access"), masks, scalars,
                       lifted, frozenset(n for n, k in kind.items() if k == "gather"), frozenset(lane_masks)), end


def vector_dtype(dt: DType) -> DType:
    """The dtype a value of `dt` has as a vector lane: index math (a weak int, `long long` in C) is int64."""
    return dtypes.int64 if dt in dtypes.weaks and dtypes.is_int(dt) else dt


def _index_math(node: UOp, kind: Mapping[UOp, str]) -> bool:
    """Whether `node` is integer math on the lane and scalars only (computed once, at lane 0, as a base offset)."""
    return all(kind.get(s) in (None, "index") for s in node.src) and dtypes.is_int(node.dtype) and node.op in GroupOp.ALU


def _gate_kind(node: UOp, kind: Mapping[UOp, str], lane: UOp) -> str | None:
    """For a lane-dependent bool of scalar index math: "monotone" (a comparison of values linear in the lane, or its
    negation: it holds on a prefix or a suffix of the lanes), "gate" (a conjunction of monotone conditions and
    lane-independent bools: it holds on one run of lanes), or None when neither (the block is not vector code)."""
    if node.op is Ops.CMPLT and all(kind.get(s) in (None, "index") for s in node.src) and dtypes.is_int(node.src[0].dtype):
        return "monotone" if all(kind.get(s) is None or stride(s, lane) is not None for s in node.src) else None
    if node.op in (Ops.CMPNE, Ops.XOR) and len(node.src) == 2:  # x != True: a negation
        gate, other = node.src if kind.get(node.src[0]) == "monotone" else node.src[::-1]
        return "monotone" if kind.get(gate) == "monotone" and other.op is Ops.CONST and other.arg is True else None
    if node.op is Ops.AND and all(kind.get(s) in (None, "gate", "monotone") for s in node.src):
        return "gate"
    return None


def _mask_op(node: UOp, kind: Mapping[UOp, str], masks: dict[UOp, DType]) -> DType | None:
    """For a lane-dependent comparison, logical op or select: the integer dtype of its mask lanes (of the select's
    condition for a WHERE), or None when it cannot be vector code."""
    if any(kind.get(s) == "index" for s in node.src):
        return None
    if node.op in GroupOp.Comparison and node.src[0].dtype != dtypes.bool:
        src = vector_dtype(node.src[0].dtype)
        return MASK_INTS.get(src.itemsize) if src in VECTOR_DTYPES and vector_dtype(node.src[1].dtype) == src else None
    if node.op in (Ops.AND, Ops.OR, Ops.XOR, Ops.NEG, Ops.CMPNE, Ops.CMPEQ) and node.dtype == dtypes.bool and node.src[0].dtype == dtypes.bool:
        # (bools compared for (in)equality are masks xor-ed: logical_not is `x != True`)
        widths = {masks[s] for s in node.src if s in masks}
        return next(iter(widths)) if len(widths) == 1 and all(s in masks or kind.get(s) is None for s in node.src) else None
    if node.op is Ops.WHERE and node.dtype in VECTOR_DTYPES:
        cond, a, b = node.src
        mask = MASK_INTS[node.dtype.itemsize]
        if (cond in masks and masks[cond] != mask) or any(s in masks for s in (a, b)):
            return None
        return mask
    return None


def _vectorizable(node: UOp, kind: Mapping[UOp, str]) -> bool:
    if any(kind.get(s) == "index" for s in node.src):
        return False
    if node.op is Ops.CAST:  # conversions and bitcasts may also go to or from a storage-only dtype
        return {node.dtype, vector_dtype(node.src[0].dtype)} <= VECTOR_DTYPES | STORAGE_ONLY_DTYPES
    if node.op is Ops.BITCAST:
        return {node.dtype, node.src[0].dtype} <= VECTOR_DTYPES | STORAGE_ONLY_DTYPES and node.src[0].dtype.itemsize == node.dtype.itemsize
    if node.dtype not in VECTOR_DTYPES:
        return False
    if node.op in (Ops.SHL, Ops.SHR):  # only a constant in-range amount: any other has numpy's answer in scalar code
        amount = node.src[1]
        return amount.op is Ops.CONST and 0 <= amount.arg < node.dtype.itemsize * 8
    if node.op in (Ops.CDIV, Ops.CMOD):  # by a constant that C divides without undefined cases (0, -1)
        return dtypes.is_int(node.dtype) and node.src[1].op is Ops.CONST and node.src[1].arg not in (0, -1)
    return node.op in (_FLOAT_OPS if dtypes.is_float(node.dtype) else _INT_OPS)


def vector_type(ctype: str, width: int, aligned: bool = True) -> tuple[str, str]:
    """(name, typedef) of the GCC vector of `width` `ctype`s; the unaligned variant is for loads and stores."""
    name = f"uop_{ctype.replace(' ', '_')}_x{width}{'' if aligned else '_u'}"
    attrs = f"vector_size({width} * sizeof({ctype}))" + ("" if aligned else f", aligned(sizeof({ctype}))")
    return name, f"typedef {ctype} {name} __attribute__(({attrs}));\n"
