"""The lazy `Tensor`: a handle on a tensor-level UOp graph, computed by the scheduler on `realize()`.

Construction, properties, conversion and realization live here; the op families are mixins in their own modules
(elementwise, reductions, movement, nn-style ops). Names, signatures, defaults and dtype rules follow tinygrad's
Tensor, so tinygrad code runs after changing the import.
"""

from __future__ import annotations

import gc
import math
import pathlib
from typing import Any, ClassVar

import numpy as np
from hcq_runtime import Buffer, Device, bind_buffer, buffer_for, canonicalize, numpy_dtype
from uopir import (
    DEFERRED_OPERAND_TYPES,
    DType,
    DTypeError,
    Ops,
    UOp,
    dtypes,
    float_to_bf16_bits,
    float_to_fp8,
    fp8_to_float,
    kernel_form,
    strong_dtype,
    to_dtype,
)

from .activations import ActivationMixin
from .call_values import IN_PLACE, written_slots
from .composite_math import CompositeMathMixin
from .elementwise import ElementwiseMixin
from .errors import DTypeOverflowError, JitError, ShapeError, TensorRuntimeError, TensorTypeError
from .gradient import GradientMixin, graph_holders, index_constants, requires_grad_tensors
from .identity import IdentitySet
from .indexing import IndexingMixin
from .losses import LossMixin
from .multi import ShardedTensor, shard
from .nn_ops import NNMixin
from .random import RandomMixin
from .realizer import capturing, done, external_buffers, realize_uops, realized_buffers, walk_cover, written_versions
from .reduce import ReduceMixin
from .schedule import GraphWalk, contiguous_slice, device_below
from .storage import file_span
from .symbolic_sizes import concrete
from .tensor_movement import TensorMovementMixin, index_tuple
from .writes import (
    ViewStep,
    all_tensors,
    apply_chain,
    apply_view,
    co_readers,
    live_reads,
    own_copy,
    pending,
    rebind_views,
    storage_of,
    view_steps,
    write,
)

_NUMPY_TO_DTYPE = {np.dtype(d.fmt): d for d in dtypes.all if d.fmt is not None}


def dtype_of_numpy(dt: np.dtype) -> DType:
    """The uopir dtype of a numpy dtype."""
    if (ret := _NUMPY_TO_DTYPE.get(np.dtype(dt))) is None:
        raise TensorTypeError(f"numpy dtype {dt} has no Tensor dtype: convert the array to a numeric or bool dtype first")
    return ret


def _shape_of_list(data: Any) -> tuple[int, ...]:
    if not isinstance(data, (list, tuple)):
        return ()
    if not data:
        return (0,)
    subs = [_shape_of_list(x) for x in data]
    if any(s != subs[0] for s in subs):
        raise ValueError(f"inhomogeneous shape from {data}")
    return (len(data), *subs[0])


def to_storage(arr: np.ndarray, dt: DType) -> np.ndarray:
    """Host values as the bytes a buffer of `dt` holds (bfloat16 and fp8, which numpy lacks, as their bit patterns)."""
    if dt.fmt is not None:  # a strided array stays strided: the buffer copies it in without a contiguous copy first
        return arr.astype(numpy_dtype(dt), copy=False)
    values = np.asarray(arr, dtype=np.float64)
    if dt is dtypes.bfloat16:
        return np.vectorize(float_to_bf16_bits, otypes=[np.uint16])(values).reshape(arr.shape)
    return np.vectorize(lambda v: float_to_fp8(float(v), dt), otypes=[np.uint8])(values).reshape(arr.shape)


def from_storage(raw: np.ndarray, dt: DType) -> np.ndarray:
    """Buffer contents as numpy values: bfloat16 and fp8 bit patterns become float32."""
    if dt.fmt is not None:
        return raw
    if dt is dtypes.bfloat16:
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return np.vectorize(lambda code: fp8_to_float(int(code), dt), otypes=[np.float32])(raw)


def _contiguous_run(u: UOp) -> tuple[UOp, int] | None:
    """For a reshape of a contiguous slice of a buffer (`schedule.contiguous_slice`): the buffer and the slice's first
    element; None otherwise."""
    while u.op is Ops.RESHAPE:
        u = u.src[0]
    return contiguous_slice(u) if u.op is Ops.SHRINK else None


def _is_buffer_view(u: UOp) -> bool:
    """True when `u` is a BUFFER or a full-size reshape of one (its value is the buffer, no kernel needed)."""
    return u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)


def _host_array(data: list | tuple, host: Any) -> np.ndarray:
    """Python values as a numpy array of `host` dtype, converted as C and torch convert (-1 as uint8 is 255, 2.7 as an
    int is 2), where numpy refuses an out-of-range Python int."""
    try:
        return np.array(data, dtype=host)
    except OverflowError:
        return np.array(data).astype(host)


def _norm_dtype(dtype: Any) -> DType | None:
    return None if dtype is None else to_dtype(dtype)


