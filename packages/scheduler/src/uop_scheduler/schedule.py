"""What the scheduler's passes (schedule_rewrites.py) share: the graph walk and its structural key, the rule for what
gets a buffer of its own, kernel lowering with its cache, operand packing, and the plan the runner takes.

Which nodes get their own buffer ("realized", `buffered_nodes`):
- the targets being realized, CONTIGUOUS nodes, COPY nodes and the sources of COPYs;
- a REDUCE, unless it reaches a realized node through single-consumer elementwise or one-to-one movement ops only
  (then it is computed inside that node's kernel, as in `x.sum() + 1`). So a reduce feeding another reduce, a reduce read through a
  movement op (softmax's `x - x.max()` broadcast) and a reduce with several consumers are materialized once instead
  of being recomputed per output element. On a device whose kernels are loops, a reduction of rows that only its own
  rows read (softmax's max and sum, a norm's mean) is computed in the one kernel that reads it instead (`_row_fused`).
Everything else (elementwise chains, movement ops, constants) is fused into each kernel that reads it.

A plan refers to buffers by number (the graph's inputs first, then the buffers it creates), so it does not depend on
which buffers the graph reads: the walk's key describes the graph up to its input buffers, and graphs with the same
key reuse one cached plan.
"""

from __future__ import annotations

import functools
import math
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from hcq_runtime import Device
from uopir import DType, GroupOp, OperandPack, Ops, UOp, dtypes, operand_packs

from .call_values import is_value_call
from .errors import TensorWriteError
from .rangeify import KernelLowering

# ops a reduce can be computed through without being recomputed: each output element reads at most one reduce
# element (EXPAND would read one many times, another REDUCE would loop over it). PAD is not one of them: the padded
# elements would still run the reduce loop before the gate drops it (a concatenation of matmuls would compute every
# product for every output element)
_ONE_TO_ONE = GroupOp.ALU | {Ops.CAST, Ops.BITCAST, Ops.CONTIGUOUS, Ops.RESHAPE, Ops.PERMUTE, Ops.SHRINK, Ops.FLIP}


#: (device, size, dtype) of a buffer a schedule creates
BufferSpec = tuple[str, int, DType]


@dataclass(eq=False)
class Schedule:
    """What realize runs for one graph structure: `linear`, a LINEAR of CALLs whose buffers are PARAM slots (a kernel SINK
    or a COPY as body, then its buffers; a kernel reading bound variables takes their DEFINE_VARs after them). Slots
    0..n_inputs-1 are the graph's inputs, then one per buffer the schedule creates (`new_buffers`)."""

    linear: UOp
    n_inputs: int
    new_buffers: tuple[BufferSpec, ...]
    outputs: tuple[int, ...]  # the slot holding each target
    afters: tuple[tuple[int, int], ...] = ()  # (walk position of an AFTER, the slot holding that version)
    preserved: tuple[tuple[int, int], ...] = ()  # (old version's slot, the copy that keeps its value for later readers)
    scratch: tuple[int, ...] = ()  # slots nothing reads after the schedule has run (see `schedule_rewrites.share_scratch`)
    # how it has run: [times, its calls linked into one native run (None: not yet, False: they cannot be)]
    runs: list = field(default_factory=lambda: [0, None], repr=False)
    # the BUFFERs of its scratch slots from its last eager run, for the next one (`realizer.spare_scratch`)
    spare: list | None = field(default=None, repr=False)


#: the name of every variable a write binds for where a slice it writes starts (`writes.write`), before its number.
#: Realize schedules these by their order in the walked graph (`scheduled_variables`), so one schedule serves every offset
OFFSET_VAR = "slice_at"
OWN_COPY = "copy before a write"  # the arg of every own copy (writes.own_copy), before its number


def _arg_key(arg: Any) -> Any:
    # floats by their bits: nan would never equal itself and 0.0 == -0.0 would merge two different constants
    if type(arg) is str and arg.startswith(OWN_COPY):  # own copies differ by a counter only: one plan serves them all
        return OWN_COPY
    return struct.pack("<d", arg) if type(arg) is float else arg


def _size(shape: tuple) -> int:
    """Elements of `shape`; a symbolic shape takes its largest size (a buffer fits every value of its variables)."""
    ret: Any = 1
    for d in shape:
        ret = ret * d
    return ret if isinstance(ret, int) else int(ret.vmax)


