"""The UOp: one immutable, hash-consed node type for every graph in the stack (tensor graphs, kernels, programs)."""

from __future__ import annotations

import math
import struct
import weakref
from collections.abc import Callable
from typing import Any, ClassVar

try:  # CPython's built-in BLAKE2 (the same function as hashlib's): importing hashlib also maps OpenSSL, 3.6 MiB resident
    from _blake2 import blake2s
except ImportError:  # pragma: no cover - other interpreters
    from hashlib import blake2s

from uopir import movement as _movement
from uopir.args import CallInfo, ParamArg
from uopir.bounds import compute_bounds
from uopir.calls import CallMixin, unique_slots
from uopir.dtypes import AddrSpace, ConstType, DType, PtrDType, dtypes
from uopir.errors import GraphError, SymbolicError
from uopir.interp import Unset, eval_node
from uopir.mathops import MathMixin
from uopir.movement import MovementMixin
from uopir.ops import AxisType, GroupOp, Ops
from uopir.render import pretty_print, pyrender_graph, render_expr
from uopir.rewrite import PatternMatcher, UPat, graph_rewrite
from uopir.shapes import BROADCAST_SHAPED, dim_value, infer_shape, sint
from uopir.symbolic import symbolic

_VOID_OPS = frozenset({Ops.STORE, Ops.SINK, Ops.GROUP, Ops.END, Ops.BARRIER, Ops.IF, Ops.ENDIF, Ops.PROGRAM, Ops.LINEAR, Ops.SOURCE,
                       Ops.CUSTOM_FUNCTION, Ops.NOOP})

def _infer_dtype(op: Ops, src: tuple[UOp, ...], arg: Any) -> DType:
    """The dtype a node gets when the builder does not give one."""
    # most nodes (ALU ops, movement ops, reduces) take their first source's: asked of a set, not of the chain below (an
    # `Ops.X` attribute costs 60 ns on Python 3.11, the enum metaclass's __getattr__ hook; the chain was a third of
    # making a node)
    if op in _FIRST_SOURCE_DTYPE and src:
        return src[0].dtype
    if op is Ops.CONST:
        return dtypes.from_py(arg)
    if op in GroupOp.Comparison:
        return dtypes.bool.vec(src[0].dtype.count)
    if op is Ops.WHERE:
        return src[1].dtype
    if op in _VOID_OPS:
        return dtypes.void
    if op is Ops.CALL:
        return arg.dtype if isinstance(arg, CallInfo) else dtypes.void
    if op in (Ops.PARAM, Ops.BUFFER):
        return arg.dtype
    if op is Ops.LOAD:
        d = src[0].dtype
        return d.base if isinstance(d, PtrDType) else d
    if op is Ops.BINARY:
        return dtypes.uint8
    if op is Ops.GETADDR:
        return dtypes.uint64
    if op is Ops.WMMA:
        return src[2].dtype
    if src:
        return src[0].dtype
    return dtypes.void


#: the ops `_infer_dtype` answers with the first source's dtype: all but those its chain handles first
_FIRST_SOURCE_DTYPE = frozenset(Ops) - {Ops.CONST, Ops.WHERE, Ops.CALL, Ops.PARAM, Ops.BUFFER, Ops.LOAD, Ops.BINARY, Ops.GETADDR,
                                        Ops.WMMA} - GroupOp.Comparison - _VOID_OPS


def _arg_key(arg: Any) -> Any:
    # 0.0 == -0.0 and nan != nan: floats are keyed by their bits so each constant keeps its own node
    if type(arg) is float:
        return (float, struct.pack("<d", arg))
    return arg


# nodes that carry no device of their own and are not followed to one (a constant, a variable, a bound variable)
_NO_DEVICE = frozenset({Ops.CONST, Ops.DEFINE_VAR, Ops.BIND, Ops.IOTA})
# the nodes whose device is their own (`UOp._device_below` stops at them)
_PLACED = frozenset({Ops.BUFFER, Ops.PARAM, Ops.COPY, Ops.MSELECT, Ops.MSTACK})