class Tensor(ElementwiseMixin, CompositeMathMixin, ActivationMixin, ReduceMixin, TensorMovementMixin, IndexingMixin, NNMixin, LossMixin, RandomMixin,
             GradientMixin):
    """A lazy n-dimensional array on a device.

    `Tensor(data)` accepts a Python scalar, a (nested) list or tuple, a numpy array, bytes, or a tensor-level UOp.
    Ops build a graph; `realize()` / `numpy()` / `tolist()` / `item()` run it.
    """

    __slots__ = ("uop", "_device", "_requires_grad", "grad", "_root", "_chain", "_views", "_borrowed", "_graph", "__weakref__")
    training: ClassVar[bool] = False

    def __init__(self, data: Any, device: str | tuple[str, ...] | None = None, dtype: Any = None, requires_grad: bool | None = None):
        devices = tuple(device) if isinstance(device, (tuple, list)) else None
        self._init(data, devices[0] if devices else device, dtype, requires_grad)
        all_tensors.add(self)  # only once built: a constructor that raised leaves no half-made tensor for live_reads
        if requires_grad:
            self._own_leaf()
        if devices:  # several devices (tinygrad's rule): the value is on each of them, sharded in place
            self.shard_(devices)

    def _fields(self, device: str) -> None:
        """The fields every new tensor starts with (its value, `uop`, is set by the caller)."""
        self.grad: Tensor | None = None
        self._requires_grad: bool | None = None
        self._device = device
        # views (see writes.py): the root tensor this one views, the view steps from it, and a root's live views
        self._root: Tensor | None = None
        self._chain: tuple[ViewStep, ...] = ()
        self._views: IdentitySet[Tensor] | None = None
        # whether this tensor's buffer may be another tensor's too (made from a UOp that is a view of existing storage,
        # or realized to a buffer another tensor realized first): its first write copies (see writes.write)
        self._borrowed = False
        # the graph this tensor's value was computed by, kept when realize replaced it with a buffer and tensors that
        # require gradients feed it (so `y.item(); y.backward()` still finds them); None otherwise
        self._graph: UOp | None = None

    def _init(self, data: Any, device: str | None, dtype: Any, requires_grad: bool | None) -> None:
        dt = _norm_dtype(dtype)
        if isinstance(data, pathlib.Path):  # a file's bytes as a DISK tensor (of `dtype`, uint8 by default), or copied to `device`
            dt, nbytes = dt or dtypes.uint8, data.stat().st_size  # (a missing file is a FileNotFoundError)
            if data.is_dir():
                raise TensorRuntimeError(f"{data} is a directory: Tensor(path) reads the bytes of a file")
            if nbytes % dt.itemsize:
                raise TensorRuntimeError(f"{data} holds {nbytes} bytes, not a whole number of {dt} ({dt.itemsize} bytes each)")
            disk = Tensor.empty(nbytes // dt.itemsize, dtype=dt, device=f"disk:{data.resolve()}")
            data = disk if device is None or canonicalize(device).startswith("DISK") else disk.to(device)
            device = data.device
            data = data.uop
        self._fields(canonicalize(device) if device is not None else Device.DEFAULT)
        self.requires_grad = requires_grad
        if isinstance(data, UOp):
            self.uop = data if dt is None or data.dtype is dt else data.cast(dt)
            self._borrowed = storage_of(self.uop) is not None
            return
        if isinstance(data, Tensor):
            raise TensorTypeError("Tensor(Tensor) is not supported: use .clone(), .to(device) or .cast(dtype)")
        if isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
            # a Python number is weakly typed (tinygrad's rule): it takes the dtype of what it is combined with, and is
            # stored as the default int or float when realized alone
            out = dt if dt is not None else dtypes.from_py(data)
            self.uop = UOp.const(out.const(data), out)
            return
        if isinstance(data, bytes):  # raw storage: the bytes of `dtype` elements (uint8 by default)
            dt = dt or dtypes.uint8
            if len(data) % dt.itemsize:
                raise TensorRuntimeError(f"{len(data)} bytes are not a whole number of {dt} ({dt.itemsize} bytes each)")
            data = from_storage(np.frombuffer(data, dtype=numpy_dtype(dt)), dt)
        if isinstance(data, (list, tuple)):
            shape = _shape_of_list(data)
            try:
                out = dt if dt is not None else (dtypes.from_py(data) if shape != (0,) else dtypes.default_float)
            except DTypeError as e:  # (a numpy scalar in a list: tinygrad and torch raise a RuntimeError)
                raise TensorRuntimeError(f"{e}; a list holds Python numbers, or pass an np.array") from None
            host = numpy_dtype(out) if out.fmt is not None else np.float64
            data = _host_array(data, host).reshape(shape) if shape != (0,) else np.zeros((0,), host)
            dt = out
        if isinstance(data, np.generic):
            data = np.asarray(data)
        if data is None and dt is None:  # tinygrad: an empty, weakly typed float tensor
            self.uop = UOp.const(0.0, dtypes.weakfloat).reshape((1,)).shrink(((0, 0),))
            return
        if data is None:
            data = np.zeros((0,), numpy_dtype(dt) if dt.fmt is not None else np.float32)
        if not isinstance(data, np.ndarray):
            raise TensorTypeError(f"can't create Tensor from {data!r} with type {type(data)}")
        out = dt if dt is not None else dtype_of_numpy(data.dtype)
        arr = to_storage(data, out)
        buf = UOp.new_buffer(self._device, arr.size, out)
        if arr.size:
            buffer_for(buf).copyin(arr)
        self.uop = buf.reshape(arr.shape)

    # ---- autodiff ----
    @property
    def requires_grad(self) -> bool | None:
        """True: `backward` computes this tensor's `.grad`; None (the default) and False: it does not."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool | None) -> None:
        self._requires_grad = value
        if value:
            requires_grad_tensors.add(self)
            if hasattr(self, "uop"):
                self._own_leaf()
        else:
            requires_grad_tensors.discard(self)

    def _own_leaf(self) -> None:
        """A tensor that asks for gradients gets a buffer of its own when its value is a constant or may share its
        buffer: equal values are one graph node (two `Tensor.ones(3)` are the same node, and realized together they
        share a buffer), and gradients are taken per node, so two such parameters got the sum of both gradients."""
        if self._root is not None or not (self._borrowed or not any(n.op in (Ops.BUFFER, Ops.PARAM) for n in self.uop.toposort())):
            return
        self.uop, self._borrowed = Tensor._in_own_buffer(Tensor(self.uop, device=self.device)).uop, False

    @staticmethod
    def _in_own_buffer(value: Tensor, **kwargs: Any) -> Tensor:
        """A new tensor with a buffer of its own, written with `value`: never the same graph node as another tensor."""
        ret = Tensor.empty(*value.shape, dtype=value.dtype, device=value.device, **kwargs)
        write(ret, value)
        return ret

    # ---- wrapping ----
    def _wrap(self, u: UOp, device: str | None = None) -> Tensor:
        """A new tensor holding the value `u` (computed from this one: not a view of it). What `Tensor(u, device=...)`
        does, without the constructor's dispatch on its argument (every op result is built here)."""
        if device is not None and not isinstance(device, str):
            return Tensor(u, device=device)
        ret = Tensor.__new__(Tensor)
        ret._fields(canonicalize(device) if device is not None else self._device)
        ret.uop = u
        ret._borrowed = storage_of(u) is not None
        all_tensors.add(ret)
        return ret

    @staticmethod
    def _owning(u: UOp, device: str, **kwargs: Any) -> Tensor:
        """A tensor whose value is `u`, a view of a buffer (version) made for this tensor alone: it owns the buffer, so
        its writes land in place."""
        t = Tensor(u, device=device, **kwargs)
        t._borrowed = False
        return t

    def _view(self, op: Ops, arg: Any) -> Tensor:
        """This tensor seen through one view step (a movement op, DETACH or BITCAST): a view of this tensor's root,
        rebuilt whenever the root gets a new value and written through by `assign` (see writes.py). The step is recorded
        as it was asked for, even when the resulting graph node is the same as this one's (`a[:]`, `a.reshape(a.shape)`)."""
        step = (op, arg)
        ret = self._wrap(apply_view(self.uop, step))  # what Tensor(u, device=self._device) makes, without its dispatch
        ret._make_view_of(self, (step,))
        return ret

    def _view_steps(self, u: UOp, steps: tuple[ViewStep, ...]) -> Tensor:
        """This tensor seen through several view steps at once (`u` is its value through them): one tensor for the
        whole chain, with the same root and steps as a tensor per step would have."""
        ret = self._wrap(u)
        ret._make_view_of(self, steps)
        return ret

    def _make_view_of(self, parent: Tensor, steps: tuple[ViewStep, ...]) -> None:
        root = parent._root if parent._root is not None else parent
        self._root, self._chain = root, parent._chain + steps
        if root._views is None:
            root._views = IdentitySet()
        root._views.add(self)

    # ---- properties ----
    @property
    def shape(self) -> tuple[int, ...]:
        """The dims, as a tuple of ints."""
        return tuple(self.uop.shape)

    @property
    def max_shape(self) -> tuple[int, ...]:
        """The shape with every symbolic dim at its maximum."""
        return tuple(int(d.vmax) if isinstance(d, UOp) else d for d in self.shape)

    def max_numel(self) -> int:
        """The number of elements of `max_shape`."""
        return math.prod(self.max_shape)

    @property
    def is_param(self) -> bool:
        """tinygrad's name for whether backward fills this tensor's gradient (`requires_grad` is not False)."""
        return self.requires_grad is not False

    @is_param.setter
    def is_param(self, value: bool) -> None:
        self.requires_grad = None if value else False

    def is_param_(self, is_param: bool = True) -> Tensor:
        """Set `is_param` in place; returns self."""
        self.is_param = is_param
        return self

    @property
    def dtype(self) -> DType:
        """The element dtype."""
        return self.uop.dtype

    @property
    def device(self) -> str:
        """The device the values live on (canonical name: "CPU", "CPU:1", ...)."""
        return self._device

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self.shape)

    def numel(self) -> int:
        """The number of elements."""
        return math.prod(self.shape)

    def element_size(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    def nbytes(self) -> int:
        """Bytes of all elements."""
        return self.numel() * self.element_size()

    def size(self, dim: int | None = None) -> int | tuple[int, ...]:
        """The shape, or one dim of it."""
        return self.shape if dim is None else self.shape[self._resolve_dim(dim)]

    def __len__(self) -> int:
        if not self.shape:
            raise TensorTypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self) -> bool:
        raise TensorTypeError("__bool__ on Tensor is not defined: use .item(), .any() or .all()")

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<Tensor {self.shape} {self.dtype} on {self.device}>"

    # ---- realization and conversion ----
    def realize(self, *lst: Tensor) -> Tensor:
        """Compute this tensor (and `lst`) now, in one schedule together with every pending write; afterwards each
        refers to its buffer. A view of a buffer stays a view of it.

        Python's cyclic garbage collector is paused while it runs (and enabled again after, if it was enabled): realize
        makes no reference cycles (training steps' realizes left nothing for a collection), but it makes thousands of
        short-lived objects (a graph walk's key, buffers, the settling of every tensor), and each 700 of them alive at
        once set off a collection that found nothing and promoted the survivors, until a full collection went over every
        live object (a small CNN's and a deep MLP's eager training steps: ~5.5% faster paused)."""
        # (`Tensor._realize`, not `self._realize`: `Tensor.realize(sharded, t)` passes a sharded tensor as self)
        if not gc.isenabled():
            return Tensor._realize(self, lst)
        gc.disable()
        try:
            return Tensor._realize(self, lst)
        finally:
            gc.enable()

    def _realize(self, lst: tuple[Tensor, ...]) -> Tensor:
        # a sharded tensor among them (`Tensor.realize(sharded, t)` too) is its shards
        flat = [s for t in (self, *lst) for s in (t.shards if hasattr(t, "shards") else (t,))]
        for t in flat:
            if t.uop.dtype in dtypes.weaks:  # a symbolic int (Tensor(Variable(...).bind(2))) is stored as the default int
                t.uop = t.uop.cast(strong_dtype(t.uop.dtype))
        tensors = list({id(t): t for t in (*flat, *pending)}.values())
        pending.clear()
        readers: list[Tensor] = []
        if any(storage_of(t.uop) is not None for t in tensors):  # writes: their old versions' small readers come along
            readers = co_readers(tensors)
            tensors += readers
        by_device: dict[str, list[tuple[Tensor, UOp]]] = {}
        reach = _Settling()  # shared by every tensor this realize settles
        for t in tensors:
            u = t.uop
            if (storage := storage_of(u)) is not None:
                if storage.op is Ops.AFTER and storage not in done:
                    by_device.setdefault(t.device, []).append((t, storage))
                elif storage.op is Ops.AFTER:
                    t._settle(storage, written_versions[storage], reach)
            elif (buf := realized_buffers.get(u)) is not None:
                t._settle(u, buf.reshape(t.shape), reach)
                t._borrowed = True  # another tensor with the same value realized it first
            else:
                by_device.setdefault(t.device, []).append((t, u))
        # the values this schedule computes read what it orders; every other live tensor (one already a view of a
        # buffer, or of a written version, included) may still read a version the schedule overwrites
        exclude = {id(t) for group in by_device.values() for t, u in group if u.op is not Ops.AFTER}
        # one schedule per target device: a target with no buffer below it (a constant) belongs to its tensor's device
        for device, group in by_device.items():
            # (the readers read a buffer version on this device: co_readers chose them for it). The values first, the
            # writes after: the walk then lists every value's graph before the versions the writes make (see `_settle`)
            targets = tuple(dict.fromkeys([*(u for _, u in group if u.op is not Ops.AFTER), *(u for _, u in group if u.op is Ops.AFTER)]))
            walked: list[GraphWalk] | None = [] if requires_grad_tensors else None
            bufs = realize_uops(targets, device, lambda: live_reads(exclude), {t.uop for t in readers}, walked=walked)
            reach.cover = walk_cover(walked[-1]) if walked else None
            got = dict(zip(targets, bufs))
            owned: set[UOp] = set()
            for t, u in group:
                t._settle(u, got[u] if u.op is Ops.AFTER else got[u].reshape(t.shape), reach)
                if u.op is not Ops.AFTER:
                    t._borrowed = u in owned  # tensors of one value share its buffer: the first one owns it
                    owned.add(u)
        return self

    def _settle(self, old: UOp, new: UOp, settling: _Settling) -> None:
        """After a realize: the computed node `old` in this tensor's value is now `new` (a buffer or a view of one).
        `settling` is what the tensors settled by one realize share (their graphs overlap)."""
        if (shape := old.shape_or_none) is not None and new.shape_or_none != shape:
            new = new.reshape(shape)  # a call's output (an AFTER shaped as its value) realizes to a flat buffer
        before = settling.leaf_count(self)
        previous = self.uop
        if self._graph is None and old.op is not Ops.AFTER:
            if requires_grad_tensors:
                # leaves, and values realized earlier whose computation reads leaves (gradients flow through them too).
                # A target of the realize's walk reads none when every leaf the walk met was listed after it (the walk
                # lists what is under a node before the node) and none is in what it did not enter. A training step's
                # loss and gradients read the parameters' versions before the optimizer's writes; the walk lists those
                # values first and the writes, and the versions they make (the leaves now), after them (`_realize`).
                # Their graphs are then not walked again: ~270 nodes, 3-5% of a small CNN's or deep MLP's eager step
                leaves = settling.leaves()
                if (cover := settling.cover) is not None and self.uop is old and (at := cover[0].get(old)) is not None and \
                        not any(cover[0].get(n, at + 1) <= at or n in cover[1] or any(n in body for body in cover[2]) for n in leaves):
                    keep = False
                else:
                    keep = _reads_any(self.uop, leaves, settling.reach)
            else:
                # a float scalar (a loss read with .item() before backward()) keeps the computation gradients need,
                # whatever asked for them: tinygrad's backward reaches every float tensor of the graph
                keep = self.shape == () and dtypes.is_float(self.dtype) and self.uop.find_below(lambda n: n.op is Ops.BUFFER) is not None
            if keep:
                self._graph = self.uop
                graph_holders.add(self)
        if self.uop is old:
            self.uop = new
        else:  # a view of the computed node (a parameter's reshape of its written version): the view rebuilt over `new`
            steps = view_steps(old, self.uop)
            self.uop = apply_chain(new, steps) if steps is not None else self.uop.substitute({old: new})
        settling.moved(previous, before, self.uop, settling.leaf_count(self))
        if self._views:
            rebind_views(self)
            settling.views_moved(self)

    def replace(self, x: Tensor, allow_shape_mismatch: bool = False) -> Tensor:
        """Make this tensor object stand for `x`'s value (its dtype and device too): not a write, so no other tensor
        changes — tensors viewing this one keep their values, and a later write to either tensor leaves the other as
        it was. Returns self."""
        if not isinstance(x, Tensor):
            raise TensorTypeError(f"replace takes a Tensor, got {type(x).__name__}")
        if self.shape != x.shape and not allow_shape_mismatch:
            raise ShapeError(f"replace shape mismatch {self.shape} != {x.shape} (pass allow_shape_mismatch=True to change it)")
        self._forget_identity()
        self.uop, self._device, self._graph = x.uop, x._device, x._graph
        if self._graph is not None:
            graph_holders.add(self)
        self._borrowed = storage_of(self.uop) is not None  # x's buffer is x's: a write here copies first
        return self

    def _forget_identity(self) -> None:
        """Stop being a view or a viewed root: tensors viewing this one keep the value they have, each becoming a tensor
        of its own, and this one is no longer a view of its root."""
        for v in list(self._views or ()):
            v._root, v._chain, v._borrowed = None, (), storage_of(v.uop) is not None
        self._views = None
        if self._root is not None and self._root._views is not None:
            self._root._views.discard(self)
        self._root, self._chain = None, ()

    def _value_device(self) -> str:
        """Where a value written into this tensor is made from host data: this tensor's device, or the default device
        for a file (a new buffer on a DISK device would map the file's first bytes, and writing it would overwrite them)."""
        return Device.DEFAULT if self.device.startswith("DISK") else self.device

    def assign(self, x: Any) -> Tensor:
        """Write the value of `x` into this tensor (same dtype and device; broadcast to this shape). Writing into a view
        (a slice, permute, flip, reshape, detach or bitcast of a tensor) writes into the tensor it views. Values
        computed from the old value before the write keep the old value."""
        if not isinstance(x, Tensor):
            x = Tensor(x, device=self._value_device(), dtype=self.dtype)
        if x.device != self.device:
            if device_below(x.uop) is None:  # a value of constants alone belongs to no device
                x = Tensor(x.uop, device=Device.DEFAULT if self.device.startswith("DISK") else self.device)
            elif not self.device.startswith("DISK"):  # a file is written from wherever the value is (below)
                raise TensorRuntimeError(f"assign device mismatch: {self.device} <- {x.device}; move the value with .to() first")
        if x.dtype in dtypes.weaks:  # a Python number's tensor takes the dtype it is written into
            x = x.cast(self.dtype)
        if x.dtype != self.dtype:
            raise TensorRuntimeError(f"assign dtype mismatch {self.dtype} != {x.dtype}: cast the value explicitly")
        if x.shape != self.shape:
            x = x.expand(self.shape)
        if self.device.startswith("DISK"):
            return self._write_file(x)
        write(self, x)
        return self

    def _write_file(self, x: Tensor) -> Tensor:
        """A DISK tensor's assign (the whole tensor or a contiguous view of it: `t[2:4] = ...`, `t[0:8].bitcast(...)`):
        the value is computed where it lives and its bytes are written into the file now (a file is not a device
        kernels run on)."""
        span = file_span(self.uop)
        root = self._root if self._root is not None else self
        if span is None and not _is_buffer_view(root.uop):  # a file not written yet (`t.to("disk:...")`): its bytes first
            root.realize()
            span = file_span(self.uop)
        if span is None:
            raise TensorRuntimeError("non-contiguous view is not supported: a write into a DISK tensor covers one contiguous range of "
                                     "its file in order (slices of leading dims, reshapes, bitcasts), not a strided, permuted or padded view")
        buffer, offset, nbytes = span
        data = memoryview(np.ascontiguousarray(to_storage(x.numpy(), self.dtype))).cast("B")
        if nbytes:
            buffer_for(buffer).view(nbytes, dtypes.uint8, offset).copyin(data)
        return self

    def __delitem__(self, indices: Any) -> None:
        raise TensorTypeError("Tensor does not support item deletion: build a new tensor without those elements (e.g. with cat)")

    def __setitem__(self, indices: Any, value: Any) -> None:
        """`t[indices] = value`: write `value` (broadcast, same dtype; Python scalars are converted) into the
        indexed elements. Basic indices (ints, slices with steps, None, Ellipsis) write through a view; tensor indices
        write the picked elements."""
        if not isinstance(value, Tensor):
            value = Tensor(value, device=self._value_device(), dtype=self.dtype)
        indices = index_tuple(indices, Tensor)  # as __getitem__ reads it
        # positions given as a tensor, list, array or a tuple inside the index: a scatter (a gathered copy is no view)
        parts = indices if isinstance(indices, tuple) else (indices,)
        if isinstance(indices, list) or any(isinstance(i, (Tensor, list, tuple, np.ndarray)) for i in parts):
            self.assign(self._scatter_index(indices, value))
            return
        self[indices].assign(value)

    def call(self, *lst: Tensor, fxn: Any, grad_fxn: Any = None) -> Tensor:
        """The value `fxn` (a Tensor or UOp over PARAMs 0.. for self and `lst`) computed as a call on these tensors;
        `grad_fxn(output_grads, call)` gives one gradient per argument when the body should not be differentiated."""
        body = fxn.uop if isinstance(fxn, Tensor) else fxn
        return Tensor(body.call_with_output(*[t.uop for t in (self, *lst)], grad_fxn=grad_fxn), device=self.device)

    def custom_kernel(self, *lst: Tensor, fxn: Any, grad_fxn: Any = None) -> list[Tensor]:
        """Run a hand-written kernel over these tensors' buffers, in place. `fxn` gets one PARAM per tensor (slot i, a
        pointer to its elements) and returns the kernel (a SINK of STOREs over ranges, or a PROGRAM whose ProgramInfo
        names the slots it writes in `outs`); the result is each tensor after the kernel ran: a new version of each
        tensor it writes, the tensor itself for one it only reads (so readers of that one never need a copy of it
        kept). A kernel that names no written slot counts as writing all. `grad_fxn(gradient of the first result,
        call)` gives one gradient per tensor."""
        self.realize(*lst)  # together: values the arguments share (a normalized input and its scales) are computed once
        srcs = [t if _is_buffer_view(t.uop) else t.contiguous().realize() for t in (self, *lst)]
        olds = [t.uop.base for t in srcs]
        body = kernel_form(fxn(*[UOp.param(i, t.dtype.ptr(b.arg.size)) for i, (t, b) in enumerate(zip(srcs, olds))]))
        written = tuple(i for i in written_slots(body) if i < len(srcs)) or tuple(range(len(srcs)))
        launch = []
        for i, b in enumerate(olds):
            if i in written:
                new = UOp.new_buffer(b.arg.device, b.arg.size, b.dtype)
                bind_buffer(new, buffer_for(b))
                launch.append(new)
            else:
                launch.append(b)
        aux = (IN_PLACE, len(launch)) if len(written) == len(srcs) else (IN_PLACE, len(launch), written)
        call = body.call(*launch, *(t.uop for t in srcs), grad_fxn=grad_fxn, aux=aux)
        return [Tensor._owning(new.after(call).reshape(t.shape), t.device) if i in written else t
                for i, (t, new) in enumerate(zip(srcs, launch))]

    def numpy(self) -> np.ndarray:
        """The values as a numpy array (realizing first). Not inside a step TinyJit captures: the value would be baked
        into every replay (JitError)."""
        if capturing():
            raise JitError("a jitted function read a tensor's value on the host (.numpy(), .item(), .tolist()): replays would "
                           "reuse the value read at capture; return the tensor and read it after the call, or keep computing with tensors")
        shape = tuple(concrete(d) for d in self.shape)
        if math.prod(shape) == 0:
            dt = strong_dtype(self.dtype)  # (a weakly typed value reads back as the default int or float)
            return from_storage(np.zeros(shape, numpy_dtype(dt)), dt)
        run = _contiguous_run(self.uop)
        if pending or run is None:  # (a view of a buffer with no write pending stays as it is)
            self.realize()
            run = _contiguous_run(self.uop)
        if run is not None:  # `x[i]`, `x[i:j]` of a buffer: its bytes, no kernel
            base, first = run
            n = math.prod(shape)
            return from_storage(buffer_for(base).view(n, base.dtype, first * base.dtype.itemsize).numpy(), self.dtype).reshape(shape)
        if not _is_buffer_view(self.uop):
            return Tensor(self.uop.contiguous(), device=self.device).numpy()
        return from_storage(buffer_for(self.uop.base).numpy()[:math.prod(shape)], self.dtype).reshape(shape)

    def tolist(self) -> Any:
        """The values as (nested) Python lists, or a scalar for a 0-d tensor."""
        return self.numpy().tolist()

    def item(self) -> Any:
        """The value of a one-element tensor as a Python scalar."""
        if self.numel() != 1:
            raise TensorRuntimeError(f"item() needs a tensor with one element, this one has shape {self.shape}")
        return self.numpy().reshape(()).item()

    def data(self) -> memoryview:
        """The values as a memoryview of this shape (flat when empty: Python lists no empty multi-dim memoryview)."""
        values = self.numpy()
        return memoryview(values if values.size else values.reshape(0))

    def to(self, device: str | tuple[str, ...] | None) -> Tensor:
        """This tensor on `device` (a lazy COPY when it differs); on several devices, a copy on each (`shard(device)`)."""
        if isinstance(device, (tuple, list)):
            return self.shard(device)
        dev = canonicalize(device) if device is not None else Device.DEFAULT
        if dev == self.device:
            return self
        return Tensor(self.uop.copy_to_device(dev), device=dev, requires_grad=self.requires_grad)

    def to_(self, device: str | tuple[str, ...] | None) -> Tensor:
        """Move this tensor object (and its gradient) to `device` in place: it stands for the same values there, as
        `replace` makes it (tensors viewing it keep theirs); onto several devices, a copy on each (`shard_`). Returns self."""
        if isinstance(device, (tuple, list)):
            return self.shard_(device)
        dev = canonicalize(device) if device is not None else Device.DEFAULT
        if dev != self.device:
            grad = self.grad.to(dev) if self.grad is not None else None
            self.replace(self.to(dev))
            self.grad = grad
        return self

    def shard(self, devices: tuple[str, ...] | list[str], axis: int | None = None) -> ShardedTensor:
        """This tensor split along `axis` over `devices` (copied whole to each when axis is None)."""
        return shard(self, devices, axis)

    def shard_(self, devices: tuple[str, ...] | list[str], axis: int | None = None) -> Tensor:
        """Shard this tensor object in place (tinygrad's `shard_`): from now on it behaves as `shard(devices, axis)` —
        every attribute and operator is that ShardedTensor's — while staying the same object, so models, optimizers
        and state dicts holding it see the sharded value. Its gradient is sharded alike. Returns self."""
        from .sharded_inplace import shard_in_place

        return shard_in_place(self, devices, axis)

    def cast(self, dtype: Any) -> Tensor:
        """The values converted to `dtype` (C conversion rules)."""
        dt = to_dtype(dtype)
        return self if dt is self.dtype else self._wrap(UOp(Ops.CAST, dt, (self.uop,)))

    def bitcast(self, dtype: Any) -> Tensor:
        """The same bits read as `dtype`; a different item size splits or joins elements of the last axis."""
        dt = to_dtype(dtype)
        if dt is self.dtype:
            return self
        if dt.itemsize == self.dtype.itemsize:
            return self._view(Ops.BITCAST, dt)
        if dtypes.bool in (dt, self.dtype) or not self.shape:
            raise TensorRuntimeError(f"bitcast from {self.dtype} to {dt} needs numeric dtypes and at least one axis")
        if (self.shape[-1] * self.dtype.itemsize) % dt.itemsize:
            raise TensorRuntimeError(f"unsupported size in bitcast: last axis of {self.shape} x {self.dtype} does not fill whole {dt}s")
        return self._view(Ops.BITCAST, dt)

    def float(self) -> Tensor:
        """Cast to float32."""
        return self.cast(dtypes.float32)

    def half(self) -> Tensor:
        """Cast to float16."""
        return self.cast(dtypes.float16)

    def int(self) -> Tensor:
        """Cast to int32."""
        return self.cast(dtypes.int32)

    def bool(self) -> Tensor:
        """Cast to bool."""
        return self.cast(dtypes.bool)

    def double(self) -> Tensor:
        """Cast to float64."""
        return self.cast(dtypes.float64)

    def long(self) -> Tensor:
        """Cast to int64."""
        return self.cast(dtypes.int64)

    def short(self) -> Tensor:
        """Cast to int16."""
        return self.cast(dtypes.int16)

    def bfloat16(self) -> Tensor:
        """Cast to bfloat16."""
        return self.cast(dtypes.bfloat16)

    def is_floating_point(self) -> bool:
        """True when the dtype is a float dtype."""
        return dtypes.is_float(self.dtype)

    def contiguous(self) -> Tensor:
        """Mark this value to be materialized in its own buffer when realized. A value of constants alone
        (`Tensor.ones(3).contiguous()`, the usual way to make a fresh buffer) gets a node of its own each time: two such
        tensors are two buffers, with a gradient each, not one hash-consed value."""
        if self.uop.device is None and not any(n.op in (Ops.BUFFER, Ops.PARAM) for n in self.uop.toposort()):
            return self._wrap(own_copy(self.uop))  # (`device` is a cheap first look: a value with one is not constant)
        return self._wrap(self.uop.contiguous())

    def contiguous_backward(self) -> Tensor:
        """The same value; in the backward pass its gradient is materialized in its own buffer (`contiguous()` on the
        gradient), so the gradient graph below it is computed once."""
        return self._wrap(UOp(Ops.CONTIGUOUS_BACKWARD, self.dtype, (self.uop,)))

    def clone(self, device: str | None = None) -> Tensor:
        """A copy in a new buffer, on `device` when given; the gradient, if any, is cloned with it. The copy is a graph
        node of its own: two clones of one value are two tensors (for gradients too), not one hash-consed node."""
        src = self if device is None else self.to(device)
        ret = Tensor(own_copy(src.uop), device=src.device)
        if self.grad is not None:
            ret.grad = self.grad.clone(device)
        return ret

    def detach(self) -> Tensor:
        """The same value, cut off from gradients: none flows through it to this tensor; the detached tensor is a leaf
        of its own (backward fills its `.grad` like any float tensor's, as tinygrad does)."""
        ret = self._wrap(self.uop.detach())
        ret._make_view_of(self, ((Ops.DETACH, None),))
        return ret

    # ---- creation ----
    @staticmethod
    def _shape_arg(shape: tuple[Any, ...], symbolic: bool = False) -> tuple[int, ...]:
        """A shape given as ints or one tuple or list of them; with `symbolic`, a dim may be a bound Variable (or an
        expression of them)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if any(isinstance(s, (tuple, list)) for s in shape):
            raise ShapeError(f"a shape is ints, given separately or as one tuple or list, not both: got {shape}")
        dims = tuple(s if symbolic and isinstance(s, UOp) else int(s) for s in shape)
        if any(isinstance(d, int) and d < 0 for d in dims):
            raise ShapeError(f"a shape cannot have negative dimensions: got {dims}")
        return dims

    @staticmethod
    def empty(*shape: Any, device: str | None = None, dtype: Any = None, **kwargs: Any) -> Tensor:
        """An uninitialized tensor. A dim may be a symbolic `Variable`: the buffer holds its maximum (`max_shape`) and
        the tensor views the variable's size of it."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if any(isinstance(d, UOp) for d in shape):
            full = Tensor.empty(*(int(d.vmax) if isinstance(d, UOp) else d for d in shape), device=device, dtype=dtype, **kwargs)
            return full.shrink(tuple((0, d) if isinstance(d, UOp) else None for d in shape))
        dims, dt = Tensor._shape_arg(shape), _norm_dtype(dtype) or dtypes.default_float
        dev = canonicalize(device) if device is not None else Device.DEFAULT
        return Tensor._owning(UOp.new_buffer(dev, math.prod(dims), dt).reshape(dims), dev, **kwargs)

    @staticmethod
    def from_blob(ptr: int, shape: tuple[int, ...], dtype: Any = None, device: str | None = None, **kwargs: Any) -> Tensor:
        """A tensor over memory the caller owns at address `ptr` (no copy; CPU): it must stay valid while the tensor
        lives, and every computation reads what the memory holds when it runs."""
        dims, dt = Tensor._shape_arg(tuple(shape)), _norm_dtype(dtype) or dtypes.default_float
        dev = canonicalize(device) if device is not None else Device.DEFAULT
        buf = UOp.new_buffer(dev, math.prod(dims), dt)
        bind_buffer(buf, Buffer.from_address(dev, math.prod(dims), dt, int(ptr)))
        external_buffers.add(buf)
        return Tensor._owning(buf.reshape(dims), dev, **kwargs)

    @staticmethod
    def invalids(*shape: Any, device: str | None = None, dtype: Any = None, **kwargs: Any) -> Tensor:
        """tinygrad's name for a tensor whose values are not set yet: `empty` (poisoned in debug mode, see writes)."""
        return Tensor.empty(*shape, device=device, dtype=dtype, **kwargs)

    @staticmethod
    def full(shape: tuple[int, ...] | int, fill_value: Any, dtype: Any = None, device: str | None = None, buffer: bool = False,
             **kwargs: Any) -> Tensor:
        """A tensor of `shape` filled with `fill_value`: a lazy broadcast constant, or with `buffer=True` a value
        materialized into a buffer of its own when realized (the values are the same either way)."""
        dims = Tensor._shape_arg((shape,) if isinstance(shape, (int, UOp)) else tuple(shape), symbolic=True)
        if isinstance(fill_value, UOp):  # a symbolic int (a bound Variable): its value, in every element
            value = Tensor(fill_value, device=device).cast(_norm_dtype(dtype) or strong_dtype(fill_value.dtype))
            return Tensor(value.uop.reshape((1,) * len(dims)).expand(dims), device=device, **kwargs)
        dt = _norm_dtype(dtype) or strong_dtype(dtypes.from_py(fill_value))
        const = UOp.const(dt.const(fill_value), dt)
        if buffer:
            dev = canonicalize(device) if device is not None else Device.DEFAULT
            return Tensor._in_own_buffer(Tensor(const.reshape((1,) * len(dims)).expand(dims), device=dev), **kwargs)
        return Tensor(const.reshape((1,) * len(dims)).expand(dims), device=device, **kwargs)

    @staticmethod
    def const(value: Any, dtype: Any = None) -> Tensor:
        """A 0-d tensor of `value`: a number (weakly typed unless `dtype`) or a scalar UOp such as a bound Variable."""
        dt = _norm_dtype(dtype)
        if isinstance(value, UOp):
            return Tensor(value if dt is None or value.dtype is dt else value.cast(dt))
        return Tensor(value, dtype=dt)

    @staticmethod
    def zeros(*shape: Any, dtype: Any = None, device: str | None = None, **kwargs: Any) -> Tensor:
        """A tensor of zeros (float32 unless `dtype`)."""
        return Tensor.full(Tensor._shape_arg(shape, symbolic=True), 0.0, dtype=dtype or dtypes.default_float, device=device, **kwargs)

    @staticmethod
    def ones(*shape: Any, dtype: Any = None, device: str | None = None, **kwargs: Any) -> Tensor:
        """A tensor of ones (float32 unless `dtype`)."""
        return Tensor.full(Tensor._shape_arg(shape, symbolic=True), 1.0, dtype=dtype or dtypes.default_float, device=device, **kwargs)

    @staticmethod
    def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None, device: str | None = None, **kwargs: Any) -> Tensor:
        """`start, start+step, ...` below `stop` (int32 when all arguments are ints, else float32)."""
        if stop is None:
            start, stop = 0, start
        if any(isinstance(x, UOp) for x in (start, stop, step)):
            return Tensor._symbolic_arange(start, stop, step, dtype, device, **kwargs)
        if step == 0:
            raise ValueError("arange step cannot be 0")
        n = max(0, math.ceil((stop - start) / step))
        ints = all(isinstance(x, int) for x in (start, stop, step))
        dt = _norm_dtype(dtype) or (dtypes.default_int if ints else dtypes.default_float)
        if ints and dtypes.is_int(dt) and n:
            # the first and last values bound the range: an int range past the default int takes int64 (as tinygrad);
            # one that does not fit a dtype asked for is refused rather than wrapped
            lo, hi = sorted((start, start + (n - 1) * step))
            if dtype is None and not dt.min <= lo <= hi <= dt.max:
                dt = dtypes.int64
            if not dt.min <= lo <= hi <= dt.max:
                reached = lo if lo < dt.min else hi
                raise DTypeOverflowError(f"arange({start}, {stop}, {step}) reaches {reached}, outside the range of {dt} [{dt.min}, {dt.max}]")
            # an int range is computed where it is read, from the element's index (no buffer: an arange of 2**31
            # elements for a one-hot compare took 16 GiB on the host and 8 on the device)
            return Tensor._index_range(n, start, step, dt, device, **kwargs)
        # float ranges: computed in float64 on the host so every element is exact before the final conversion
        values = start + np.arange(n, dtype=np.float64 if dtypes.is_float(dt) else np.int64) * step
        return _index_constant(Tensor(values, device=device, dtype=dt, **kwargs))

    @staticmethod
    def _symbolic_arange(start: Any, stop: Any, step: Any, dtype: Any, device: str | None, **kwargs: Any) -> Tensor:
        """arange with bound Variables among its bounds or step: a symbolic length, ceil((stop - start) / step), its
        values computed from the element's index and the variables' values when it runs (one kernel for every value).
        Ints only, and a step that is positive for every value of its variables."""
        dt = _norm_dtype(dtype) or dtypes.default_int
        if not dtypes.is_int(dt) or not all(isinstance(x, (int, UOp)) and not isinstance(x, bool) for x in (start, stop, step)):
            raise TensorTypeError(f"a symbolic arange takes ints and int Variables with an int dtype, got {start!r}, {stop!r}, {step!r}, {dt}")
        if (step if isinstance(step, int) else int(step.vmin)) <= 0:
            raise ShapeError(f"a symbolic arange needs a step above 0 for every value of its variables, got {step!r}")
        # the size of arange(v) is v itself, not rewritten: the same symbolic dim as the shapes built from v (a
        # simplified v + t came back as t + v, and a reshape between the two forms could not match them)
        unit = isinstance(step, int) and step == 1
        if unit and isinstance(start, int) and start == 0:
            size = stop
        else:
            size = stop - start if unit else ((stop - start) + (step - 1)) // step
            size = size.ssimplify() if isinstance(size, UOp) else size  # an int when the variables cancel out
            if isinstance(size, UOp) and size.vmin < 0:
                size = size.maximum(0).ssimplify()
        size = max(size, 0) if isinstance(size, int) else size
        # no dtype asked for: int64 when the variables' values can pass int32, as a concrete range past int32 takes it
        return Tensor._index_range(size, start, step, dt if dtype is not None else _index_width(size, start, step), device, **kwargs)

    @staticmethod
    def _index_range(size: Any, start: Any, step: Any, dt: DType, device: str | None, **kwargs: Any) -> Tensor:
        """start + i * step for i in [0, size) as a tensor of `dt` holding no buffer (an Ops.IOTA leaf, lowered to the
        element's index where it is read); the partial values in int32 when they fit, else int64. `size`, `start` and
        `step` are ints or symbolic ints."""
        wide = _index_width(size, start, step)
        ret = Tensor(UOp(Ops.IOTA, wide, (size if isinstance(size, UOp) else UOp.const(size),)), device=device)
        if not (isinstance(step, int) and step == 1):
            ret = ret.mul(step)
        if not (isinstance(start, int) and start == 0):
            ret = ret.add(start)
        return Tensor(ret.cast(dt).uop, device=device, **kwargs)

    @staticmethod
    def linspace(start: float, stop: float, steps: int, dtype: Any = None, device: str | None = None, **kwargs: Any) -> Tensor:
        """`steps` evenly spaced values from `start` to `stop` inclusive."""
        dt = _norm_dtype(dtype) or dtypes.default_float
        if dt is dtypes.bool:
            raise ValueError("linspace with bool dtype is not supported")
        return _index_constant(Tensor(np.linspace(start, stop, steps), device=device, dtype=dt, **kwargs))

    @staticmethod
    def eye(n: int, m: int | None = None, dtype: Any = None, device: str | None = None, **kwargs: Any) -> Tensor:
        """An n x m tensor with ones on the diagonal."""
        if n < 0 or (m is not None and m < 0):
            raise ValueError(f"cannot have negative {n=}, {m=}")
        dt = _norm_dtype(dtype) or dtypes.default_float
        return _index_constant(Tensor(np.eye(n, m if m is not None else n), device=device, dtype=dt, **kwargs))

    def full_like(self, fill_value: Any, **kwargs: Any) -> Tensor:
        """A tensor like this one (shape, dtype, device unless given) filled with `fill_value`."""
        kwargs.setdefault("dtype", self.dtype)
        kwargs.setdefault("device", self.device)
        return Tensor.full(self.shape, fill_value, **kwargs)

    def zeros_like(self, **kwargs: Any) -> Tensor:
        """Zeros like this tensor."""
        return self.full_like(0, **kwargs)

    def ones_like(self, **kwargs: Any) -> Tensor:
        """Ones like this tensor."""
        return self.full_like(1, **kwargs)

    def empty_like(self, **kwargs: Any) -> Tensor:
        """An uninitialized tensor like this one."""
        kwargs.setdefault("dtype", self.dtype)
        kwargs.setdefault("device", self.device)
        return Tensor.empty(self.shape, **kwargs)