@dataclass
class GraphWalk:
    """The nodes under the targets in topological order, the input leaves, and the structural key."""

    nodes: list[UOp]
    inputs: list[UOp]
    key: tuple
    marked: list[UOp]  # the nodes realize looks at (MARKED_OPS: storage, calls, writes, bound variables), in order
    #: the slices of buffers the walk took as inputs, each with its buffer and first element (`contiguous_slice`; only
    #: when asked to lift them)
    lifted: dict[UOp, tuple[UOp, int]] = field(default_factory=dict)
    #: the constants the walk took as inputs (`walk_graph`'s `constants`), each a one-element buffer when run
    constants: list[UOp] = field(default_factory=list)
    #: every node the walk listed (`nodes`, inputs included) -> its position
    position: dict[UOp, int] = field(default_factory=dict)
    #: the bodies of hand-written kernels met: the walk does not enter them (see `walk_graph`)
    opaque: list[UOp] = field(default_factory=list)
    #: how many inputs are values realized earlier (`leaves`): the walk did not enter their graphs
    realized: int = 0


_ENTERED = -1  # a walk's state of a node whose sources are being walked

#: the ops whose nodes a walk lists in `GraphWalk.marked`, so realize checks them without scanning every node again
MARKED_OPS = frozenset({Ops.BUFFER, Ops.COPY, Ops.AFTER, Ops.BIND, Ops.STORE, Ops.CALL})


def contiguous_slice(node: UOp) -> tuple[UOp, int] | None:
    """For a SHRINK of a buffer on a CPU device that keeps one contiguous run of its elements (a batch of rows
    `x[i:i + n]`, a row `x[i]`, a slice of a row `x[i][j:k]`: SHRINKs and RESHAPEs down to the BUFFER): the BUFFER and
    the run's first element. None otherwise (a column slice, a symbolic bound, a view of something computed)."""
    return _run_of(node) if node.op is Ops.SHRINK else None


def _run_of(node: UOp) -> tuple[UOp, int] | None:
    """(BUFFER, first element) when `node`'s elements, in row-major order, are one contiguous run of a CPU buffer's."""
    if node.op is Ops.BUFFER:
        device = node.arg.device
        return (node, 0) if not node.arg.unbound and type(device) is str and device.startswith("CPU") else None
    if node.op is Ops.RESHAPE:  # the same elements in the same order
        return _run_of(node.src[0])
    if node.op is not Ops.SHRINK or (inner := _run_of(node.src[0])) is None:
        return None
    shape = node.src[0].shape_or_none
    bounds = node.src[1:]
    if shape is None or any(type(d) is not int for d in shape) or any(b.op is not Ops.CONST or type(b.arg) is not int for b in bounds):
        return None
    first, stride, outer = 0, 1, False  # `outer`: an axis inside the run is cut, so every axis outside keeps one element
    for axis in range(len(shape) - 1, -1, -1):
        b, e = bounds[2 * axis].arg, bounds[2 * axis + 1].arg
        if e <= b or (outer and e - b != 1):
            return None
        if (b, e) != (0, shape[axis]):
            outer = True
        first += b * stride
        stride *= shape[axis]
    return inner[0], inner[1] + first


