"""The scheduler as graph rewrites.

A tensor graph becomes a LINEAR of CALLs over PARAM slots in named passes over UOps:

1. `parameterise`: the graph's inputs (BUFFERs, values already realized) become PARAM slots 0..n-1 on their buffers'
   devices, bound variables their variables, call outputs their inlined values. UOps are hash-consed, so graphs of one
   structure over other buffers are the same parameterised UOp; the schedule cache is keyed by the walk's structural
   key, its node-by-node description (see `cached_schedule`).
2. `mark_buffers` (what needs a buffer, `schedule.buffered_nodes`): each node that gets a buffer of its own is tagged.
3. `kernelize` (ranges and kernel bodies; CALLs over PARAM slots), a `graph_rewrite`, sources first: a tagged node
   becomes `AFTER(PARAM k, CALL(kernel, PARAM k, *reads))`, the value lowered over loop ranges (rangeify) with the
   slots it reads (inputs, and the AFTERs of values computed before) as the kernel's arguments. A COPY of a buffer to
   another device becomes a COPY call.
   A write, STORE(target view of PARAM new, value, old version), becomes CALL(store kernel, AFTER(PARAM new, old
   version), *reads): its output argument names the version it replaces. It reads that version through its own
   output slot, or from a copy made first when it also reads it at other places (`x.assign(x.flip(0))`).
4. `linearize` (ordering by buffer versions): the CALLs in dependency order, each after the CALLs behind the AFTERs it
   reads, each write after the write it overwrites and after every other reader of the version it replaces. A reader
   that cannot run before the write (it also reads the write's result) or a version that live values outside the
   schedule still read gets a copy of the old version, made before the write. Otherwise the order kernelize made the
   CALLs in (the graph's own order). The result is a LINEAR whose CALLs name their buffers by slot.

A hand-written kernel run in place (`Tensor.custom_kernel`) is a write too: its CALL names each slot it writes as
AFTER(slot, old version). `finish` then packs operands the device wants packed, numbers the slots densely and lets
scratch buffers share memory: the `Schedule` realize runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from uopir import Ops, PatternMatcher, UOp, UPat, dtypes, graph_rewrite

from .call_values import computed_arguments, in_place_arity, in_place_written, inline_calls, is_call_output
from .rangeify import KernelLowering
from .schedule import (
    OWN_COPY,
    SCHEDULE_CACHE_SIZE,
    BufferSpec,
    GraphWalk,
    Schedule,
    _device_of,
    _lowered_kernel,
    _size,
    _toposort,
    _unsafe_self_read,
    _variables,
    _version,
    _without_detach,
    buffered_nodes,
    operand_packs_of,
    packed_operand_bytes,
    row_fusion,
    schedule_cache,
)

_BUFFERED = "needs a buffer"  # the tag mark_buffers puts on a node that gets a buffer of its own
_SELF_READ = "reads a copy of the version it overwrites"  # ... on a write that reads its old version elsewhere too
_EMPTY_WRITE = "an empty write"  # the body of the CALL of a write into no elements
_SLOT_NAME = "buffer slot"  # the name of the PARAMs standing for a schedule's buffers


@dataclass(frozen=True)
class Parameterised:
    sink: UOp  # SINK of the targets, inputs replaced by PARAM slots
    inputs: tuple[UOp, ...]  # the PARAM of each input
    alias: tuple[int, ...] = ()  # alias[i]: the first input holding the same buffer as input i (empty: none do)
    live: frozenset[UOp] = frozenset()  # versions (inputs or pending writes) that values outside the schedule still read

    @property
    def n_inputs(self) -> int:
        return len(self.inputs)

    def canon(self, n: UOp) -> UOp:
        """The node standing for `n`'s buffer version: an input aliasing an earlier one is that one."""
        if self.alias and n.op is Ops.PARAM and n.arg.slot < len(self.inputs):
            return self.inputs[self.alias[n.arg.slot]]
        return n


