"""Writes with value semantics: `assign`, `__setitem__` and writes through views.

A tensor made from another by view ops (movement ops, detach, bitcast) is a view of its root tensor: it remembers the
chain of ops that made it, and when the root gets a new value every live view of it is rebuilt from the new value
(numpy's aliasing: a write through `a[1:3]` is seen by `a` and by `a.T`). Values computed from a tensor are not views:
`t = a * 3` keeps the value `a` had when `t` was built, whatever is written to `a` later.

When the root's value sits in a buffer, a write happens in place: the root's value becomes a new version of the same
storage, `AFTER(new_buffer, STORE(target view over new_buffer, value, old version))`, and the scheduler writes only the
target elements into the storage. Readers of the old version keep it: the scheduler orders them before the write, or
copies the old version first when they cannot run before it (they need the write's result too) or are realized later
(`live_reads` finds them among the live tensors). Every write made before a realize runs in that realize, even one
nothing reads (`pending`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hcq_runtime import bind_buffer, buffer_for
from uopir import GroupOp, Ops, UOp, dtypes

from .call_values import computed_arguments, is_call_output, is_kernel_output, kernel_output_before, version_under
from .errors import TensorRuntimeError
from .identity import IdentitySet
from .realizer import before_capture, capturing, done, version_of
from .schedule import OFFSET_VAR, OWN_COPY

if TYPE_CHECKING:
    from .tensor import Tensor

VIEW_OPS = GroupOp.Movement | {Ops.DETACH, Ops.BITCAST}
# one step of a view chain: (op, argument) where the argument is the movement arg, or the dtype of a BITCAST
ViewStep = tuple[Ops, Any]

all_tensors: IdentitySet[Tensor] = IdentitySet()
# roots whose value changed by a write that has not run yet (strong: the write must run even if nothing reads it)
pending: dict[Tensor, None] = {}


def apply_view(u: UOp, step: ViewStep) -> UOp:
    """`u` seen through one view step."""
    op, arg = step
    if op is Ops.DETACH:
        return u.detach()
    if op is Ops.BITCAST:
        return u if arg is u.dtype else UOp(Ops.BITCAST, arg, (u,))
    return _MOVE[op](u, arg)


# the UOp method of each movement op (looked up once: a dict of bound methods per step was a tenth of a conv's graph)
_MOVE = {Ops.RESHAPE: UOp.reshape, Ops.EXPAND: UOp.expand, Ops.PERMUTE: UOp.permute, Ops.PAD: UOp.pad, Ops.SHRINK: UOp.shrink,
         Ops.FLIP: UOp.flip}


def apply_chain(u: UOp, chain: tuple[ViewStep, ...]) -> UOp:
    for step in chain:
        u = apply_view(u, step)
    return u


def _step_of(node: UOp) -> ViewStep:
    if node.op is Ops.DETACH:
        return (Ops.DETACH, None)
    if node.op is Ops.BITCAST:
        return (Ops.BITCAST, node.dtype)
    return (node.op, node.marg)


def view_steps(parent: UOp, child: UOp) -> tuple[ViewStep, ...] | None:
    """The view steps that turn `parent` into `child`, or None when `child` is not a view of `parent`."""
    steps: list[ViewStep] = []
    node = child
    while node is not parent and node.op in VIEW_OPS:
        steps.append(_step_of(node))
        node = node.src[0]
    if node is parent:
        return tuple(reversed(steps))
    # a reshape of a reshape is built as one reshape of the source below both
    if (child.op is Ops.RESHAPE and parent.shape_or_none is not None and math.prod(parent.shape) == math.prod(child.shape)
            and parent.reshape(child.shape) is child):
        return ((Ops.RESHAPE, child.shape),)
    return None


def storage_of(u: UOp) -> UOp | None:
    """The buffer version under `u`'s view ops (a BUFFER, or an AFTER made by a write or a hand-written kernel), None
    for computed values (a call's output is a computed value too: it has no storage until realized)."""
    while u.op in GroupOp.Movement or u.op is Ops.DETACH:
        u = u.src[0]
    return u if u.op is Ops.BUFFER or (u.op is Ops.AFTER and (u.src[1].op is Ops.STORE or is_kernel_output(u))) else None


def _in_place(u: UOp) -> bool:
    """Whether every element of `u` is one element of its storage, so a write into `u` can land in the storage: no PAD
    (its padding has no memory) or EXPAND (its copies share one) between `u` and the buffer. A tensor whose value is
    such a view (`a.pad(...)` is a value of its own, not a view of `a`) gets a buffer of its own before a write."""
    while u.op in GroupOp.Movement or u.op is Ops.DETACH:
        if u.op in (Ops.PAD, Ops.EXPAND):
            return False
        u = u.src[0]
    return True


_copies = itertools.count()


def own_copy(u: UOp) -> UOp:
    """A copy of `u` that no other tensor's graph holds: a CONTIGUOUS of its own (the arg makes it a node of its own,
    where a plain `u.contiguous()` is the same node as any other tensor's `u.contiguous()` and realizes to its buffer)."""
    return UOp(Ops.CONTIGUOUS, u.dtype, (u,), arg=f"{OWN_COPY} #{next(_copies)}")


def rebind_views(root: Tensor) -> None:
    """Rebuild every live view of `root` from its current value."""
    for v in list(root._views or ()):
        v.uop = apply_chain(root.uop, v._chain)


def _strip_bitcasts(chain: tuple[ViewStep, ...], dtype_below: list, value: Tensor) -> tuple[tuple[ViewStep, ...], Tensor]:
    """Move the chain's bitcasts onto the value: writing v through bitcast(dt) writes v.bitcast(source dtype). (The
    caller leaves no movement op above a bitcast that changes the item size.)"""
    for k in reversed(range(len(chain))):
        if chain[k][0] is Ops.BITCAST:
            value = value.bitcast(dtype_below[k])
    return tuple(step for step in chain if step[0] is not Ops.BITCAST), value


def _scatter_through(chain: tuple[ViewStep, ...], value: UOp, whole: UOp) -> UOp:
    """`whole` with `value` written through the view steps `chain` (a functional write: each step is undone on the
    value and on a mask of the written elements)."""
    below_each = []
    u = whole
    for step in chain:
        below_each.append(u)
        u = apply_view(u, step)
    mask = UOp.const(True, dtypes.bool).reshape((1,) * len(value.shape)).expand(value.shape)
    for step, under in zip(reversed(chain), reversed(below_each)):
        op, arg, below = step[0], step[1], under.shape
        if op is Ops.RESHAPE:
            value, mask = value.reshape(below), mask.reshape(below)
        elif op is Ops.PERMUTE:
            inv = tuple(sorted(range(len(arg)), key=lambda i: arg[i]))
            value, mask = value.permute(inv), mask.permute(inv)
        elif op is Ops.FLIP:
            value, mask = value.flip(arg), mask.flip(arg)
        elif op is Ops.SHRINK:
            pads = tuple((b, d - e) for (b, e), d in zip(arg, below))
            value, mask = value.pad(pads), mask.pad(pads)
        elif op is Ops.PAD:
            keep = tuple((b, b + d) for (b, _), d in zip(arg, below))
            value, mask = value.shrink(keep), mask.shrink(keep)
        elif op is Ops.BITCAST:
            if arg.itemsize != under.dtype.itemsize:
                raise TensorRuntimeError("assign through two bitcasts that change the item size with movement ops between them is not supported")
            value = UOp(Ops.BITCAST, under.dtype, (value,))
    return UOp(Ops.WHERE, whole.dtype, (mask, value, whole))


def write(target: Tensor, value: Tensor) -> None:
    """Write `value` (same dtype and device, broadcast to `target`'s shape) into `target` and everything it views."""
    root = target._root if target._root is not None else target
    chain = target._chain
    root._graph = None  # a new value: the graph it was computed by no longer describes it
    if not chain and (storage_of(root.uop) is None or root._borrowed):
        # a value not in a buffer of its own: becomes (a copy of) the value, never an alias of the value's own buffer
        root.uop = value.uop.contiguous()
        root._borrowed = False
        rebind_views(root)
        pending[root] = None
        return
    if storage_of(root.uop) is None and not any(step[0] in (Ops.EXPAND, Ops.BITCAST) for step in chain):
        # a computed value not in a buffer yet: the write is a new value built from the old one (the written elements
        # from `value`, the rest from the old value), so nothing is realized and gradients flow to both
        root.uop = own_copy(_scatter_through(chain, value.uop, root.uop))
        root._borrowed = False
        rebind_views(root)
        pending[root] = None
        return
    if storage_of(root.uop) is None:
        root.realize()  # the value computed; it may come back sharing the buffer another tensor realized it into
    if not _in_place(root.uop) or root._borrowed:
        # the write lands in a buffer of the root's own: its value copied into one first
        root.uop = own_copy(root.uop)
        root.realize()
        root._borrowed = False
    storage = storage_of(root.uop)
    assert storage is not None
    # the chain from the storage: the root's own view ops (a reshape of the flat buffer), then the target's
    node = root.uop
    root_chain: list[ViewStep] = []
    while node is not storage:
        root_chain.append(_step_of(node))
        node = node.src[0]
    full_chain = (*reversed(root_chain), *chain)
    dtypes_below = [storage.dtype] * len(full_chain)  # the dtype under each step: only a bitcast changes it
    if any(step[0] is Ops.BITCAST for step in full_chain):
        u = storage
        for k, step in enumerate(full_chain):
            dtypes_below[k] = u.dtype
            u = apply_view(u, step)
    if any(step[0] is Ops.EXPAND for step in full_chain):
        raise TensorRuntimeError("cannot assign into a view made with expand: its elements do not each have one place in memory")
    resized = [k for k, step in enumerate(full_chain) if step[0] is Ops.BITCAST and step[1].itemsize != dtypes_below[k].itemsize]
    if resized and any(step[0] in GroupOp.Movement for step in full_chain[resized[-1] + 1:]):
        # movement ops above a bitcast that changes the item size: the whole bitcast view gets the value written in
        k = resized[-1]
        whole = apply_chain(storage, full_chain[:k + 1])
        value = value._wrap(_scatter_through(full_chain[k + 1:], value.uop, whole))
        full_chain, dtypes_below = full_chain[:k + 1], dtypes_below[:k + 1]
    write_chain, value = _strip_bitcasts(full_chain, dtypes_below, value)
    base = storage.src[0] if storage.op is Ops.AFTER else storage
    new = UOp.new_buffer(base.arg.device, base.arg.size, base.dtype)
    bind_buffer(new, buffer_for(base))
    st = UOp(Ops.STORE, dtypes.void, (_written_view(new, write_chain), value.uop, storage))
    root.uop = apply_chain(new.after(st), tuple(reversed(root_chain)))
    root._borrowed = False
    rebind_views(root)
    pending[root] = None


_offset_names = itertools.count()


def _written_view(new: UOp, chain: tuple[ViewStep, ...]) -> UOp:
    """`new` seen through the write's view steps, where a slice's cut axes start at bound variables
    (`schedule.OFFSET_VAR`) rather than at constants: realize schedules the write by the variables' order, so writing
    `out[i * n:(i + 1) * n]` at every step of a loop compiles its kernel once, not once per offset. Under a TinyJit
    capture the bounds stay constants (a replay writes where the capture wrote)."""
    u = new
    for op, arg in chain:
        if op is Ops.SHRINK and not capturing() and all(type(d) is int for d in u.shape) and \
                all(type(b) is int and type(e) is int for b, e in arg) and any((b, e) != (0, d) for (b, e), d in zip(arg, u.shape)):
            bounds = []
            for (b, e), d in zip(arg, u.shape):
                if (b, e) == (0, d):
                    bounds.append((b, e))
                else:
                    at = UOp.variable(f"{OFFSET_VAR}{next(_offset_names)}", 0, d - (e - b)).bind(b)
                    bounds.append((at, at + (e - b)))
            u = u.shrink(tuple(bounds))
        else:
            u = apply_view(u, (op, arg))
    return u


def write_by_kernel(kernel: UOp, info: Any, written: list[Tensor], reads: list[UOp]) -> bool:
    """Run the hand-written `kernel` (a kernel SINK over PARAM slots: one per tensor in `written`, then one per value
    in `reads`) in place: each written tensor takes the kernel's output in its buffer as its new value, as a write
    gives it (readers of the old value keep it; views are rebuilt; the kernel runs at the next realize, with every
    other pending write). A value in `reads` is a buffer (or a view of one) or a value the same schedule computes into
    a buffer of its own first. `info` is the CALL's arg (its aux `(IN_PLACE, slots, written slots)`). Returns False,
    doing nothing, unless every written tensor is a root whose value is a buffer of its own (seen through reshapes):
    `write` handles the other cases."""
    bases = [version_under(t.uop) for t in written]
    if any(t._root is not None or t._borrowed or base is None or base.op is not Ops.BUFFER for t, base in zip(written, bases)):
        return False
    launch = []
    for base in bases:
        new = UOp.new_buffer(base.arg.device, base.arg.size, base.dtype)
        bind_buffer(new, buffer_for(base))
        launch.append(new)
    # a buffer read in its elements' order is launched as that buffer; anything else is computed into one first
    read_launch = [b if (b := version_under(r)) is not None and b.op is Ops.BUFFER else r for r in reads]
    call = UOp(Ops.CALL, dtypes.void, (kernel, *launch, *read_launch, *(t.uop for t in written), *reads), info)
    for t, new in zip(written, launch):
        after = new.after(call)
        t._graph = None
        t.uop = after if after.shape == t.shape else after.reshape(t.shape)
        rebind_views(t)
        pending[t] = None
    return True


def live_reads(exclude: set[int]) -> set[UOp]:
    """The buffer versions that live tensors (other than those with ids in `exclude`) read: the BUFFERs and AFTERs in
    their graphs (not looking into the writes under an AFTER: a write's own inputs are read when it runs). A call's
    output not computed yet is no version: its value reads what its arguments and its body read (a tensor the body
    captured is read when the call's value is)."""
    out: set[UOp] = set()
    seen: set[UOp] = set()
    for t in list(all_tensors):
        if id(t) in exclude:
            continue
        # most live tensors are realized: asked directly, not walked (every realize that overwrites a version asks for
        # every live tensor)
        if (buf := _realized_buffer(t.uop)) is not None:
            out.add(buf)
        else:
            out.update(_versions_read(t.uop, seen))
    return out


def _realized_buffer(u: UOp) -> UOp | None:
    """The buffer a realized tensor's value is, when it is one or a reshape of one (a weight, an optimizer state), else
    None (the graph must be walked)."""
    if u.op is Ops.BUFFER:
        return u
    return u.src[0] if u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER and u not in done else None


def _versions_read(u: UOp, seen: set[UOp]) -> Iterator[UOp]:
    """The buffer versions `u`'s graph reads (see `live_reads`), walking only nodes not in `seen` and adding each to it."""
    stack = [u]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        op = n.op  # (the cheap tests first: `done` is asked through weak references)
        if op is Ops.BUFFER or (op is Ops.AFTER and not is_call_output(n)) or n in done:
            yield version_of(n)
        else:
            stack.extend(n.src[1].src if n.op is Ops.AFTER else n.src)  # a call output: its call's body and arguments


def _overwritten(targets: list[Tensor]) -> tuple[dict[UOp, tuple[int, str]], set[UOp], dict[UOp, str]]:
    """What the pending writes under `targets` do: the buffer versions they overwrite in place (each with its bytes and
    device), the versions they make (`fresh`), and the values their hand-written kernels read that the schedule
    computes first (`computed_arguments`), each with the kernel's device. A write's chain is followed back through the
    versions it overwrites while those are pending writes too."""
    old: dict[UOp, tuple[int, str]] = {}
    fresh: set[UOp] = set()
    computed: dict[UOp, str] = {}
    calls: set[UOp] = set()
    for t in targets:
        s = storage_of(t.uop)
        while s is not None and s.op is Ops.AFTER and s not in done and s not in fresh:
            if s.src[1].op is Ops.STORE and len(s.src[1].src) == 3:
                prev = s.src[1].src[2]
            elif is_kernel_output(s):  # written in place by a hand-written kernel: the version it had before
                if (before := storage_of(kernel_output_before(s))) is None:
                    break
                prev = before
                if (call := s.src[1]) not in calls and isinstance(device := s.src[0].arg.device, str):
                    calls.add(call)
                    computed.update(dict.fromkeys(computed_arguments(call), device))
            else:
                break
            fresh.add(s)
            base = prev.src[0] if prev.op is Ops.AFTER else prev
            if base.op is Ops.BUFFER and isinstance(base.arg.device, str):
                old[version_of(prev)] = (base.arg.size * base.dtype.itemsize, base.arg.device)
            s = prev
    return old, fresh, computed


def co_readers(targets: list[Tensor]) -> list[Tensor]:
    """The live tensors a schedule realizing `targets` computes too: values not yet computed that read a buffer version
    one of the schedule's writes overwrites in place, read no version it makes, sit on that buffer's device and are no
    bigger than the versions they read there (implicit gradients, of tensors that did not ask for one, excepted).
    Computed before the write, they need no copy of the old version, and they share the schedule's kernels (a training
    step's loss shares its forward pass with the gradients the step applies). Bigger values keep today's way: the old
    version is copied and they are computed when read. Values a write's hand-written kernel reads as arguments (the
    gradients an optimizer's kernel reads) are computed first by the schedule anyway: they come along without a walk
    of their graphs (in a training step, those walks were most of this function's time). Tensors that existed before
    a TinyJit capture began are left out: their kernels would rerun on every replay."""
    old, fresh, computed = _overwritten(targets)
    if not old:
        return []
    chosen: list[Tensor] = []
    tensors = list(all_tensors)
    # gradients of tensors that did not ask for one (a batch's inputs): rarely read, so not worth computing now
    skip = {id(t) for t in targets} | {id(t.grad) for t in tensors if t.grad is not None and t.requires_grad is None}
    # the watched versions as bits of an int: each node's reads are a mask, and a node's mask the OR of its sources'
    # (frozenset unions were quadratic: a deep model's gradients each read most of its parameters' versions)
    bits = {v: 1 << i for i, v in enumerate(dict.fromkeys((*old, *fresh)))}
    of_bit = {b: v for v, b in bits.items()}
    fresh_mask = sum(bits[v] for v in fresh)
    on_device: dict[str, int] = {}  # device -> the bits of the overwritten versions on it
    for v, (_, device) in old.items():
        on_device[device] = on_device.get(device, 0) | bits[v]
    memo: dict[UOp, int] = {}  # node -> the watched versions its graph reads (shared by every tensor's graph)
    for t in tensors:
        u = t.uop
        if _realized_buffer(u) is not None:  # realized (see below), checked first
            continue
        if id(t) in skip or before_capture(t) or u in done or storage_of(u) is not None:
            continue
        # computed before the write anyway: an argument of its kernel (a gradient an optimizer's kernel reads), when it
        # reads a buffer on that device (a constant, as the gradient of a sum over a bias is, has none: realize must not
        # place it on one)
        if (device := computed.get(u)) is not None and device == t.device and _near_buffer_on(u, device):
            chosen.append(t)
            continue
        read = _watched_reads(u, bits, memo)
        # what it reads must all be on its device (the versions as bits: a mask per device)
        if not read or read & fresh_mask or read & ~on_device.get(t.device, 0):
            continue
        shape = t.shape
        if not all(isinstance(d, int) for d in shape):
            continue
        # no bigger than what it reads: summed only as far as needed (most gradients: their parameter's version alone)
        need, total = math.prod(shape) * t.dtype.itemsize, 0
        while read:
            low = read & -read
            total += old[of_bit[low]][0]
            if total >= need:
                chosen.append(t)
                break
            read ^= low
    return chosen


def _near_buffer_on(root: UOp, device: str, budget: int = 64) -> bool:
    """Whether a BUFFER on `device` is among the `budget` nodes nearest `root` (breadth first): a cheap proof that a
    value reads one (a gradient's weight or activation is a few nodes below it). False proves nothing."""
    seen = {root}
    level = [root]
    while level and budget > 0:
        nxt: list[UOp] = []
        for node in level:
            if node.op is Ops.BUFFER:
                if node.arg.device == device:
                    return True
                continue
            budget -= 1
            for src in node.src:
                if src not in seen and src.op is not Ops.CONST:  # (a movement op's sizes are constant sources)
                    seen.add(src)
                    nxt.append(src)
        level = nxt
    return False


def _watched_reads(u: UOp, bits: dict[UOp, int], memo: dict[UOp, int]) -> int:
    """The versions among `bits`'s keys that `u`'s graph reads (as `_versions_read` finds them), as the OR of their
    bits, each node's answer kept in `memo`: the live tensors' graphs overlap (a step's activations, loss and
    gradients), and each node is asked once."""
    # depth first, a node entered once and finished when popped again (every source is answered by then: see
    # `UOp.toposort`)
    stack: list[UOp] = [u]
    entered: set[UOp] = set()
    while stack:
        n = stack.pop()
        if n in memo:
            continue
        if n in entered:
            found = 0
            for s in n.src:
                found |= memo[s]
            memo[n] = found
            continue
        op = n.op
        if op is Ops.BUFFER or op is Ops.AFTER or n in done:
            memo[n] = bits.get(version_of(n), 0)
            continue
        entered.add(n)
        stack.append(n)
        for s in n.src:
            if s not in memo:
                stack.append(s)
    return memo[u]