def walk_graph(targets: tuple[UOp, ...], leaves: set[UOp] | Any, default_device: str, lift: bool = False,
               by_order: bool = False, constants: frozenset[UOp] | set[UOp] = frozenset()) -> GraphWalk:
    """Toposort the graph under `targets`, stopping at BUFFERs, at bound variables and at nodes in `leaves` (already
    realized). The body of a value call (`call_with_outputs`, `@function`) is walked too: the passes inline it, so what
    it reads besides its parameters (a buffer or realized tensor it captured, `allow_implicit`) is an input like any
    other.

    `by_order`: a written slice's offset variable (`OFFSET_VAR`) is keyed by its order among them, not by its name
    (see `scheduled_variables`).

    `constants`: float constants that are inputs of their own (`varying_constants`), keyed by dtype alone.

    `lift`: a contiguous slice of a buffer (`contiguous_slice`) is an input of its own, a view of the buffer's memory
    at its offset, rather than a SHRINK whose bounds are constants of the kernels that read it: a loop over a dataset's
    batches `x[i * n:(i + 1) * n]` then runs the kernels of its first batch (each batch was a new kernel to compile,
    70-170 ms a step). Not a slice that is itself a target, or a view of one (its buffer would be the memory of the
    buffer it slices, not a value of its own)."""
    sink = UOp.sink(*targets)
    lifted: dict[UOp, tuple[UOp, int]] = {}
    kept: set[UOp] = set()  # slices a target views (not lifted)
    if lift:
        for t in targets:
            while t.op in GroupOp.Movement:
                if t.op is Ops.SHRINK:
                    kept.add(t)
                t = t.src[0]
    # one pass, depth first, each node's key entry made as it is finished (every source has its position then): the
    # toposort with a gate closure followed by a second loop over its order took 1.7x as long (0.5 ms of an eager MLP
    # training step's ~300 nodes). A node popped again after it was entered is finished (see `UOp.toposort`); a node
    # the walk does not enter (a buffer, a bound variable, a leaf, a kernel's opaque body) is finished at once
    # one dict for both walk states: a node's position once finished, ENTERED while its sources are walked (a set of
    # entered nodes beside the positions was a second lookup per pop)
    position: dict[UOp, int] = {}
    nodes: list[UOp] = []
    inputs: list[UOp] = []
    key: list[Any] = [default_device]
    marked: list[UOp] = []
    inlined: set[UOp] = set()  # the bodies of value calls met
    offsets: dict[str, int] = {}  # the written slices' offset variables met, by name, in order
    lifted_constants: list[UOp] = []
    opaque: list[UOp] = []
    realized = 0
    stack = [sink]
    pop, push, at, state = stack.pop, stack.append, position.__getitem__, position.get
    SINK, BUFFER, BIND, CALL, SHRINK = Ops.SINK, Ops.BUFFER, Ops.BIND, Ops.CALL, Ops.SHRINK
    while stack:
        node = pop()
        if (seen := state(node)) is not None and seen >= 0:
            continue
        op = node.op
        entry: Any
        if seen is not None:  # entered: every source is finished now
            if node is sink:
                continue
            if op is SINK:
                entry = ("body", node)
            else:
                arg = node.arg
                entry = (op, node.dtype, _arg_key(arg) if type(arg) in (float, str) else arg, tuple(map(at, node.src)))
        elif op is BUFFER:
            if node.arg.unbound:  # a call's output buffer: the call is inlined, it holds nothing
                entry = ("out", node.dtype, node.shape, node.device)
            else:
                inputs.append(node)
                entry = ("in", node.dtype, node.shape, node.device)
        elif op is BIND:  # a bound variable is its variable here (its value is passed at run time): one schedule for every value
            var = node.src[0].arg
            if by_order and var[0].startswith(OFFSET_VAR):  # a written slice's offset: by its order (see `scheduled_variables`)
                entry = (op, node.dtype, (OFFSET_VAR, offsets.setdefault(var[0], len(offsets)), *var[1:]))
            else:
                entry = (op, node.dtype, var)
        elif node in leaves:  # realized already (`leaves` is asked once per node: it may be a costly container)
            inputs.append(node)
            realized += 1
            entry = ("in", node.dtype, node.shape, node.device)
        elif op is SINK and node is not sink and node not in inlined:  # a hand-written kernel's body is opaque
            entry = ("body", node)
            opaque.append(node)
        elif lift and op is SHRINK and node not in kept and (piece := contiguous_slice(node)) is not None:
            inputs.append(node)
            lifted[node] = piece
            entry = ("in", node.dtype, node.shape, piece[0].arg.device)
        elif constants and node in constants:  # a constant whose value changes from run to run: an input
            inputs.append(node)
            lifted_constants.append(node)
            entry = ("in", node.dtype, node.shape, default_device)
        elif not node.src:  # a leaf (a constant, a shape's size): finished at once, without entering it first
            arg = node.arg
            entry = (op, node.dtype, _arg_key(arg) if type(arg) in (float, str) else arg, ())
        else:
            if op is CALL and is_value_call(node):
                inlined.add(node.src[0])
            position[node] = _ENTERED
            push(node)
            for s in reversed(node.src):
                if (st := state(s)) is None or st < 0:
                    push(s)
            continue
        position[node] = len(nodes)
        nodes.append(node)
        if op in MARKED_OPS:
            marked.append(node)
        key.append(entry)
    key.append(tuple(map(at, targets)))
    return GraphWalk(nodes, inputs, tuple(key), marked, lifted, lifted_constants, position, opaque, realized)


