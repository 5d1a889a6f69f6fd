"""Shape inference: the shape of a node from its op, srcs and arg (movement ops, broadcasting, reductions).

A dimension is an `int` or a symbolic index UOp (`sint`). Shapes of symbolic movement ops are kept in the node's
srcs (not its arg) so that substitute/graph_rewrite reach the symbols inside them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uopir.errors import GraphError
from uopir.ops import GroupOp, Ops

if TYPE_CHECKING:
    from uopir.uop import UOp

sint = Any  # int | UOp: a dimension that may be symbolic

# ops whose shape is their first src's shape
_PASSTHROUGH = frozenset({Ops.AFTER, Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH, Ops.COPY, Ops.LOAD, Ops.STORE, Ops.END,
                          Ops.ALLREDUCE, Ops.MSELECT, Ops.MSTACK, Ops.BIND})
_SCALAR = frozenset({Ops.CONST, Ops.DEFINE_VAR, Ops.RANGE, Ops.SPECIAL, Ops.GETADDR})


def dim_value(u: UOp) -> sint:
    """A dimension src as an int when it is constant, else the symbolic UOp."""
    return u.arg if u.op is Ops.CONST else u


def is_int_dim(d: sint) -> bool:
    """True when a dimension is a concrete int."""
    return isinstance(d, int)


_INT_TYPES = frozenset({int, bool})


def _same(a: sint, b: sint) -> bool:
    return a is b if not isinstance(a, int) or not isinstance(b, int) else a == b


def broadcast_shape(*shapes: tuple[sint, ...]) -> tuple[sint, ...]:
    """The numpy broadcast of `shapes`: right-aligned, size-1 dims stretch; symbolic dims must match exactly."""
    first = shapes[0]
    for other in shapes[1:]:
        if other != first:
            break
    else:
        return first
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out: list[sint] = []
    for dims in zip(*padded):
        rest = [d for d in dims if not (isinstance(d, int) and d == 1)]
        first = rest[0] if rest else 1
        if any(not _same(first, d) for d in rest[1:]):
            raise GraphError(f"shapes {shapes} cannot be broadcast together: make the dims equal or 1 (reshape/expand first)")
        out.append(first)
    return tuple(out)


def prod(dims: tuple[sint, ...]) -> sint:
    """The product of dims (an int when all are ints)."""
    ret: sint = 1
    for d in dims:
        ret = ret * d
    return ret


def shape_str(shape: tuple[sint, ...]) -> str:
    """A shape for messages: symbolic dims by their expression, `(3, i)` rather than the UOps."""
    dims = [str(d) if isinstance(d, int) else d.render() for d in shape]
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


SizeFactors = tuple[int, tuple["UOp", ...]]


def size_factors(d: sint) -> SizeFactors:
    """A size as an int coefficient times symbolic factors (variables, or symbolic sizes that are no product), the
    factors ordered by identity: two sizes with equal factors are equal for every value of their variables."""
    if isinstance(d, int):
        return d, ()
    if d.op is Ops.CONST:
        return int(d.arg), ()
    if d.op is Ops.MUL:
        return mul_factors(size_factors(d.src[0]), size_factors(d.src[1]))
    return 1, (d,)


def mul_factors(a: SizeFactors, b: SizeFactors) -> SizeFactors:
    """The factors of the product of two sizes (see `size_factors`)."""
    return a[0] * b[0], tuple(sorted(a[1] + b[1], key=id))


def divides(a: SizeFactors, b: SizeFactors) -> bool:
    """Whether size `a` divides size `b` for every value of their variables (as far as their factors show)."""
    if a[0] == 0 or b[0] % a[0]:
        return False
    rest = list(b[1])
    for f in a[1]:
        at = next((k for k, g in enumerate(rest) if g is f), None)
        if at is None:
            return False
        rest.pop(at)
    return True


def infer_shape(u: UOp) -> tuple[sint, ...] | None:
    """The shape of `u` (None for nodes that are not values: sinks, programs, control flow)."""
    # one table lookup per node (an eager training step infers a few hundred shapes; a chain of op tests was most of it)
    rule = _SHAPE_RULES.get(u.op)
    return rule(u) if rule is not None else None


def _scalar_shape(u: UOp) -> tuple[sint, ...]:
    return ()


def _passthrough_shape(u: UOp) -> tuple[sint, ...] | None:
    return u.src[0].shape_or_none if u.src else None


def _call_shape(u: UOp) -> tuple[sint, ...] | None:
    return None if u.dtype.name == "void" else ()


def _buffer_shape(u: UOp) -> tuple[sint, ...]:
    return () if u.arg.size is None else (u.arg.size,)


def _param_shape(u: UOp) -> tuple[sint, ...]:
    return tuple(dim_value(s) for s in u.src)


def _iota_shape(u: UOp) -> tuple[sint, ...]:
    return (dim_value(u.src[0]),)


def _binary_shape(u: UOp) -> tuple[sint, ...]:
    return (len(u.arg),)


def _stack_shape(u: UOp) -> tuple[sint, ...]:
    return () if not u.src else (len(u.src), *u.src[0].shape)


def _index_shape(u: UOp) -> tuple[sint, ...]:
    idx_shapes = [s.shape for s in u.src[1:]]
    base = u.src[0].shape_or_none
    lead = broadcast_shape(*idx_shapes) if idx_shapes else ()
    return lead + (base[len(u.src) - 1:] if base else ())


def _reduce_shape(u: UOp) -> tuple[sint, ...] | None:
    inner = u.src[0].shape_or_none
    if isinstance(u.arg, tuple):  # tensor form: (op, axes) keeps the reduced axes as size 1
        axes = u.arg[1]
        return tuple(1 if i in axes else d for i, d in enumerate(inner or ()))
    return inner


def _bitcast_shape(u: UOp) -> tuple[sint, ...] | None:
    ps = u.src[0].shape_or_none
    if ps is None or not ps or u.dtype.itemsize == u.src[0].dtype.itemsize:
        return ps
    last = ps[-1] * u.src[0].dtype.itemsize
    if isinstance(last, int) and last % u.dtype.itemsize:
        raise GraphError(f"bitcast of shape {ps} from {u.src[0].dtype} to {u.dtype} does not divide evenly: reshape first")
    return (*ps[:-1], last // u.dtype.itemsize)


def _unshard_shape(u: UOp) -> tuple[sint, ...]:
    ps = u.src[0].shape
    ndev = len(u.src[0].device) if isinstance(u.src[0].device, tuple) else 1
    return tuple(d * ndev if i == u.arg else d for i, d in enumerate(ps))


def _elementwise_shape(u: UOp) -> tuple[sint, ...]:
    shapes = [s for s in (x.shape_or_none for x in u.src) if s is not None]
    if not shapes:
        return ()
    return shapes[0] if len(shapes) == 1 else broadcast_shape(*shapes)


def _shape_rules() -> dict[Ops, Any]:
    """The shape rule of each op; ops without one (sinks, programs, control flow) have no shape. The groups as the
    chain of tests had them, first match winning."""
    rules: dict[Ops, Any] = {}
    groups = [(_SCALAR, _scalar_shape), (_PASSTHROUGH, _passthrough_shape), ({Ops.CALL}, _call_shape),
              ({Ops.BUFFER}, _buffer_shape), ({Ops.IOTA}, _iota_shape),
              ({Ops.PARAM}, _param_shape), ({Ops.BINARY}, _binary_shape), ({Ops.STACK}, _stack_shape),
              ({Ops.INDEX}, _index_shape), ({Ops.REDUCE}, _reduce_shape), ({Ops.BITCAST}, _bitcast_shape), ({Ops.UNSHARD}, _unshard_shape),
              (GroupOp.Movement, _movement_shape), (GroupOp.Elementwise | {Ops.CUSTOM, Ops.CUSTOMI, Ops.WMMA}, _elementwise_shape)]
    for ops, rule in groups:
        for op in ops:
            rules.setdefault(op, rule)
    return rules


def _movement_shape(u: UOp) -> tuple[sint, ...]:
    ps = u.src[0].shape_or_none
    if ps is None:
        raise GraphError(f"{u.op!r} needs a src with a shape, {u.src[0].op!r} has none")
    return movement_shape(u.op, ps, u.marg)


def movement_shape(op: Ops, ps: tuple[sint, ...], marg: Any) -> tuple[sint, ...]:
    """The shape a movement op `op` with plain argument `marg` (see `UOp.marg`) gives a value of shape `ps`; raises
    GraphError for an argument that does not fit the shape."""
    if op is Ops.RESHAPE:
        if set(map(type, ps + marg)) <= _INT_TYPES and prod(ps) != prod(marg):  # (every dim an int: `is_int_dim`)
            raise GraphError(f"cannot reshape {ps} to {marg}: the sizes differ")
        return marg
    if op is Ops.EXPAND:
        if len(marg) != len(ps):
            raise GraphError(f"cannot expand {ps} to {marg}: only size-1 dims expand (reshape to add dims)")
        # one loop, `_same` inlined: a view is checked for every broadcast operand of every tensor op
        for p, m in zip(ps, marg):
            if p is m or (type(p) is int and (p == 1 or (type(m) is int and p == m))):
                continue
            if not (_same(p, m) or (isinstance(p, int) and p == 1)):
                raise GraphError(f"cannot expand {ps} to {marg}: only size-1 dims expand (reshape to add dims)")
        return marg
    if op is Ops.PERMUTE:
        if sorted(marg) != list(range(len(ps))):
            raise GraphError(f"permute {marg} is not a permutation of the {len(ps)} axes of {ps}")
        return tuple(ps[i] for i in marg)
    if op is Ops.FLIP:
        if len(marg) != len(ps):
            raise GraphError(f"flip {marg} needs one flag per axis of {ps}")
        return ps
    if len(marg) != len(ps):
        raise GraphError(f"{op.name.lower()} {marg} needs one (begin, end) pair per axis of {ps}")
    if op is Ops.PAD:
        return tuple(_simp(d + b + e) for d, (b, e) in zip(ps, marg))
    # SHRINK
    for d, (b, e) in zip(ps, marg):
        if isinstance(d, int) and isinstance(b, int) and isinstance(e, int) and not 0 <= b <= e <= d:
            raise GraphError(f"shrink {marg} is out of bounds for shape {ps}")
    return tuple(e if isinstance(b, int) and b == 0 else _span(b, e) for b, e in marg)


def _span(b: sint, e: sint) -> sint:
    """`e - b`, simplified; an end written as `b + n` (a slice of n elements starting at a symbolic `b`, as a write
    into a moving slice is) is n without a rewrite of the difference."""
    if not isinstance(e, int) and e.op is Ops.ADD and e.src[0] is b and e.src[1].op is Ops.CONST and type(e.src[1].arg) is int:
        return e.src[1].arg
    return _simp(e - b)


def _simp(d: sint) -> sint:
    return d if isinstance(d, int) else d.ssimplify()


_SHAPE_RULES = _shape_rules()
#: the ops whose shape is the broadcast of their sources' (elementwise ops)
BROADCAST_SHAPED = frozenset(op for op, rule in _SHAPE_RULES.items() if rule is _elementwise_shape)