def parameterise(targets: tuple[UOp, ...], inputs: list[UOp], devices: list[str], alias: tuple[int, ...] = (),
                 live: frozenset[UOp] = frozenset(), variables: dict[UOp, UOp] | None = None) -> Parameterised:
    """The targets' graph with input `i` replaced by PARAM slot `i` on `devices[i]` (where its buffer is: a realized
    graph of constants has no device of its own). An own copy's counter (writes.own_copy) is left out of its arg, so one
    schedule serves them all; a bound variable is the variable `variables` maps it to (`schedule.scheduled_variables`:
    the value is passed at run time). `alias` (by input position) and `live` (nodes of the graph) as in
    `cached_schedule`."""
    # named: a call body's own PARAMs (inlined below) must not be the same hash-consed nodes as the graph's slots
    subs = {leaf: UOp.param(i, leaf.dtype, leaf.shape_or_none, device, name=_SLOT_NAME) for i, (leaf, device) in enumerate(zip(inputs, devices))}
    slots = {**subs, **(variables or {})}
    both = UOp.sink(UOp.sink(*targets), UOp.sink(*live)).substitute(slots)
    nodes = _nodes(both.src[0])  # (the live versions are nodes of the targets' graph)
    if any(is_call_output(n) for n in nodes):  # a call's outputs are its inlined values (a precompiled one's in a kernel)
        # substitute does not enter call bodies: what a body reads besides its parameters (a buffer it captured) becomes
        # its slot once the body is inlined
        both = UOp.sink(*inline_calls(both.src, slots)).substitute(slots)
        nodes = _nodes(both.src[0])
    own = [n for n in nodes if n.op is Ops.CONTIGUOUS and type(n.arg) is str and n.arg.startswith(OWN_COPY)]
    if own:
        both = both.substitute({n: n.replace(arg=OWN_COPY) for n in own})
    return Parameterised(both.src[0], tuple(subs.values()), alias if any(a != i for i, a in enumerate(alias)) else (),
                         frozenset(both.src[1].src))


def _nodes(sink: UOp) -> list[UOp]:
    """The nodes under `sink` in topological order, stopping at PARAM slots and hand-written kernel bodies (SINKs)."""
    return [n for n in sink.toposort(gate=lambda n: n.op is not Ops.PARAM and (n is sink or n.op is not Ops.SINK)) if n is not sink]


def _base(view: UOp) -> UOp:
    """The PARAM slot under a write's target view."""
    while view.op is not Ops.PARAM:
        view = view.src[0]
    return view


def _is_write(n: UOp) -> bool:
    return n.op is Ops.STORE and len(n.src) == 3


def mark_buffers(graph: Parameterised, default_device: str | None = None) -> UOp:
    """SINK(the targets' sink, SINK(live versions)) with every node that needs a buffer tagged
    (`schedule.buffered_nodes` decides which; every write is one), a write whose value also reads the version it
    overwrites at other places than the ones it writes with _SELF_READ (it must read a copy: x.assign(x.flip(0)) must
    not read elements it already wrote)."""
    sink = graph.sink
    nodes = _nodes(sink)
    leaves = {n for n in nodes if n.op is Ops.PARAM}
    writes = [n for n in nodes if _is_write(n)]
    in_place = [n for n in nodes if n.op is Ops.CALL and in_place_arity(n) is not None]
    marked = buffered_nodes(nodes, (*sink.src, *writes, *in_place, *(a for c in in_place for a in computed_arguments(c))), leaves,
                            rows=default_device is not None and row_fusion(default_device))
    # the live versions ride along (SINK(targets' sink, SINK(live))) so later passes know what they became
    sink = UOp.sink(sink, UOp.sink(*graph.live))
    tags = dict.fromkeys(marked, _BUFFERED)
    for st in writes:
        target, value, old = st.src
        aligned = _without_detach(target.substitute({_base(target): old}))
        versions = {old} | {leaf for leaf in leaves if graph.canon(leaf) is graph.canon(old)}
        if value in leaves:
            unsafe = value in versions and value is not aligned
        else:
            unsafe = _unsafe_self_read(value, versions, aligned, marked | leaves)
        if unsafe:
            tags[st] = _SELF_READ
    return sink.substitute({n: n.rtag(tag) for n, tag in tags.items()}) if tags else sink


