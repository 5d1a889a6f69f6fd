"""Graph templates of composite tensor ops: the graph a convolution or a pooling builds, traced once per signature.

A composite op (`conv2d`, `max_pool2d`, a loss, `sigmoid`, an index by int tensors, a sort) builds the same graph every
time its inputs have the same shapes, dtypes and devices and its other arguments are the same: only the input nodes
differ. Building it op by op, each
through the tensor layer's checks, broadcasting and view bookkeeping, cost a small CNN's eager training step about a
quarter of its forward pass (a 3x3 conv2d: ~28 movement ops, 170 us). `templated` runs such an op once per signature
on placeholder inputs (PARAMs) and keeps the nodes that depend on them as a plan; later calls rebuild those nodes over
the real inputs, node for node (hash-consing makes an unchanged graph the same graph), and wrap the result.

The rebuilt graph is the traced one with the inputs substituted, so it has the same value as building it again would:
tracing builds nothing from the inputs' values. What could make a trace stand for something else is kept out:
- the signature holds everything the ops read besides the inputs' values: each tensor's shape, dtype, device and
  `requires_grad`, the other arguments (numbers, strings, None, dtypes and tuples of them), `Tensor.training` and the
  default dtypes;
- a trace whose graph reads anything but its placeholders and constants (a buffer, a variable), that draws random
  numbers (they are constants of their call number), that leaves a write pending, or that fails, is not kept: that
  signature runs the op as written from then on;
- symbolic shapes and tensors over several devices run the op as written;
- a choice the op makes from a tunable (sort's algorithm by SORT_NETWORK_COMPARISONS) is made by its caller and passed
  in as an argument, so the signature holds it (a test that switches the tunable gets the other algorithm).
Folding that looks at an input's node (a constant input folded into the result) is not done by a rebuilt graph;
its value is the same. `UOP_TEMPLATES=0` turns templates off (every call runs the op as written).

Gradients too: each rebuilt result is remembered (weakly) as an instance of its template, and the gradient pass,
reaching one with its gradient, rebuilds its inputs' gradients from the gradient pass over the traced graph (traced
once per set of inputs that want one) instead of applying a rule per inner node (a small CNN's backward 0.77 -> 0.58
ms). Its inner nodes then pass on only the gradients other readers give them, which the pass handles as usual; an
instance with an inner node that is itself a target (a live tensor holding it) is differentiated node by node.
"""

from __future__ import annotations

import enum
import functools
import operator
import os
import struct
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from uopir import DType, Ops, UOp, dtypes

from .random import RandomMixin
from .writes import pending

F = TypeVar("F", bound=Callable[..., Any])

# the leaves a template's graph may hold besides its placeholders (constants, the size nodes of shapes, index ranges),
# and the ops it may not hold: storage, variables, writes, calls, values over several devices
_PURE_LEAVES = frozenset({Ops.CONST, Ops.IOTA})
_IMPURE = frozenset({Ops.BUFFER, Ops.PARAM, Ops.DEFINE_VAR, Ops.BIND, Ops.CALL, Ops.AFTER, Ops.STORE, Ops.COPY, Ops.CUSTOM,
                     Ops.CUSTOMI, Ops.CUSTOM_FUNCTION, Ops.MSELECT, Ops.MSTACK, Ops.UNSHARD, Ops.ALLREDUCE, Ops.SINK})
_RUN_AS_WRITTEN = object()  # a signature whose trace cannot be kept
_UNKEYED = ("an argument a signature cannot hold",)
_PLACEHOLDER_NAME = "template input"
_MAX_SIGNATURES = 256  # per op: the oldest signature's template is dropped past this many
_PLAIN = frozenset({int, bool, str, type(None)})


def _arg_key(a: Any) -> Any:
    """A non-tensor argument as the signature holds it: with its type (1, 1.0 and True differ) and a float by its bits
    (0.0 and -0.0 differ; nan equals itself). Only numbers, strings, None, dtypes, enum members and tuples of them: anything else (a
    list, an array, a tensor in a tuple, a variable) is `_UNKEYED`, and the call runs as written."""
    kind = type(a)
    if kind is float:
        return (float, struct.pack("<d", a))
    if kind in _PLAIN or isinstance(a, (DType, enum.Enum)):  # (an enum member: an op, as `_cumulative` takes)
        return (kind, a)
    if kind is tuple:
        keys = tuple(_arg_key(x) for x in a)
        return _UNKEYED if any(k is _UNKEYED for k in keys) else (tuple, keys)
    return _UNKEYED


def templates_enabled() -> bool:
    return os.environ.get("UOP_TEMPLATES", "1") not in ("0", "")


