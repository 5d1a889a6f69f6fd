"""Rangeify: lower a tensor-level UOp expression to a kernel value over loop ranges.

A view is a function from output indices to an input index plus a validity gate: each movement op maps the
indices it is asked for to indices of its source (RESHAPE regroups, PERMUTE reorders, EXPAND pins broadcast axes to 0,
SHRINK offsets, FLIP mirrors, PAD offsets and narrows the gate). Elementwise ops lower their sources at the same
indices; a tensor-form REDUCE opens fresh REDUCE ranges for its reduced axes. Realized values are leaves: they become
LOADs from a PARAM at the flat (row-major) index, gated when a PAD is on the path.
"""

from __future__ import annotations

from collections.abc import Callable

from uopir import AxisType, GroupOp, Ops, UOp, divides, dtypes, graph_rewrite, mul_factors, prod, size_factors, symbolic

from .errors import SchedulerError

Index = tuple[UOp, ...]
_UINT_OF_SIZE = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}
Key = tuple[UOp, Index, "UOp | None"]
Step = tuple[list[Key], Callable[[list[UOp]], UOp]]


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a contiguous row-major array of `shape`."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def flat_index(idx: Index, shape: tuple[int, ...]) -> UOp:
    """The row-major offset of `idx` in an array of `shape` (size-1 axes contribute nothing)."""
    ret: UOp = UOp.const(0)
    for i, d, st in zip(idx, shape, row_major_strides(shape)):
        if d != 1:
            ret = ret + i * st
    return ret


Size = "int | UOp"


def reshape_index(idx: Index, new_shape: tuple[Size, ...], old_shape: tuple[Size, ...]) -> Index:
    """Indices into `old_shape` for indices `idx` into the reshape of it to `new_shape`.

    Axes are split into the smallest groups whose sizes match on both sides, so a reshape that only splits or merges
    some axes gives index math local to those axes (no global flatten that the codegen would have to untangle).
    Size-1 axes are dropped first: their index is always 0. Symbolic sizes (a view shrunk by a Variable) are compared
    by their factors; where neither side's running product divides the other's, the rest of the axes form one group.
    """
    zero = UOp.const(0)
    if any(isinstance(d, int) and d == 0 for d in new_shape):
        return (zero,) * len(old_shape)  # an empty view: its loop never runs, so nothing is read
    new = [(i, d) for i, d in zip(idx, new_shape) if not (isinstance(d, int) and d == 1)]
    old_pos = [k for k, d in enumerate(old_shape) if not (isinstance(d, int) and d == 1)]
    out: list[UOp] = [zero] * len(old_shape)
    ni = oi = 0
    while ni < len(new) or oi < len(old_pos):
        group_new, group_old = [new[ni]], [old_pos[oi]]
        pn, po = size_factors(new[ni][1]), size_factors(old_shape[old_pos[oi]])
        ni, oi = ni + 1, oi + 1
        while pn != po:
            ints = not pn[1] and not po[1]  # concrete sizes: the smaller side takes its next axis
            if (pn[0] < po[0] if ints else divides(pn, po)) and ni < len(new):
                group_new.append(new[ni])
                pn = mul_factors(pn, size_factors(new[ni][1]))
                ni += 1
            elif (ints or divides(po, pn)) and oi < len(old_pos):
                group_old.append(old_pos[oi])
                po = mul_factors(po, size_factors(old_shape[old_pos[oi]]))
                oi += 1
            else:  # sizes that do not divide each other (symbolic): the remaining axes as one group
                group_new += new[ni:]
                group_old += old_pos[oi:]
                ni, oi = len(new), len(old_pos)
                break
        if len(group_new) == 1 and len(group_old) == 1:
            out[group_old[0]] = group_new[0][0]
            continue
        flat: UOp = zero
        for i, d in group_new:
            flat = flat * d + i
        for n, k in enumerate(group_old):
            stride = prod(tuple(old_shape[j] for j in group_old[n + 1:]))
            part = flat if isinstance(stride, int) and stride == 1 else flat // stride
            out[k] = part if n == 0 else part % old_shape[k]
    return tuple(out)


def _and(a: UOp | None, b: UOp | None) -> UOp | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def _is_zero(x) -> bool:
    return isinstance(x, int) and x == 0


