"""Text forms of UOp graphs: the readable printer, `pyrender` (Python source that rebuilds a graph), infix expressions.

Works on nodes through their fields only (no UOp import), so the UOp module can use it directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uopir.dtypes import dtypes
from uopir.ops import Ops

if TYPE_CHECKING:
    from uopir.uop import UOp


def _toposort(root: UOp) -> list[UOp]:
    return list(root.toposort())


def pretty_print(root: UOp, max_nodes: int = 400) -> str:
    """A readable multi-line form: one `UOp(...)` per node, nested by src; shared nodes print once as `x<n>`."""
    order = _toposort(root)
    if len(order) > max_nodes:
        return f"<UOp {root.op!r} {root.dtype!r}: a graph of {len(order)} nodes; print_uops() lists them>"
    users: dict[UOp, int] = {}
    for u in order:
        for s in u.src:
            users[s] = users.get(s, 0) + 1
    names = {u: f"x{i}" for i, u in enumerate(order) if users.get(u, 0) > 1}
    text: dict[UOp, str] = {}
    for u in order:
        head = f"UOp({u.op!r}, {u.dtype!r}, arg={u.arg!r}" + (f", tag={u.tag!r}" if u.tag is not None else "")
        if not u.src:
            text[u] = head + ", src=())"
            continue
        parts = []
        for s in u.src:
            body = text[s] if s not in names or s is u else names[s]
            parts.append("\n".join("  " + line for line in body.split("\n")))
        text[u] = head + ", src=(\n" + ",\n".join(parts) + "))"
    lines = [f"{names[u]} = {text[u]}" for u in order if u in names and u is not root]
    return "\n".join([*lines, text[root]])


def print_uops(uops: list[UOp]) -> str:
    """A linear listing: index, op, dtype, src indices, arg (for a LINEAR or a toposort)."""
    index = {u: i for i, u in enumerate(uops)}
    rows = []
    for i, u in enumerate(uops):
        srcs = [index.get(s, "--") for s in u.src]
        rows.append(f"{i:4d} {u.op.name:20s}: {u.dtype!r:32s} {str(srcs):32s} {u.arg!r}")
    return "\n".join(rows)


def _arg_source(arg: Any) -> str:
    # a CallInfo's grad_fxn has no source form: it is dropped (the repr names it)
    text = repr(arg)
    if type(arg).__name__ == "CallInfo" and arg.grad_fxn is not None:
        text = "CallInfo(None" + text[text.index(","):]
    return text


def pyrender_graph(root: UOp) -> str:
    """Python source that rebuilds the graph under `root` into a variable named `ast`.

    Evaluate with the names from `uopir` in scope: `ns = vars(uopir).copy(); exec(src, ns); ns["ast"]`.
    """
    order = _toposort(root)
    index = {u: i for i, u in enumerate(order)}
    lines = []
    for i, u in enumerate(order):
        src = "(" + "".join(f"c{index[s]}, " for s in u.src) + ")" if u.src else "()"
        tag = f", tag={u.tag!r}" if u.tag is not None else ""
        lines.append(f"c{i} = UOp({u.op!r}, {u.dtype!r}, src={src}, arg={_arg_source(u.arg)}{tag})")
    lines.append(f"ast = c{index[root]}")
    return "\n".join(lines)


_INFIX = {Ops.ADD: "+", Ops.MUL: "*", Ops.FLOORDIV: "//", Ops.FLOORMOD: "%", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "==",
          Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>", Ops.FDIV: "/", Ops.SUB: "-"}
_FLAT = frozenset({Ops.ADD, Ops.MUL, Ops.AND, Ops.OR, Ops.XOR})
_C_NAMES = {dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long", dtypes.bool: "bool", dtypes.float32: "float"}


def render_expr(root: UOp) -> str:
    """Infix text of an expression; a chain of one associative op prints flat, as `(a+b+c)`."""
    out: dict[UOp, str] = {}
    for u in _toposort(root):
        op = u.op
        if op is Ops.CONST:
            out[u] = str(u.arg).lower() if isinstance(u.arg, bool) else str(u.arg)
        elif op is Ops.DEFINE_VAR:
            out[u] = u.arg[0]
        elif op is Ops.BIND:
            out[u] = out[u.src[0]]
        elif op is Ops.RANGE:
            out[u] = f"r{u.arg[0]}"
        elif op is Ops.SPECIAL:
            out[u] = str(u.arg)
        elif op is Ops.PARAM:
            out[u] = u.arg.name or f"p{u.arg.slot}"
        elif op is Ops.CAST:
            out[u] = f"({_C_NAMES.get(u.dtype, u.dtype.name)})({out[u.src[0]]})"
        elif op in _INFIX and len(u.src) == 2:
            # a src with the same associative op prints without its own parens
            parts = [out[s][1:-1] if op in _FLAT and s.op is op and len(s.src) == 2 else out[s] for s in u.src]
            out[u] = f"({_INFIX[op].join(parts)})"
        elif op is Ops.MAX:
            out[u] = f"max({out[u.src[0]]}, {out[u.src[1]]})"
        elif op is Ops.WHERE:
            out[u] = f"({out[u.src[0]]}?{out[u.src[1]]}:{out[u.src[2]]})"
        else:
            out[u] = f"{op.name.lower()}({', '.join(out[s] for s in u.src)})"
    return out[root]
