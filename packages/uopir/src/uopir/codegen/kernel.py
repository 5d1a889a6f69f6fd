"""Reading a kernel AST: its stores, ranges, reductions and buffers.

A kernel AST is a SINK whose sources are STOREs (optionally wrapped in END(store, *ranges)) into INDEXed buffer
PARAMs. Values are built from LOADs of INDEXed PARAMs, CONSTs, variables (DEFINE_VAR or scalar PARAMs), ALU ops,
CAST, BITCAST and REDUCE(value, *ranges, arg=op). Loop indices are RANGE(end) nodes whose arg is (axis_id, AxisType).
"""

from __future__ import annotations

from dataclasses import dataclass

from uopir.dtypes import PtrDType, dtypes
from uopir.errors import GraphError
from uopir.ops import AxisType, Ops
from uopir.uop import UOp

#: axis kinds that are small constant loops kept in registers rather than real loops
REGISTER_AXES = frozenset({AxisType.UPCAST, AxisType.UNROLL})
REDUCE_AXES = frozenset({AxisType.REDUCE, AxisType.UNROLL, AxisType.GROUP_REDUCE})
#: axes that opts split off an existing axis; they are numbered after the kernel's own axes (WARP: the lanes of a
#: tensor-core wave)
DERIVED_AXES = REGISTER_AXES | {AxisType.LOCAL, AxisType.GROUP_REDUCE, AxisType.WARP}


class CodegenError(GraphError):
    """A kernel AST cannot be lowered (malformed, or an optimization does not apply)."""


def reduce_identity(op: Ops, dtype) -> float | int | bool:
    if op is Ops.ADD:
        return False if dtype == dtypes.bool else 0
    if op is Ops.MUL:
        return True if dtype == dtypes.bool else 1
    if op is Ops.MAX:
        return dtype.min
    raise CodegenError(f"REDUCE with {op!r} has no identity: use ADD, MUL or MAX")


def axis_type(r: UOp) -> AxisType:
    return r.arg[1]


def range_end(r: UOp) -> int:
    end = r.src[0]
    if end.op is not Ops.CONST:
        raise CodegenError(f"range {r.arg[0]} has a symbolic end ({end.render()}): this optimization needs a constant size")
    return int(end.arg)


def strip_end(x: UOp) -> UOp:
    while x.op is Ops.END:
        x = x.src[0]
    return x


def store_ranges(ast: UOp) -> list[set[UOp]]:
    """The RANGEs each store of a kernel runs under (those in its subtree: address, value, END), in SINK order. A
    kernel of one loop nest per output has stores under different ranges: a loop split across cores or workgroups
    must be one every store runs under, or the other stores would run once per part."""
    return [{u for u in s.toposort() if u.op is Ops.RANGE} for s in ast.src]


def kernel_stores(ast: UOp) -> list[UOp]:
    """The STOREs of a kernel, in SINK order."""
    if ast.op is not Ops.SINK:
        raise CodegenError(f"a kernel AST is a SINK, got {ast.op.name}")
    stores = [strip_end(s) for s in ast.src]
    for s in stores:
        if s.op is not Ops.STORE:
            raise CodegenError(f"a kernel SINK holds STOREs (or END(STORE, ...)), got {s.op.name}")
    return stores


def kernel_ranges(ast: UOp) -> list[UOp]:
    """Every RANGE of the kernel: loop axes, then reduce axes, then the axes opts split off (registers, locals,
    groups), each by axis id."""
    ranges = {u for u in ast.toposort() if u.op is Ops.RANGE}
    return sorted(ranges, key=lambda r: (axis_type(r) in DERIVED_AXES, axis_type(r) in REDUCE_AXES, r.arg[0]))


def buffer_params(ast: UOp) -> list[UOp]:
    """The pointer PARAMs (global buffers) the kernel touches, by slot."""
    params = {u for u in ast.toposort() if u.op is Ops.PARAM and isinstance(u.dtype, PtrDType)}
    return sorted(params, key=lambda p: p.arg.slot)


def kernel_variables(ast: UOp) -> list[UOp]:
    """Scalar inputs of the kernel (DEFINE_VAR nodes and scalar PARAMs), by name."""
    found = {u for u in ast.toposort() if u.op is Ops.DEFINE_VAR or (u.op is Ops.PARAM and not isinstance(u.dtype, PtrDType))}
    return sorted(found, key=variable_name)


def variable_name(v: UOp) -> str:
    if v.op is Ops.DEFINE_VAR:
        return v.arg[0]
    return v.arg.name or f"var{v.arg.slot}"


@dataclass(frozen=True)
class Access:
    """Which buffer slots a kernel writes and reads."""

    outs: tuple[int, ...]
    ins: tuple[int, ...]


def buffer_access(ast: UOp) -> Access:
    outs = {strip_index(s.src[0]).arg.slot for s in kernel_stores(ast)}
    ins = {strip_index(u.src[0]).arg.slot for u in ast.toposort() if u.op is Ops.LOAD}
    return Access(tuple(sorted(outs)), tuple(sorted(ins)))


def strip_index(x: UOp) -> UOp:
    """The buffer PARAM under an INDEX (or the node itself)."""
    while x.op in (Ops.INDEX, Ops.CAST, Ops.BITCAST, Ops.AFTER):
        x = x.src[0]
    return x


def next_axis_id(ast: UOp) -> int:
    """An axis id no RANGE of `ast` uses yet."""
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


def add_gate(index: UOp, valid: UOp) -> UOp:
    """The INDEX `index` with `valid` added to its gate (a gated access reads 0 and writes nothing)."""
    return index.replace(src=(*index.src[:2], valid if len(index.src) == 2 else index.src[2] & valid))


def explicit_loads(ast: UOp) -> UOp:
    """A kernel written in tinygrad's element form (`ptr[i]` is an INDEX of the element dtype, read where it is used as
    a value, written with `.store`) in the pointer form the codegen takes: INDEX of the pointer dtype, an explicit LOAD
    for each read. A kernel already in pointer form comes back unchanged."""
    elems = [n for n in ast.toposort() if n.op is Ops.INDEX and not isinstance(n.dtype, PtrDType) and isinstance(n.src[0].dtype, PtrDType)]
    if not elems:
        return ast
    loaded = ast.substitute({n: n.replace(dtype=n.src[0].dtype).load(dtype=n.dtype) for n in elems})
    # a store's target is the address, not a read of it
    targets = {s: s.replace(src=(s.src[0].src[0], *s.src[1:])) for s in loaded.toposort() if s.op is Ops.STORE and s.src[0].op is Ops.LOAD}
    return loaded.substitute(targets) if targets else loaded


def ungroup_stores(ast: UOp) -> UOp:
    """`SINK(END(GROUP(store_a, store_b), r))` (tinygrad's grouped stores under one loop) as `SINK(END(store_a, r),
    END(store_b, r))`, the form `kernel_stores` reads: the stores share the range node, so they stay in one loop."""
    if ast.op is not Ops.SINK or not any(strip_end(s).op is Ops.GROUP for s in ast.src):
        return ast
    out: list[UOp] = []
    for s in ast.src:
        ranges: list[UOp] = []
        node = s
        while node.op is Ops.END:
            ranges = [*node.src[1:], *ranges]
            node = node.src[0]
        items = node.src if node.op is Ops.GROUP else (node,)
        out.extend(x.end(*ranges) for x in items)
    return ast.replace(src=tuple(out))


def kernel_form(ast: UOp) -> UOp:
    """A hand-written kernel in the form the codegen takes (see `ungroup_stores`, `explicit_loads`)."""
    return explicit_loads(ungroup_stores(ast))