def movement_inner(node: UOp, idx: Index) -> tuple[Index, UOp | None]:
    """The indices into the source of movement op `node` for indices `idx` into it, and the gate under which the
    source is read (only PAD has one: outside the source the value is padding)."""
    src = node.src[0]
    op, in_shape, out_shape = node.op, src.shape, node.shape
    if op is Ops.RESHAPE:
        return reshape_index(idx, out_shape, in_shape), None
    if op is Ops.EXPAND:
        return tuple(UOp.const(0) if s == 1 and o != 1 else i for i, s, o in zip(idx, in_shape, out_shape)), None
    if op is Ops.PERMUTE:
        inner: list[UOp] = [UOp.const(0)] * len(idx)
        for out_axis, in_axis in enumerate(node.marg):
            inner[in_axis] = idx[out_axis]
        return tuple(inner), None
    if op is Ops.SHRINK:
        return tuple(i if isinstance(b, int) and b == 0 else i + b for i, (b, _) in zip(idx, node.marg)), None
    if op is Ops.FLIP:
        return tuple((d - 1) - i if f else i for i, d, f in zip(idx, in_shape, node.marg)), None
    gate: UOp | None = None
    pad_inner = []
    for i, d, (b, e) in zip(idx, in_shape, node.marg):
        if not _is_zero(b):
            gate = _and(gate, i >= b)
        if not _is_zero(e):
            gate = _and(gate, i < b + d)
        pad_inner.append(i if _is_zero(b) else i - b)
    return tuple(pad_inner), gate