class _Plan:
    """The nodes of traced graphs (`roots`) that depend on their placeholders, in build order. Every source is a slot of
    one list of values: the inputs (one per placeholder), then the nodes kept as they are (constants, shapes' sizes),
    then the rebuilt nodes; each step is (op, dtype, its sources' slots, arg, shape), the slots as one int for a single
    source and an itemgetter of the sources' tuple otherwise (a generator testing each source per node was a fifth of a
    rebuild)."""

    __slots__ = ("steps", "roots", "kept", "first")

    def __init__(self, roots: list[UOp | None], placeholders: list[UOp]):
        sink = UOp.sink(*(r for r in roots if r is not None))
        inputs = set(placeholders)
        dependent: list[UOp] = []
        reads: set[UOp] = set(inputs)  # the nodes that depend on a placeholder
        for node in sink.toposort():
            if node is not sink and node not in inputs and any(s in reads for s in node.src):
                reads.add(node)
                dependent.append(node)
        kept = list(dict.fromkeys(s for node in dependent for s in node.src if s not in reads))
        slot: dict[UOp, int] = {n: i for i, n in enumerate([*placeholders, *kept, *dependent])}
        steps: list[tuple] = []
        for node in dependent:
            refs = tuple(slot[s] for s in node.src)
            get: Any = refs[0] if len(refs) == 1 else operator.itemgetter(*refs)
            steps.append((node.op, node.dtype, get, node.arg, node.shape_or_none))
        self.steps, self.kept = tuple(steps), tuple(kept)
        #: the slot of the first rebuilt node (the inputs and the kept nodes come before)
        self.first = len(placeholders) + len(kept)
        # a root that reads no input (a constant) is kept as it is
        self.roots: tuple[Any, ...] = tuple(slot[r] if r in reads else r for r in roots)

    def build(self, inputs: list[UOp]) -> list[Any]:
        """The values the plan's slots hold over `inputs` (one node per placeholder): the inputs, the kept nodes, then
        the rebuilt nodes (from `first` on)."""
        values: list[Any] = [*inputs, *self.kept]
        append = values.append
        for op, dtype, get, arg, shape in self.steps:
            append(UOp(op, dtype, (values[get],) if type(get) is int else get(values), arg, None, shape))
        return values

    def root_values(self, values: list[Any]) -> list[Any]:
        return [values[r] if type(r) is int else r for r in self.roots]


# the template instances built and alive: root node -> (template, its inputs, the nodes rebuilt for it). The gradient
# pass asks it (see `instance_gradients`); asked through the weak dictionary's own table, as `realizer.done` is
instances: weakref.WeakKeyDictionary[UOp, tuple] = weakref.WeakKeyDictionary()
_instances_table = instances.data


class _Template:
    """A traced op: its plan (one root), the device of its result, and what its gradients are traced from."""

    __slots__ = ("plan", "device", "traced", "placeholders", "gradient_plans")

    def __init__(self, root: UOp, placeholders: list[UOp], device: str):
        self.plan, self.device = _Plan([root], placeholders), device
        self.traced, self.placeholders = root, placeholders
        self.gradient_plans: dict[tuple[bool, ...], _Plan] = {}

    def build(self, inputs: list[UOp]) -> UOp:
        """The traced graph over `inputs`; an instance the gradient pass recognizes."""
        plan = self.plan
        values = plan.build(inputs)
        root = plan.root_values(values)[0]
        # (over its own placeholders, as inside a trace whose inputs are the same PARAMs, it is the traced graph, which
        # its gradients are traced from)
        if len(values) > plan.first and values[-1] is root and root is not self.traced:
            # (the rebuilt nodes below the root, not the root: an entry that held its key would keep it alive forever)
            instances[root] = (self, tuple(inputs), tuple(values[plan.first:-1]))
        return root

    def gradients(self, need: tuple[bool, ...], inputs: tuple[UOp, ...], grad: UOp) -> list[UOp | None]:
        """The gradient of each input the instance over `inputs` passes on from `grad` (its root's), for the inputs
        `need` marks (None for the others): the gradient pass over the traced graph, traced once per `need` and
        rebuilt, as the op is."""
        if (plan := self.gradient_plans.get(need)) is None:
            from .gradient import compute_gradient

            seed = UOp.param(len(self.placeholders), self.traced.dtype, self.traced.shape, self.device, name=_PLACEHOLDER_NAME)
            wanted = {p for p, n in zip(self.placeholders, need) if n}
            got = compute_gradient(self.traced, seed, wanted)
            plan = self.gradient_plans[need] = _Plan([got.get(p) if n else None for p, n in zip(self.placeholders, need)],
                                                     [*self.placeholders, seed])
        return plan.root_values(plan.build([*inputs, grad]))