class _Settling:
    """What the tensors one realize settles share: `reach`, whether a node reads a gradient leaf, and the leaves: the
    value of every tensor that requires a gradient or keeps the graph it was computed by, counted per node. Built
    once and kept up to date as the realize replaces values, instead of collected again for every tensor it settles:
    a training step settles each parameter, optimizer state and gradient, and a 160-layer model's step spent most of
    its time collecting them (quadratic in the number of parameters)."""

    __slots__ = ("reach", "_leaves", "cover")

    def __init__(self) -> None:
        self.reach: dict[UOp, bool] = {}
        self._leaves: dict[UOp, int] | None = None
        # what the realize of the targets being settled walked (`realizer.walk_cover`), None when unknown
        self.cover: tuple[dict[UOp, int], set[UOp], list[frozenset[UOp]]] | None = None

    @staticmethod
    def leaf_count(t: Tensor) -> int:
        """How many times `t`'s value counts among the leaves (once for a gradient, once for a kept graph)."""
        return (t in requires_grad_tensors) + (t._graph is not None and t in graph_holders)

    def leaves(self) -> dict[UOp, int]:
        if self._leaves is None:
            counts: dict[UOp, int] = {}
            for t in list(requires_grad_tensors):
                counts[t.uop] = counts.get(t.uop, 0) + 1
            for t in list(graph_holders):
                if t._graph is not None:
                    counts[t.uop] = counts.get(t.uop, 0) + 1
            self._leaves = counts
        return self._leaves

    def moved(self, old: UOp, old_count: int, new: UOp, new_count: int) -> None:
        """A tensor's value changed from `old` (counted `old_count` times) to `new` (`new_count` times)."""
        if (counts := self._leaves) is None or (old is new and old_count == new_count):
            return
        if old_count:
            if (left := counts.get(old, 0) - old_count) > 0:
                counts[old] = left
            else:
                counts.pop(old, None)
        if new_count:
            counts[new] = counts.get(new, 0) + new_count

    def views_moved(self, root: Tensor) -> None:
        """`root`'s views were rebuilt: collected again when one of them counts among the leaves."""
        if self._leaves is not None and any(self.leaf_count(v) for v in list(root._views or ())):
            self._leaves = None