class _Kernelize:
    """kernelize's context: the graph, the next free slot (a new buffer's slot is a PARAM with its dtype, shape and
    device), and the order the CALLs are made in."""

    def __init__(self, graph: Parameterised, default_device: str):
        self.graph = graph
        self.next_slot = graph.n_inputs
        self.default_device = default_device
        self.made: dict[UOp, int] = {}
        self.devices: dict[UOp, str | None] = {}  # the device searches' answers (a search per new slot was quadratic)

    def new_slot(self, like: UOp) -> UOp:
        slot = UOp.param(self.next_slot, like.dtype, like.shape, _device_of(like, self.default_device, self.devices), name=_SLOT_NAME)
        self.next_slot += 1
        return slot

    def call(self, *src: UOp) -> UOp:
        c = UOp(Ops.CALL, dtypes.void, src)
        self.made.setdefault(c, len(self.made))
        return c

    def copy_of(self, version: UOp) -> UOp:
        """AFTER(new slot, CALL(copy kernel, new slot, version)): a copy of a buffer version."""
        out = self.new_slot(_slot(version))
        ast, _, variables = _lowered_kernel(UOp(Ops.CONTIGUOUS, version.dtype, (version,)), version, {version: 1}, 0)
        return out.after(self.call(ast, out, version, *variables))


def _reads(body: UOp) -> list[UOp]:
    """The slots a kernel computing `body` reads: input PARAMs and the AFTERs of values computed before, in order."""
    return [n for n in body.toposort(gate=lambda n: n.op not in (Ops.PARAM, Ops.AFTER)) if n.op in (Ops.PARAM, Ops.AFTER)]


def _slot(n: UOp) -> UOp:
    """The PARAM slot holding a read: a PARAM itself, an AFTER its buffer."""
    while n.op is Ops.AFTER:
        n = n.src[0]
    return n


def _replace_reads(value: UOp, subs: dict[UOp, UOp]) -> UOp:
    """`value` with the reads in `subs` replaced, within the kernel's own nodes (not below the AFTERs it reads)."""
    memo: dict[UOp, UOp] = {}
    for n in value.toposort(gate=lambda n: n.op not in (Ops.PARAM, Ops.AFTER)):
        if n in subs:
            memo[n] = subs[n]
        elif n.op not in (Ops.PARAM, Ops.AFTER) and any(s in memo for s in n.src):
            memo[n] = n.replace(src=tuple(memo.get(s, s) for s in n.src))
    return memo.get(value, value)


def _write_kernel(ctx: _Kernelize, st: UOp, self_read: bool) -> UOp:
    """The CALL of a write: a store kernel over the target view, reading the old version through its own output slot
    (or from a copy made first, when it reads that version elsewhere too)."""
    target, value, old = st.src
    base = _base(target)
    if _size(target.shape) == 0:  # writes nothing: ordered as a write, run as no kernel
        return ctx.call(UOp(Ops.NOOP, dtypes.void, (), _EMPTY_WRITE), base.after(old))
    canon = ctx.graph.canon
    versions = {r for r in _reads(value) if canon(r) is canon(old)} | {old}
    if self_read:
        copy = ctx.copy_of(old)
        # each read of the old version in its own shape: an input holding the same buffer may be another node's (a
        # realized value a call captured is (2, 2, 3) where the buffer's slot is (12,))
        value = _replace_reads(value, {r: copy if r.shape == copy.shape else copy.reshape(r.shape) for r in versions})
    reads = _reads(value)
    leaves = {r: 0 if r in versions else i + 1 for i, r in enumerate(reads)}
    lowering = KernelLowering(leaves, 0)
    ast = lowering.store_kernel(st.replace(src=(target, value, old), tag=None), base)
    number = {i + 1: r for i, r in enumerate(reads)}
    return ctx.call(ast, base.after(old), *(number[b] for b in lowering.buffers[1:]), *_variables(ast))