#: the float dtypes whose constants may become inputs (`varying_constants`: held in a one-element buffer by numpy)
_VARYING_DTYPES = frozenset({dtypes.float16, dtypes.float32, dtypes.float64})
_BLANK = (Ops.CONST, None)  # a float constant's entry in a walk key with its value left out
# per walk key with its float constants' values left out: the values last seen, and the key positions seen to change
_constant_history: dict[tuple, tuple[tuple, frozenset[int]]] = {}


def varying_constants(walk: GraphWalk) -> set[UOp]:
    """The float constants of a walked graph whose values changed since the last graph of the same structure that
    missed the schedule cache (the same walk key but for float constants' values): `x * alpha` with a new Python float
    at each step of a loop, a loss scaled by `1 / (i + 1)`. Realize takes them as inputs (`walk_graph`'s `constants`),
    so the loop compiles its kernels twice (the first value baked in, then with the value read from memory) instead
    of once per value, 60-170 ms each. Constants that have not changed stay constants: folding and the code generator
    see their values."""
    key = walk.key
    at = [i for i, e in enumerate(key) if type(e) is tuple and len(e) == 4 and e[0] is Ops.CONST and e[1] in _VARYING_DTYPES]
    if not at:
        return set()
    relaxed = list(key)
    for i in at:
        relaxed[i] = _BLANK
    shape_key = tuple(relaxed)
    values = tuple(key[i][2] for i in at)
    seen = _constant_history.pop(shape_key, None)  # (put back last: the dict's order is the eviction order)
    varying = frozenset() if seen is None else seen[1] | {i for i, a, b in zip(at, values, seen[0]) if a != b}
    if len(_constant_history) >= SCHEDULE_CACHE_SIZE:
        del _constant_history[next(iter(_constant_history))]
    _constant_history[shape_key] = (values, varying)
    return {walk.nodes[i - 1] for i in varying}  # (key[0] is the device: node p has entry p + 1)


def scheduled_variables(binds: list[UOp], by_order: bool) -> dict[UOp, UOp]:
    """The variable each bound variable of a walked graph (`binds`, in walk order) is scheduled as: its own, or with
    `by_order` (as the walk was made), for the offset of a written slice (`OFFSET_VAR`), a variable named by the order of
    the offsets in the walk. A later write at other offsets has fresh variables in the same places; named the same way,
    they are the same schedule and the same kernels (compiled once), run with the new values."""
    ret: dict[UOp, UOp] = {}
    order: dict[UOp, UOp] = {}
    for b in binds:
        var = b.src[0]
        if by_order and var.arg[0].startswith(OFFSET_VAR):
            if var not in order:
                order[var] = UOp.variable(f"{OFFSET_VAR}{len(order)}", var.arg[1], var.arg[2], var.dtype)
            ret[b] = order[var]
        else:
            ret[b] = var
    return ret


def _is_leaf_view(node: UOp, leaf_set: set[UOp]) -> UOp | None:
    """The leaf under `node` when `node` is only a full-size reshape of it (a contiguous view), else None."""
    while node.op is Ops.RESHAPE:
        node = node.src[0]
    return node if node in leaf_set else None


def bytes_only(device) -> bool:
    """Whether `device` only stores bytes (runs no kernels: DISK)."""
    return isinstance(device, str) and _bytes_only_name(device)


@functools.lru_cache(maxsize=256)
def _bytes_only_name(device: str) -> bool:
    return device.upper().startswith("DISK")  # asked for every buffer of every realize: the upper-cased copy once per name


def device_below(node: UOp) -> str | None:
    """Where a node is computed: its own device, else the device of the buffers below it (`UOp.device` follows only
    the first source, and a graph such as a gradient can start from a device-less constant); None for a graph of
    constants alone."""
    return device_below_in(node, {})


def _placed(n: UOp) -> bool:
    """What `device_below` looks for under a node: a buffer (a PARAM is a parameterised graph's input buffer) or a COPY
    on one device. The search goes depth first, sources in order, and not below a COPY (it puts its value on its
    device)."""
    return n.op in (Ops.BUFFER, Ops.PARAM, Ops.COPY) and isinstance(n.device, str)


def _device_of(node: UOp, default_device: str, memo: dict[UOp, str | None] | None = None) -> str:
    """`device_below`, else the default; with `memo` (shared by the calls on one graph, see `device_below_in`) each
    node is searched once."""
    return device_below_in(node, {} if memo is None else memo) or default_device


