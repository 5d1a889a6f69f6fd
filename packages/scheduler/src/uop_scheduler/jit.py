"""`TinyJit`: capture the kernels a function runs once, then replay them as one native call.

Call 0 runs the function eagerly. Call 1 runs it again while recording every LINEAR the scheduler executes, with the
call's input tensors as parameters; the recorded calls are linked (`hcq_runtime.link_linear`) into one native batch
program on CPU, or one hcq2 submit per device queue on queue devices such as MOCKAMD: buffers the step creates keep
the addresses they got at capture (link time), while the input buffers, fresh output buffers and variable values are
passed per call (run time). Calls 2+ only check the inputs, allocate the outputs and make that one call: no
scheduling, no compiling, no per-kernel Python.

Writes replay as writes: a write into an input lands in that call's input (a returned written input is that input),
and a write into other state (BatchNorm's statistics, an optimizer's moments) lands in that state's buffer each call.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from hcq_runtime import Buffer, CPUDevice, Device, DeviceError, Linked, bind_buffer, buffer_for, call_buffers, counters, link_linear, run_linear
from uopir import Ops, UOp, dtypes

from .errors import JitError
from .random import JitRng, RandomMixin
from .realizer import capture_linears, capturing
from .schedule import OFFSET_VAR
from .symbolic_sizes import bind_shape, bound_values, unbound_shape
from .tensor import Tensor
from .writes import all_tensors, storage_of

ReturnType = TypeVar("ReturnType")


@functools.cache
def _signature_of(fn: Callable[..., Any]) -> tuple[inspect.Signature | None, tuple[str, ...]]:
    """`fn`'s signature (None when it has none) and the names of its parameters when all of them are plain positional
    ones (the fast path of `_bound_arguments`), else ()."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None, ()
    plain = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in sig.parameters.values())
    return sig, tuple(sig.parameters) if plain else ()