def _in_place_call(ctx: _Kernelize, call: UOp) -> UOp:
    """A hand-written kernel run in place (`Tensor.custom_kernel`): CALL(kernel, *launch buffers, *values before) becomes
    a CALL over its launch slots, each written one as AFTER(slot, the version it overwrites), each one only read as the
    version it reads (so the call runs after what made it)."""
    n = in_place_arity(call)
    assert n is not None
    launch, befores = call.src[1:1 + n], call.src[1 + n:]
    written = set(in_place_written(call))
    args = []
    for i, (slot, before) in enumerate(zip(launch, befores)):
        version = _version(before)
        # a read-only argument computed in this schedule (see `computed_arguments`) is kernelized to the AFTER of its
        # own kernel, which orders this call after that kernel
        args.append(slot.after(version) if i in written else version if _slot(version) is slot or version.op is Ops.AFTER else slot)
    return ctx.call(call.src[0], *args, *_variables(call.src[0]))


def _buffered(ctx: _Kernelize, x: UOp) -> UOp | None:
    """kernelize's rule: a tagged node (its sources already kernelized) becomes AFTER(new slot, CALL) or, for an empty
    buffer, the slot alone; a write becomes its CALL (the AFTER above it is its new version)."""
    if x.tag not in (_BUFFERED, _SELF_READ):
        return None
    if _is_write(x):
        return _write_kernel(ctx, x, x.tag == _SELF_READ)
    if x.op is Ops.CALL:
        return _in_place_call(ctx, x)
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
            return out.after(ctx.call(body, out, src))
        value = node.src[0]  # constants alone: computed on the copy's device
    else:
        value = node.src[0] if node.op is Ops.CONTIGUOUS else node
    reads = _reads(value)
    number = {n: i + 1 for i, n in enumerate(reads)}
    ast, slots, variables = _lowered_kernel(node, value, number, 0)
    return out.after(ctx.call(ast, out, *(reads[a - 1] for a in slots[1:]), *variables))


kernelize_rules = PatternMatcher([(UPat(None, name="x"), _buffered)])


def kernelize(marked: UOp, graph: Parameterised, default_device: str) -> tuple[UOp, _Kernelize]:
    """Every tagged node as its kernel's CALL (see the module docstring); returns the sink and the context (slots used,
    CALLs in the order they were made)."""
    ctx = _Kernelize(graph, default_device)
    return graph_rewrite(marked, kernelize_rules, ctx=ctx, name="kernelize"), ctx


def _producer(n: UOp) -> UOp | None:
    """The CALL that made a read: the CALL under AFTER(slot, CALL)."""
    return n.src[1] if n.op is Ops.AFTER and n.src[1].op is Ops.CALL else None


def _is_overwrite(a: UOp) -> bool:
    """Whether a CALL argument is a slot the call writes over an old version, AFTER(slot, old version) (a read of a
    computed value is AFTER(slot, the CALL that made it))."""
    return a.op is Ops.AFTER and a.src[1].op is not Ops.CALL


def _reaches(deps: dict[UOp, set[UOp]], start: UOp, goal: UOp) -> bool:
    stack, seen = [start], {start}
    while stack:
        for d in deps[stack.pop()]:
            if d is goal:
                return True
            if d not in seen:
                seen.add(d)
                stack.append(d)
    return False