def device_below_in(node: UOp, memo: dict[UOp, str | None]) -> str | None:
    """`device_below(node)`, its search's answers kept in `memo` (the device of the first placed node in the search's
    order below a node, or None), so asking it for many nodes of one graph searches each node at most once. The search
    still stops at the first match: then every node it had entered and not left has that match as its own first one
    (whatever it met before inside them had none; a node met again had none either, or had this answer)."""
    if isinstance(node.device, str):
        return node.device
    stack: list[tuple[UOp, bool]] = [(node, False)]
    entered: list[UOp] = []  # the nodes entered and not left, outermost first
    found: str | None = None
    while stack:
        n, leaving = stack.pop()
        if leaving:
            memo[entered.pop()] = None  # searched through: nothing placed below
            continue
        if n in memo:
            if (found := memo[n]) is not None:
                break
            continue
        if _placed(n):
            found = memo[n] = n.device
            break
        if n.op is Ops.COPY:
            memo[n] = None
            continue
        entered.append(n)
        stack.append((n, True))
        stack.extend((s, False) for s in reversed(n.src))
    for n in entered:
        memo[n] = found
    return found


def _version(value: UOp) -> UOp:
    """The buffer version a value is a view of."""
    while value.op in GroupOp.Movement or value.op is Ops.DETACH:
        value = value.src[0]
    return value


def _unsafe_self_read(value: UOp, versions: set[UOp], aligned: UOp, boundary: set[UOp]) -> bool:
    """Whether computing `value` element by element while writing it through the view `aligned` of a buffer version
    could read an element the same kernel already overwrote: a read of the version (any node of `versions`, the nodes
    that hold it) other than through `aligned`, or `aligned` read through a movement op or a reduction. Only the nodes
    fused into the kernel count: the walk stops at `boundary` (values other kernels compute, which are ordered before
    the write)."""
    def expands(n: UOp) -> bool:
        return n is not aligned and n.op not in (Ops.BUFFER, Ops.AFTER) and (n is value or n not in boundary)

    # post-order (every source before its users), iteratively: a node is finished once all its sources are
    tainted: dict[UOp, bool] = {}
    stack: list[tuple[UOp, bool]] = [(value, False)]
    while stack:
        n, ready = stack.pop()
        if n in tainted:
            continue
        if n is aligned:
            tainted[n] = True
        elif n in versions:
            return True
        elif not expands(n):
            tainted[n] = False
        elif not ready:
            stack.append((n, True))
            stack.extend((s, False) for s in n.src if s not in tainted)
        else:
            t = tainted[n] = any(tainted[s] for s in n.src)
            if t and (n.op in GroupOp.Movement or n.op is Ops.REDUCE):
                return True
    return False


def _without_detach(view: UOp) -> UOp:
    """A view with its DETACH steps left out (they do not move elements)."""
    if view.op is Ops.DETACH:
        return _without_detach(view.src[0])
    if view.op in GroupOp.Movement:
        inner = _without_detach(view.src[0])
        return view if inner is view.src[0] else view.replace(src=(inner, *view.src[1:]))
    return view


# what one evaluation of an op costs, in simple ALU ops (a load from a buffer is 1; ops not listed are 1, movement ops
# and constants 0): divisions and transcendental functions cost tens of cycles per element
_OP_COST = {Ops.EXP2: 20, Ops.LOG2: 20, Ops.SIN: 20, Ops.SQRT: 8, Ops.FDIV: 8, Ops.CDIV: 8, Ops.CMOD: 8, Ops.POW: 40}
_FREE = GroupOp.Movement | {Ops.CONST, Ops.IOTA, Ops.DEFINE_VAR, Ops.BIND, Ops.DETACH, Ops.CONTIGUOUS_BACKWARD}
#: work (extra evaluations times what each costs beyond reading a buffer) an expand must add before the value it
#: repeats gets a buffer (about a kernel launch's time, computed the slow way)
COSTLY_WORK = 1 << 20
# views an expanded value may be read through and still be materialized as it is (each element read at most once)
_VIEWS = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP})


# the cheap integer and logic ops of index arithmetic, and views (a transcendental of an arange, as a rotary embedding's
# sin and cos, is costly enough per element to be computed once)
_INDEX_OPS = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.MAX, Ops.CDIV, Ops.CMOD, Ops.FLOORDIV, Ops.FLOORMOD, Ops.AND,
                        Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE, Ops.CAST, Ops.RESHAPE,
                        Ops.EXPAND, Ops.PERMUTE})


