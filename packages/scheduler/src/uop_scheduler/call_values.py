"""Calls in tensor graphs: `UOp.call_with_outputs` values, `@function`, and their gradients.

A call's outputs are `AFTER(output_buffer, CALL(SINK(STORE(PARAM(pos), value), ...), *args))`. The scheduler
computes an output by inlining: the stored value with each PARAM replaced by the argument at its position (a
precompiled call's value is materialized in its own kernel). Gradients flow through the inlined value, or through
the call's `grad_fxn` when it has one: `grad_fxn(*output_grads, call)`, the gradient of each output in order, returns
one gradient per argument (None allowed).
"""

from __future__ import annotations

import weakref
from collections.abc import Container

from uopir import Ops, UOp

from .errors import SchedulerError


def is_value_call(call: UOp) -> bool:
    """A call made by `call_with_outputs`: its body is SINK(STORE(PARAM, value), ...) over tensor-level values."""
    body = call.src[0]
    return body.op is Ops.SINK and all(s.op is Ops.STORE and s.src[0].op is Ops.PARAM for s in body.src)


def is_call_output(u: UOp) -> bool:
    """An output of a value-producing call: AFTER(buffer, CALL(SINK(STORE(PARAM, value), ...), ...))."""
    return u.op is Ops.AFTER and len(u.src) == 2 and u.src[1].op is Ops.CALL and is_value_call(u.src[1])


IN_PLACE = "in_place"


def in_place_arity(call: UOp) -> int | None:
    """For a hand-written kernel run in place (`Tensor.custom_kernel`), the number of buffers it is launched with: its
    CALL is (kernel, *launch buffers, *the tensors' values before it), a launch buffer being a new version of a tensor
    the kernel writes or the buffer of one it only reads; None for other calls."""
    aux = call.arg.aux if call.op is Ops.CALL else None
    return aux[1] if isinstance(aux, tuple) and len(aux) in (2, 3) and aux[0] == IN_PLACE else None


def in_place_written(call: UOp) -> tuple[int, ...]:
    """The positions among a hand-written kernel's launch buffers that it writes (all, unless the CALL says)."""
    aux = call.arg.aux
    return aux[2] if len(aux) == 3 else tuple(range(aux[1]))


def in_place_overwritten(call: UOp) -> list[UOp]:
    """The values a hand-written kernel's CALL overwrites: the previous version of each tensor it writes."""
    n = in_place_arity(call)
    assert n is not None
    befores = call.src[1 + n:]
    return [befores[i] for i in in_place_written(call)]


def computed_arguments(call: UOp) -> list[UOp]:
    """The read-only arguments of a hand-written kernel's CALL that are values computed in the same schedule (not a
    buffer or a buffer version in its elements' order, see `version_under`): each gets a buffer of its own, computed
    first, which the kernel is launched with."""
    n = in_place_arity(call)
    assert n is not None
    written = set(in_place_written(call))
    return [a for i, a in enumerate(call.src[1 + n:]) if i not in written and version_under(a) is None]


def version_under(u: UOp) -> UOp | None:
    """The buffer (or buffer version: a PARAM slot, an AFTER) whose elements `u` is in their order, seen through
    reshapes and DETACHes only; None for anything else (a computed value, or a view that reorders or drops elements)."""
    while u.op in (Ops.RESHAPE, Ops.DETACH):
        u = u.src[0]
    return u if u.op in (Ops.BUFFER, Ops.PARAM, Ops.AFTER) else None


def kernel_output_before(u: UOp) -> UOp:
    """The value the tensor a hand-written kernel wrote (output `u`, see `is_kernel_output`) had before the kernel."""
    call = u.src[1]
    n = in_place_arity(call)
    assert n is not None
    return call.src[1 + n + output_position(u)]


def is_kernel_output(u: UOp) -> bool:
    """A buffer version a hand-written kernel wrote in place: AFTER(new version, CALL(kernel, ...))."""
    return u.op is Ops.AFTER and len(u.src) == 2 and u.src[1].op is Ops.CALL and in_place_arity(u.src[1]) is not None


def output_position(u: UOp) -> int:
    """The argument position of call output (or kernel output) `u`."""
    call = u.src[1]
    if len(call.src) > _SCANNED_ARGUMENTS:
        # a call of many arguments (one Adam kernel for every parameter: 3 outputs and ~8 arguments each) is asked for
        # each of its outputs: a scan each was quadratic in the parameters (a fifth of a 24-layer step's co_readers)
        if (positions := _positions.get(call)) is None:
            positions = _positions[call] = {}
            for pos, arg in enumerate(call.src[1:]):
                positions.setdefault(arg, pos)
        if (found := positions.get(u.src[0])) is not None:
            return found
    else:
        for pos, arg in enumerate(call.src[1:]):
            if arg is u.src[0]:
                return pos
    raise SchedulerError("a call output's buffer is not among its call's arguments")


#: calls of up to this many sources are scanned; larger ones keep a table of their arguments' positions
_SCANNED_ARGUMENTS = 16
_positions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


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
    # this call's parameters only: a call made inside the body has parameters of its own (substitute does not enter
    # call bodies either)
    params = {p: _argument(p, args[p.arg.slot]) for p in value.toposort(enter_calls=False) if p.op is Ops.PARAM}
    ret = value.substitute(params) if params else value
    shape = u.src[0].shape_or_none
    if shape is not None and ret.shape != shape:
        ret = ret.reshape(shape)
    return ret.contiguous() if call.arg.precompile else ret