@dataclass(frozen=True)
class Linearized:
    """What the passes make of one graph structure: the LINEAR over slots, the slot of each target, the kept copies."""

    linear: UOp
    outputs: tuple[UOp, ...]
    n_inputs: int
    preserved: tuple[tuple[UOp, UOp], ...] = ()


def linearize(sink: UOp, ctx: _Kernelize) -> Linearized:
    """Order the CALLs by buffer versions (see the module docstring) into a LINEAR over slots."""
    canon = ctx.graph.canon
    calls = sorted((n for n in sink.toposort(enter_calls=False) if n.op is Ops.CALL), key=ctx.made.__getitem__)
    # a write -> the versions it overwrites (one per written argument AFTER(slot, old version))
    olds = {c: [a.src[1] for a in c.src[1:] if _is_overwrite(a)] for c in calls}
    olds = {c: o for c, o in olds.items() if o}
    reads = {c: {canon(a) for a in c.src[1:] if a.op is Ops.PARAM or (a.op is Ops.AFTER and not _is_overwrite(a))} for c in calls}
    deps: dict[UOp, set[UOp]] = {c: {p for a in c.src[1:] if (p := _producer(a)) is not None} for c in calls}
    for w, versions in olds.items():  # versions of one buffer in order
        deps[w].update(p for old in versions if (p := _producer(old)) is not None)
    live = {canon(n) for n in sink.src[1].src}
    preserve: dict[UOp, set[UOp]] = {}  # old version -> the readers that read a copy of it instead
    for w, old in ((w, canon(o)) for w, versions in olds.items() for o in versions):
        for reader in calls:
            if reader is w or old not in reads[reader]:
                continue
            if old in live or _reaches(deps, reader, w):
                preserve.setdefault(old, set()).add(reader)
            else:
                deps[w].add(reader)  # a write after every read of the version it replaces
        if old in live:
            preserve.setdefault(old, set())
    redirect: dict[UOp, dict[UOp, UOp]] = {}  # reader -> {version: its copy}
    rank = {c: float(i) for i, c in enumerate(calls)}
    preserved: list[tuple[UOp, UOp]] = []  # (a live version's slot, the slot of the copy that keeps it)
    copies = []
    for old, readers in preserve.items():
        copy = ctx.copy_of(old)
        cp = copy.src[1]
        copies.append(cp)
        deps[cp] = {p} if (p := _producer(old)) is not None else set()
        rank[cp] = rank[p] + 0.5 if p is not None else -1.0
        for reader in readers:
            deps[reader].add(cp)
            redirect.setdefault(reader, {})[old] = copy
        for w, versions in olds.items():
            if any(canon(o) is old for o in versions):
                deps[w].add(cp)
        if old in live:
            preserved.append((_slot(old), _slot(copy)))
    order = _toposort([*calls, *copies], deps, rank.__getitem__)

    def arg(c: UOp, a: UOp) -> UOp:
        if c in redirect and a.op in (Ops.PARAM, Ops.AFTER) and (cp := redirect[c].get(canon(a))) is not None:
            a = cp
        return _slot(a)

    linear = UOp(Ops.LINEAR, dtypes.void, tuple(c.replace(src=(c.src[0], *(arg(c, a) for a in c.src[1:]))) for c in order))
    return Linearized(linear, tuple(_slot(t) for t in sink.src[0].src), ctx.graph.n_inputs, tuple(preserved))


def schedule_rewrites(graph: Parameterised, default_device: str) -> Linearized:
    """The passes, in order, over a parameterised graph."""
    return linearize(*kernelize(mark_buffers(graph, default_device), graph, default_device))


def _arg_slot(k: int) -> UOp:
    """The PARAM naming slot `k` among a finished schedule's CALL arguments."""
    return UOp.param(k, dtypes.void)