def _index_arithmetic(value: UOp) -> bool:
    """Whether `value` is worth no buffer of its own whatever its readers: cheap arithmetic on aranges (IOTA) and
    constants alone (a triangular mask, a scan's `j <= i`), which a kernel computes from its loop indices more cheaply
    than it would load it; or a comparison with an arange (a one-hot, as indexing by a tensor builds), which the kernel
    turns into a read of the indexed element (`uopir.codegen.onehot`: materialized, the compare could not be folded and
    the whole indexed axis would be read)."""
    if value.op is Ops.CMPEQ:
        for side in value.src:
            while side.op in (Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.CAST):
                side = side.src[0]
            if side.op is Ops.IOTA:
                return True
    leaf = (Ops.IOTA, Ops.CONST)
    return value.find_below(lambda n: n.op not in _INDEX_OPS and n.op not in leaf, gate=lambda n: n.op not in leaf) is None


def _one_hot_index(expand: UOp, consumers: dict[UOp, list[UOp]]) -> bool:
    """Whether `expand` is only compared with aranges (the index of a one-hot, as indexing by a tensor builds, a
    negative index wrapped): the kernel computes each compare anyway, so the expanded value costs it a constant factor
    at most, and once the one-hot sum becomes a read at the index (`uopir.codegen.onehot`) nothing is repeated. Given
    a buffer, it was a kernel of its own: an embedding of 512 tokens ran its index wrap as a second kernel."""
    users = consumers.get(expand, [])
    return bool(users) and all(u.op is Ops.CMPEQ and _index_arithmetic(u) for u in users)


def _repeats(expand: UOp, src: UOp) -> int:
    """How many more elements `expand` reads than `src` has (0 when a shape is symbolic)."""
    shapes = (expand.shape_or_none, src.shape_or_none)
    if any(sh is None or not all(isinstance(d, int) for d in sh) for sh in shapes):
        return 0
    return math.prod(shapes[0]) - math.prod(shapes[1])


def _fused_cost(value: UOp, boundary: set[UOp]) -> int:
    """What computing one element of `value` in a kernel costs (see _OP_COST): the ops fused into it, and a load per
    value another kernel computes or a buffer holds."""
    cost, seen, stack = 0, set(), [value]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n is not value and (n in boundary or n.op in (Ops.BUFFER, Ops.AFTER)):
            cost += 1
            continue
        cost += 0 if n.op in _FREE else _OP_COST.get(n.op, 1)
        stack.extend(n.src)
    return cost


def buffered_nodes(nodes: list[UOp], targets: tuple[UOp, ...] | list[UOp], leaf_set: set[UOp], rows: bool = False) -> set[UOp]:
    """Which of `nodes` (a graph in topological order, stopping at the leaves) get a buffer of their own: the targets,
    CONTIGUOUS and COPY nodes and the sources of COPYs, the REDUCEs that do not fuse into their consumer, and values an
    EXPAND would recompute too often (see the module docstring); leaves and AFTERs never (they have one). With `rows`
    (a device whose kernels are loops: see `_row_fused`), a reduction over rows that only its own rows read is
    computed inside the one kernel that reads it."""
    consumers: dict[UOp, list[UOp]] = {n: [] for n in nodes}
    for node in nodes:
        if node in leaf_set:
            continue
        for s in dict.fromkeys(node.src):
            if s in consumers:
                consumers[s].append(node)
    realized: set[UOp] = set(targets)
    for node in nodes:
        if node.op in (Ops.CONTIGUOUS, Ops.COPY) and node not in leaf_set:
            realized.add(node)
            # a COPY's source is computed where it lives, unless it is of constants alone (no device): then the
            # COPY computes it on its own device (realized apart, it would sit on the default device and be read there
            # by kernels of other devices too) unless that device runs no kernels (a file): then on the default one
            if node.op is Ops.COPY and _is_leaf_view(node.src[0], leaf_set) is None and \
                    (device_below(node.src[0]) is not None or bytes_only(node.arg)):
                realized.add(node.src[0])
    row_reduces: list[UOp] = []
    for node in nodes:
        if node.op is Ops.REDUCE and node not in leaf_set and not _fuses_into_consumer(node, consumers, realized):
            if node not in realized:
                row_reduces.append(node)
            realized.add(node)
    # a value read through an EXPAND is computed once into a buffer when the expand would have the kernel reading it
    # compute it again often enough, at enough cost per element, that the repeated work (beyond reading a buffer) is
    # COSTLY_WORK or more: attention's softmax weights broadcast over the head dimension into the second matmul, a
    # convolution's upstream gradient (ReLU and pooling masks, a division) broadcast over its input channels and kernel
    # window. A cheap or little-repeated one stays fused: a kernel costs more
    for node in nodes:
        if node.op is Ops.EXPAND and node not in leaf_set:
            src = node.src[0]
            while src.op in _VIEWS and src not in leaf_set and src not in realized:
                src = src.src[0]
            if src.op in GroupOp.ALU and src not in leaf_set and src not in realized and not _index_arithmetic(src) \
                    and not _one_hot_index(node, consumers) and (repeats := _repeats(node, src)) > 0 \
                    and repeats * (_fused_cost(src, realized | leaf_set) - 1) >= COSTLY_WORK:
                realized.add(src)
    if rows:
        # the last first: a row's sum of exp(x - max) is fused before its max is asked about (the max's rows then
        # reach one kernel through the sum)
        for node in reversed(row_reduces):
            if _row_fused(node, consumers, realized):
                realized.discard(node)
    return {n for n in realized if n not in leaf_set and n.op is not Ops.AFTER}


