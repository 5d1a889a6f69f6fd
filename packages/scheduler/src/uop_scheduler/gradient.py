"""Reverse-mode autodiff over tensor-level UOp graphs: one gradient rule per op, beside the op it differentiates.

`compute_gradient(root, root_grad, targets)` walks the graph from `root` back to `targets`, only through nodes that
lead to a target, applies each op's rule to the gradient flowing into it and sums the contributions per node. Rules
return one gradient per source (None where the source gets none: comparisons, bit ops, indices, DETACH).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable

from uopir import Ops, UOp, dtypes

from .call_values import call_gradients, is_call_output, is_kernel_output, output_position
from .errors import GradientError
from .identity import IdentitySet
from .templates import _instances_table as instances_table
from .templates import instance_gradients

Rule = Callable[[UOp, UOp], tuple[UOp | None, ...]]
_LN2 = math.log(2)


def _reduce_grad(g: UOp, ret: UOp) -> tuple[UOp | None, ...]:
    x = ret.src[0]
    op, axes = ret.arg
    if op is Ops.ADD:
        return (g.expand(x.shape),)
    if op is Ops.MAX:
        # the gradient goes to the maxima, split evenly between ties
        is_max = x.eq(ret.expand(x.shape)).cast(g.dtype)
        count = is_max.r(Ops.ADD, axes)
        return (is_max * (g / count).expand(x.shape),)
    if op is Ops.MUL:
        # d(prod x)/dx_j is the product of the others: ret / x_j where x_j is not 0; where it is, the product of the
        # nonzero others if it is the only zero, else 0 (ret / x_j was 0 / 0 = NaN there)
        is_zero = x.eq(0)
        safe = is_zero.where(x.const_like(1), x)
        lone_zero = is_zero.cast(dtypes.int32).r(Ops.ADD, axes).eq(1)
        others = lone_zero.where(safe.r(Ops.MUL, axes), ret.const_like(0))
        share = is_zero.where(others.expand(x.shape), ret.expand(x.shape) / safe)
        return (g.expand(x.shape) * share,)
    raise NotImplementedError(f"no gradient for a {op.name} reduction")


def _pow_grad(g: UOp, ret: UOp) -> tuple[UOp | None, ...]:
    """b ** e: d/db = e * b**(e-1), except 0 where e is 0 (b**0 is the constant 1: the formula gave 0 * inf = NaN at
    b = 0); d/de = b**e * ln(b), except at b = 0, where 0**e is 0 for e > 0 (gradient 0, not 0 * -inf = NaN), 1 at
    e = 0 (0) and inf for e < 0 (-inf), as torch has them."""
    b, e = ret.src
    zero = g.const_like(0)
    d_base = e.eq(0).where(zero, g * e * b.alu(Ops.POW, e - 1))
    at_zero = (e < 0).where(g.const_like(-math.inf), zero)
    d_exp = b.eq(0).where(g * at_zero, g * ret * b.log2() * _LN2)
    return (d_base, d_exp)


def _max_grad(g: UOp, ret: UOp) -> tuple[UOp | None, ...]:
    a, b = ret.src
    bigger, equal = (b < a).cast(g.dtype), a.eq(b).cast(g.dtype)
    share = bigger + equal * 0.5
    return (g * share, g * (1.0 - share))


def _argsort(order: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sorted(range(len(order)), key=order.__getitem__))


def _expand_grad(g: UOp, ret: UOp) -> tuple[UOp | None, ...]:
    x = ret.src[0]
    axes = tuple(i for i, (a, b) in enumerate(zip(x.shape, ret.shape)) if a != b)
    return (g.r(Ops.ADD, axes) if axes else g, *[None] * (len(ret.src) - 1))


def _movement(fn: Callable[[UOp, UOp], UOp]) -> Rule:
    # movement ops keep their parameters as extra sources: those get no gradient
    return lambda g, ret: (fn(g, ret), *[None] * (len(ret.src) - 1))


_ALL = (True, True, True)


# ops whose sources' gradients are built separately: `need` says which sources want one (a relu's select built a
# gradient for its constant zero, and a matmul's product one for an input that wants none: 12-17% of a training step's
# gradient nodes); the rule tables call them with every source wanted
def _mul_grad(g: UOp, ret: UOp, need: tuple[bool, ...] = _ALL) -> tuple[UOp | None, ...]:
    return (g * ret.src[1] if need[0] else None, g * ret.src[0] if need[1] else None)


def _fdiv_grad(g: UOp, ret: UOp, need: tuple[bool, ...] = _ALL) -> tuple[UOp | None, ...]:
    return (g / ret.src[1] if need[0] else None, -g * ret.src[0] / (ret.src[1] * ret.src[1]) if need[1] else None)


def _where_grad(g: UOp, ret: UOp, need: tuple[bool, ...] = _ALL) -> tuple[UOp | None, ...]:
    return (None, ret.src[0].where(g, g.const_like(0)) if need[1] else None, ret.src[0].where(g.const_like(0), g) if need[2] else None)


_PARTIAL_RULES = {Ops.MUL: _mul_grad, Ops.FDIV: _fdiv_grad, Ops.WHERE: _where_grad}


GRADIENT_RULES: dict[Ops, Rule] = {
    Ops.ADD: lambda g, ret: (g, g),
    Ops.SUB: lambda g, ret: (g, -g),
    Ops.MUL: lambda g, ret: _mul_grad(g, ret),
    Ops.NEG: lambda g, ret: (-g,),
    Ops.FDIV: lambda g, ret: _fdiv_grad(g, ret),
    Ops.RECIPROCAL: lambda g, ret: (-g * ret * ret,),
    Ops.EXP2: lambda g, ret: (g * ret * _LN2,),
    Ops.LOG2: lambda g, ret: (g / (ret.src[0] * _LN2),),
    Ops.SIN: lambda g, ret: (g * (ret.src[0].const_like(math.pi / 2) - ret.src[0]).sin(),),
    Ops.SQRT: lambda g, ret: (g / (ret * 2),),
    Ops.POW: lambda g, ret: _pow_grad(g, ret),
    Ops.MULACC: lambda g, ret: (g * ret.src[1], g * ret.src[0], g),
    Ops.MAX: _max_grad,
    Ops.WHERE: lambda g, ret: _where_grad(g, ret),
    Ops.CAST: lambda g, ret: (g.cast(ret.src[0].dtype),),
    Ops.TRUNC: lambda g, ret: (g.const_like(0),),
    Ops.REDUCE: _reduce_grad,
    Ops.RESHAPE: _movement(lambda g, ret: g.reshape(ret.src[0].shape)),
    Ops.EXPAND: _expand_grad,
    Ops.PERMUTE: _movement(lambda g, ret: g.permute(_argsort(ret.marg))),
    Ops.PAD: _movement(lambda g, ret: g.shrink(tuple((b, b + s) for (b, _), s in zip(ret.marg, ret.src[0].shape)))),
    Ops.SHRINK: _movement(lambda g, ret: g.pad(tuple((b, s - e) for (b, e), s in zip(ret.marg, ret.src[0].shape)))),
    Ops.FLIP: _movement(lambda g, ret: g.flip(ret.marg)),
    Ops.CONTIGUOUS: lambda g, ret: (g,),
    Ops.CONTIGUOUS_BACKWARD: lambda g, ret: (g.contiguous(),),
    Ops.COPY: lambda g, ret: (g.copy_to_device(ret.src[0].device),),
}
# no gradient flows through these: their results are not differentiable functions of their inputs
NON_DIFFERENTIABLE = frozenset({Ops.DETACH, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR,
                                Ops.CDIV, Ops.CMOD, Ops.FLOORDIV, Ops.FLOORMOD, Ops.BITCAST, Ops.THREEFRY})


def compute_gradient(root: UOp, root_grad: UOp, targets: set[UOp], order: list[UOp] | None = None) -> dict[UOp, UOp]:
    """d(root)/d(t) for each t in `targets` reachable from `root` (missing when no path leads there); `order`: the
    toposort of `root` when the caller has it."""
    if order is None:
        order = list(root.toposort())
    leads: set[UOp] = set()
    disjoint, add = leads.isdisjoint, leads.add
    for node in order:  # sources come first, so one pass finds every node with a target below it
        if node in targets or not disjoint(node.src):
            add(node)
    grads: dict[UOp, UOp] = {root: root_grad}
    call_grads: dict[UOp, dict[int, UOp]] = {}  # per CALL: the gradients of its outputs, by argument position
    for node in reversed(order):
        if node.op is Ops.CALL and node in call_grads:
            for src, src_grad in zip(node.src[1:], call_gradients(node, call_grads.pop(node), leads, compute_gradient)):
                if src_grad is not None and src in leads:
                    grads[src] = src_grad if src not in grads else grads[src] + src_grad
            continue
        g = grads.get(node)
        if g is None or node not in leads or node in targets and not node.src:
            continue
        if node.op in NON_DIFFERENTIABLE or not node.src or node.op is Ops.PARAM:  # a PARAM's srcs are its shape
            continue
        if instances_table and (passed := instance_gradients(node, g, leads, targets)) is not None:
            # a composite op's instance (templates.py): its inputs' gradients rebuilt from its traced gradient pass
            for src, src_grad in passed:
                grads[src] = src_grad if src not in grads else grads[src] + src_grad
            continue
        if node.op is Ops.AFTER and (is_call_output(node) or is_kernel_output(node)):
            per_output = call_grads.setdefault(node.src[1], {})
            pos = output_position(node)
            per_output[pos] = g if pos not in per_output else per_output[pos] + g
            continue
        if node.op is Ops.AFTER:  # a written buffer version (not a call's output)
            for src, src_grad in _write_gradients(g, node):
                if src in leads:
                    grads[src] = src_grad if src not in grads else grads[src] + src_grad
            continue
        need = tuple(map(leads.__contains__, node.src))
        if not any(need):  # (a target that is itself a view of a buffer: nothing below it wants a gradient)
            continue
        if (shape := node.shape_or_none) is not None:
            # a node's gradient has the node's shape: given, not inferred (the rules' own nodes are made unshaped; a
            # rule asking for it walked back through them, a third of an MLP's backward(), and a cached schedule never
            # needs the shapes of the nodes in between: MLP step 2.18 -> 2.02 ms)
            g.assume_shape(shape)
        if (partial := _PARTIAL_RULES.get(node.op)) is not None and not all(need):
            src_grads = partial(g, node, need)  # only the gradients some target reads (the others were built and dropped)
        elif (rule := GRADIENT_RULES.get(node.op)) is not None:
            src_grads = rule(g, node)
        else:
            raise NotImplementedError(f"no gradient rule for {node.op.name}")
        for src, src_grad in zip(node.src, src_grads):
            if src_grad is None or src not in leads:
                continue
            grads[src] = src_grad if src not in grads else grads[src] + src_grad
    return {t: grads[t] for t in targets if t in grads}


def _write_gradients(g: UOp, after: UOp) -> list[tuple[UOp, UOp]]:
    """A tensor-level write, AFTER(new, STORE(view of new, value, old)): the written elements come from `value` (its
    gradient is `g` seen through the same view), the others from `old` (its gradient is `g` with the written elements
    zeroed). Any other AFTER is data, like a buffer."""
    new, st = after.src[0], after.src[1]
    if st.op is not Ops.STORE or len(st.src) != 3 or new.op is not Ops.BUFFER:
        return []
    target, value, old = st.src
    seen = target.substitute({new: g})  # g through the written view
    out = [(value, seen)]
    if old.shape == g.shape:
        # which elements the write covers: the view's own gradient of ones (1 where written; views never overlap,
        # an expand view cannot be written)
        ones = UOp.const(g.dtype.const(1), g.dtype).reshape((1,) * len(target.shape)).expand(target.shape)
        written = compute_gradient(seen, ones, {g}).get(g)
        out.append((old, g if written is None else g - g * written))
    return out


class GradientMixin:
    """`Tensor.gradient`, `Tensor.backward` and the `requires_grad` registry they read."""

    __slots__ = ()

    def gradient(self, *targets, gradient=None) -> list:
        """d(self)/d(target) for each target, as new tensors (zeros for a target self does not depend on); `gradient`
        seeds d(self) (ones for a scalar). A target must be a floating-point tensor with a device buffer in its graph."""
        for i, t in enumerate(targets):
            if not dtypes.is_float(t.dtype):
                raise GradientError(f"target {i} has dtype {t.dtype}: gradients are taken with respect to floating-point tensors")
            if not _has_buffer(t, index_constants_count=True):  # an explicit target may be an index constant (eye)
                raise GradientError(f"target {i} is a constant (no buffer in its graph): it has no gradient; use a tensor made from data")
        return self._gradients(targets, gradient)

    def _gradients(self, targets, gradient, graph=None, keys=None, order=None) -> list:
        """`gradient` for targets already known to be float tensors with a buffer below them; `keys` (default each
        target's value) are the nodes of `graph` (default `_autograd_graph()`) that stand for them; `order` is `graph`'s
        toposort when the caller has it."""
        if gradient is None:
            if self.shape != ():
                raise GradientError(f"gradient of a non-scalar tensor of shape {self.shape} needs an explicit `gradient=`")
            seed = self.uop.const_like(1.0)
        else:
            seed = gradient.uop
        keys = [t.uop for t in targets] if keys is None else keys
        grads = compute_gradient(self._autograd_graph() if graph is None else graph, seed, set(keys), order)
        return [t._wrap(grads[k]) if k in grads else t.zeros_like() for t, k in zip(targets, keys)]

    def _autograd_graph(self):
        """The graph gradients flow through: the computation realize kept (`_graph`) in place of every buffer a realized
        tensor holds, this one's and those of the realized values it reads (`y.numpy(); (y * y).sum().backward()`
        reaches what y was computed from), level by level."""
        from .realizer import overwritten

        graph = self._graph if self._graph is not None else self.uop
        # not a tensor that asked for its own gradient (a parameter is a leaf, whatever computed its first value)
        kept = {t.uop: t._graph for t in list(graph_holders) if t._graph is not None and t is not self and t.requires_grad is not True}
        for _ in range(len(kept)):  # a substituted graph may read realized values too: one level per pass
            nodes = graph.toposort()
            # nor one whose graph reads a buffer overwritten since (it would compute other values than the buffer holds)
            found = {u: g for u, g in kept.items() if u in nodes and not any(n.op is Ops.BUFFER and overwritten(n) for n in g.toposort())}
            if not found:
                break
            graph = graph.substitute(found)
        return graph

    def backward(self, gradient=None):
        """Accumulate d(self)/d(t) into `t.grad` for every live floating-point tensor `t` of self's graph that has a
        buffer below it (constants alone have no gradient) and does not opt out with `requires_grad=False`. A tensor
        with a gradient already gets the new one added into that same tensor."""
        from .writes import all_tensors

        graph = self._autograd_graph()
        order = list(graph.toposort())  # walked once: the gradient pass takes the same order
        nodes = set(order)
        found: list[tuple[object, UOp]] = []  # (tensor, the node standing for it in the graph)
        for t in list(all_tensors):
            # a realized value read through the graph it was computed by (see _autograd_graph) is that graph's root
            k = t._graph if t._graph is not None and t._graph in nodes else t.uop
            if k in nodes and t.requires_grad is not False and dtypes.is_float(t.dtype) and _has_buffer(t):
                found.append((t, k))
        # equal values are one node (two zeros tensors realized together share a buffer): where a node is shared, the
        # tensors that asked for gradients (requires_grad=True) take them, not every tensor holding that value
        asked = {k for t, k in found if t.requires_grad}
        chosen = [(t, k) for t, k in found if t.requires_grad or k not in asked]
        targets = [t for t, _ in chosen]
        for t, g in zip(targets, self._gradients(targets, gradient, graph, [k for _, k in chosen], order)):
            if t.grad is None:
                t.grad = g
            else:
                t.grad.assign(t.grad + g.to(t.grad.device))
        return self


def _has_buffer(t, index_constants_count: bool = False) -> bool:
    """Whether the tensor holds a value of a device gradients are taken for: a buffer below it (other than an index
    constant's: `arange`, `linspace`, `eye`), a value materialized into one (`contiguous()`), or a constant given a
    shape by a creation function (`Tensor.ones(4) * 2`, a buffer in tinygrad). A bare scalar constant (`Tensor(2.0)`)
    and values computed from index constants alone have no gradient, as tinygrad's device-less constants have none,
    unless they ask for one (`requires_grad=True`) or `index_constants_count` (an explicit `gradient()` target)."""
    if t.requires_grad:
        return True

    def holds(n: UOp) -> bool:
        return (n.op is Ops.BUFFER and (index_constants_count or n not in index_constants)) or n.op in (Ops.PARAM, Ops.CONTIGUOUS) or _is_full(n)

    # any such node will do: the walk stops at the first (a whole toposort per tensor was a third of backward())
    return t.uop.find_below(holds) is not None


def _is_full(n: UOp) -> bool:
    """Whether n is a constant broadcast to a shape, as `Tensor.full` builds it."""
    if n.op is not Ops.EXPAND or n.shape == ():
        return False
    src = n.src[0]
    return src.op is Ops.CONST or (src.op is Ops.RESHAPE and src.src[0].op is Ops.CONST)


# buffers made on the host by arange, linspace and eye: constants of index arithmetic, with no gradient
index_constants: weakref.WeakSet = weakref.WeakSet()


requires_grad_tensors: IdentitySet = IdentitySet()
# tensors realize gave a `_graph` (the computation of a buffer gradients flow through)
graph_holders: IdentitySet = IdentitySet()