def number_slots(linear: UOp, outputs: tuple[UOp, ...], n_inputs: int,
                 default_device: str) -> tuple[UOp, tuple[BufferSpec, ...], Callable[[UOp], int]]:
    """`linear` with its slots numbered densely (inputs first, then the buffers it creates in the order kernelize made
    them; a slot no call touches, an empty buffer, still gets one), empty writes left out; the new buffers' specs and
    the number of each slot."""
    specs: dict[int, BufferSpec] = {}
    for p in [a for call in linear.src for a in call.src[1:]] + list(outputs):
        if p.op is Ops.PARAM and p.arg.slot >= n_inputs and p.arg.slot not in specs:
            specs[p.arg.slot] = (p.arg.device or default_device, _size(p.shape), p.dtype)
    number = {k: n_inputs + i for i, k in enumerate(sorted(specs))}

    def num(p: UOp) -> int:
        return p.arg.slot if p.arg.slot < n_inputs else number[p.arg.slot]

    calls = [c.replace(src=(c.src[0], *(_arg_slot(num(a)) if a.op is Ops.PARAM else a for a in c.src[1:])))
             for c in linear.src if c.src[0].op is not Ops.NOOP]
    return UOp(Ops.LINEAR, dtypes.void, tuple(calls)), tuple(specs[k] for k in sorted(specs)), num


def pack_operands(linear: UOp, default_device: str) -> UOp:
    """Each kernel whose device wants an operand packed (`uopir.operand_packs`: a matmul's operand read across rows, on
    the CPU) reads it from a new slot a packing kernel fills just before it."""
    next_slot = 1 + max((a.arg.slot for c in linear.src for a in c.src[1:] if a.op is Ops.PARAM), default=-1)
    calls: list[UOp] = []
    for call in linear.src:
        body, args = call.src[0], list(call.src[1:])
        device = _slot(args[0]).arg.device or default_device if args else default_device
        if body.op is Ops.SINK and (group := packed_operand_bytes(device)) and (packed := operand_packs_of(body, group))[1]:
            body, packs = packed
            for pack in packs:
                slot = UOp.param(next_slot, pack.dtype, (pack.size,), device)
                next_slot += 1
                calls.append(UOp(Ops.CALL, dtypes.void, (pack.ast, slot, args[pack.slot])))
                args[pack.slot] = slot
        calls.append(call.replace(src=(body, *args)))
    return UOp(Ops.LINEAR, dtypes.void, tuple(calls))


def share_scratch(sched: Schedule) -> Schedule:
    """Scratch buffers shared: a buffer the schedule creates that nothing outside it reads afterwards (not an output, a
    written version or a kept copy) lives from the call that first touches it to the last; one whose life has ended is
    taken again by the next scratch buffer of the same device, size and dtype. A model's layers compute the same shapes
    over and over, so a 30-layer forward pass needs about one layer's scratch memory instead of thirty (and a TinyJit
    capture owns that much). Slots are then numbered densely again."""
    n_in = sched.n_inputs
    escaping = {*sched.outputs, *(b for _, b in sched.afters), *(b for pair in sched.preserved for b in pair)}
    touched_by = [[a.arg.slot for a in call.src[1:] if a.op is Ops.PARAM] for call in sched.linear.src]
    last: dict[int, int] = {}
    for i, slots in enumerate(touched_by):
        for b in slots:
            last[b] = i
    free: dict[BufferSpec, list[int]] = {}
    home: dict[int, int] = {}  # scratch slot -> the slot it shares (itself when it is the first)
    for i, slots in enumerate(touched_by):
        touched = [b for b in dict.fromkeys(slots) if b >= n_in and b not in escaping]
        for b in touched:
            if b not in home:
                pool = free.get(sched.new_buffers[b - n_in])
                home[b] = pool.pop() if pool else b
        for b in touched:
            if last[b] == i:
                free.setdefault(sched.new_buffers[b - n_in], []).append(home[b])
    if all(h == b for b, h in home.items()):
        sched.scratch = tuple(sorted(home))
        return sched
    kept = [b for b in range(n_in, n_in + len(sched.new_buffers)) if home.get(b, b) == b]
    number = {b: n_in + i for i, b in enumerate(kept)}
    number.update((b, number[h]) for b, h in home.items())

    def num(b: int) -> int:
        return b if b < n_in else number[b]

    linear = UOp(Ops.LINEAR, dtypes.void, tuple(c.replace(src=(c.src[0], *(_arg_slot(num(a.arg.slot)) if a.op is Ops.PARAM else a
                                                                          for a in c.src[1:]))) for c in sched.linear.src))
    return Schedule(linear, n_in, tuple(sched.new_buffers[b - n_in] for b in kept), tuple(map(num, sched.outputs)),
                    tuple((pos, num(b)) for pos, b in sched.afters), tuple((num(a), num(b)) for a, b in sched.preserved),
                    tuple(sorted({number[h] for h in home.values()})))