def inline_calls(roots: tuple[UOp, ...], stop: Container[UOp] = ()) -> tuple[UOp, ...]:
    """`roots` with every call output replaced by its inlined value, level by level: a call made inside another call's
    body is reached once the outer call is inlined. Nodes in `stop` are left as they are, with what is under them (a
    schedule's inputs: their values exist already)."""
    while outs := [n for n in UOp.sink(*roots).toposort(gate=lambda n: n.op is not Ops.CALL and n not in stop) if is_call_output(n)]:
        mapping: dict[UOp, UOp] = {}
        for o in outs:  # sources first: an output whose arguments hold other calls sees them inlined already
            mapping[o] = inlined_value(o).substitute(mapping) if mapping else inlined_value(o)
        roots = UOp.sink(*roots).substitute(mapping).src
    return roots


def written_slots(body: UOp) -> list[int]:
    """The PARAM slots a hand-written kernel body stores into, in order; for a PROGRAM the ones its ProgramInfo names
    as written (`outs`)."""
    if body.op is Ops.PROGRAM:
        return sorted(set(getattr(body.arg, "outs", ())))
    slots = set()
    for st in (n for n in body.toposort() if n.op is Ops.STORE):
        target = st.src[0]
        while target.op is Ops.INDEX:
            target = target.src[0]
        if target.op is Ops.PARAM:
            slots.add(target.arg.slot)
    return sorted(slots)


def _as_uops(grads) -> list[UOp | None]:
    """A grad_fxn's gradients as UOps (it may return Tensors)."""
    return [None if g is None else g.uop if hasattr(g, "uop") else g for g in grads]


def _zeros_like(value: UOp) -> UOp:
    """Zeros of `value`'s dtype and shape."""
    zero = value.const_like(0)
    return zero.reshape((1,) * len(value.shape)).expand(value.shape) if value.shape else zero


def call_gradients(call: UOp, output_grads: dict[int, UOp], leads, compute_gradient) -> list[UOp | None]:
    """One gradient per argument of `call`, given the gradients of its outputs by argument position.

    Without a `grad_fxn`, the gradients are one call named `<name>_backward` (precompiled when the call says
    `precompile_backward`) whose body differentiates the forward body; a precompiled call's backward reads the
    forward outputs instead of computing them again."""
    args = call.src[1:]
    info = call.arg
    if (n := in_place_arity(call)) is not None:
        # a hand-written kernel: grad_fxn gives one gradient per tensor, for the tensors' values before the kernel (the
        # CALL's last n sources)
        if info.grad_fxn is None:
            raise SchedulerError("no gradient through a custom kernel without a grad_fxn")
        # as tinygrad calls it: the gradient of each tensor the kernel writes (zeros for one nothing used), then the call
        # as tinygrad builds it, its sources the kernel body and the tensors (their values before the kernel)
        written = written_slots(call.src[0]) or [0]
        values = args[n:]  # each tensor's value before the kernel, in its shape
        per_output = [output_grads[i].reshape(values[i].shape) if i in output_grads else _zeros_like(values[i]) for i in written]
        seen = call.replace(src=(call.src[0], *call.src[1 + n:]))
        grads = _as_uops(info.grad_fxn(*per_output, seen))
        return [None] * n + grads + [None] * (n - len(grads))
    stores = {s.src[0].arg.slot: s.src[1] for s in call.src[0].src if s.op is Ops.STORE and s.src[0].op is Ops.PARAM}
    if info.grad_fxn is not None:
        # as tinygrad calls it: the gradient of each output in order (zeros for an output nothing used), then the call
        per_output = [output_grads[pos] if pos in output_grads else _zeros_like(stores[pos]) for pos in sorted(stores)]
        returned = _as_uops(info.grad_fxn(*per_output, call))
        if len(returned) == len(args):  # one per argument, outputs included (None for them)
            return returned
        # one per input, in order (the outputs are arguments of the call here, not of the function)
        grads: list[UOp | None] = [None] * len(args)
        for pos, g in zip([i for i in range(len(args)) if i not in stores], returned):
            grads[pos] = g
        return grads
    params = {p.arg.slot: p for v in stores.values() for p in v.toposort(enter_calls=False) if p.op is Ops.PARAM}
    wanted = {params[i] for i, a in enumerate(args) if i in params and i not in stores and a in leads}
    extra: list[UOp] = []  # backward arguments after the forward ones: output gradients, then forward outputs

    def param_for(value: UOp) -> UOp:
        extra.append(value)
        return UOp.param(len(args) + len(extra) - 1, value.dtype, value.shape, value.device)

    total: dict[UOp, UOp] = {}
    for pos, g in sorted(output_grads.items()):
        value = stores[pos]
        for p, gp in compute_gradient(value, param_for(g), wanted).items():
            total[p] = gp if p not in total else total[p] + gp
    if not total:
        return [None] * len(args)
    order = sorted(total, key=lambda p: p.arg.slot)
    values = tuple(total[p] for p in order)
    if info.precompile:  # read the forward outputs rather than recomputing them
        forward = {stores[pos]: param_for(args[pos].after(call)) for pos in sorted(stores)}
        values = UOp.sink(*values).substitute(forward).src
    outs = UOp.call_with_outputs(values, *args, *extra, name=f"{info.name or 'call'}_backward", precompile=info.precompile_backward)
    ret: list[UOp | None] = [None] * len(args)
    for p, o in zip(order, outs):
        ret[p.arg.slot] = o
    return ret
