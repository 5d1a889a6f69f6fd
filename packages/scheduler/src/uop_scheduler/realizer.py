"""Running a schedule: mint the buffers it creates, emit its LINEAR of CALLs over them, run it with hcq_runtime.

`realized_buffers` remembers, per realized tensor node, the BUFFER holding its value, so later graphs that share
the node read the buffer instead of computing it again. It is weak on the node: when no graph refers to the node any
more, the entry (and the buffer with it) goes away. A schedule that overwrites a buffer version in place without
keeping a copy (nothing live reads it) drops every entry pointing at it: a graph rebuilding the same node later (a
constant, or a value of buffers still alive) must compute it again, not read what the write left there.
"""

from __future__ import annotations

import math
import os
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import numpy as np
from hcq_runtime import (
    Buffer,
    CompileError,
    Device,
    DeviceError,
    Linked,
    bind_buffer,
    bound_buffer,
    buffer_for,
    counters,
    debug_level,
    defer_linear,
    link_linear,
    numpy_dtype,
    poison_enabled,
    run_linear,
    runner_ready,
    settle_deferred,
    uses_queue_devices,
)
from uopir import GroupOp, Ops, UOp, dtypes

from .call_values import in_place_arity, in_place_overwritten
from .errors import ArgumentError
from .schedule import BufferSpec, GraphWalk, Schedule, bytes_only, device_below_in, scheduled_variables, varying_constants, walk_graph
from .schedule_rewrites import cached_schedule
from .storage import off_storage, touches_storage

realized_buffers: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
# buffer versions made by writes that have run: AFTER(buffer, STORE) -> buffer (kept through TinyJit captures, unlike
# realized_buffers: running a write twice would apply it twice)
written_versions: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
# BUFFERs over memory someone else owns (`Tensor.from_blob`): values read from them are not remembered
external_buffers: weakref.WeakSet[UOp] = weakref.WeakSet()
_captures: list[list[UOp]] = []
# per capture: storage of scratch buffers (see `Schedule.scratch`) of linears that have run, free for the next linear's
# scratch of the same device, size and dtype, so the recording owns about one schedule's scratch memory, not every one's
_scratch_pools: list[dict[BufferSpec, list[Buffer]]] = []
_existing: list[frozenset[int]] = []  # per capture: ids of the tensors made before it
# per capture: the plans it built, by structural key. Plans built while capturing stay out of the schedule cache (a
# capture is replayed, never scheduled again), but within one capture the same structure recurs (each layer of a
# model realizes the same graphs over its own weights): an LLM's prefill and decode captures planned 366 graphs, ~12
# kinds, each from scratch
_capture_plans: list[dict] = []
# buffer versions overwritten in place with no copy kept: no realized node may map to them again
_stale: weakref.WeakSet[UOp] = weakref.WeakSet()


def overwritten(node: UOp) -> bool:
    """Whether `node` is a buffer version a write has since overwritten in place with no copy kept."""
    return node in _stale


def _forget_overwritten(stale: set[UOp]) -> None:
    """Drop the realized nodes whose value sat in buffer versions a write has since overwritten in place."""
    if not stale:
        return
    _stale.update(stale)
    for node, buf in list(realized_buffers.items()):
        if buf in stale:
            del realized_buffers[node]


@contextmanager
def capture_linears(existing: frozenset[int] = frozenset()) -> Iterator[list[UOp]]:
    """Record every LINEAR run inside the block (TinyJit's capture). Graph nodes realized before the block are
    computed again inside it, so the recording holds every kernel the block's tensors need. `existing`: ids of the
    tensors made before the block (see `before_capture`)."""
    saved = dict(realized_buffers)
    realized_buffers.clear()
    linears: list[UOp] = []
    _captures.append(linears)
    _scratch_pools.append({})
    _existing.append(existing)
    _capture_plans.append({})
    try:
        try:
            yield linears
        except BaseException:
            # the writes the block queued before it failed are made, as if run eagerly; the block's error is the one raised
            with suppress(Exception):
                settle_deferred()
            raise
        settle_deferred()  # what the block queued runs now (see `_run`): a failing kernel raises from the block
    finally:
        _captures.pop()
        _scratch_pools.pop()
        _existing.pop()
        _capture_plans.pop()
        realized_buffers.clear()
        realized_buffers.update({node: buf for node, buf in saved.items() if buf not in _stale})