def _bound_arguments(fn: Callable[..., Any], args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """The call's arguments by parameter name, in the order of the function's parameters (so `f(b=y, a=x)` and
    `f(x, y)` bind the same tensors to the same places); positions and sorted keywords when `fn` has no signature."""
    sig, names = _signature_of(fn)
    if not kwargs and len(args) == len(names):  # every parameter given by position: no binding to do
        return list(zip(names, args))
    if sig is None:
        return [(f"#{i}", a) for i, a in enumerate(args)] + sorted(kwargs.items())
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise JitError(f"TinyJit call does not match {getattr(fn, '__name__', 'the function')}{sig}: {e}") from None
    bound.apply_defaults()
    return list(bound.arguments.items())


def _input_tensors(fn: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[list[Tensor], tuple]:
    """The tensors a call passes, wherever they sit (an argument, or inside lists, tuples and dicts in arguments), in
    parameter order, and where each one is (its path: parameter name, then indices and keys)."""
    found: list[tuple[tuple, Tensor]] = []

    def walk(value: Any, path: tuple) -> None:
        if isinstance(value, Tensor):
            found.append((path, value))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, (*path, i))
        elif isinstance(value, dict):
            for key in sorted(value, key=repr):
                walk(value[key], (*path, key))

    for name, value in _bound_arguments(fn, args, kwargs):
        walk(value, (name,))
    tensors = [t for _, t in found]
    seen: dict[int, tuple] = {}
    for path, t in found:
        if (other := seen.setdefault(id(t), path)) is not path:
            raise JitError(f"TinyJit got the same tensor twice (as {_where(other)} and {_where(path)}): pass it once, or pass a .clone()")
    return tensors, tuple(p for p, _ in found)


def _check_distinct_buffers(inputs: list[Tensor], paths: tuple) -> None:
    """Refuse two inputs in one buffer (two tensors over the same storage, or views of one buffer): a capture would
    record kernels reading that buffer once, and a replay with distinct inputs would read the wrong one (as tinygrad,
    "duplicate inputs to JIT")."""
    seen: dict[int, tuple] = {}
    for path, t in zip(paths, inputs):
        base = t.uop.base
        if base.op is not Ops.BUFFER:
            continue
        if (other := seen.setdefault(id(buffer_for(base)), path)) is not path:
            raise JitError(f"TinyJit inputs {_where(other)} and {_where(path)} are in the same buffer (duplicate inputs to JIT): "
                           "pass it once, or pass a .clone()")


def _where(path: tuple) -> str:
    return str(path[0]) + "".join(f"[{p!r}]" for p in path[1:])


def _signature(tensors: list[Tensor]) -> tuple:
    """What a replay must match: shapes (bound variables stand for any of their values), dtypes, devices."""
    return tuple((unbound_shape(t.shape), t.dtype, t.device) for t in tensors)


def _view_of(t: Tensor) -> UOp | None:
    """How `t` views its buffer, with the buffer and the values of bound variables left out (a replay keys on it):
    None for the whole buffer in order."""
    u = t.uop
    base = u.base
    if u is base or (u.op is Ops.RESHAPE and u.src[0] is base):
        return None
    replace = {b: b.src[0] for b in u.toposort() if b.op is Ops.BIND}
    replace[base] = UOp(Ops.NOOP, base.dtype, arg="jit input")
    return u.substitute(replace)


def _describe_view(view: UOp | None) -> str:
    if view is None:
        return "a whole buffer"
    chain = []
    while view.op is not Ops.NOOP and view.src:
        chain.append(view.op.name.lower())
        view = view.src[0]
    return "a view (" + " of ".join(chain) + ")"


def _var_vals(tensors: list[Tensor], args: tuple, kwargs: dict) -> dict[str, int]:
    """The values of the variables bound in the inputs' shapes and in bound-variable arguments."""
    ret: dict[str, int] = {}
    for t in tensors:
        ret.update(bound_values(t.shape))
    ret.update(bound_values(tuple(a for a in (*args, *kwargs.values()) if isinstance(a, UOp) and a.op is Ops.BIND)))
    return ret


def _buffer_of(t: Tensor) -> UOp:
    base = t.uop.base
    if base.op is not Ops.BUFFER:
        raise JitError(f"a TinyJit input or output must be realized to a buffer, got {base.op.name}")
    return base


@dataclass
class _Captured:
    signature: tuple
    linked: Linked | None  # None: a device without linked replays; replays substitute buffers into `linear`
    linear: UOp
    buffers: list[UOp]  # the captured input buffers, then the captured output buffers
    outputs: list[tuple[tuple[int, ...], Any, str, int]]  # shape, dtype, device, size of each fresh returned tensor
    # per returned tensor: the input it is (written in place), the state tensor it is (its buffer predates the capture),
    # or None for a fresh output
    aliased: list[int | Tensor | None]
    structure: Callable[[list[Tensor]], Any]
    paths: tuple = ()  # where each input tensor sits in the call (see `_input_tensors`)
    rng: JitRng | None = None  # the step's RNG state buffers, when it draws random numbers
    views: tuple = ()  # how each input views its buffer (see `_view_of`)
    # tensors the step left unrealized (gradients nobody realized, say) with their graphs over the captured buffers:
    # each replay rebinds them to its own inputs and outputs (see `_late_tensors`)
    late: list[tuple[weakref.ref, UOp]] = dataclasses.field(default_factory=list)
    late_now: dict[UOp, UOp] = dataclasses.field(default_factory=dict)  # the latest replay's buffers for the captured ones
    relink: bool = False  # the step's internal buffers were let go (`free_intermediates`): link again at the next replay
    # the offsets of written slices the recording binds (a write made before the capture and run in it: see
    # `writes._written_view`), passed to every replay by their names, so each replay writes where the capture wrote
    offsets: dict[str, int] = dataclasses.field(default_factory=dict)

    def free_intermediates(self) -> None:
        """Let go of the memory of the step's buffers that no live tensor or random state holds (a jitted step kept
        between uses, such as an LLM's prefill beside its decode step): its intermediates, and the capture's own inputs
        and outputs once their tensors are gone (replays are given their buffers). Each gets new storage, allocated and
        linked at the next replay; buffers that shared memory keep sharing it."""
        keep = _live_storage([t.uop.base for t in self.rng.state.values()] if self.rng is not None else [])
        groups: dict[int, list[UOp]] = {}
        for a in (*self.buffers, *(a for call in self.linear.src for a in call.src[1:])):
            if a.op is Ops.BUFFER and isinstance(a.arg.device, str) and id(old := buffer_for(a)) not in keep and not old.external:
                groups.setdefault(id(old), []).append(a)
        if not groups:
            return
        self.linked, self.relink = None, self.linked is not None  # the link holds the old storage (its addresses are baked in)
        for uops in groups.values():
            old = buffer_for(uops[0])
            new = Buffer(old.device, old.size, old.dtype)  # (allocated on first use)
            for u in dict.fromkeys(uops):
                bind_buffer(u, new)


def _live_storage(roots: list[UOp]) -> set[int]:
    """The storage (ids of Buffers) of every BUFFER under `roots` and under the graph of every live tensor."""
    seen: set[UOp] = set()
    stack = [*roots, *(t.uop for t in list(all_tensors))]
    out: set[int] = set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op is Ops.BUFFER:
            if isinstance(n.arg.device, str):
                out.add(id(buffer_for(n)))
        else:
            stack.extend(n.src)
    return out


def _shared_memory(linear: UOp, kept: list[UOp]) -> tuple[UOp, set[str]]:
    """`linear` with its internal CPU buffers sharing memory where their lives in it do not overlap. Internal: no live
    tensor's graph (nor the inputs, outputs and RNG state in `kept`) reaches it, and the first call to touch it in the
    linear writes it without reading it, so no replay depends on what it held before (a buffer a call `_pruned`
    dropped wrote is only read by the calls that stay: pruning keeps every writer of a buffer a staying call writes). A captured 30-layer prompt
    otherwise held every layer's intermediates (the outputs of hand-written kernels are buffers of their own, outside
    the scheduler's scratch pools): SmolLM2's 64-token prefill kept 78 MB. Buffers of one device, size and dtype are
    shared, first come first served: a buffer whose last use is over gives its memory to the next one to start. Also
    returns the devices whose buffers the sharing let go."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    uses: dict[int, list[UOp]] = {}
    written_first: dict[int, bool] = {}
    for i, call in enumerate(linear.src):
        reads, writes = call_buffers(call)
        read_ids = {id(buffer_for(b)) for b in reads}
        for b in (*writes, *reads):
            b = b.src[0] if b.op is Ops.AFTER else b
            if b.op is not Ops.BUFFER:
                continue
            sid = id(buffer_for(b))
            if sid not in first:
                first[sid], written_first[sid] = i, sid not in read_ids
            last[sid] = i
            if b not in uses.setdefault(sid, []):
                uses[sid].append(b)
    live = _live_storage(kept)
    candidates = [sid for sid in first if written_first[sid] and sid not in live and isinstance(Device[uses[sid][0].arg.device], CPUDevice)]
    candidates.sort(key=first.__getitem__)
    free: dict[tuple, list[Any]] = {}
    busy: list[tuple[int, tuple, Any]] = []  # (last use, kind, Buffer) of the memory given out so far
    mapping: dict[UOp, UOp] = {}
    released: set[str] = set()
    for sid in candidates:
        storage = buffer_for(uses[sid][0])
        for end, kind, buf in [x for x in busy if x[0] < first[sid]]:
            busy.remove((end, kind, buf))
            free.setdefault(kind, []).append(buf)
        kind = (storage.device, storage.nbytes, storage.dtype)
        target = free[kind].pop() if free.get(kind) else storage
        busy.append((last[sid], kind, target))
        if target is not storage:
            released.add(storage.device)
            for u in uses[sid]:
                mapping[u] = UOp.new_buffer(u.arg.device, u.arg.size, u.dtype)
                bind_buffer(mapping[u], target)
    return (linear.substitute(mapping) if mapping else linear), released


def _pruned(linear: UOp, varying: list[UOp]) -> UOp:
    """`linear` without the calls whose effect is the same on every replay: a call stays when it reads or writes a
    buffer whose contents can differ between replays (`varying`: the inputs, fresh outputs and RNG state, then whatever
    a staying call writes), writes what it reads (state it advances), or takes a variable. The dropped calls ran at
    capture; the buffers they wrote keep those values."""
    storage = {id(buffer_for(b)) for b in varying}
    io = []
    writers: dict[int, int] = {}
    for call in linear.src:
        reads, writes = call_buffers(call)
        symbolic = any(u.op in (Ops.DEFINE_VAR, Ops.BIND) for u in call.toposort())
        io.append(({id(buffer_for(b)) for b in reads}, {id(buffer_for(b)) for b in writes}, symbolic))
        for w in io[-1][1]:
            writers[w] = writers.get(w, 0) + 1
    # memory several calls write (scratch the scheduler shares between values whose lives do not overlap) holds the
    # last one's value after the capture: a reader of an earlier one's value must see that call run on every replay
    storage |= {w for w, n in writers.items() if n > 1}
    kept: set[int] = set()
    grew = True
    while grew:  # a call kept late in the step can make an earlier one vary on the next replay
        grew = False
        for i, (reads, writes, symbolic) in enumerate(io):
            if i not in kept and (symbolic or reads & writes or (reads | writes) & storage):
                kept.add(i)
                storage |= writes
                grew = True
    return linear.replace(src=tuple(c for i, c in enumerate(linear.src) if i in kept))


class TinyJit(Generic[ReturnType]):
    """Wrap a function of Tensors; see the module docstring. `reset()` forgets the capture.

    prune=True: replays skip the kernels that do not depend on the inputs (weights the step only reads, say); their
    results are computed once, at capture, so a change made to such state outside the step is not seen by replays.

    warmup: how many calls run eagerly before the capture (1, as in tinygrad: the first call settles state the step
    creates lazily). 0 captures on the first call, for a step whose state already exists (it saves one eager run,
    the slow one of a cold start)."""

    def __init__(self, fn: Callable[..., ReturnType], prune: bool = False, warmup: int = 1):
        if warmup < 0:
            raise ValueError(f"warmup is a number of calls, got {warmup}")
        self.fn = fn
        self.prune = prune
        self.warmup = warmup
        self.cnt = 0
        self.captured: _Captured | None = None
        functools.update_wrapper(self, fn)

    def reset(self) -> None:
        """Drop the capture (and the buffers it owns); the next call runs eagerly again."""
        self.cnt, self.captured = 0, None

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self.__call__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> ReturnType:
        if capturing():
            raise JitError("having TinyJit inside another TinyJit is not supported: jit only the outer function "
                           "(the inner one's kernels are captured with it)")
        inputs, paths = _input_tensors(self.fn, args, kwargs)
        if inputs:
            inputs[0].realize(*inputs[1:])
            _check_distinct_buffers(inputs, paths)
        if self.captured is not None:
            if paths != self.captured.paths:
                raise JitError(f"TinyJit inputs changed place: captured with tensors at {', '.join(map(_where, self.captured.paths)) or 'none'}, "
                               f"called with {', '.join(map(_where, paths)) or 'none'} (call .reset() to capture again)")
            return self._replay(inputs, _var_vals(inputs, args, kwargs))
        if self.cnt < self.warmup:
            self.cnt += 1
            ret = self.fn(*args, **kwargs)
            outs = _returned_tensors(ret)
            if outs:
                outs[0].realize(*outs[1:])
            return ret
        return self._capture(inputs, paths, args, kwargs)

    def _capture(self, inputs: list[Tensor], paths: tuple, args: tuple, kwargs: dict) -> ReturnType:
        input_buffers = [_buffer_of(t) for t in inputs]
        rng = RandomMixin._jit_rng = JitRng(Tensor)
        existing = list(all_tensors)  # held until the capture ends, so no new tensor can take one's id
        try:
            with capture_linears(frozenset(map(id, existing))) as linears:
                ret = self.fn(*args, **kwargs)
                outs = _returned_tensors(ret)
                if outs:
                    outs[0].realize(*outs[1:])
        finally:
            RandomMixin._jit_rng = None
        output_buffers = [_buffer_of(t) for t in outs]
        linear = UOp(Ops.LINEAR, dtypes.void, tuple(call for recorded in linears for call in recorded.src))
        if not linear.src:
            raise JitError(f"the jitted function {getattr(self.fn, '__name__', '')!r} ran no kernels, so there is nothing to replay: "
                           "return the tensors it computes (they are realized), or call it without TinyJit")
        # writes into an input made new versions of its buffer (same storage): they are that input on every replay
        storage = {id(buffer_for(b)): b for b in input_buffers}
        versions = {a: storage[id(buffer_for(a))] for call in linear.src for a in call.src[1:]
                    if a.op is Ops.BUFFER and a not in input_buffers and id(buffer_for(a)) in storage}
        if versions:
            linear = linear.substitute(versions)
        aliased: list[int | Tensor | None] = [input_buffers.index(storage[id(buffer_for(b))]) if id(buffer_for(b)) in storage else None
                                              for b in output_buffers]
        if any(a is None for a in aliased):  # a returned tensor in state made before the capture is that state every replay
            state = {id(buffer_for(s.src[0] if s.op is Ops.AFTER else s)) for t in existing if (s := storage_of(t.uop)) is not None}
            aliased = [t if a is None and id(buffer_for(b)) in state else a for t, b, a in zip(outs, output_buffers, aliased)]
        output_buffers = [b for b, a in zip(output_buffers, aliased) if a is None]
        if self.prune:
            linear = _pruned(linear, [*input_buffers, *output_buffers, *(t.uop.base for t in rng.state.values())])
        linear, released = _shared_memory(linear, [*input_buffers, *output_buffers, *(t.uop.base for t in rng.state.values())])
        linears.clear()  # the recording held the buffers the sharing let go: their memory goes back to the OS
        for device in released:
            Device[device].allocator.free_cache()
        try:
            linked = link_linear(linear, inputs=[*input_buffers, *output_buffers])
        except DeviceError:
            linked = None  # a device the runtime cannot link for: replay the recorded calls through run_linear
        fresh = [t for t, a in zip(outs, aliased) if a is None]
        out_info = [(unbound_shape(t.shape), t.dtype, t.device, b.arg.size) for t, b in zip(fresh, output_buffers)]
        buffers = [*input_buffers, *output_buffers]
        late = _late_tensors({id(t) for t in existing}, versions, set(buffers))
        offsets = {a.expr: int(a.src[1].arg) for call in linear.src for a in call.src[1:] if a.op is Ops.BIND and a.expr.startswith(OFFSET_VAR)}
        self.captured = _Captured(_signature(inputs), linked, linear, buffers, out_info, aliased, _restructure(ret),
                                  paths, rng if rng.calls else None, tuple(map(_view_of, inputs)), late, offsets=offsets)
        self.cnt = self.warmup + 1  # calls made so far, as tinygrad counts them
        return ret

    def _replay(self, inputs: list[Tensor], var_vals: dict[str, int]) -> ReturnType:
        cap = self.captured
        assert cap is not None
        if (signature := _signature(inputs)) != cap.signature:
            raise JitError(f"TinyJit inputs changed: captured with {cap.signature}, called with {signature} "
                           "(same shapes, dtypes and devices are required; call .reset() to capture again)")
        for path, t, view in zip(cap.paths, inputs, cap.views):
            if (now := _view_of(t)) is not view:  # the kernels address the input's buffer as the captured view did
                raise JitError(f"TinyJit input {_where(path)} is {_describe_view(now)} of its buffer, captured as "
                               f"{_describe_view(view)}: pass the same kind of view every call (a .contiguous() copy works "
                               "for any), or call .reset() to capture again")
        input_buffers = [_buffer_of(t) for t in inputs]
        outputs = [UOp.new_buffer(device, size, dtype) for _, dtype, device, size in cap.outputs]
        if cap.offsets:
            var_vals = {**cap.offsets, **var_vals}
        start = time.perf_counter()
        if cap.rng is not None:
            cap.rng.fill()  # the step's random tensors continue the eager sequence
            RandomMixin._calls += cap.rng.calls
        if cap.relink:
            cap.relink = False
            try:
                cap.linked = link_linear(cap.linear, inputs=cap.buffers)
            except DeviceError:
                cap.linked = None
        if cap.linked is not None:
            cap.linked([buffer_for(b) for b in input_buffers] + [buffer_for(b).ensure_allocated() for b in outputs], var_vals)
            counters.ops += cap.linked.n_ops  # (the work a replay does; `counters.kernels` counts scheduled launches only)
            counters.mem += cap.linked.n_mem
        else:
            run_linear(cap.linear.substitute(dict(zip(cap.buffers, [*input_buffers, *outputs]))), var_vals)
        if int(os.environ.get("DEBUG", "0") or 0) >= 2:  # a replay is one call: its kernels are timed together
            n = cap.linked.n_kernels if cap.linked is not None else len(cap.linear.src)
            print(f"*** jit {getattr(self.fn, '__name__', 'fn')} replay {self.cnt - 1}: {n} kernels {(time.perf_counter() - start) * 1e6:10.1f} us")
        self.cnt += 1
        if cap.late:  # the step's unrealized tensors now stand for this call's values, rebound when first read
            cap.late_now = dict(zip(cap.buffers, [*input_buffers, *outputs]))
            _LateTensor.defer(cap)
        fresh = iter(Tensor._owning(b.reshape(bind_shape(shape, var_vals)), device) for b, (shape, _, device, _) in zip(outputs, cap.outputs))
        return cap.structure([inputs[a] if isinstance(a, int) else a if a is not None else next(fresh) for a in cap.aliased])


class _LateTensor(Tensor):
    """The class a replay gives the step's unrealized tensors (see `_late_tensors`) until one of them is read: reading
    (or setting) `.uop` of any rebinds all of that capture's late tensors to the latest replay's buffers with one
    substitution (their gradient graphs share most nodes) and gives them back their class. A step whose gradients
    nobody reads between replays (a training loop) so pays nothing for them."""

    __slots__ = ()
    _pending: ClassVar[dict[int, _Captured]] = {}  # id(tensor) -> its capture (which holds the latest replay's buffers)

    @staticmethod
    def defer(cap: _Captured) -> None:
        cap.late = [(ref, graph) for ref, graph in cap.late if ref() is not None]
        for ref, _ in cap.late:
            t = ref()
            if type(t) is Tensor:
                t.__class__ = _LateTensor
            _LateTensor._pending[id(t)] = cap
        if any(type(ref()) is not _LateTensor for ref, _ in cap.late):  # a subclass of Tensor keeps its class: rebind now
            _LateTensor._rebind_all(cap)

    @staticmethod
    def _rebind_all(cap: _Captured) -> None:
        late = [(t, graph) for ref, graph in cap.late if (t := ref()) is not None and _LateTensor._pending.get(id(t)) is cap]
        rebound = UOp.sink(*(graph for _, graph in late)).substitute(cap.late_now).src if late else ()
        for (t, _), graph in zip(late, rebound):
            del _LateTensor._pending[id(t)]
            if type(t) is _LateTensor:
                t.__class__ = Tensor
            _slot_uop.__set__(t, graph)

    def _rebind(self) -> None:
        _LateTensor._rebind_all(_LateTensor._pending[id(self)])

    @property
    def uop(self) -> UOp:
        self._rebind()
        return _slot_uop.__get__(self, Tensor)

    @uop.setter
    def uop(self, value: UOp) -> None:
        self._rebind()
        _slot_uop.__set__(self, value)


_slot_uop = Tensor.__dict__["uop"]


def _late_tensors(existing: set[int], versions: dict[UOp, UOp], buffers: set[UOp]) -> list[tuple[weakref.ref, UOp]]:
    """The tensors the captured step made and left unrealized that read its inputs or outputs (a `.grad` that
    `backward()` filled and nothing realized): their graphs, with written versions of an input read as that input.
    Replays rebind them to each call's buffers; the step's internal buffers already hold that call's values, so a
    gradient read after a replay is that replay's gradient."""
    late = []
    for t in list(all_tensors):
        if id(t) in existing or t.uop.base.op is Ops.BUFFER:
            continue
        graph = t.uop.substitute(versions) if versions else t.uop
        if any(n in buffers for n in graph.toposort()):
            late.append((weakref.ref(t), graph))
    return late


def _returned_tensors(ret: Any) -> list[Tensor]:
    """The tensors of a jitted function's return value: a Tensor, a tuple/list of Tensors, a dict of Tensors, or None.
    Anything else would be the capture-time value on every replay, so it is a JitError."""
    if isinstance(ret, Tensor):
        return [ret]
    if ret is None:
        return []
    items = list(ret.values()) if isinstance(ret, dict) else list(ret) if isinstance(ret, (tuple, list)) else None
    if items is None:
        raise JitError(f"a jitted function returns Tensors (alone, in a tuple, list or dict) or None; got {type(ret).__name__}")
    if bad := [type(x).__name__ for x in items if not isinstance(x, Tensor)]:
        raise JitError(f"a jitted function returned {', '.join(sorted(set(bad)))} beside its tensors: a replay would return the "
                       "capture-time value; return only tensors (compute the rest outside the jitted function)")
    return items


def _restructure(ret: Any) -> Callable[[list[Tensor]], Any]:
    """How to rebuild the function's return value from its tensors, in order."""
    if isinstance(ret, Tensor):
        return lambda ts: ts[0]
    if ret is None:
        return lambda ts: None
    if isinstance(ret, dict):
        keys = list(ret)
        return lambda ts: dict(zip(keys, ts, strict=True))
    kind = type(ret)
    return lambda ts: kind(ts)