class UOpMeta(type):
    """Hash-consing: `UOp(op, dtype, src, arg, tag)` returns the live node with the same fields if there is one.

    The cache holds weak references keyed by (op, dtype, src, arg, tag); src is a tuple of nodes whose hash is their
    identity, so the key hashes the src ids. A node removes its entry when it dies.
    """

    cache: ClassVar[dict[tuple, weakref.ReferenceType]] = {}

    def __call__(cls, op: Ops, dtype: DType | None = None, src: tuple[UOp, ...] = (), arg: Any = None, tag: Any = None,
                 shape: tuple | None = None) -> UOp:
        """`shape`: the node's shape when the caller knows it (a traced template's nodes), given to a node that has none
        yet instead of inferred when first asked (`UOp.assume_shape`)."""
        if dtype is None:
            dtype = _infer_dtype(op, src, arg)
        key = (op, dtype, src, (float, _pack_double(arg)) if type(arg) is float else arg, tag)  # `_arg_key`, inlined
        try:
            ref = _node_cache.get(key)
        except TypeError:  # an unhashable arg: such nodes are not shared
            key = (op, dtype, src, ("unhashable", id(arg)), tag)
            ref = None
        if ref is not None and (ret := ref()) is not None:
            if shape is not None and not hasattr(ret, "_shape"):
                _set_shape(ret, shape)
            return ret
        # the fields set here rather than by a call of __init__ (the same assignments; one Python frame less per node)
        node = _new_object(cls)
        _set_op(node, op)
        _set_dtype(node, dtype)
        _set_src(node, src)
        _set_arg(node, arg)
        _set_tag(node, tag)
        _set_key(node, key)
        _node_cache[key] = _weak_ref(node)
        if shape is not None:
            _set_shape(node, shape)
        return node