def before_capture(t: object) -> bool:
    """Whether a TinyJit capture is recording and the tensor `t` was made before it began."""
    return bool(_existing) and id(t) in _existing[-1]


def capturing() -> bool:
    """Whether a TinyJit capture is recording the kernels being run."""
    return bool(_captures)


class _Realized:
    """The nodes whose value already sits in a buffer (a realized node or a buffer version a write made)."""

    def __contains__(self, node: UOp, _ref: Callable = weakref.ref, _after: Ops = Ops.AFTER) -> bool:
        # the weak dictionaries' own tables, asked directly: this test runs for every node of every realize's walks
        # (every UOp has a plain weak reference, the hash-consing cache's, so weakref.ref(node) makes nothing)
        ref = _ref(node)
        return ref in _realized_table or (node.op is _after and ref in _written_table)


done = _Realized()
_realized_table, _written_table = realized_buffers.data, written_versions.data


def version_of(node: UOp) -> UOp:
    """The buffer holding a realized node or a written version (the node itself for a BUFFER or a pending version)."""
    if node.op is Ops.BUFFER or node not in done:
        return node
    return _input_buffer(node)


def _input_buffer(node: UOp) -> UOp:
    if node.op is Ops.BUFFER:
        return node
    return written_versions[node] if node.op is Ops.AFTER else realized_buffers[node]


def _slice_buffer(node: UOp, base: UOp, first: int) -> UOp:
    """A new BUFFER over the memory of the slice `node`: the run of `base`'s elements from `first` (a lifted slice,
    see `walk_graph`)."""
    size = math.prod(node.shape)
    ret = UOp.new_buffer(base.arg.device, size, node.dtype)
    bind_buffer(ret, buffer_for(base).view(size, node.dtype, first * node.dtype.itemsize))
    return ret


def _constant_buffer(node: UOp, device: str) -> UOp:
    """A new one-element BUFFER on `device` holding the float constant `node`'s value (see `varying_constants`)."""
    ret = UOp.new_buffer(device, 1, node.dtype)
    buffer_for(ret).copyin(np.array([node.arg], dtype=numpy_dtype(node.dtype)))
    return ret


def _one_cpu_device(walk: GraphWalk, held: list[UOp], device: str) -> bool:
    """Whether a walked graph runs on the CPU device `device` alone: every input is there and nothing is copied."""
    return device.startswith("CPU") and all(b.arg.device == device for b in held) and not any(n.op is Ops.COPY for n in walk.marked)


def _storage(node: UOp) -> UOp:
    """The node under movement ops and AFTERs (a buffer, for a view of one or of one of its versions)."""
    while node.op in GroupOp.Movement or node.op is Ops.AFTER:
        node = node.src[0]
    return node


def _lifted_alone(walk: GraphWalk) -> bool:
    """Whether no buffer a lifted slice views is written by the walked graph (a write, a written version, a buffer a
    hand-written kernel is launched with) or is memory someone else owns: the slice's view of the memory is then the
    value the graph reads. Otherwise the graph is walked again without lifting, and the writes' ordering sees the
    slice as a read of that buffer."""
    written: set[UOp] = set()
    for n in walk.marked:
        if n.op is Ops.STORE or n.op is Ops.AFTER:
            written.add(_storage(n.src[0]))
        elif n.op is Ops.CALL:
            written.update(_storage(s) for s in n.src[1:])
    # a version a write makes is a BUFFER of its own over the same memory: compared by memory too
    memory = {id(b.base) for w in written if (b := bound_buffer(w)) is not None}
    return not any(base in written or base in external_buffers or id(buffer_for(base).base) in memory for base, _ in walk.lifted.values())


def _schedule_buffers(plan: Schedule, held: list[UOp], spare: list[UOp] | None = None) -> list[UOp]:
    """The BUFFER of every slot: the inputs' buffers (`held`, see `_input_buffer`), then a new BUFFER per buffer the
    schedule creates, but for its scratch slots when `spare` holds their BUFFERs from its last run (`spare_scratch`)."""
    if spare is None:
        return [*held, *(UOp.new_buffer(device, size, dtype) for device, size, dtype in plan.new_buffers)]
    kept = dict(zip(plan.scratch, spare))
    buffers = list(held)
    for slot, (device, size, dtype) in enumerate(plan.new_buffers, plan.n_inputs):
        buffers.append(UOp.new_buffer(device, size, dtype) if (uop := kept.get(slot)) is None else uop)
    return buffers


