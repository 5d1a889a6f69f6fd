"""Calls: `body.call(...)` for opaque bodies, `call_with_outputs` for value-producing bodies, program signatures."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uopir.args import OPAQUE_CALL_BODIES, CallInfo, ParamArg
from uopir.dtypes import DType, dtypes
from uopir.errors import CallError, GraphError
from uopir.ops import AxisType, Ops
from uopir.rewrite import PatternMatcher, UPat, graph_rewrite
from uopir.shapes import dim_value, prod, sint

if TYPE_CHECKING:
    from uopir.uop import UOp

# BUFFER ids: every minted or new buffer gets a fresh one, so buffers never alias by accident
unique_slots = itertools.count()


class CallMixin:
    """CALL builders and queries shared by every UOp (they build nodes through the node's own class)."""

    __slots__ = ()

    # provided by UOp
    op: Any
    src: Any
    arg: Any
    sink: Any
    ranges: Any

    def call(self, *srcs: UOp, ret_dtype: DType | None = None, grad_fxn: Callable | None = None, name: str | None = None,
             precompile: bool = False, precompile_backward: bool = False, aux: Any = None) -> UOp:
        """A CALL of this opaque body (SINK, PROGRAM, LINEAR, COPY, CUSTOM_FUNCTION) with ready arguments `srcs`.

        Value-producing bodies go through `UOp.call_with_outputs`, which mints the output buffers.
        """
        if self.op not in OPAQUE_CALL_BODIES:
            raise CallError(f"cannot call a {self.op!r} body: use UOp.call_with_outputs(values, ...) for value-producing bodies")
        # calls launch per device, so only a DEVICE range may stay open across the call boundary
        leaking = [r for r in self.ranges if r.arg[1] is not AxisType.DEVICE]
        if leaking:
            raise CallError(f"ranges {[r.arg for r in leaking]} leak out of the call body: END or REDUCE them inside it")
        info = CallInfo(grad_fxn, name, precompile, precompile_backward, aux, dtypes.void if ret_dtype is None else ret_dtype)
        return type(self)(Ops.CALL, info.dtype, (self, *srcs), info)

    @classmethod
    def call_with_outputs(cls, values: tuple[UOp, ...], *srcs: UOp, grad_fxn: Callable | None = None, name: str | None = None,
                          precompile: bool = False, precompile_backward: bool = False, aux: Any = None,
                          output_pos: tuple[int, ...] | None = None) -> tuple[UOp, ...]:
        """Call a body computing `values`; returns an AFTER on each output buffer.

        The body stores each value into an output PARAM. The outputs are fresh unbound BUFFERs placed among the call's
        arguments at `output_pos` (default: after the inputs; strictly ascending, distinct, in range); the inputs fill
        the other positions in order. Symbolic output shapes are resolved against the final argument slots.
        """
        nargs = len(srcs) + len(values)
        pos = tuple(range(len(srcs), nargs)) if output_pos is None else tuple(output_pos)
        if len(pos) != len(values) or len(set(pos)) != len(pos):
            raise CallError(f"output_pos {output_pos} must give one distinct position per output ({len(values)} outputs)")
        if any(a >= b for a, b in zip(pos, pos[1:])):
            raise CallError(f"output_pos {output_pos} must be strictly ascending: outputs pair with values in order")
        if any(not 0 <= p < nargs for p in pos):
            raise CallError(f"output_pos {output_pos} must be within the {nargs} call arguments")
        default_dev = next((x.device for x in itertools.chain(values, srcs) if x.device is not None), None)
        inputs = iter(srcs)
        slots: list[UOp | None] = [None if i in pos else next(inputs) for i in range(nargs)]
        outs = tuple(_mint_output(cls, v, slots, default_dev) for v in values)
        body = cls.sink(*[v.param_like(p).store(v) for v, p in zip(values, pos)])
        for p, o in zip(pos, outs):
            slots[p] = o
        call = body.call(*[s for s in slots if s is not None], grad_fxn=grad_fxn, name=name, precompile=precompile,
                         precompile_backward=precompile_backward, aux=aux)
        return tuple(o.after(call) for o in outs)

    def call_with_output(self, *srcs: UOp, **kwargs: Any) -> UOp:
        """`UOp.call_with_outputs((self,), *srcs, **kwargs)[0]`: the single-output form."""
        return type(self).call_with_outputs((self,), *srcs, **kwargs)[0]

    @property
    def has_unbound_outputs(self) -> bool:
        """True for a CALL that still has unresolved outputs (unbound BUFFERs among its arguments)."""
        return self.op is Ops.CALL and any(x.unsharded_base.is_unbound for x in self.src[1:])

    @property
    def unbound_outputs(self) -> tuple[UOp, ...]:
        """An AFTER on each unbound output BUFFER of this CALL, usable like a normal buffer."""
        return tuple(x.after(self) for x in self.src[1:] if x.unsharded_base.is_unbound)

    @classmethod
    def custom_function(cls, name: str, *src: UOp) -> UOp:
        """A reference to an external function (the body of an external call)."""
        return cls(Ops.CUSTOM_FUNCTION, dtypes.void, src, name)

    def program_signature(self) -> tuple[tuple[str | None, int, DType, tuple[sint, ...] | None], ...]:
        """(name, slot, dtype, shape) of a PROGRAM's arguments as a binary binds them.

        Buffer slots are compact, in the program's globals order; variables follow. They are never raw call-argument
        positions, which skip buffers when a kernel uses a sparse subset of its call's buffers.
        """
        if self.op is not Ops.PROGRAM or len(self.src) < 2:
            raise GraphError(f"program_signature needs a PROGRAM(sink, linear, ...), got {self.op!r}")
        info = self.arg
        compact = {slot: i for i, slot in enumerate(info.globals)}
        bufs = [u for u in self.src[1].src if u.op is Ops.PARAM and u.arg.vmin_vmax is None]
        missing = [u.arg.slot for u in bufs if u.arg.slot not in compact]
        if missing:
            raise GraphError(f"PROGRAM uses buffer slots {missing} that are not in its globals {info.globals}")
        sig = [(u.arg.name, compact[u.arg.slot], u.dtype, u.shape_or_none) for u in bufs]
        sig += [(v.expr, len(info.globals) + j, v.dtype, v.shape_or_none) for j, v in enumerate(info.vars)]
        return tuple(sig)


def _mint_output(cls: type[UOp], value: UOp, slots: list[UOp | None], default_dev: Any) -> UOp:
    """A fresh unbound BUFFER for one output of call_with_outputs, viewed with the value's resolved shape."""
    shape = value.shape_or_none
    if shape is not None:
        shape = tuple(d if isinstance(d, int) else graph_rewrite(d, _pm_resolve_params, ctx=slots, walk=True) for d in shape)
        shape = tuple(d if isinstance(d, int) else dim_value(d) for d in shape)
    dev = value.device if value.device is not None else default_dev
    axis = value.axis if isinstance(value.device, tuple) else None
    # multi-device values get per-shard sized storage: the sharding lives in the graph (UNSHARD), not the arg
    if shape and isinstance(dev, tuple) and axis is not None:
        shape = tuple(d // len(dev) if i == axis else d for i, d in enumerate(shape))
    size = None if not shape else int(prod(tuple(d if isinstance(d, int) else int(d.vmax) for d in shape)))
    buf = cls(Ops.BUFFER, value.dtype, (), ParamArg(next(unique_slots), value.dtype, size, device=dev, unbound=True))
    return buf if not shape else buf.view_as(shape, axis)


def _resolve_param(ctx: list[UOp | None], p: UOp) -> UOp | None:
    slot = p.arg.slot
    return ctx[slot] if 0 <= slot < len(ctx) and ctx[slot] is not None else None


_pm_resolve_params = PatternMatcher([(UPat(Ops.PARAM, name="p"), _resolve_param)])
