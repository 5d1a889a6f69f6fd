"""The scheduler as graph rewrites.

A tensor graph becomes a LINEAR of CALLs over PARAM slots in named passes over UOps:

1. `parameterise`: the graph's inputs (BUFFERs, values already realized) become PARAM slots 0..n-1 on their buffers'
   devices. UOps are hash-consed, so graphs of one structure over other buffers are the same parameterised UOp; the
   schedule cache is keyed by the walk's structural key, its node-by-node description (see `rewrite_plan`).
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
AFTER(slot, old version). Running is shared: `as_plan` turns the LINEAR into the plan the runner takes (operand packs
and scratch sharing included), until the plan dataclasses go.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from uopir import Ops, PatternMatcher, UOp, UPat, dtypes, graph_rewrite

from .calls import in_place_arity, in_place_written
from .rangeify import KernelLowering
from .schedule import (
    OWN_COPY,
    PLAN_CACHE_SIZE,
    CopyStep,
    GraphWalk,
    KernelStep,
    NewBuffer,
    Plan,
    _device_of,
    _lowered_kernel,
    _size,
    _toposort,
    _unsafe_self_read,
    _version,
    _with_packs,
    _without_detach,
    buffered_nodes,
    rewrite_cache,
    share_buffers,
)

_BUFFERED = "needs a buffer"  # the tag mark_buffers puts on a node that gets a buffer of its own
_SELF_READ = "reads a copy of the version it overwrites"  # ... on a write that reads its old version elsewhere too
_EMPTY_WRITE = "an empty write"  # the body of the CALL of a write into no elements


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
                 live: frozenset[UOp] = frozenset()) -> Parameterised:
    """The targets' graph with input `i` replaced by PARAM slot `i` on `devices[i]` (where its buffer is: a realized
    graph of constants has no device of its own). An own copy's counter (writes.own_copy) is left out of its arg, so one
    schedule serves them all. `alias` (by input position) and `live` (nodes of the graph) as in `schedule.build_plan`."""
    subs = {leaf: UOp.param(i, leaf.dtype, leaf.shape_or_none, device) for i, (leaf, device) in enumerate(zip(inputs, devices))}
    both = UOp.sink(UOp.sink(*targets), UOp.sink(*live)).substitute(subs)
    own = [n for n in _nodes(both) if n.op is Ops.CONTIGUOUS and type(n.arg) is str and n.arg.startswith(OWN_COPY)]
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


def mark_buffers(graph: Parameterised) -> UOp:
    """SINK(the targets' sink, SINK(live versions)) with every node that needs a buffer tagged
    (`schedule.buffered_nodes` decides which; every write is one), a write whose value also reads the version it
    overwrites at other places than the ones it writes with _SELF_READ (it must read a copy: x.assign(x.flip(0)) must
    not read elements it already wrote)."""
    sink = graph.sink
    nodes = _nodes(sink)
    leaves = {n for n in nodes if n.op is Ops.PARAM}
    writes = [n for n in nodes if _is_write(n)]
    in_place = [n for n in nodes if n.op is Ops.CALL and in_place_arity(n) is not None]
    marked = buffered_nodes(nodes, (*sink.src, *writes, *in_place), leaves)
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

    def new_slot(self, like: UOp) -> UOp:
        slot = UOp.param(self.next_slot, like.dtype, like.shape, _device_of(like, self.default_device))
        self.next_slot += 1
        return slot

    def call(self, *src: UOp) -> UOp:
        c = UOp(Ops.CALL, dtypes.void, src)
        self.made.setdefault(c, len(self.made))
        return c

    def copy_of(self, version: UOp) -> UOp:
        """AFTER(new slot, CALL(copy kernel, new slot, version)): a copy of a buffer version."""
        out = self.new_slot(_slot(version))
        step = _lowered_kernel(UOp(Ops.CONTIGUOUS, version.dtype, (version,)), version, {version: 1}, 0)
        return out.after(self.call(step.ast, out, version, *step.variables))


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
        value = _replace_reads(value, dict.fromkeys(versions, copy))
    reads = _reads(value)
    leaves = {r: 0 if r in versions else i + 1 for i, r in enumerate(reads)}
    lowering = KernelLowering(leaves, 0)
    ast = lowering.store_kernel(st.replace(src=(target, value, old), tag=None), base)
    number = {i + 1: r for i, r in enumerate(reads)}
    variables = sorted({u for u in ast.toposort() if u.op is Ops.DEFINE_VAR}, key=lambda v: v.arg[0])
    return ctx.call(ast, base.after(old), *(number[b] for b in lowering.buffers[1:]), *variables)


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
        args.append(slot.after(version) if i in written else version if _slot(version) is slot else slot)
    variables = sorted({u for u in call.src[0].toposort() if u.op is Ops.DEFINE_VAR}, key=lambda v: v.arg[0])
    return ctx.call(call.src[0], *args, *variables)


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
    step = _lowered_kernel(node, value, number, 0)
    return out.after(ctx.call(step.ast, out, *(reads[a - 1] for a in step.args[1:]), *step.variables))


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


@dataclass
class _Linear:
    linear: UOp
    outputs: tuple[UOp, ...]
    preserved: list[tuple[UOp, UOp]] = field(default_factory=list)  # (old version's slot, the slot of its copy)


def linearize(sink: UOp, ctx: _Kernelize) -> _Linear:
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
    out = _Linear(UOp(Ops.LINEAR, dtypes.void, ()), ())
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
            out.preserved.append((_slot(old), _slot(copy)))
    order = _toposort([*calls, *copies], deps, rank.__getitem__)

    def arg(c: UOp, a: UOp) -> UOp:
        if c in redirect and a.op in (Ops.PARAM, Ops.AFTER) and (cp := redirect[c].get(canon(a))) is not None:
            a = cp
        return _slot(a)

    out.linear = UOp(Ops.LINEAR, dtypes.void, tuple(c.replace(src=(c.src[0], *(arg(c, a) for a in c.src[1:]))) for c in order))
    out.outputs = tuple(_slot(t) for t in sink.src[0].src)
    return out


@dataclass(frozen=True)
class RewriteSchedule:
    """What the passes made of one graph structure: the LINEAR over slots, the slot of each target, the kept copies."""

    linear: UOp
    outputs: tuple[UOp, ...]
    n_inputs: int
    preserved: tuple[tuple[UOp, UOp], ...] = ()


def schedule_rewrites(graph: Parameterised, default_device: str) -> RewriteSchedule:
    """The passes, in order, over a parameterised graph."""
    sink, ctx = kernelize(mark_buffers(graph), graph, default_device)
    lin = linearize(sink, ctx)
    return RewriteSchedule(lin.linear, lin.outputs, graph.n_inputs, tuple(lin.preserved))


def as_plan(sched: RewriteSchedule, default_device: str, afters: tuple[tuple[int, int], ...] = ()) -> Plan:
    """The plan the runner takes for a rewrite schedule: slot k is buffer k; kernels whose device packs operands get
    their packing kernels; scratch buffers are shared. `afters`: (walk position, input) of each buffer version the
    graph's writes make."""
    specs: dict[int, NewBuffer] = {}
    steps: list[KernelStep | CopyStep] = []

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
        if body.op is Ops.NOOP:  # an empty write
            continue
        bufs = tuple(num(a) for a in args if a.op is Ops.PARAM)
        variables = tuple(a for a in args if a.op is Ops.DEFINE_VAR)
        device = args[0].arg.device or default_device
        steps.extend(_with_packs(KernelStep(body, bufs, variables), device, new_buffers, sched.n_inputs))
    return share_buffers(Plan(sched.n_inputs, tuple(new_buffers), tuple(steps), tuple(num(p) for p in sched.outputs), afters,
                              tuple((num(a), num(b)) for a, b in sched.preserved)))


def rewrite_plan(walk: GraphWalk, targets: tuple[UOp, ...], devices: list[str], default_device: str,
                 live: frozenset[UOp] = frozenset(), alias: tuple[int, ...] = (), store: bool | dict = True) -> Plan:
    """The plan of the walked graph under `targets` (its inputs held on `devices`) made by the rewrite passes, cached
    by the parameterised graph (`live`, `alias` and `store` as in `schedule.cached_plan`; `schedule.clear_schedule_cache`
    clears it)."""
    # the walk's structural key describes the parameterised graph node by node (ops, dtypes, args, input slots), so it
    # stands for it here: equal keys, equal parameterised graphs (test_sched_schedule_rewrites checks both ways), and
    # the walk a realize needs anyway computes it, where building the parameterised graph costs a rebuild of every node
    # (~0.3 ms for a training step's graph). The graph is built on a miss
    key = (walk.key, tuple(devices), tuple(i for i, n in enumerate(walk.nodes) if n in live) if live else (), alias)
    if (plan := rewrite_cache.get(key)) is not None:
        return plan
    local = store if isinstance(store, dict) else None
    if local is not None and (plan := local.get(key)) is not None:
        return plan
    graph = parameterise(targets, walk.inputs, devices, alias, live)
    position = {n: i for i, n in enumerate(walk.inputs)}
    leaves = set(walk.inputs)
    afters = tuple((i, position[n.src[0]]) for i, n in enumerate(walk.nodes) if n.op is Ops.AFTER and n not in leaves)
    plan = as_plan(schedule_rewrites(graph, default_device), default_device, afters)
    if local is not None:
        local[key] = plan
    elif store:
        if len(rewrite_cache) >= PLAN_CACHE_SIZE:
            del rewrite_cache[next(iter(rewrite_cache))]  # the oldest entry
        rewrite_cache[key] = plan
    return plan
