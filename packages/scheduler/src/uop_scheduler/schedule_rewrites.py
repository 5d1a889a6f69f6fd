"""The scheduler as graph rewrites (beside the plan scheduler of `schedule.py`, selected by `SCHEDULER=rewrite`).

A tensor graph becomes a LINEAR of CALLs over PARAM slots in named passes over UOps:

1. `parameterise`: the graph's inputs (BUFFERs, values already realized) become PARAM slots 0..n-1 (`param_like`). The
   parameterised sink is the schedule cache's key: UOps are hash-consed, so graphs of one structure over other buffers
   are the same UOp.
2. `mark_buffers` (what needs a buffer, `schedule.buffered_nodes`): each node that gets a buffer of its own is tagged.
3. `kernelize` (ranges and kernel bodies; CALLs over PARAM slots), a `graph_rewrite`, sources first: a tagged node
   becomes `AFTER(PARAM k, CALL(kernel, PARAM k, *reads))`, the value lowered over loop ranges (rangeify) with the
   slots it reads (inputs, and the AFTERs of values computed before) as the kernel's arguments. A COPY of a buffer to
   another device becomes a COPY call.
4. `linearize` (ordering): the CALLs in dependency order (each after the CALLs behind the AFTERs it reads; for a graph
   without writes, the order kernelize created their slots in) as a LINEAR whose CALLs name their buffers by slot.

Writes into existing buffers (STOREs, in-place kernels) still go to the plan scheduler: ordering by buffer versions
is the next pass to move. Running is shared: `as_plan` turns the LINEAR into the plan the runner takes (operand packs
and scratch sharing included), until the plan dataclasses go.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from uopir import Ops, PatternMatcher, UOp, UPat, dtypes, graph_rewrite

from .schedule import (
    OWN_COPY,
    PLAN_CACHE_SIZE,
    CopyStep,
    KernelStep,
    NewBuffer,
    Plan,
    _device_of,
    _lowered_kernel,
    _size,
    _with_packs,
    buffered_nodes,
    rewrite_cache,
    share_buffers,
)

#: the environment variable (also a `Context` knob) choosing the scheduler: "plan" (the default) or "rewrite"
SCHEDULER_ENV = "SCHEDULER"
SCHEDULERS = ("plan", "rewrite")


def chosen_scheduler(scheduler: str | None = None) -> str:
    """The scheduler a realize uses: `scheduler` when given, else `$SCHEDULER`, else "plan"."""
    name = scheduler if scheduler is not None else os.environ.get(SCHEDULER_ENV) or "plan"
    if name not in SCHEDULERS:
        from .errors import ArgumentError

        raise ArgumentError(f"unknown scheduler {name!r}: use one of {', '.join(SCHEDULERS)}")
    return name


_BUFFERED = "needs a buffer"  # the tag mark_buffers puts on a node that gets a buffer of its own


@dataclass(frozen=True)
class Parameterised:
    sink: UOp  # SINK of the targets, inputs replaced by PARAM slots
    n_inputs: int


def parameterise(targets: tuple[UOp, ...], inputs: list[UOp], devices: list[str]) -> Parameterised:
    """The targets' graph with input `i` replaced by PARAM slot `i` on `devices[i]` (where its buffer is: a realized
    graph of constants has no device of its own). An own copy's counter (writes.own_copy) is left out of its arg, so one
    schedule serves them all."""
    subs = {leaf: UOp.param(i, leaf.dtype, leaf.shape_or_none, device) for i, (leaf, device) in enumerate(zip(inputs, devices))}
    sink = UOp.sink(*targets).substitute(subs)
    own = [n for n in _nodes(sink) if n.op is Ops.CONTIGUOUS and type(n.arg) is str and n.arg.startswith(OWN_COPY)]
    if own:
        sink = sink.substitute({n: n.replace(arg=OWN_COPY) for n in own})
    return Parameterised(sink, len(inputs))


def _nodes(sink: UOp) -> list[UOp]:
    """The nodes under `sink` in topological order, stopping at PARAM slots and hand-written kernel bodies (SINKs)."""
    return [n for n in sink.toposort(gate=lambda n: n.op is not Ops.PARAM and (n is sink or n.op is not Ops.SINK)) if n is not sink]


def mark_buffers(graph: Parameterised) -> UOp:
    """The sink with every node that needs a buffer tagged (`schedule.buffered_nodes` decides which)."""
    sink = graph.sink
    nodes = _nodes(sink)
    leaves = {n for n in nodes if n.op is Ops.PARAM}
    marked = buffered_nodes(nodes, sink.src, leaves)
    return sink.substitute({n: n.rtag(_BUFFERED) for n in marked}) if marked else sink


class _Kernelize:
    """kernelize's context: the next free slot (a new buffer's slot is a PARAM with its dtype, shape and device)."""

    def __init__(self, n_inputs: int, default_device: str):
        self.next_slot = n_inputs
        self.default_device = default_device

    def new_slot(self, node: UOp) -> UOp:
        slot = UOp.param(self.next_slot, node.dtype, node.shape, _device_of(node, self.default_device))
        self.next_slot += 1
        return slot


def _reads(body: UOp) -> list[UOp]:
    """The slots a kernel computing `body` reads: input PARAMs and the AFTERs of values computed before, in order."""
    return [n for n in body.toposort(gate=lambda n: n.op not in (Ops.PARAM, Ops.AFTER)) if n.op in (Ops.PARAM, Ops.AFTER)]


def _slot(n: UOp) -> UOp:
    """The PARAM slot holding a read: a PARAM itself, an AFTER its buffer."""
    return n.src[0] if n.op is Ops.AFTER else n


def _buffered(ctx: _Kernelize, x: UOp) -> UOp | None:
    """kernelize's rule: a tagged node (its sources already kernelized) becomes AFTER(new slot, CALL) or, for an empty
    buffer, the slot alone."""
    if x.tag != _BUFFERED:
        return None
    node = x.rtag(None)
    out = ctx.new_slot(node)
    if _size(node.shape) == 0:
        return out  # nothing to compute: an empty buffer
    if node.op is Ops.COPY:
        src = node.src[0]
        while src.op is Ops.RESHAPE:  # a full-size reshape of a buffer is that buffer
            src = src.src[0]
        if src.op in (Ops.PARAM, Ops.AFTER):
            body = UOp(Ops.COPY, out.dtype, (), _device_of(node, ctx.default_device))
            return out.after(UOp(Ops.CALL, dtypes.void, (body, out, src)))
        value = node.src[0]  # constants alone: computed on the copy's device
    else:
        value = node.src[0] if node.op is Ops.CONTIGUOUS else node
    reads = _reads(value)
    number = {n: i + 1 for i, n in enumerate(reads)}
    step = _lowered_kernel(node, value, number, 0)
    args = [out, *(reads[a - 1] for a in step.args[1:]), *step.variables]
    return out.after(UOp(Ops.CALL, dtypes.void, (step.ast, *args)))


kernelize_rules = PatternMatcher([(UPat(None, name="x"), _buffered)])


def kernelize(marked: UOp, n_inputs: int, default_device: str) -> tuple[UOp, int]:
    """Every tagged node as the AFTER of its kernel's CALL (see the module docstring); returns the sink and the number
    of slots."""
    ctx = _Kernelize(n_inputs, default_device)
    return graph_rewrite(marked, kernelize_rules, ctx=ctx, name="kernelize"), ctx.next_slot


def linearize(sink: UOp) -> tuple[UOp, tuple[UOp, ...]]:
    """The CALLs under `sink` in dependency order (the graph's own order otherwise) as a LINEAR whose CALLs take PARAM
    slots; and the slot holding each target."""
    # kernelize numbers the slots as it goes, sources first in the graph's own order: a call's output slot is after
    # those of every call it reads, so slot order is a dependency order, and the graph's (a model computes each layer's
    # values where the layer uses them, so its scratch buffers are free for the next layer's)
    calls = sorted((n for n in sink.toposort(enter_calls=False) if n.op is Ops.CALL), key=lambda c: c.src[1].arg.slot)
    linear = UOp(Ops.LINEAR, dtypes.void, tuple(c.replace(src=(c.src[0], *map(_slot, c.src[1:]))) for c in calls))
    return linear, tuple(_slot(t) for t in sink.src)


@dataclass(frozen=True)
class RewriteSchedule:
    """What the passes made of one graph structure: the LINEAR over slots, the slot of each target, the slot count."""

    linear: UOp
    outputs: tuple[UOp, ...]
    n_inputs: int
    n_slots: int


def schedule_rewrites(graph: Parameterised, default_device: str) -> RewriteSchedule:
    """The passes, in order, over a parameterised graph."""
    sink, n_slots = kernelize(mark_buffers(graph), graph.n_inputs, default_device)
    linear, outputs = linearize(sink)
    return RewriteSchedule(linear, outputs, graph.n_inputs, n_slots)


def as_plan(sched: RewriteSchedule, default_device: str) -> Plan:
    """The plan the runner takes for a rewrite schedule: slot k is buffer k; kernels whose device packs operands get
    their packing kernels; scratch buffers are shared."""
    specs: dict[int, NewBuffer] = {}
    steps: list[KernelStep | CopyStep] = []
    new_buffers: list[NewBuffer] = []

    def spec(p: UOp) -> None:
        k = p.arg.slot
        if k >= sched.n_inputs and k not in specs:
            specs[k] = NewBuffer(p.arg.device or default_device, _size(p.shape), p.dtype)

    for call in sched.linear.src:
        for a in call.src[1:]:
            if a.op is Ops.PARAM:
                spec(a)
    for p in sched.outputs:
        if p.op is Ops.PARAM:
            spec(p)
    # slots are numbered in kernelize's order; a slot no call touches (an empty buffer) still gets its buffer
    renumber = {k: sched.n_inputs + i for i, k in enumerate(sorted(specs))}
    new_buffers = [specs[k] for k in sorted(specs)]

    def num(p: UOp) -> int:
        return p.arg.slot if p.arg.slot < sched.n_inputs else renumber[p.arg.slot]

    for call in sched.linear.src:
        body, args = call.src[0], call.src[1:]
        if body.op is Ops.COPY:
            steps.append(CopyStep(num(args[0]), num(args[1])))
            continue
        bufs = tuple(num(a) for a in args if a.op is Ops.PARAM)
        variables = tuple(a for a in args if a.op is Ops.DEFINE_VAR)
        device = args[0].arg.device or default_device
        steps.extend(_with_packs(KernelStep(body, bufs, variables), device, new_buffers, sched.n_inputs))
    return share_buffers(Plan(sched.n_inputs, tuple(new_buffers), tuple(steps), tuple(num(p) for p in sched.outputs)))


def rewrite_plan(targets: tuple[UOp, ...], inputs: list[UOp], devices: list[str], default_device: str, store: bool | dict = True) -> Plan:
    """The plan of `targets` over `inputs` (held on `devices`) made by the rewrite passes, cached by the parameterised
    graph (`store` as in `schedule.cached_plan`; `schedule.clear_schedule_cache` clears it)."""
    graph = parameterise(targets, inputs, devices)
    key = (graph.sink, default_device)
    if (plan := rewrite_cache.get(key)) is not None:
        return plan
    local = store if isinstance(store, dict) else None
    if local is not None and (plan := local.get(key)) is not None:
        return plan
    plan = as_plan(schedule_rewrites(graph, default_device), default_device)
    if local is not None:
        local[key] = plan
    elif store:
        if len(rewrite_cache) >= PLAN_CACHE_SIZE:
            del rewrite_cache[next(iter(rewrite_cache))]  # the oldest entry
        rewrite_cache[key] = plan
    return plan