def instance_gradients(node: UOp, grad: UOp, leads: set[UOp], targets: set[UOp]) -> list[tuple[UOp, UOp]] | None:
    """When `node` is a template instance none of whose rebuilt nodes is a target: (input, its gradient) for each input
    in `leads`, the gradient `grad` of `node` passes on through the instance (see `_Template.gradients`). Its inner
    nodes then pass on only what other readers give them (the gradient pass goes on as usual); None otherwise."""
    if (entry := _instances_table.get(weakref.ref(node))) is None:
        return None
    template, inputs, inner = entry
    if not targets.isdisjoint(inner):  # (the root itself may be a target: its own gradient is kept as usual)
        return None
    need = tuple(i in leads for i in inputs)
    return [(i, g) for i, g in zip(inputs, template.gradients(need, inputs, grad)) if g is not None]


def _reads_only_placeholders(root: UOp, placeholders: set[UOp]) -> bool:
    """Whether every leaf of `root`'s graph is a placeholder or a constant (no buffer, variable, random state, call)."""
    for node in root.toposort(gate=lambda n: n not in placeholders):
        if node in placeholders:
            continue
        if node.op in _IMPURE or (not node.src and node.op not in _PURE_LEAVES):
            return False
    return True


def _trace(fn: Callable, args: tuple, kwargs: dict, positions: list[tuple[bool, Any]], tensors: list) -> Any:
    """Run `fn` on placeholder tensors in the places of `tensors`; its template, or `_RUN_AS_WRITTEN`."""
    from .tensor import Tensor

    placeholders = [UOp.param(i, t.dtype, t.shape, t.device, name=_PLACEHOLDER_NAME) for i, t in enumerate(tensors)]
    stand_ins = [Tensor(p, device=t.device) for p, t in zip(placeholders, tensors)]
    it = iter(stand_ins)
    p_args = tuple(next(it) if is_tensor else a for is_tensor, a in positions[:len(args)])
    p_kwargs = {k: next(it) if is_tensor else v for (is_tensor, v), k in zip(positions[len(args):], kwargs)}
    was_pending = len(pending)
    # random numbers are constants of their call number (the graph holds the key): a trace that drew some would repeat
    # them at every call. It gives back the numbers it drew, and the op runs as written
    rng, calls = RandomMixin._jit_rng, RandomMixin._calls
    jit_calls = rng.calls if rng is not None else 0
    try:
        ret = fn(*p_args, **p_kwargs)
    except Exception:  # the op as written decides what a call with these arguments does (its error, or a value)
        ret = None
    drew = RandomMixin._calls != calls or (rng is not None and rng.calls != jit_calls)
    if drew:
        RandomMixin._calls = calls
        if rng is not None:
            rng.calls = jit_calls
    # (a view of an input is a tensor writes reach its input through: not a template. A view of a value the op made
    # (a reshape of its sum) is a new value to the caller: its result is one tensor of its own)
    if drew or type(ret) is not Tensor or any(ret is s or ret._root is s for s in stand_ins) or len(pending) != was_pending \
            or not isinstance(ret.device, str) or not _reads_only_placeholders(ret.uop, set(placeholders)):
        return _RUN_AS_WRITTEN
    return _Template(ret.uop, placeholders, ret.device)


@functools.cache
def _tensor_class() -> type:
    """`Tensor`, looked up once: the ops are decorated while tensor.py is being imported."""
    from .tensor import Tensor

    return Tensor


def templated(fn: F) -> F:
    """Trace `fn` (a Tensor method or function of tensors returning one new tensor, pure in its inputs' values) once
    per signature and rebuild its graph over the inputs of later calls (see the module docstring)."""
    cache: dict[tuple, Any] = {}

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not templates_enabled():
            return fn(*args, **kwargs)
        Tensor = _tensor_class()  # noqa: N806

        positions: list[tuple[bool, Any]] = []
        tensors: list[Tensor] = []
        parts: list[Any] = [Tensor.training, dtypes.default_float, dtypes.default_int, tuple(kwargs)]
        for a in (*args, *kwargs.values()):
            if type(a) is Tensor:
                shape, device = a.shape, a.device
                if type(device) is not str or not all(type(d) is int for d in shape):
                    return fn(*args, **kwargs)
                tensors.append(a)
                positions.append((True, None))
                parts.append((shape, a.dtype, device, a.requires_grad))
            elif isinstance(a, Tensor):  # a subclass (a sharded tensor): as written
                return fn(*args, **kwargs)
            elif (k := _arg_key(a)) is _UNKEYED:
                return fn(*args, **kwargs)
            else:
                positions.append((False, a))
                parts.append(k)
        key = tuple(parts)
        template = cache.get(key)
        if template is None:
            if len(cache) >= _MAX_SIGNATURES:
                del cache[next(iter(cache))]
            template = cache[key] = _trace(fn, args, kwargs, positions, tensors)
        if template is _RUN_AS_WRITTEN or not tensors:
            return fn(*args, **kwargs)
        return tensors[0]._wrap(template.build([t.uop for t in tensors]), template.device)

    wrapper.templates = cache  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
