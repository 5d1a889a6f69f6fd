"""Spec checks: which nodes may appear in tensor graphs, kernel graphs and programs, and `type_verify`.

A spec is a PatternMatcher whose rules return True (the node is fine) or a string saying what is wrong; a node no
rule accepts fails too. Rules are tried in order, so specific rules come before general ones.
"""

from __future__ import annotations

from collections.abc import Iterable

from uopir.args import OPAQUE_CALL_BODIES, CallInfo, ParamArg, ProgramInfo
from uopir.dtypes import PtrDType, dtypes
from uopir.errors import SpecError
from uopir.ops import GroupOp, Ops
from uopir.rewrite import PatternMatcher, UPat
from uopir.uop import UOp


def _const_ok(x: UOp) -> bool | str:
    v, dt = x.arg, x.dtype.scalar()
    if dtypes.is_bool(dt):
        return isinstance(v, bool) or f"bool CONST holds {type(v).__name__} {v!r}"
    if dtypes.is_int(dt):
        if not isinstance(v, int) or isinstance(v, bool):
            return f"int CONST holds {type(v).__name__} {v!r}"
        return dt is dtypes.weakint or dt.min <= v <= dt.max or f"CONST {v} is outside the range of {dt}"
    if dtypes.is_float(dt):
        return isinstance(v, float) or f"float CONST holds {type(v).__name__} {v!r}"
    return f"CONST of dtype {x.dtype} is not a value"


def _alu_ok(x: UOp) -> bool | str:
    if x.op is Ops.WHERE:
        c, a, b = x.src
        if not dtypes.is_bool(c.dtype):
            return f"WHERE condition is {c.dtype}, not bool"
        return a.dtype is b.dtype is x.dtype or f"WHERE branches {a.dtype}/{b.dtype} differ from the result {x.dtype}"
    if x.op in (Ops.SHL, Ops.SHR):
        return (dtypes.is_int(x.src[0].dtype) and x.dtype is x.src[0].dtype) or "shifts need an int value and keep its dtype"
    if x.op in GroupOp.Comparison:
        if not dtypes.is_bool(x.dtype):
            return f"comparison produces {x.dtype}, not bool"
        return x.src[0].dtype is x.src[1].dtype or f"comparison of {x.src[0].dtype} with {x.src[1].dtype}: cast one side"
    bad = [s.dtype for s in x.src if s.dtype is not x.dtype]
    return not bad or f"{x.op.name} mixes {x.dtype} with {bad}: promote the operands first"


def _bind_ok(x: UOp) -> bool | str:
    var, val = x.src
    if var.op is not Ops.DEFINE_VAR:
        return "BIND must bind a DEFINE_VAR"
    return (var.vmin <= val.vmin and val.vmax <= var.vmax) or f"BIND value {val.arg} outside [{var.vmin}, {var.vmax}]"


def _call_ok(x: UOp) -> bool | str:
    if x.src[0].op not in OPAQUE_CALL_BODIES:
        return f"CALL body is {x.src[0].op!r}: only opaque bodies are called (use call_with_outputs)"
    return (isinstance(x.arg, CallInfo) and x.dtype is x.arg.dtype) or "CALL arg must be a CallInfo whose dtype is the CALL's"


def _param_ok(x: UOp) -> bool | str:
    return (isinstance(x.arg, ParamArg) and x.arg.dtype is x.dtype.scalar()) or f"{x.op.name} needs a ParamArg with its dtype"


def _bitcast_ok(x: UOp) -> bool | str:
    return x.dtype.itemsize == x.src[0].dtype.itemsize or x.src[0].shape_or_none is not None or "BITCAST must keep the item size"


spec_shared = PatternMatcher([
    (UPat(Ops.CONST, name="x"), _const_ok),
    (UPat(Ops.DEFINE_VAR, name="x"),
     lambda x: (isinstance(x.arg, tuple) and len(x.arg) == 3 and isinstance(x.arg[0], str)) or "DEFINE_VAR arg is (name, min, max)"),
    (UPat(Ops.BIND, name="x", src=(UPat(), UPat(Ops.CONST))), _bind_ok),
    (UPat(GroupOp.ALU, name="x"), _alu_ok),
    (UPat(Ops.CAST, name="x"), lambda x: x.dtype is not dtypes.void or "CAST to void"),
    (UPat(Ops.BITCAST, name="x"), _bitcast_ok),
    (UPat((Ops.SINK, Ops.GROUP), name="x"), lambda x: x.dtype is dtypes.void or f"{x.op.name} must be void"),
    (UPat(Ops.CALL, name="x", allow_any_len=True), _call_ok),
    (UPat(Ops.CUSTOM_FUNCTION, name="x"), lambda x: isinstance(x.arg, str) or "CUSTOM_FUNCTION arg is the function name"),
    (UPat(Ops.AFTER, name="x"), lambda x: (len(x.src) >= 2 and x.dtype is x.src[0].dtype) or "AFTER(value, *deps) keeps the value's dtype"),
    (UPat((Ops.PARAM, Ops.BUFFER), name="x"), _param_ok),
    (UPat((Ops.RANGE, Ops.SPECIAL), name="x"),
     lambda x: (dtypes.is_int(x.dtype) and x.src[0].dtype is x.dtype) or f"{x.op.name} needs an int end of its own dtype"),
    (UPat(Ops.END, name="x"), lambda x: all(r.op is Ops.RANGE for r in x.src[1:]) or "END closes RANGEs only"),
    (UPat(Ops.NOOP), lambda: True),
])

