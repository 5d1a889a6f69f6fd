"""Running a plan: mint the buffers it creates, emit a LINEAR of CALLs in plan order, run it with hcq_runtime.

`realized_buffers` remembers, per realized tensor node, the BUFFER holding its value, so later graphs that share
the node read the buffer instead of computing it again. It is weak on the node: when no graph refers to the node any
more, the entry (and the buffer with it) goes away.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from hcq_runtime import run_linear
from uopir import Ops, UOp, dtypes

from .schedule import CopyStep, KernelStep, Plan, cached_plan, walk_graph

realized_buffers: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
_captures: list[list[UOp]] = []


@contextmanager
def capture_linears() -> Iterator[list[UOp]]:
    """Record every LINEAR run inside the block (TinyJit's capture). Graph nodes realized before the block are
    computed again inside it, so the recording holds every kernel the block's tensors need."""
    saved = dict(realized_buffers)
    realized_buffers.clear()
    linears: list[UOp] = []
    _captures.append(linears)
    try:
        yield linears
    finally:
        _captures.pop()
        realized_buffers.clear()
        realized_buffers.update(saved)


def _input_buffer(node: UOp) -> UOp:
    return node if node.op is Ops.BUFFER else realized_buffers[node]


def linear_for(plan: Plan, inputs: list[UOp]) -> tuple[UOp, list[UOp]]:
    """The LINEAR of CALLs that runs `plan` over the BUFFER UOps `inputs`, and the buffer of every plan number."""
    buffers = [_input_buffer(n) for n in inputs]
    buffers += [UOp.new_buffer(nb.device, nb.size, nb.dtype) for nb in plan.new_buffers]
    calls = []
    for step in plan.steps:
        if isinstance(step, KernelStep):
            calls.append(UOp(Ops.CALL, dtypes.void, (step.ast, *(buffers[a] for a in step.args))))
        elif isinstance(step, CopyStep):
            dest = buffers[step.dest]
            body = UOp(Ops.COPY, dest.dtype, (), dest.arg.device)
            calls.append(UOp(Ops.CALL, dtypes.void, (body, dest, buffers[step.src])))
    return UOp(Ops.LINEAR, dtypes.void, tuple(calls)), buffers


def realize_uops(targets: tuple[UOp, ...], default_device: str) -> list[UOp]:
    """Compute every target node; returns the BUFFER UOp holding each (targets already in a buffer are not rerun)."""
    walk = walk_graph(targets, realized_buffers, default_device)
    plan, _ = cached_plan(walk, targets, default_device)
    linear, buffers = linear_for(plan, walk.inputs)
    if linear.src:
        run_linear(linear)
        if _captures:
            _captures[-1].append(linear)
    outs = [buffers[n] for n in plan.outputs]
    for t, buf in zip(targets, outs):
        if t.op is not Ops.BUFFER:
            realized_buffers[t] = buf
    return outs