class UOp(MathMixin, MovementMixin, CallMixin, metaclass=UOpMeta):
    """One node of a UOp graph.

    Fields (read-only): `op` the Ops kind; `dtype` the value's DType; `src` the input nodes; `arg` op-specific data
    (a constant, a CallInfo, a ParamArg, an axis tuple, ...); `tag` free-form marker used by passes. Equal fields
    give the same object, so `is` is equality and graphs share structure.
    """

    __slots__ = ("op", "dtype", "src", "arg", "tag", "_cache_key", "_bounds", "_shape", "_key", "_dev", "__weakref__")

    op: Ops
    dtype: DType
    src: tuple[UOp, ...]
    arg: Any
    tag: Any

    def __init__(self, op: Ops, dtype: DType, src: tuple[UOp, ...], arg: Any, tag: Any):
        _set_op(self, op)
        _set_dtype(self, dtype)
        _set_src(self, src)
        _set_arg(self, arg)
        _set_tag(self, tag)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"UOp is immutable: use .replace({name}=...) to build a changed node")

    # the cache is bound as a default so it is still reachable while the interpreter tears module globals down
    def __del__(self, cache: dict = UOpMeta.cache) -> None:
        try:
            key = self._cache_key
        except AttributeError:
            return
        # the entry taken out (one hash of the key: a lookup and a delete took two), and put back when it points at a
        # newer twin rather than at this (dying) node
        ref = cache.pop(key, None)
        if ref is not None and (node := ref()) is not None and node is not self:
            cache[key] = ref

    def __reduce__(self) -> tuple:
        return UOp, (self.op, self.dtype, self.src, self.arg, self.tag)

    def __repr__(self) -> str:
        return pretty_print(self)

    def __bool__(self) -> bool:
        if not dtypes.is_bool(self.dtype):
            raise GraphError(f"truth value of a {self.dtype} UOp is ambiguous: compare it (x.ne(0)) or use resolve()")
        s = self.simplify()
        if s.vmin == s.vmax:
            return bool(s.vmin)
        raise GraphError(f"cannot decide {self.render()} statically: use resolve(x, default) to pick a side")

    # ---- building changed nodes ----
    def replace(self, **kwargs: Any) -> UOp:
        """This node with some fields (op, dtype, src, arg, tag) changed; the same node when nothing changes."""
        op, dtype, src, arg, tag = (kwargs.pop("op", self.op), kwargs.pop("dtype", self.dtype), kwargs.pop("src", self.src),
                                    kwargs.pop("arg", self.arg), kwargs.pop("tag", self.tag))
        if kwargs:
            raise GraphError(f"replace got unknown fields {sorted(kwargs)}: use op, dtype, src, arg or tag")
        if op is self.op and dtype is self.dtype and src == self.src and arg is self.arg and tag is self.tag:
            return self
        return UOp(op, dtype, src, arg, tag)

    def rtag(self, tag: Any = True) -> UOp:
        """This node with a different tag."""
        return self.replace(tag=tag)

    # ---- identity ----
    @property
    def key(self) -> bytes:
        """A content hash (sha256) of the graph under this node, stable across processes."""
        try:
            return self._key
        except AttributeError:
            pass
        for node in self.toposort(gate=lambda n: not hasattr(n, "_key")):
            if not hasattr(node, "_key"):
                head = repr((node.op.name, node.dtype, node.arg, node.tag)).encode()
                _set_hash_key(node, blake2s(head + b"".join(s._key for s in node.src)).digest())
        return self._key

    # ---- graph walks ----
    def toposort(self, gate: Callable[[UOp], bool] | None = None, enter_calls: bool = True) -> dict[UOp, None]:
        """Every node under this one (itself last), srcs before users, as an ordered dict.

        gate(node) False stops the walk below that node; enter_calls=False skips the bodies (src[0]) of CALLs.
        """
        # depth first without (node, done) pairs: a node popped a second time after it was entered is its own marker
        # (in a DAG nothing under a node can push it again while it is open), so it is finished then
        out: dict[UOp, None] = {}
        entered: set[UOp] = set()
        stack: list[UOp] = [self]
        while stack:
            node = stack.pop()
            if node in out:
                continue
            if node in entered:
                out[node] = None
                continue
            entered.add(node)
            stack.append(node)
            if gate is None or gate(node):
                srcs = node.src if enter_calls or node.op is not Ops.CALL else node.src[1:]
                for s in reversed(srcs):
                    if s not in out:
                        stack.append(s)
        return out

    def find_below(self, pred: Callable[[UOp], bool], gate: Callable[[UOp], bool] | None = None) -> UOp | None:
        """The first node under this one (itself included, depth first, srcs in order) for which `pred` holds, else
        None; gate(node) False stops the walk below that node. Stops at the first match instead of ordering the
        whole graph as `toposort` does."""
        seen: set[UOp] = set()
        stack = [self]
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            if pred(node):
                return node
            if gate is None or gate(node):
                stack.extend(reversed(node.src))
        return None

    @property
    def backward_slice(self) -> dict[UOp, None]:
        """Every node under this one, without itself."""
        ret = self.toposort()
        del ret[self]
        return ret

    def substitute(self, dvars: dict[UOp, UOp], name: str | None = None, walk: bool = False, enter_calls: bool = False) -> UOp:
        """This graph with each key of `dvars` replaced by its value (applied before looking inside the replaced node)."""
        if not dvars:
            return self
        return graph_rewrite(self, _pm_substitute, ctx=dvars, bottom_up=True, walk=walk, enter_calls=enter_calls, name=name)

    @property
    def ranges(self) -> frozenset[UOp]:
        """The RANGEs still open at this node: used below it and not closed by an END or REDUCE (CALL bodies excluded)."""
        open_at: dict[UOp, frozenset[UOp]] = {}
        for node in self.toposort(enter_calls=False):
            srcs = node.src[1:] if node.op is Ops.CALL else node.src
            found = frozenset().union(*(open_at[s] for s in srcs)) if srcs else frozenset()
            if node.op in (Ops.END, Ops.REDUCE):
                found = found - set(node.src[1:])
            open_at[node] = found | {node} if node.op is Ops.RANGE else found
        return open_at[self]

    # ---- value ranges ----
    @property
    def vmin(self) -> ConstType:
        """The smallest value this node can take."""
        return self._min_max[0]

    @property
    def vmax(self) -> ConstType:
        """The largest value this node can take."""
        return self._min_max[1]

    @property
    def _min_max(self) -> tuple[ConstType, ConstType]:
        try:
            return self._bounds
        except AttributeError:
            pass
        if all(hasattr(s, "_bounds") for s in self.src):
            _set_bounds(self, ret := compute_bounds(self))
            return ret
        for node in self.toposort(gate=lambda n: not hasattr(n, "_bounds")):
            if not hasattr(node, "_bounds"):
                _set_bounds(node, compute_bounds(node))
        return self._bounds

    # ---- shapes ----
    @property
    def shape_or_none(self) -> tuple[sint, ...] | None:
        """The shape, or None for nodes that are not values."""
        try:
            return self._shape
        except AttributeError:
            return self._infer_shape()

    def assume_shape(self, shape: tuple[sint, ...]) -> UOp:
        """This node, given `shape` as its shape when it has none yet, instead of inferring it when first asked: for a
        caller that knows it by construction (a gradient has the shape of the node it is the gradient of). Returns self."""
        if not hasattr(self, "_shape"):
            _set_shape(self, shape)
        return self

    def _infer_shape(self) -> tuple[sint, ...] | None:
        """The shape, inferred (with the shapes of the sources not inferred yet) and remembered."""
        for s in self.src:
            if not hasattr(s, "_shape"):
                # a new source whose own sources have shapes (a constant dimension, the op built just before) is
                # shaped directly; anything deeper in one walk of the unshaped nodes
                if all(hasattr(x, "_shape") for x in s.src):
                    _set_shape(s, infer_shape(s))
                    continue
                for node in self.toposort(gate=lambda n: not hasattr(n, "_shape")):
                    if node is not self and not hasattr(node, "_shape"):
                        _set_shape(node, infer_shape(node))
                break
        _set_shape(self, ret := infer_shape(self))
        return ret

    @property
    def shape(self) -> tuple[sint, ...]:
        """The shape (ints and symbolic index UOps); raises for nodes that are not values."""
        try:  # known already: read directly (the most asked property of graph building)
            ret = self._shape
        except AttributeError:
            ret = self._infer_shape()
        if ret is None:
            raise GraphError(f"{self.op!r} has no shape: only value nodes do")
        return ret

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def marg(self) -> Any:
        """A movement op's argument as plain values: new shape, permutation, flip flags or (begin, end) pairs."""
        if self.op in (Ops.RESHAPE, Ops.EXPAND):
            return tuple(dim_value(s) for s in self.src[1:])
        if self.op in (Ops.PAD, Ops.SHRINK):
            dims = [dim_value(s) for s in self.src[1:]]
            return tuple(zip(dims[0::2], dims[1::2]))
        if self.op in (Ops.PERMUTE, Ops.FLIP):
            return self.arg
        raise GraphError(f"{self.op!r} is not a movement op")

    # ---- constants and variables ----
    @staticmethod
    def const(value: ConstType, dtype: DType | None = None) -> UOp:
        """A constant; without a dtype, Python ints/floats give the weak literal dtypes."""
        if isinstance(value, UOp):
            return value
        dt = dtypes.from_py(value) if dtype is None else dtype
        return UOp(Ops.CONST, dt, (), dt.const(value))

    def const_like(self, value: ConstType, dtype: DType | None = None) -> UOp:
        """A constant with this node's dtype (or `dtype`)."""
        return UOp.const(value, self.dtype if dtype is None else dtype)

    @property
    def val(self) -> ConstType:
        """The value of a CONST."""
        if self.op is not Ops.CONST:
            raise GraphError(f"val is only defined for CONST, not {self.op!r}")
        return self.arg

    @staticmethod
    def variable(name: str, min_val: int, max_val: int, dtype: DType = dtypes.weakint) -> UOp:
        """A named integer variable with value range [min_val, max_val]."""
        if min_val > max_val:
            raise GraphError(f"variable {name!r} has an empty range [{min_val}, {max_val}]: swap the bounds")
        return UOp(Ops.DEFINE_VAR, dtype, (), (name, min_val, max_val))

    @property
    def expr(self) -> str:
        """The name of a variable (DEFINE_VAR, its BIND, or a variable PARAM)."""
        if self.op is Ops.DEFINE_VAR:
            return self.arg[0]
        if self.op is Ops.BIND:
            return self.src[0].expr
        if self.op is Ops.PARAM and self.arg.name is not None:
            return self.arg.name
        raise GraphError(f"{self.op!r} is not a variable")

    def bind(self, value: int | UOp) -> UOp:
        """This variable bound to a value inside its range."""
        if self.op is not Ops.DEFINE_VAR:
            raise GraphError(f"only variables can be bound, not {self.op!r}")
        uval = self.const_like(value) if isinstance(value, int) else value
        if not (self.vmin <= uval.vmin and uval.vmax <= self.vmax):
            raise GraphError(f"cannot bind {self.expr} to {value}: outside its range [{self.vmin}, {self.vmax}]")
        return UOp(Ops.BIND, self.dtype, (self, uval))

    def unbind(self) -> tuple[UOp, int]:
        """(variable, value) of a BIND."""
        if self.op is not Ops.BIND or self.src[1].op is not Ops.CONST:
            raise GraphError(f"cannot unbind {self.op!r}: only BIND(var, CONST) unbinds")
        return self.src[0], self.src[1].arg

    def variables(self) -> list[UOp]:
        """The variables this graph depends on (bound ones unbound), sorted by name."""
        found = {x.src[0] if x.op is Ops.BIND else x for x in self.toposort() if x.op in (Ops.DEFINE_VAR, Ops.BIND)}
        return sorted(found, key=lambda v: v.arg)

    # ---- ALU ----
    @staticmethod
    def elementwise(op: Ops, dtype: DType | None, *srcs: UOp) -> UOp:
        """`UOp(op, dtype, srcs)` for an elementwise op whose sources share one known shape: the node takes it as it is
        made, instead of inferring it when first asked (about half of making a node; tensor ops broadcast their
        operands first, so theirs always share one). Sources of other shapes, or not shaped yet, leave it to inference."""
        ret = UOp(op, dtype, srcs)
        if op not in BROADCAST_SHAPED or hasattr(ret, "_shape"):
            return ret
        try:
            shape = srcs[0]._shape
            for s in srcs[1:]:
                if (other := s._shape) is not shape and other != shape:
                    return ret
        except AttributeError:
            return ret
        _set_shape(ret, shape)
        return ret

    def alu(self, op: Ops, *src: UOp, dtype: DType | None = None) -> UOp:
        """`op` on this node and `src` (which must already share a dtype: the Python operators promote)."""
        return UOp(op, dtype, (self, *src))

    def cast(self, dtype: DType) -> UOp:
        """A value conversion to `dtype` (no-op when it already is)."""
        return self if self.dtype is dtype else UOp(Ops.CAST, dtype, (self,))

    def bitcast(self, dtype: DType) -> UOp:
        """A reinterpretation of the bits as `dtype`."""
        return self if self.dtype is dtype else UOp(Ops.BITCAST, dtype, (self,))

    # ---- symbolic ----
    def simplify(self) -> UOp:
        """The graph rewritten with the symbolic rules (constant folding, canonical order, div/mod, comparisons)."""
        return graph_rewrite(self, symbolic, name="simplify")

    def ssimplify(self) -> UOp | ConstType:
        """`simplify()`, returning a Python value when the result is a constant."""
        ret = self.simplify()
        return ret.arg if ret.op is Ops.CONST else ret

    def sym_infer(self, var_vals: dict[str, int] | dict[UOp, int]) -> ConstType:
        """The value of this expression with variables set from `var_vals` (keyed by name or by variable node)."""
        env = {(k.expr if isinstance(k, UOp) else k): v for k, v in var_vals.items()}
        vals: dict[UOp, ConstType] = {}
        for node in self.toposort():
            vals[node] = eval_node(node, vals, env)
        if isinstance(ret := vals[self], Unset):
            raise SymbolicError(f"variable {ret.name!r} has no value: pass it in var_vals")
        return ret

    def render(self, simplify: bool = True) -> str:
        """Infix text of an index expression, e.g. `((x*4)+y)`."""
        return render_expr(self.simplify() if simplify else self)

    def pyrender(self) -> str:
        """Python source that rebuilds this graph (`eval`-able with `from uopir import *`)."""
        return pyrender_graph(self)

    # ---- graph structure ----
    def sink(*srcs: UOp | None, **kwargs: Any) -> UOp:  # noqa: N805 -- `UOp.sink(a, b)` and `a.sink(b)` both work
        """A SINK collecting `srcs` (Nones dropped); as a method, the node it is called on comes first."""
        return UOp(Ops.SINK, dtypes.void, tuple(x for x in srcs if x is not None), **kwargs)

    @staticmethod
    def group(*srcs: UOp | None) -> UOp:
        """A GROUP of `srcs` (a single src is returned as is)."""
        items = tuple(x for x in srcs if x is not None)
        return items[0] if len(items) == 1 else UOp(Ops.GROUP, dtypes.void, items)

    def after(self, *srcs: UOp, **kwargs: Any) -> UOp:
        """This value, ordered after `srcs` (a new version of a buffer once a store is done)."""
        if not srcs:
            return self
        ret = UOp(Ops.AFTER, self.dtype, (self, *srcs), **kwargs)
        # shaped as this value (what inference gives), so the shape never walks what it is ordered after
        if not hasattr(ret, "_shape") and hasattr(self, "_shape"):
            _set_shape(ret, self._shape)
        return ret

    def end(self, *ranges: UOp) -> UOp:
        """Close `ranges` after this (a STORE or value) finishes."""
        return UOp(Ops.END, dtypes.void, (self, *ranges)) if ranges else self

    @staticmethod
    def range(end: sint, axis_id: int, axis_type: AxisType = AxisType.LOOP, dtype: DType = dtypes.weakint) -> UOp:
        """A loop index from 0 to end-1; arg is (axis_id, axis_type)."""
        return UOp(Ops.RANGE, dtype, (UOp.const(end, dtype) if not isinstance(end, UOp) else end,), (axis_id, axis_type))

    @staticmethod
    def special(end: sint, name: str, dtype: DType = dtypes.weakint) -> UOp:
        """A GPU dimension index (e.g. gidx0) from 0 to end-1."""
        return UOp(Ops.SPECIAL, dtype, (UOp.const(end, dtype) if not isinstance(end, UOp) else end,), name)

    # ---- memory ----
    def numel(self) -> int:
        """The element count: a pointer's size, else the product of the shape."""
        if isinstance(self.dtype, PtrDType):
            return self.dtype.size
        return math.prod(self.shape)

    def flatten(self) -> UOp:
        """This value as one axis (a pointer is already flat)."""
        return self if isinstance(self.dtype, PtrDType) else self.reshape((math.prod(self.shape),))

    def __getitem__(self, idx: Any) -> UOp:
        """`ptr[i]`: the element at `i` of a pointer (tinygrad's kernel-writing form), stored into with `.store(v)` or
        read where it is used as a value (see `codegen.explicit_loads`)."""
        if not isinstance(self.dtype, PtrDType):
            raise GraphError(f"only a pointer is indexed with [], not a {self.dtype}")
        idxs = idx if isinstance(idx, tuple) else (idx,)
        return self.index(*idxs, dtype=self.dtype.base)

    def index(self, *idxs: UOp | int | None, **kwargs: Any) -> UOp:
        """INDEX into this buffer/pointer (Nones dropped, ints become constants)."""
        srcs = tuple(UOp.const(x) if isinstance(x, int) else x for x in idxs if x is not None)
        return UOp(Ops.INDEX, kwargs.pop("dtype", self.dtype), (self, *srcs), **kwargs)

    def load(self, *srcs: UOp, **kwargs: Any) -> UOp:
        """A LOAD from this INDEX/pointer."""
        return UOp(Ops.LOAD, kwargs.pop("dtype", None), (self, *srcs), **kwargs)

    def store(self, value: UOp | ConstType, *srcs: UOp, **kwargs: Any) -> UOp:
        """A STORE of `value` into this INDEX/buffer."""
        target = self.dtype.base if isinstance(self.dtype, PtrDType) else self.dtype
        v = value if isinstance(value, UOp) else self.const_like(value, target)
        return UOp(Ops.STORE, dtypes.void, (self, v, *srcs), **kwargs)

    def reduce(self, *ranges: UOp, arg: Ops = Ops.ADD) -> UOp:
        """Kernel-form reduction of this value over `ranges` with the ALU op `arg`."""
        if arg not in GroupOp.Reduce:
            raise GraphError(f"{arg!r} is not a reduce op: use one of {sorted(o.name for o in GroupOp.Reduce)}")
        return UOp(Ops.REDUCE, self.dtype, (self, *ranges), arg) if ranges else self

    def r(self, op: Ops, axes: tuple[int, ...]) -> UOp:
        """Tensor-form reduction over `axes` (kept as size-1 dims) with the ALU op `op`."""
        if op not in GroupOp.Reduce:
            raise GraphError(f"{op!r} is not a reduce op: use one of {sorted(o.name for o in GroupOp.Reduce)}")
        axes = tuple(sorted(a % self.ndim if self.ndim else a for a in axes))
        return UOp(Ops.REDUCE, self.dtype, (self,), (op, axes)) if axes else self

    def wmma(self, b: UOp, acc: UOp, arg: Any) -> UOp:
        """A tensor-core multiply-accumulate `self @ b + acc` described by `arg`."""
        return UOp(Ops.WMMA, acc.dtype, (self, b, acc), arg)

    # ---- buffers, params, devices ----
    @staticmethod
    def new_buffer(device: str | tuple[str, ...] | None, size: int, dtype: DType) -> UOp:
        """A fresh BUFFER of `size` elements (its identity is unique)."""
        ret = UOp(Ops.BUFFER, dtype, (), ParamArg.of_buffer(next(unique_slots), dtype, size, device))
        # shaped and placed now (what inference would give): every realize makes buffers, and walks read both of each
        _set_shape(ret, () if size is None else (size,))
        _set_dev(ret, device)
        return ret

    @property
    def is_unbound(self) -> bool:
        """True for a BUFFER minted by call_with_outputs that no storage backs yet."""
        return self.op is Ops.BUFFER and self.arg.unbound

    @staticmethod
    def param(slot: int, dtype: DType, shape: tuple[sint, ...] | None = None, device: Any = None,
              vmin_vmax: tuple[int, int] | None = None, name: str | None = None, addrspace: AddrSpace = AddrSpace.GLOBAL) -> UOp:
        """Formal argument `slot` of a call body, with a shape (dims may be symbolic)."""
        dims = tuple(d if isinstance(d, UOp) else UOp.const(d) for d in (shape or ()))
        return UOp(Ops.PARAM, dtype, dims, ParamArg(slot, dtype, None, vmin_vmax, name, addrspace, device=device))

    def param_like(self, slot: int) -> UOp:
        """A PARAM at `slot` standing for this value (same dtype, shape, device; a variable keeps its name and range)."""
        if self.op in (Ops.DEFINE_VAR, Ops.BIND):
            return UOp.param(slot, self.dtype, (), vmin_vmax=(self.vmin, self.vmax), name=self.expr)
        axis = self.axis if isinstance(self.device, tuple) else None
        p = UOp.param(slot, self.dtype, self.shape_or_none, self.device)
        return p if axis is None else p.replace(arg=ParamArg(slot, self.dtype, None, None, None, AddrSpace.GLOBAL, axis, self.device))

    @staticmethod
    def placeholder(shape: tuple[sint, ...], dtype: DType, slot: int, addrspace: AddrSpace = AddrSpace.GLOBAL, device: Any = None) -> UOp:
        """A PARAM for a kernel's buffer argument at `slot`."""
        return UOp.param(slot, dtype, shape, device, addrspace=addrspace)

    def placeholder_like(self, slot: int, addrspace: AddrSpace = AddrSpace.GLOBAL) -> UOp:
        """A placeholder PARAM with this value's shape and dtype."""
        return UOp.placeholder(self.shape, self.dtype, slot, addrspace, self.device)

    @property
    def device(self) -> str | tuple[str, ...] | None:
        """The device of this value (None when it has none). Remembered on every node of the chain it followed (the
        first non-constant sources): asked of each node of a graph, the chains of first sources are walked once."""
        try:
            return self._dev
        except AttributeError:
            pass
        # (the chain's nodes are mostly unasked: a default instead of a caught AttributeError each, and the first
        # placed source found by a loop, not a generator: a fresh 24-node chain 22.8 -> 11.0 us; asked of a training
        # step's loss at every realize)
        chain: list[UOp] = []
        node = self
        dead_end = False  # the first sources led to constants (a pad's mask, a one-hot's aranges), or to such a node
        while True:
            if (ret := getattr(node, "_dev", _UNASKED)) is not _UNASKED:
                dead_end = ret is None and bool(chain)
                break
            chain.append(node)
            op = node.op
            if op is Ops.BUFFER or op is Ops.PARAM:
                ret = node.arg.device
            elif op is Ops.COPY:
                ret = node.arg
            elif op is Ops.MSELECT:
                d = node.src[0].device
                ret = d[node.arg] if isinstance(d, tuple) else d
            elif op is Ops.MSTACK:
                ret = tuple(s.device for s in node.src)
            elif op in _NO_DEVICE:
                ret = None
            else:
                for s in node.src:
                    if s.op not in _NO_DEVICE:
                        node = s
                        break
                else:  # no sources, or constants only
                    ret = None
                    dead_end = len(chain) > 1
                    break
                continue
            break
        for n in chain:
            _set_dev(n, ret)
        if dead_end:  # the chain's nodes keep None (some are constants); this one searches its other sources
            ret = self._device_below()
            _set_dev(self, ret)
        return ret

    def _device_below(self) -> str | tuple[str, ...] | None:
        """The device of the first placed node under this one, depth first with sources in order (a device remembered
        on a node ends the search there): where the chain of first sources ends in constants, a value padded with a
        constant (`WHERE(pad mask, x, value)`) or selected by a mask of aranges still has the device of what it reads
        (it had none: `Tensor.contiguous` then searched the whole graph for a buffer, a step of a merge network the
        whole network before it)."""
        found = self.find_below(lambda n: n.op in _PLACED or (n is not self and getattr(n, "_dev", None) is not None),
                                gate=lambda n: n.op not in _NO_DEVICE)
        return None if found is None else found.device

    @property
    def axis(self) -> int | None:
        """The sharded axis of a multi-device value (None when not sharded)."""
        node = self
        while True:
            if node.op in (Ops.BUFFER, Ops.PARAM):
                return node.arg.axis
            if node.op is Ops.UNSHARD:
                return node.arg
            if node.op is Ops.PERMUTE:
                inner = node.src[0].axis
                return None if inner is None else node.arg.index(inner)
            if not node.src:
                return None
            node = node.src[0]

    def copy_to_device(self, device: str | tuple[str, ...]) -> UOp:
        """A COPY of this value to `device`."""
        return UOp(Ops.COPY, self.dtype, (self,), device)

    def contiguous(self) -> UOp:
        """Mark this value to be materialized in its own buffer."""
        return UOp(Ops.CONTIGUOUS, self.dtype, (self,))

    def detach(self) -> UOp:
        """Stop gradients through this value."""
        return UOp(Ops.DETACH, self.dtype, (self,))