# a UOp operand (a bound Variable) combined with a tensor leaves the operation to the tensor: `v * t` is `t * v`
DEFERRED_OPERAND_TYPES.add(Tensor)


def _index_width(size: Any, start: Any, step: Any) -> DType:
    """int32 when start + i * step stays in its range for every i below `size` (and every value of their variables),
    else int64."""

    def largest(x: Any) -> int:
        return abs(x) if isinstance(x, int) else max(abs(int(x.vmin)), abs(int(x.vmax)))

    return dtypes.int32 if largest(size) * largest(step) + largest(start) < 2**31 else dtypes.int64


def _index_constant(t: Tensor) -> Tensor:
    """Mark the buffers of a host-made index constant (arange, linspace, eye): no gradient is taken for them or for
    values computed from them alone."""
    index_constants.update(n for n in t.uop.toposort() if n.op is Ops.BUFFER)
    return t


def _reads_any(root: UOp, leaves: set[UOp], memo: dict[UOp, bool]) -> bool:
    """Whether a node of `leaves` is under `root` (itself included); `memo` keeps the answer for every node walked. It
    stays right while `leaves` grows by nodes that themselves read a leaf (what a realize adds as it settles).

    Depth first, a node entered once and finished when popped again; the walk stops at the first leaf it meets: then
    every node entered and not finished reads it (they are the path down to it), and the nodes finished before read none
    (a gradient's graph meets a parameter within a few nodes, where the whole graph under it is the model's)."""
    if (known := memo.get(root)) is not None:
        return known
    stack: list[UOp] = [root]
    entered: set[UOp] = set()
    while stack:
        node = stack.pop()
        if (known := memo.get(node)) is not None:
            if not known:
                continue
        elif node in entered:
            memo[node] = False  # every source finished without a leaf
            continue
        elif node not in leaves:
            entered.add(node)
            stack.append(node)
            stack.extend(node.src)
            continue
        else:
            memo[node] = True
        for n in entered:  # a leaf under the open path: every node on it reads one
            if n not in memo:
                memo[n] = True
        return True
    return memo[root]
