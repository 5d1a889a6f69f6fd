"""Calls in tensor graphs: `UOp.call_with_outputs` values, `@function`, and their gradients.

A call's outputs are `AFTER(output_buffer, CALL(SINK(STORE(PARAM(pos), value), ...), *args))`. The scheduler
computes an output by inlining: the stored value with each PARAM replaced by the argument at its position (a
precompiled call's value is materialized in its own kernel). Gradients flow through the inlined value, or through
the call's `grad_fxn` when it has one: `grad_fxn(output_grads, call)` returns one gradient per argument (None allowed).
"""

from __future__ import annotations

from uopir import Ops, UOp

from .errors import SchedulerError


def is_call_output(u: UOp) -> bool:
    """An output of a value-producing call: AFTER(buffer, CALL(SINK of STOREs, ...))."""
    return u.op is Ops.AFTER and len(u.src) == 2 and u.src[1].op is Ops.CALL and u.src[1].src[0].op is Ops.SINK


def output_position(u: UOp) -> int:
    """The argument position of call output `u`."""
    call = u.src[1]
    for pos, arg in enumerate(call.src[1:]):
        if arg is u.src[0]:
            return pos
    raise SchedulerError("a call output's buffer is not among its call's arguments")


def _argument(param: UOp, arg: UOp) -> UOp:
    """The argument `arg` shaped like the PARAM it replaces."""
    if param.arg.vmin_vmax is not None or not param.src:
        return arg
    shape = param.shape
    return arg if arg.shape == shape else arg.reshape(shape)


def inlined_value(u: UOp) -> UOp:
    """The value of call output `u` as an expression over the call's arguments (see the module docstring)."""
    call = u.src[1]
    pos = output_position(u)
    stores = [s for s in call.src[0].src if s.op is Ops.STORE and s.src[0].op is Ops.PARAM and s.src[0].arg.slot == pos]
    if len(stores) != 1:
        raise SchedulerError(f"call {call.arg.name!r} has no single store for its output at position {pos}")
    value = stores[0].src[1]
    args = call.src[1:]
    params = {p: _argument(p, args[p.arg.slot]) for p in value.toposort() if p.op is Ops.PARAM}
    ret = value.substitute(params) if params else value
    shape = u.src[0].shape_or_none
    if shape is not None and ret.shape != shape:
        ret = ret.reshape(shape)
    return ret.contiguous() if call.arg.precompile else ret


def inline_calls(roots: tuple[UOp, ...]) -> tuple[UOp, ...]:
    """`roots` with every call output replaced by its inlined value (calls inside arguments included)."""
    outs = [n for n in UOp.sink(*roots).toposort() if is_call_output(n)]
    if not outs:
        return roots
    mapping: dict[UOp, UOp] = {}
    for o in outs:  # sources first: an output whose arguments hold other calls sees them inlined already
        mapping[o] = inlined_value(o).substitute(mapping) if mapping else inlined_value(o)
    return UOp.sink(*roots).substitute(mapping).src


def call_gradients(call: UOp, output_grads: dict[int, UOp], targets_below, compute_gradient) -> list[UOp | None]:
    """One gradient per argument of `call`, given the gradients of its outputs by position."""
    args = call.src[1:]
    if call.arg.grad_fxn is not None:
        grads = call.arg.grad_fxn(tuple(output_grads.get(i) for i in range(len(args))), call)
        grads = list(grads) + [None] * (len(args) - len(grads))
        return [None if g is None else g.uop if hasattr(g, "uop") else g for g in grads]
    ret: list[UOp | None] = [None] * len(args)
    wanted = {a for a in args if a in targets_below}
    for pos, g in output_grads.items():
        value = inlined_value(args[pos].after(call))
        for arg, ga in compute_gradient(value, g, wanted).items():
            for i, a in enumerate(args):
                if a is arg:
                    ret[i] = ga if ret[i] is None else ret[i] + ga
    return ret