_set_op = UOp.__dict__["op"].__set__
_node_cache = UOpMeta.cache
_new_object = object.__new__
_weak_ref = weakref.ref
_pack_double = struct.Struct("<d").pack
_set_dtype = UOp.__dict__["dtype"].__set__
_set_src = UOp.__dict__["src"].__set__
_set_arg = UOp.__dict__["arg"].__set__
_set_tag = UOp.__dict__["tag"].__set__
_set_key = UOp.__dict__["_cache_key"].__set__
_set_bounds = UOp.__dict__["_bounds"].__set__
_set_shape = UOp.__dict__["_shape"].__set__
_movement._set_shape = _set_shape  # movement.py is imported first: it takes the setter now
_set_dev = UOp.__dict__["_dev"].__set__
_UNASKED = object()  # `UOp.device` not asked of a node yet
_set_hash_key = UOp.__dict__["_key"].__set__


_pm_substitute = PatternMatcher([(UPat(name="x"), lambda ctx, x: ctx.get(x))])


def resolve(x: UOp | bool, default: bool = True) -> bool:
    """The truth value of `x` when it is statically known, else `default`."""
    if isinstance(x, bool):
        return x
    if not dtypes.is_bool(x.dtype):
        raise GraphError(f"resolve needs a bool UOp, got {x.dtype}")
    s = x.simplify()
    return bool(s.vmin) if s.vmin == s.vmax else default


def ssimplify(x: sint) -> sint:
    """Simplify a symbolic dim (ints pass through)."""
    return x.ssimplify() if isinstance(x, UOp) else x


def sym_infer(x: sint, var_vals: dict[str, int]) -> int:
    """The value of a symbolic dim with variables set (ints pass through)."""
    return x.sym_infer(var_vals) if isinstance(x, UOp) else x