def _spare_scratch_bytes(value: str) -> int:
    """`UOP_SPARE_SCRATCH_MB` (MiB, 0 keeps none) in bytes."""
    try:
        mib = float(value)
    except ValueError:
        mib = -1.0
    if not 0 <= mib < 1 << 40:
        raise ArgumentError(f"UOP_SPARE_SCRATCH_MB={value!r}: give the MiB of scratch memory schedules may keep between runs (0 keeps none)")
    return int(mib * (1 << 20))


#: the most bytes of scratch memory schedules keep between their eager runs (`spare_scratch`), in all
SPARE_SCRATCH_BYTES = _spare_scratch_bytes(os.environ.get("UOP_SPARE_SCRATCH_MB", "64"))
# schedules keeping their scratch BUFFERs, oldest use first, with the bytes each keeps
_spare_bytes: weakref.WeakKeyDictionary[Schedule, int] = weakref.WeakKeyDictionary()


def _scratch_bytes(plan: Schedule) -> int:
    return sum(size * dtype.itemsize for _, size, dtype in (plan.new_buffers[s - plan.n_inputs] for s in plan.scratch))


def spare_scratch(plan: Schedule, buffers: list[UOp], nbytes: int | None = None) -> None:
    """Keep the BUFFERs of `plan`'s scratch slots (`Schedule.scratch`: nothing reads them after the run) for its next
    eager run, which takes them instead of new ones. A training step runs one schedule per step, and minting a buffer
    (its node, its storage, its address, freeing it) cost ~7-12 us in Python: a sixth of the buffers a small CNN's step
    made, half of a deep MLP's, were scratch. Only schedules that repeat (run twice or more) keep them, and at most
    SPARE_SCRATCH_BYTES in all: the schedule that used its scratch longest ago gives its up first (`take_scratch` hands
    them to the next run). `nbytes`: the scratch's bytes when known (those `take_scratch` gave back)."""
    if not plan.scratch or plan.runs[0] < 2:
        return
    nbytes = _scratch_bytes(plan) if nbytes is None else nbytes
    if nbytes > SPARE_SCRATCH_BYTES:
        return
    total = sum(_spare_bytes.values()) + nbytes
    while total > SPARE_SCRATCH_BYTES and _spare_bytes:
        oldest = next(iter(_spare_bytes.keys()))
        total -= _spare_bytes.pop(oldest)
        oldest.spare = None
    plan.spare = [buffers[s] for s in plan.scratch]
    _spare_bytes[plan] = nbytes


def take_scratch(plan: Schedule) -> tuple[list[UOp] | None, int | None]:
    """The scratch BUFFERs `plan` kept from its last eager run and their bytes (None, None when it kept none), taken
    off it for this run (a realize of it from another thread meanwhile makes new buffers; a run that raises gives
    them up). In debug mode (`hcq_runtime.poison_enabled`) they are poisoned again first, as fresh memory is there: a
    kernel reading scratch nothing wrote in this run shows, not the last run's values."""
    spare, plan.spare = plan.spare, None
    if spare is None:
        return None, None
    nbytes = _spare_bytes.pop(plan, None)
    if poison_enabled():
        for uop in spare:
            buffer_for(uop).poison()
    return spare, nbytes


def _schedule_linear(plan: Schedule, buffers: list[UOp], var_vals: dict[str, int] | None) -> UOp:
    """The LINEAR of CALLs that runs `plan` over `buffers` (see `_schedule_buffers`); a kernel reading symbolic variables
    gets them bound to `var_vals` as trailing arguments."""
    calls = []
    for call in plan.linear.src:
        args = [buffers[a.arg.slot] if a.op is Ops.PARAM else a.bind(var_vals[a.arg[0]]) for a in call.src[1:]
                if a.op is Ops.PARAM or var_vals]
        calls.append(UOp(Ops.CALL, dtypes.void, (call.src[0], *args)))
    return UOp(Ops.LINEAR, dtypes.void, tuple(calls))