#: whether row reductions are fused into their reader (see `_row_fused`; UOP_ROW_FUSION=0 turns it off)
ROW_FUSION = os.environ.get("UOP_ROW_FUSION", "1") != "0"


@functools.lru_cache(maxsize=64)
def row_fusion(device: str) -> bool:
    """Whether `device` fuses row reductions into their reader: one whose kernels are loops (its renderer has no GPU
    launch dimensions; a GPU kernel runs each element as its own work-item, which would reduce the row once per
    element)."""
    if not ROW_FUSION:
        return False
    try:
        renderer = getattr(Device[device], "renderer", None)
    except Exception:  # noqa: BLE001 -- a device that cannot be opened here gets its error where it runs
        return False
    return renderer is not None and not getattr(renderer, "global_dims", True)


#: the longest row (elements) a reduction is fused into its reader over (see `_row_fused`): each pass over the row
#: reads it from the first-level cache
ROW_FUSE_MAX = 1 << 13
# ops a row's reduction may reach its reader through (elementwise ops, views that keep the rows, reductions of rows)
_ROW_OPS = GroupOp.ALU | {Ops.CAST, Ops.RESHAPE, Ops.EXPAND, Ops.REDUCE, Ops.DETACH, Ops.CONTIGUOUS}


def _row_reduce(node: UOp) -> int | None:
    """The number of leading axes (at least one) a reduction keeps, when it reduces all the others, of at most
    ROW_FUSE_MAX elements (a row; a symbolic size by its largest value); else None."""
    shape = node.src[0].shape_or_none
    if shape is None:
        return None
    lead = len(shape) - len(node.arg[1])
    if lead < 1 or tuple(sorted(node.arg[1])) != tuple(range(lead, len(shape))) or \
            math.prod(d if isinstance(d, int) else int(d.vmax) for d in shape[lead:]) > ROW_FUSE_MAX:
        return None
    return lead


def _row_fused(red: UOp, consumers: dict[UOp, list[UOp]], realized: set[UOp]) -> bool:
    """Whether the reduction `red` of rows (softmax's max and sum, a norm's mean) can be computed in the kernel of the
    one value that reads it: when every path from it to a value with a buffer goes through elementwise ops, reshapes
    and expands that keep the rows' axes in front, and reductions of the same rows, and ends at one such value. That
    kernel's loops then run over the rows outermost, and each row's reduction is one loop over the row ahead of the
    loops over its elements (`codegen.linearize`, `Linearizer.open_loops`), where it would otherwise be a kernel that
    writes the reductions and a second pass that reads them back."""
    if (lead := _row_reduce(red)) is None:
        return False
    rows = red.src[0].shape[:lead]
    ends: set[UOp] = set()
    seen, stack = {red}, [red]
    while stack:
        for user in consumers[stack.pop()]:
            if user in seen:
                continue
            seen.add(user)
            shape = user.shape_or_none
            if user.op not in _ROW_OPS or shape is None or tuple(shape[:lead]) != rows or \
                    (user.op is Ops.REDUCE and _row_reduce(user) != lead):
                return False
            if user in realized:
                ends.add(user)
                if len(ends) > 1:
                    return False
            else:
                stack.append(user)
    return len(ends) == 1