class KernelLowering:
    """Lowers the expressions of one kernel; `leaves` maps realized tensor nodes to buffer numbers.

    After lowering, `buffers` lists the buffer number of each PARAM slot (slot 0 is the output).
    """

    def __init__(self, leaves: dict[UOp, int], output: int):
        self.leaves = leaves
        self.buffers: list[int] = [output]
        self._params: dict[int, UOp] = {}
        self._memo: dict[Key, UOp] = {}
        self._steps: dict[Key, Step] = {}
        self.next_axis = 0

    def new_range(self, size: int, axis_type: AxisType) -> UOp:
        """A fresh range with a kernel-unique axis id (a constant 0 for size-1 axes)."""
        if size == 1:
            return UOp.const(0)
        self.next_axis += 1
        return UOp.range(size, self.next_axis - 1, axis_type)

    def param_for(self, bufnum: int, dtype, size: int) -> UOp:
        """The PARAM standing for buffer `bufnum` in this kernel (slots in first-use order)."""
        if (p := self._params.get(bufnum)) is None:
            self.buffers.append(bufnum)
            p = self._params[bufnum] = UOp.param(len(self.buffers) - 1, dtype.ptr(size))
        return p

    def load_leaf(self, node: UOp, idx: Index, valid: UOp | None) -> UOp:
        shape = node.shape
        size = 1
        for d in shape:
            size *= d
        param = self.param_for(self.leaves[node], node.dtype, size)
        flat = flat_index(idx, shape).simplify() if idx else UOp.const(0)
        return param.index(flat, valid).load() if valid is not None else param.index(flat).load()

    def lower(self, node: UOp, idx: Index, valid: UOp | None = None) -> UOp:
        """The kernel value of tensor node `node` at indices `idx` (one per axis), loads gated by `valid`.

        Iterative (an explicit stack, children first) so that long elementwise chains do not hit Python's recursion
        limit; each (node, idx, valid) is lowered once.
        """
        root: Key = (node, idx, valid)
        stack = [root]
        while stack:
            key = stack[-1]
            if key in self._memo:
                stack.pop()
                continue
            if (step := self._steps.get(key)) is None:
                step = self._steps[key] = self._step(*key)
            deps, build = step
            missing = [d for d in deps if d not in self._memo]
            if missing:
                stack.extend(missing)
                continue
            self._memo[key] = build([self._memo[d] for d in deps])
            del self._steps[key]
            stack.pop()
        return self._memo[root]

    def _step(self, node: UOp, idx: Index, valid: UOp | None) -> Step:
        """What lowering `node` at `idx` needs (child keys) and how it combines their values."""
        if node in self.leaves:
            return [], lambda _: self.load_leaf(node, idx, valid)
        op = node.op
        if op in (Ops.CONST, Ops.DEFINE_VAR):  # a variable is a scalar the kernel receives as an argument
            return [], lambda _: node
        if op is Ops.IOTA:  # element i is i: the index itself
            return [], lambda _: idx[0].cast(node.dtype)
        if op in (Ops.CONTIGUOUS, Ops.DETACH, Ops.CONTIGUOUS_BACKWARD):
            return [(node.src[0], idx, valid)], lambda vals: vals[0]
        if op in GroupOp.Movement:
            return self._movement_step(node, idx, valid)
        if op is Ops.REDUCE:
            reduce_op, axes = node.arg
            in_shape = node.src[0].shape
            ranges = {a: self.new_range(in_shape[a], AxisType.REDUCE) for a in axes}
            inner_idx = tuple(ranges.get(k, i) for k, i in enumerate(idx))
            real = [r for r in ranges.values() if r.op is Ops.RANGE]
            return [(node.src[0], inner_idx, valid)], lambda vals: vals[0].reduce(*real, arg=reduce_op) if real else vals[0]
        if op is Ops.BITCAST and node.dtype.itemsize != node.src[0].dtype.itemsize:
            return self._bitcast_step(node, idx, valid)
        if op in GroupOp.ALU or op in (Ops.CAST, Ops.BITCAST):
            return [(s, idx, valid) for s in node.src], lambda vals: UOp(op, node.dtype, tuple(vals), node.arg)
        raise SchedulerError(f"cannot lower {op!r} inside a kernel: realize its source first")

    def _movement_step(self, node: UOp, idx: Index, valid: UOp | None) -> Step:
        inner, gate = movement_inner(node, idx)
        if gate is None:
            return [(node.src[0], inner, valid)], lambda vals: vals[0]
        # PAD: the source is read only inside it; elsewhere the value is 0
        zero = UOp.const(0 if not dtypes.is_bool(node.dtype) else False, node.dtype)
        return [(node.src[0], inner, _and(valid, gate))], lambda vals: gate.where(vals[0], zero)

    def _bitcast_step(self, node: UOp, idx: Index, valid: UOp | None) -> Step:
        """A bitcast between item sizes: each wide element holds `r` narrow ones along the last axis, little-endian."""
        src = node.src[0]
        ssz, dsz = src.dtype.itemsize, node.dtype.itemsize
        src_u, dst_u = _UINT_OF_SIZE[ssz], _UINT_OF_SIZE[dsz]
        if dsz < ssz:  # split: narrow element j is bits [8*dsz*(j%r), ...) of wide element j//r
            r = ssz // dsz
            inner = (*idx[:-1], idx[-1] // r)

            def split(vals: list[UOp]) -> UOp:
                shift = (idx[-1] % r).cast(src_u) * (8 * dsz)
                return (vals[0].bitcast(src_u) >> shift).cast(dst_u).bitcast(node.dtype)

            return [(src, inner, valid)], split
        r = dsz // ssz
        keys = [(src, (*idx[:-1], idx[-1] * r + k), valid) for k in range(r)]

        def join(vals: list[UOp]) -> UOp:
            acc = vals[0].bitcast(src_u).cast(dst_u)
            for k in range(1, r):
                acc = acc | (vals[k].bitcast(src_u).cast(dst_u) << (8 * ssz * k))
            return acc.bitcast(node.dtype)

        return keys, join

    def kernel(self, node: UOp, body: UOp) -> UOp:
        """The kernel SINK storing `body` (lowered over fresh LOOP ranges) into slot 0 with `node`'s shape."""
        ranges = tuple(self.new_range(d, AxisType.LOOP) for d in node.shape)
        value = self.lower(body, ranges)
        out = UOp.param(0, node.dtype.ptr(_prod(node.shape)))
        store = out.index(flat_index(ranges, node.shape).simplify() if ranges else UOp.const(0)).store(value)
        return self._finish(store, ranges)

    def store_kernel(self, store: UOp, base: UOp) -> UOp:
        """The kernel of a tensor-level STORE(target view, value, previous version): loops over the target view's
        shape and writes each value where the view places it in `base`, the BUFFER bound to slot 0. Reads of the
        previous version (same storage) also go through slot 0, so the kernel never sees two aliasing pointers."""
        target, value = store.src[0], store.src[1]
        ranges = tuple(self.new_range(d, AxisType.LOOP) for d in target.shape)
        out = self._params[self.buffers[0]] = UOp.param(0, base.dtype.ptr(_prod(base.shape)))
        idx: Index = ranges
        gate: UOp | None = None
        node = target
        while node is not base:
            if node.op in GroupOp.Movement:
                idx, g = movement_inner(node, idx)
                gate = _and(gate, g)
            node = node.src[0]
        flat = flat_index(idx, base.shape).simplify() if idx else UOp.const(0)
        val = self.lower(value, ranges)
        ret = (out.index(flat, gate.simplify()) if gate is not None else out.index(flat)).store(val)
        return self._finish(ret, ranges)

    @staticmethod
    def _finish(store: UOp, ranges: Index) -> UOp:
        ast = UOp.sink(store.end(*[r for r in ranges if r.op is Ops.RANGE]))
        return graph_rewrite(ast, symbolic)


def _prod(shape: tuple[int, ...]) -> int:
    ret = 1
    for d in shape:
        ret *= d
    return ret