def finish(sched: Linearized, default_device: str, afters: tuple[tuple[int, int], ...] = ()) -> Schedule:
    """The schedule realize runs: operands packed (`pack_operands`), slots numbered (`number_slots`), scratch shared
    (`share_scratch`). `afters`: (walk position, input) of each buffer version the graph's writes make."""
    linear, specs, num = number_slots(pack_operands(sched.linear, default_device), sched.outputs, sched.n_inputs, default_device)
    return share_scratch(Schedule(linear, sched.n_inputs, specs, tuple(map(num, sched.outputs)), afters,
                                  tuple((num(a), num(b)) for a, b in sched.preserved)))


def cached_schedule(walk: GraphWalk, targets: tuple[UOp, ...], devices: list[str], default_device: str,
                    live: frozenset[UOp] = frozenset(), alias: tuple[int, ...] = (), store: bool | dict = True,
                    variables: dict[UOp, UOp] | None = None, on_miss: Callable[[], bool] | None = None) -> Schedule | None:
    """The schedule of the walked graph under `targets` (its inputs held on `devices`), cached by structure
    (`schedule.clear_schedule_cache` clears the cache). `live`: versions (nodes of the graph) that values outside the
    schedule still read, kept when overwritten; `alias[i]`: the first input holding the same buffer as input i; `store`:
    False looks up without keeping a new schedule, a dict keeps it there instead (a TinyJit capture's own); `variables`:
    the variable each of the graph's bound variables is scheduled as (`schedule.scheduled_variables`); `on_miss`: asked
    when no schedule is cached, None is returned instead of a new one when it says True."""
    # the walk's structural key describes the parameterised graph node by node (ops, dtypes, args, input slots), so it
    # stands for it here: equal keys, equal parameterised graphs (test_sched_schedule_rewrites checks both ways), and
    # the walk a realize needs anyway computes it, where building the parameterised graph costs a rebuild of every node
    # (~0.3 ms for a training step's graph). The graph is built on a miss
    key = (walk.key, tuple(devices), tuple(i for i, n in enumerate(walk.nodes) if n in live) if live else (), alias)
    if (plan := schedule_cache.get(key)) is not None:
        return plan
    local = store if isinstance(store, dict) else None
    if local is not None and (plan := local.get(key)) is not None:
        return plan
    if on_miss is not None and on_miss():
        return None
    graph = parameterise(targets, walk.inputs, devices, alias, live, variables)
    position = {n: i for i, n in enumerate(walk.inputs)}
    leaves = set(walk.inputs)
    afters = tuple((i, position[n.src[0]]) for i, n in enumerate(walk.nodes)
                   if n.op is Ops.AFTER and n not in leaves and not is_call_output(n))
    plan = finish(schedule_rewrites(graph, default_device), default_device, afters)
    if local is not None:
        local[key] = plan
    elif store:
        if len(schedule_cache) >= SCHEDULE_CACHE_SIZE:
            del schedule_cache[next(iter(schedule_cache))]  # the oldest entry
        schedule_cache[key] = plan
    return plan