@functools.cache
def packed_operand_bytes(device: str) -> int:
    """The device renderer's `packed_operand_bytes` (0 for devices without a code generator)."""
    try:
        return int(getattr(getattr(Device[device], "renderer", None), "packed_operand_bytes", 0) or 0)
    except Exception:  # noqa: BLE001 -- a device that cannot be opened here gets its error where it runs
        return 0


@functools.lru_cache(maxsize=4096)
def operand_packs_of(ast: UOp, group_bytes: int) -> tuple[UOp, tuple[OperandPack, ...]]:
    """`uopir.operand_packs`, remembered per kernel."""
    return operand_packs(ast, group_bytes)


def _variables(ast: UOp) -> tuple[UOp, ...]:
    return tuple(sorted({u for u in ast.toposort() if u.op is Ops.DEFINE_VAR}, key=lambda v: v.arg[0]))


# kernels already lowered, by their graph with the buffers they read as numbered stand-ins: a model's layers compute
# the same kernels over other buffers, lowered once (key -> the AST and, per PARAM slot after the output, its stand-in)
_LOWERED: dict[bytes, tuple[UOp, tuple[int, ...], tuple[UOp, ...]]] = {}
_LOWERED_MAX = 4096


def _lowered_kernel(node: UOp, body: UOp, leaves: dict[UOp, int], out: int) -> tuple[UOp, tuple[int, ...], tuple[UOp, ...]]:
    """The kernel computing `node` (its value `body`) into buffer `out`: its AST, the buffer (a number of `leaves`) of
    each of its PARAM slots, the variables it reads."""
    standin_of: dict[int, int] = {}  # buffer number -> stand-in number, in first-encounter order
    stand: dict[UOp, UOp] = {}
    for n in body.toposort(gate=lambda n: n not in leaves):
        if n in leaves:
            k = standin_of.setdefault(leaves[n], len(standin_of))
            stand[n] = UOp(Ops.NOOP, n.dtype, (), ("kernel input", k, n.shape))
    key = UOp(Ops.NOOP, node.dtype, (body.substitute(stand) if stand else body,), ("kernel", node.shape)).key
    if (hit := _LOWERED.get(key)) is None:
        lowering = KernelLowering(leaves, out)
        ast = lowering.kernel(node, body)
        hit = (ast, tuple(standin_of[b] for b in lowering.buffers[1:]), _variables(ast))
        if len(_LOWERED) >= _LOWERED_MAX:
            del _LOWERED[next(iter(_LOWERED))]
        _LOWERED[key] = hit
    ast, standins, variables = hit
    buffer_of = list(standin_of)
    return ast, (out, *(buffer_of[k] for k in standins)), variables


def _toposort(nodes: list[UOp], deps: dict[UOp, set[UOp]], rank) -> list[UOp]:
    """`nodes` in an order where each comes after its `deps`, otherwise by `rank` (the graph's own order)."""
    done: set[UOp] = set()
    out: list[UOp] = []
    pending = sorted(nodes, key=rank)
    while pending:
        ready = next((n for n in pending if deps[n] <= done), None)
        if ready is None:
            stuck = ", ".join(sorted({f"{n.op.name} {n.shape}" for n in pending})[:4])
            raise TensorWriteError(f"cycle in the kernel order: the writes and reads of {stuck} cannot be ordered (a scheduler bug: "
                                   "please report the program)")
        pending.remove(ready)
        done.add(ready)
        out.append(ready)
    return out


def _fuses_into_consumer(node: UOp, consumers: dict[UOp, list[UOp]], realized: set[UOp]) -> bool:
    """True when `node` reaches a realized node through single-consumer one-to-one ops only."""
    cur = node
    while cur not in realized:
        users = consumers[cur]
        if len(users) != 1 or users[0].op not in _ONE_TO_ONE:
            return False
        cur = users[0]
    return True


# schedules are small, but a program that keeps building new structures must not grow the cache without end
SCHEDULE_CACHE_SIZE = 4096
# the scheduler's schedules (schedule_rewrites.py), by structure (walk key, input devices, live versions, aliases)
schedule_cache: dict[tuple, Schedule] = {}


def cached_schedules() -> list[Schedule]:
    """Every schedule the schedule cache holds."""
    return list(schedule_cache.values())


def clear_schedule_cache() -> None:
    """Forget every cached schedule (the next realize of each structure schedules again), and which constants were
    seen to change (`varying_constants`)."""
    schedule_cache.clear()
    _constant_history.clear()