def _run(plan: Schedule, buffers: list[UOp], var_vals: dict[str, int]) -> UOp | None:
    """Run a plan over `buffers` (see `_schedule_buffers`). From its second run on, a plan of CPU calls runs linked
    (`hcq_runtime.link_linear`): one native call that launches every kernel in order, with the buffers' addresses
    patched in by position; the Python dispatch per call was most of an eager training step's run time, and no LINEAR
    is built. A plan that cannot be linked (another device, a kernel that fails to compile, mixed devices) runs its
    LINEAR call by call, where errors are raised in order; `DEBUG>=2` and TinyJit captures run call by call too
    (per-kernel timings; a capture records what runs). A capture queues its LINEARs (`hcq_runtime.defer_linear`)
    until it ends or the host touches memory: a model's step realized layer by layer has a new kernel or two in each
    realize, and queued, they compile together in parallel. Returns the LINEAR that ran call by call, else None."""
    runs = plan.runs
    runs[0] += 1
    # the link waits until the batch runner is built (in the background from the first run on: a cold start does not
    # pause for it; until then the plan runs call by call)
    if runs[1] is None and not _captures and runner_ready() and runs[0] >= 2:
        runs[1] = _link(plan, buffers, var_vals)
    if not runs[1] or _captures or debug_level() >= 2:
        linear = _schedule_linear(plan, buffers, var_vals)
        if not _captures:  # a capture queues what it records (see `realize_uops`)
            run_linear(linear, var_vals)
        return linear
    linked: Linked = runs[1]
    start = time.perf_counter()
    linked([buffer_for(b) for b in buffers], var_vals)
    counters.kernels += linked.n_kernels
    counters.copies += linked.n_copies
    counters.ops += linked.n_ops
    counters.mem += linked.n_mem
    counters.seconds += time.perf_counter() - start
    return None


def _link(plan: Schedule, buffers: list[UOp], var_vals: dict[str, int]) -> Linked | bool:
    """`plan` linked over one placeholder BUFFER per position (two positions holding one buffer in this run may hold
    two in the next), or False when it cannot be."""
    holders = [UOp.new_buffer(b.arg.device, b.arg.size, b.dtype) for b in buffers]
    linear = _schedule_linear(plan, holders, var_vals)
    if uses_queue_devices(linear):
        return False
    try:
        return link_linear(linear, inputs=holders)
    except (DeviceError, CompileError):
        return False


def _as_recorded(linear: UOp, rebound: list[UOp]) -> UOp:
    """`linear` as a capture records it. The buffers in `rebound` are about to be bound to the copies that keep their
    old values for later readers; the calls that ran here read and wrote the memory they had while running, so the
    recording names that memory through stand-in buffers (a replay must read the state as it is then, not the copy
    taken at capture)."""
    if not rebound:
        return linear
    stand_ins = {}
    for b in rebound:
        stand_ins[b] = UOp.new_buffer(b.arg.device, b.arg.size, b.dtype)
        bind_buffer(stand_ins[b], buffer_for(b))
    return linear.substitute(stand_ins)


def schedule_for(walk: GraphWalk, targets: tuple[UOp, ...], default_device: str, live: frozenset[UOp] = frozenset(),
                 alias: tuple[int, ...] = (), variables: dict[UOp, UOp] | None = None, held: list[UOp] | None = None,
                 on_miss: Callable[[], bool] | None = None) -> Schedule | None:
    """The (cached) schedule of a walked graph (`schedule_rewrites.cached_schedule`; a TinyJit capture keeps its own).
    `held`: the inputs' buffers when the caller has them already; `on_miss` as in `cached_schedule` (None: a schedule
    is always returned)."""
    store = _capture_plans[-1] if _capture_plans else True
    held = held if held is not None else [_input_buffer(n) for n in walk.inputs]
    return cached_schedule(walk, targets, [b.arg.device for b in held], default_device, live, alias, store, variables or {}, on_miss)


# a hand-written kernel's body -> every node under it (bodies are shared: an optimizer's kernel is one per model)
_body_nodes: weakref.WeakKeyDictionary[UOp, frozenset[UOp]] = weakref.WeakKeyDictionary()