spec_tensor = spec_shared + PatternMatcher([
    (UPat(GroupOp.Movement, name="x"), lambda x: x.shape_or_none is not None or f"{x.op.name} has no shape"),
    (UPat(Ops.REDUCE, name="x"),
     lambda x: (isinstance(x.arg, tuple) and x.arg[0] in GroupOp.Reduce) or "tensor REDUCE arg is (op, axes)"),
    (UPat((Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH, Ops.UNSHARD, Ops.ALLREDUCE)), lambda: True),
    (UPat(Ops.COPY, name="x"), lambda x: x.arg is not None or "COPY needs a target device"),
    (UPat(Ops.MSELECT, name="x"),
     lambda x: (isinstance(x.src[0].device, tuple) and x.arg < len(x.src[0].device)) or "MSELECT picks a shard of a multi-device value"),
    (UPat(Ops.MSTACK, name="x"), lambda x: all(isinstance(s.device, str) for s in x.src) or "MSTACK stacks single-device values"),
    (UPat(Ops.STORE, name="x"), lambda x: len(x.src) >= 2 or "STORE(target, value)"),
])

spec_kernel = spec_shared + PatternMatcher([
    (UPat(Ops.INDEX, name="x"),
     lambda x: all(dtypes.is_int(s.dtype) or dtypes.is_bool(s.dtype) for s in x.src[1:]) or "INDEX offsets must be ints"),
    (UPat(Ops.LOAD, name="x"), lambda x: x.src[0].op in (Ops.INDEX, Ops.PARAM, Ops.AFTER) or "LOAD reads through an INDEX"),
    (UPat(Ops.STORE, name="x"),
     lambda x: (len(x.src) >= 2 and x.src[0].op in (Ops.INDEX, Ops.PARAM, Ops.AFTER)) or "STORE(INDEX, value) writes through an INDEX"),
    (UPat(Ops.REDUCE, name="x"),
     lambda x: (x.arg in GroupOp.Reduce and all(r.op is Ops.RANGE for r in x.src[1:])) or "kernel REDUCE is (value, *RANGEs) with an ALU op"),
    (UPat((Ops.IF, Ops.ENDIF, Ops.BARRIER, Ops.WMMA, Ops.STACK, Ops.CUSTOM, Ops.CUSTOMI, Ops.GETADDR)), lambda: True),
    (UPat(GroupOp.Movement, name="x"), lambda x: f"{x.op.name} is a tensor-graph op: it must be lowered before codegen"),
])

spec_program = spec_kernel + PatternMatcher([
    (UPat(Ops.PROGRAM, name="x"),
     lambda x: (isinstance(x.arg, ProgramInfo) and x.src and x.src[0].op is Ops.SINK) or "PROGRAM(SINK, ...) with a ProgramInfo arg"),
    (UPat(Ops.LINEAR), lambda: True),
    (UPat(Ops.SOURCE, name="x"), lambda x: isinstance(x.arg, str) or "SOURCE holds the program text"),
    (UPat(Ops.BINARY, name="x"), lambda x: isinstance(x.arg, bytes) or "BINARY holds the compiled bytes"),
])


def type_verify(uops: Iterable[UOp] | UOp, spec: PatternMatcher = spec_tensor) -> None:
    """Check every node against `spec`; raise SpecError naming the first bad node and why it is bad.

    Accepts a node (its whole graph is checked) or a list of nodes (e.g. a LINEAR's srcs).
    """
    nodes = list(uops.toposort()) if isinstance(uops, UOp) else list(uops)
    for i, u in enumerate(nodes):
        if isinstance(u.dtype, PtrDType) and u.op is Ops.CONST:
            raise SpecError(f"node {i} {u.op!r}: a CONST cannot have the pointer dtype {u.dtype!r}")
        ok = spec.rewrite(u)
        if ok is True:
            continue
        why = ok if isinstance(ok, str) else "no rule of this spec accepts it"
        raise SpecError(f"node {i} {u.op!r} {u.dtype!r} arg={u.arg!r}: {why}")