def walk_cover(walk: GraphWalk) -> tuple[dict[UOp, int], set[UOp], list[frozenset[UOp]]] | None:
    """What a realize's walk (`realize_uops`' `walked`) met, for asking whether a node is under one of its targets
    without walking their graphs again: (the nodes it listed, the nodes under the ones it did not enter: lifted slices'
    chains and bound variables' sources, then those of hand-written kernels' bodies, one set per body), or None when
    that is not every node under its targets (it stopped at a value realized earlier, whose graph it did not walk)."""
    if walk.realized:
        return None
    hidden: set[UOp] = set()  # (a BUFFER has no sources)
    for node in walk.lifted:
        hidden.update(node.toposort())
    for node in walk.constants:
        hidden.update(node.src)
    for node in walk.marked:
        if node.op is Ops.BIND:
            hidden.update(node.src)
    bodies: list[frozenset[UOp]] = []
    for body in walk.opaque:
        if (below := _body_nodes.get(body)) is None:
            _body_nodes[body] = below = frozenset(body.toposort())
        bodies.append(below)
    return walk.position, hidden, bodies


def realize_uops(targets: tuple[UOp, ...], default_device: str, live_reads: Callable[[], set[UOp]] | None = None,
                 placed: frozenset[UOp] | set[UOp] = frozenset(), lift: bool = True, constants: frozenset[UOp] = frozenset(),
                 walked: list[GraphWalk] | None = None) -> list[UOp]:
    """Compute every target node; returns the BUFFER UOp holding each (targets already in a buffer are not rerun).

    `live_reads` lists the buffer versions values outside this schedule may still read; it is asked only when the
    schedule overwrites a version in place, and those versions are kept (copied) for their readers. `placed`: targets
    the caller knows read a buffer (so they belong to its device: see the end). `walked`: a list the graph's walks are
    appended to (the last is the one scheduled; see `walk_cover`), for a caller that asks about the graph after."""
    if bytes_only(default_device):  # values of constants alone copied into a file are computed on the default device
        default_device = Device.DEFAULT
    # contiguous slices of buffers are inputs of their own (`walk_graph`'s `lift`), unless a capture records the run
    # (and written slices' offsets are keyed by their order; not under a capture either: a replay passes each
    # recorded offset by its own name, see `jit`)
    by_order = not _captures
    walk = walk_graph(plan_targets := targets, done, default_device, lift=lift and not _captures, by_order=by_order, constants=constants)
    if walk.lifted and not _lifted_alone(walk):
        walk = walk_graph(plan_targets, done, default_device, by_order=by_order, constants=constants)
    # (the CPU's launch threads wake now, while the schedule is looked up, not at the first kernel; a device from
    # another package may not define the CompiledDevice hook. Not under a capture, which queues its kernels: woken for
    # nothing at each of an LLM capture's ~180 realizes, they cost the caller a wake-up each and then spun on a core
    # the capture's compiles wanted)
    # (once per realize: a realize with varying constants found is this call's second)
    if not _captures and not constants and (expect_work := getattr(Device[default_device], "expect_work", None)) is not None:
        expect_work()
    if touches_storage(walk.marked):
        # views of a file's buffer are computed from a copy of the bytes they read (a DISK device runs no kernels)
        walk = walk_graph(plan_targets := off_storage(targets, default_device), done, default_device, by_order=by_order, constants=constants)
    # bound variables are scheduled as their variables (one schedule and one compile for every value), run with the values
    variables = scheduled_variables([n for n in walk.marked if n.op is Ops.BIND], by_order)
    var_vals = {var.arg[0]: int(b.src[1].arg) for b, var in variables.items()}
    live: frozenset[UOp] = frozenset()
    alias: tuple[int, ...] = ()
    overwritten = [n.src[2] for n in walk.marked if n.op is Ops.STORE and len(n.src) == 3]
    overwritten += [v.base for n in walk.marked if in_place_arity(n) is not None for v in in_place_overwritten(n)]
    # the buffer of each input, asked once per realize (a lifted slice's a view of its buffer's memory, a varying
    # constant's a new buffer of one element)
    lifted_constants = set(walk.constants)
    held = [_constant_buffer(n, default_device) if n in lifted_constants else _slice_buffer(n, *piece)
            if (piece := walk.lifted.get(n)) is not None else _input_buffer(n) for n in walk.inputs]
    if overwritten:
        first: dict[UOp, int] = {}
        alias = tuple(first.setdefault(b, i) for i, b in enumerate(held))
        if live_reads is not None:
            version = {n: held[i] for i, n in enumerate(walk.inputs)}
            reads = live_reads()
            live = frozenset(old for old in overwritten if version.get(old, old) in reads)
    # a graph with no cached schedule whose float constants changed since the last one of its structure (a Python
    # number that differs at each step of a loop) is realized with those constants read from memory. Not under a
    # capture (a replay runs the values it recorded), and only for a graph on one CPU device: a constant's buffer is
    # made on the realize's device, and in a graph that copies between devices it may be read on another
    vary: set[UOp] = set()

    def constants_vary() -> bool:  # (asked on a miss only: a cache hit pays nothing for it)
        if _one_cpu_device(walk, held, default_device):
            vary.update(varying_constants(walk))
        return bool(vary)

    on_miss = None if _captures or constants else constants_vary
    if walked is not None:
        walked.append(walk)
    plan = schedule_for(walk, plan_targets, default_device, live, alias, variables, held, on_miss)
    if plan is None:
        return realize_uops(targets, default_device, live_reads, placed, lift, frozenset(vary), walked)
    if walk.lifted and any(o < len(held) and walk.inputs[o] in walk.lifted for o in plan.outputs):
        # a target whose value is a lifted slice as it is (a copy the plan leaves out): its buffer would be the memory
        # of the buffer it slices; realized without lifting, it gets one of its own
        return realize_uops(targets, default_device, live_reads, placed, lift=False, walked=walked)
    spare, spare_bytes = take_scratch(plan) if not _captures else (None, None)
    buffers = _schedule_buffers(plan, held, spare)
    if plan.linear.src:
        scratch = [(plan.new_buffers[b - plan.n_inputs], buffers[b]) for b in plan.scratch] if _captures else []
        for kind, uop in scratch:
            if free := _scratch_pools[-1].get(kind):
                bind_buffer(uop, free.pop())
        linear = _run(plan, buffers, var_vals)
        if _captures:  # a capture records `linear` and queues it, to run when the capture ends or the host reads memory
            assert linear is not None
            _captures[-1].append(recorded := _as_recorded(linear, [buffers[old] for old, _ in plan.preserved]))
            defer_linear(recorded, var_vals)
        for kind, uop in scratch:  # nothing reads them any more: the next linear may use their memory
            _scratch_pools[-1].setdefault(kind, []).append(buffer_for(uop))
        if not _captures:
            spare_scratch(plan, buffers, spare_bytes)
    for old, copy in plan.preserved:
        bind_buffer(buffers[old], buffer_for(buffers[copy]))
    if overwritten:
        kept = {buffers[old] for old, _ in plan.preserved}
        position = {n: i for i, n in enumerate(walk.inputs)}
        _forget_overwritten({buffers[position[old]] for old in overwritten if old in position} - kept)
    for pos, num in plan.afters:
        written_versions[walk.nodes[pos]] = buffers[num]
    outs = [buffers[n] for n in plan.outputs]
    if external_buffers and any(n in external_buffers for n in walk.inputs):
        return outs  # memory its owner may change at any time (`Tensor.from_blob`): every read computes again
    # a graph of constants alone belongs to no device: realized for a tensor on one device, it must not be read from that
    # buffer by a kernel on another (a lone target with inputs below it has one). The targets are asked with one memo:
    # searched one by one, the gradients of a deep model each went down its whole backward graph (40% of a 160-layer
    # step); most answer from their own device, followed along their first sources
    searched: dict[UOp, str | None] = {}
    lone = len(targets) == 1 and len(walk.inputs) > len(walk.constants)  # (a varying constant's buffer is no placed input)
    for t, buf in zip(targets, outs):
        if t.op not in (Ops.BUFFER, Ops.AFTER) and (lone or t in placed or device_below_in(t, searched) is not None):
            realized_buffers[t] = buf
    return outs
