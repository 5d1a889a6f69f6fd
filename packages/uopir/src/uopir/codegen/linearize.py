"""Lowering a kernel AST to a linear program: loops, accumulators and statements in execution order.

The linear program is a list of UOps a renderer walks top to bottom:
- PARAM (global buffers), DEFINE_VAR and SPECIAL come first: the program's inputs.
- RANGE opens a loop; END(range) closes it. Register axes (UPCAST/UNROLL) are small constant loops the renderer
  marks for full unrolling; they are opened around each block that needs them, innermost.
- A REDUCE becomes an accumulator (a PARAM in AddrSpace.REG holding one slot per register-axis element), an
  initializing STORE, an update STORE inside the reduce loops, and a LOAD of the result after them. REDUCEs over
  the same ranges share one loop nest, so a register-tiled matmul updates all its accumulators in one pass.
  A tensor-core REDUCE (its body a WMMA, see `tc`) is updated by one void WMMA(A, B, INDEX(acc, base)) statement that
  reads and writes the 8 consecutive accumulator slots from `base`, its accumulator register axis innermost.
- Every other node appears once per scope that needs it, after its sources; STOREs are statements.
- A costly value a reduction's loop computes that the kernel's output computes again over its own loops of the same
  sizes (a softmax's exp(x - max), summed, then divided by the sum) is kept in a stash (a REG array over the
  reduction's loops) when the renderer takes stashes: the output loop reads it back instead of computing it again.
"""

from __future__ import annotations

import math

from uopir.args import ParamArg
from uopir.dtypes import AddrSpace, dtypes
from uopir.ops import AxisType, Ops
from uopir.uop import UOp

from .kernel import REGISTER_AXES, CodegenError, axis_type, kernel_stores, range_end, reduce_identity

_DEFINES = (Ops.PARAM, Ops.DEFINE_VAR, Ops.SPECIAL)


def accumulate(red: UOp, acc: UOp) -> UOp:
    """acc OP body; a float sum of products becomes one fused multiply-add per step, as BLAS accumulates."""
    body = red.src[0]
    if red.arg is Ops.ADD and body.op is Ops.MUL and dtypes.is_float(body.dtype):
        return UOp(Ops.MULACC, body.dtype, (body.src[0], body.src[1], acc))
    return acc.alu(red.arg, body)


def wmma_update(wmma: UOp, accumulators: UOp) -> UOp:
    """The statement that adds a tensor-core product to the accumulator slots from `accumulators` (an INDEX)."""
    return UOp(Ops.WMMA, dtypes.void, (wmma.src[0], wmma.src[1], accumulators), wmma.arg)


def flat_index(regs: list[UOp]) -> UOp:
    """The row-major index of the register-axis element (the last axis moves fastest)."""
    flat = UOp.const(0, dtypes.weakint)
    for r in regs:
        flat = flat * range_end(r) + r
    return flat.simplify()


#: register loops up to this many iterations are fully unrolled by renderers; longer ones (a matrix-vector kernel's
#: accumulator row) stay loops
MAX_UNROLL = 64


def register_order(r: UOp) -> tuple[bool, bool, int]:
    """Register loops nest the ones too long to unroll outermost, then unrolled reduce axes, then upcasts newest first:
    the first upcast the heuristic makes is the contiguous output axis, and innermost it becomes the one the C
    compiler vectorizes. An unrolled reduce axis inside a long accumulator loop updates each accumulator several
    times per pass, so the compiler keeps it in a register between those updates."""
    return (range_end(r) <= MAX_UNROLL, axis_type(r) is not AxisType.UNROLL, -r.arg[0])


#: the arg tag of a CUSTOM statement combining vector lanes (see `Linearizer.emit_lane_sums`)
LANE_SUMS = "lane_sums"
#: ... and of one combining the lanes of a single accumulator into one value (a row's sum or max)
LANE_REDUCE = "lane_reduce"


#: a stash holds at most this many elements (16 KiB of floats: with the row it is read back from, within a core's L1)
STASH_MAX = 4096
#: ... of a value that costs at least this many operations per element to compute again (an exp is about 25)
STASH_MIN_OPS = 8


class _Stash:
    """A value a reduction's update loop stores (`value`, at `index` of `param`) and the output loop loads at `out_index`
    instead of computing `out_value` (`value` over the output's loops) again."""

    __slots__ = ("param", "value", "index", "out_value", "out_index")

    def __init__(self, param: UOp, value: UOp, index: UOp, out_value: UOp, out_index: UOp):
        self.param, self.value, self.index, self.out_value, self.out_index = param, value, index, out_value, out_index


class Linearizer:
    def __init__(self, ast: UOp, lane_sums: bool = False):
        self.ast = ast
        self.lane_sums = lane_sums
        #: per innermost REDUCE, the stashes its update loop fills (see `plan_stashes`)
        self.stashes: dict[UOp, list[_Stash]] = {}
        #: values the program loads from a filled stash instead of computing them
        self.stashed: dict[UOp, _Stash] = {}
        self.out: list[UOp] = []
        self.scopes: list[set[UOp]] = [set()]
        self.open: list[UOp] = []
        self.reduce_value: dict[UOp, UOp] = {}
        self.n_accs = self.n_locals = 0
        self.next_axis = 1 + max((u.arg[0] for u in ast.toposort() if u.op is Ops.RANGE), default=-1)
        self._deps: dict[UOp, frozenset[UOp]] = {}

    # ---- analysis ----
    def _compute_deps(self, node: UOp) -> frozenset[UOp]:
        if node.op is Ops.RANGE:
            return frozenset({node}) | self._deps[node.src[0]]
        below = frozenset().union(*(self._deps[s] for s in node.src))
        if node.op is Ops.REDUCE:
            return below - frozenset(node.src[1:])
        if node.op is Ops.END:
            return below - frozenset(node.src[1:])
        return below

    def deps(self, node: UOp) -> frozenset[UOp]:
        """The RANGEs `node` depends on (a REDUCE or END hides the ranges it closes)."""
        if node not in self._deps:
            for n in node.toposort(gate=lambda x: x not in self._deps):
                if n not in self._deps:
                    self._deps[n] = self._compute_deps(n)
        return self._deps[node]

    # ---- scopes ----
    def visible(self, node: UOp) -> bool:
        return any(node in scope for scope in self.scopes)

    def open_range(self, r: UOp) -> None:
        self.emit(r.src[0])
        self.out.append(r)
        self.open.append(r)
        self.scopes.append({r})

    def close_range(self) -> None:
        r = self.open.pop()
        self.scopes.pop()
        self.out.append(UOp(Ops.END, dtypes.void, (r,)))

    # ---- emission ----
    def emit(self, node: UOp) -> UOp:
        """Make `node` available in the current scope; returns the node the program uses for it.

        Iterative (an explicit stack), so a chain of thousands of ops does not hit Python's recursion limit."""
        done: dict[UOp, UOp] = {}
        stack: list[tuple[UOp, bool]] = [(node, False)]
        while stack:
            cur, srcs_ready = stack.pop()
            if cur in done:
                continue
            # (only while the stash's declaration is in scope: a store after its loops closed computes the value again)
            if (stash := self.stashed.get(cur)) is not None and self.visible(stash.param):
                kept = stash.param.index(stash.out_index).load()
                if kept in done:
                    done[cur] = done[kept]
                else:
                    stack += [(cur, False), (kept, False)]
                continue
            if cur.op is Ops.REDUCE:
                if cur not in self.reduce_value:
                    raise CodegenError("internal: a REDUCE was used before its loop was emitted")
                value = self.reduce_value[cur]
                if value in done:
                    done[cur] = done[value]
                else:
                    stack += [(cur, False), (value, False)]
                continue
            if cur.op is Ops.RANGE:
                if cur not in self.open:
                    raise CodegenError(f"range {cur.arg[0]} is used outside its loop: the kernel AST is malformed")
                done[cur] = cur
                continue
            if self.visible(cur):
                done[cur] = cur
                continue
            if not srcs_ready:
                stack.append((cur, True))
                stack += [(s, False) for s in reversed(cur.src) if s not in done]
                continue
            lowered = cur.replace(src=tuple(done[s] for s in cur.src))
            if not self.visible(lowered):
                self.out.append(lowered)
                self.scopes[-1].add(lowered)
            done[cur] = lowered
        return done[node]

    def emit_block(self, values: list[UOp]) -> list[UOp]:
        """Emit `values` (computing the reductions they need first) inside loops over their register axes."""
        self.emit_reductions(values)
        regs = sorted({r for v in values for r in self.deps(v) if axis_type(r) in REGISTER_AXES and r not in self.open},
                      key=register_order)
        for r in regs:
            self.open_range(r)
        lowered = [self.emit(v) for v in values]
        for _ in regs:
            self.close_range()
        return lowered

    def open_loops(self, loops: list[UOp], values: list[UOp]) -> None:
        """Open `loops` outermost first, computing each reduction `values` read before the first loop it does not
        depend on: a row's maximum that each element of the row is compared with is one loop over the row, ahead of the
        loop over its elements, not one such loop per element."""
        if not loops:
            return
        pending = self.top_level_reduces(values)
        for n, r in enumerate(loops):
            later = set(loops[n:])
            if ready := [red for red in pending if red not in self.reduce_value and not later & self.deps(red)]:
                self.emit_reductions(ready)
            self.open_range(r)

    def top_level_reduces(self, values: list[UOp]) -> list[UOp]:
        found: dict[UOp, None] = {}
        for v in values:
            # stop at REDUCEs: the ones inside a reduce body are emitted inside its loop
            for node in v.toposort(gate=lambda n, root=v: n.op is not Ops.REDUCE or n is root):
                if node.op is Ops.REDUCE and node not in self.reduce_value:
                    found[node] = None
        return list(found)

    def emit_reductions(self, values: list[UOp]) -> None:
        groups: dict[tuple[UOp, ...], list[UOp]] = {}
        for red in self.top_level_reduces(values):
            groups.setdefault(tuple(sorted(red.src[1:], key=lambda r: (r.op is Ops.SPECIAL, str(r.arg)))), []).append(red)
        for ranges, group in groups.items():
            self.emit_reduce_group(ranges, group)

    def plan_stashes(self, store: UOp) -> None:
        """Find the costly values a reduction `store` reads computes that `store` computes again over its own loops.

        For each reduction the store reads, the ranges its innermost body moves along beyond the reduction's own
        enclosing loops are paired with the store's other ranges of the same size and kind (register axis or loop).
        A node of the body whose renamed copy is a node of the store is the same value at the paired positions: the
        largest such nodes that cost enough are stashed. The stash is filled by the reduction's update loop and read
        once that loop has closed, within the same iterations of the enclosing loops (it depends on no other)."""
        store_nodes: dict[UOp, None] | None = None
        for red in self.top_level_reduces([store]):
            core = red
            while core.src[0].op is Ops.REDUCE:
                core = core.src[0]
            if core.src[0].op is Ops.WMMA or core in self.stashes:
                continue
            outer = self.deps(red)
            body = core.src[0]
            inner = self.deps(body) - outer
            # the stash is indexed by the inner ranges alone: an enclosing register axis would share its slots
            if not inner or any(axis_type(r) in REGISTER_AXES for r in self.deps(body) & outer):
                continue
            if store_nodes is None:
                store_nodes = store.toposort()
            mapping = self._pair_ranges(inner, self.deps(store) - outer)
            if mapping is None:
                continue
            renamed = self._renamed(body, mapping)
            covered: set[UOp] = set()
            found: list[_Stash] = []
            for node in reversed(list(body.toposort(gate=lambda n: n.op is not Ops.REDUCE))):
                if node in covered:
                    continue
                copy = renamed.get(node, node)
                if copy is node or copy not in store_nodes or (slots := self._stash_slots(node, inner)) is None:
                    continue
                covered.update(node.toposort())
                order, size = slots
                ptr = node.dtype.ptr(size, AddrSpace.REG)
                param = UOp(Ops.PARAM, ptr, (), ParamArg(self.n_accs, ptr, addrspace=AddrSpace.REG))
                self.n_accs += 1
                found.append(_Stash(param, node, flat_index(order), copy, flat_index([mapping[r] for r in order])))
            if found:
                self.stashes[core] = found

    @staticmethod
    def _pair_ranges(inner: frozenset[UOp], others: frozenset[UOp]) -> dict[UOp, UOp] | None:
        """Each inner range paired with one of `others` of the same size and kind, in axis order; None when one has none."""
        def kind(r: UOp) -> tuple[bool, int] | None:
            if r.op is not Ops.RANGE or r.src[0].op is not Ops.CONST:
                return None
            return (axis_type(r) in REGISTER_AXES, range_end(r))
        free: dict[tuple[bool, int], list[UOp]] = {}
        for r in sorted(others, key=lambda r: r.arg[0]):
            if (k := kind(r)) is not None:
                free.setdefault(k, []).append(r)
        mapping = {}
        for r in sorted(inner, key=lambda r: r.arg[0]):
            if (k := kind(r)) is None or not free.get(k):
                return None
            mapping[r] = free[k].pop(0)
        return mapping

    @staticmethod
    def _renamed(body: UOp, mapping: dict[UOp, UOp]) -> dict[UOp, UOp]:
        """Every node of `body` (REDUCEs not entered) with the ranges of `mapping` renamed."""
        new: dict[UOp, UOp] = {}
        for node in body.toposort(gate=lambda n: n.op is not Ops.REDUCE):
            if node in mapping:
                new[node] = mapping[node]
            elif node.op is not Ops.REDUCE and any(new.get(s, s) is not s for s in node.src):
                new[node] = node.replace(src=tuple(new.get(s, s) for s in node.src))
        return new

    def _stash_slots(self, node: UOp, inner: frozenset[UOp]) -> tuple[list[UOp], int] | None:
        """The ranges a stash of `node` is indexed by (see `_stash_order`) and its size, or None when `node` is not worth
        one: not a float32/float64 value, too large, or too cheap to compute again."""
        if node.dtype not in (dtypes.float32, dtypes.float64):
            return None
        order = self._stash_order(self.deps(node) & inner)
        if not order or (size := math.prod(range_end(r) for r in order)) > STASH_MAX:
            return None
        ops = sum(1 for n in node.toposort(gate=lambda n: n.op is not Ops.REDUCE)
                  if n.op not in (Ops.CONST, Ops.INDEX, Ops.LOAD, Ops.PARAM, Ops.RANGE, Ops.REDUCE) and self.deps(n) & inner)
        return (order, size) if ops >= STASH_MIN_OPS else None

    @staticmethod
    def _stash_order(ranges: frozenset[UOp]) -> list[UOp]:
        """Loops outermost by axis, then register axes as they nest (the vector axis innermost: contiguous slots)."""
        loops = sorted((r for r in ranges if axis_type(r) not in REGISTER_AXES), key=lambda r: r.arg[0])
        return loops + sorted((r for r in ranges if axis_type(r) in REGISTER_AXES), key=register_order)

    def emit_lane_sums(self, ranges: tuple[UOp, ...], group: list[UOp]) -> bool:
        """The sum over a LANES axis (see `codegen.opts._lanes`) as CUSTOM(LANE_SUMS) statements, when the renderer
        takes them: each adds the n lanes of n consecutive accumulators at once with a tree of vector shuffles, where
        the plain update adds one lane of one accumulator at a time (64 scalar adds and lane extractions per 4x2 tile
        of 8 lanes: after a short loop, such as q @ k^T over 64-wide heads, as long as the loop itself). A single
        accumulator (a row's sum or max in a fused softmax or norm: one value per row) is combined by a tree of halves
        instead (CUSTOM(LANE_REDUCE)): the plain update was a chain of 16 dependent scalar steps per row. False when
        the reduce is neither (the inner reduction is emitted either way)."""
        if not self.lane_sums or len(group) != 1 or len(ranges) != 1:
            return False
        red, lane = group[0], ranges[0]
        inner = red.src[0]
        if red.arg not in (Ops.ADD, Ops.MAX) or red.dtype != dtypes.float32 or inner.op is not Ops.REDUCE or inner.src[0].op is Ops.WMMA:
            return False
        if lane.op is not Ops.RANGE or axis_type(lane) is not AxisType.UPCAST or (n := range_end(lane)) not in (4, 8, 16):
            return False
        out_regs = sorted({r for r in self.deps(red) if axis_type(r) in REGISTER_AXES}, key=register_order)
        inner_regs = sorted({r for r in self.deps(inner) if axis_type(r) in REGISTER_AXES}, key=register_order)
        size = math.prod(range_end(r) for r in out_regs)
        single = size == 1
        # each accumulator's lanes must be one run of n slots; the sums of several accumulators at once are adds only
        if inner_regs != [*out_regs, lane] or (size % n and not single) or (red.arg is not Ops.ADD and not single):
            return False
        self.emit_reductions([inner])
        value = self.reduce_value[inner]
        if value.op is not Ops.LOAD or value.src[0].src[1] is not flat_index(inner_regs):
            return False
        partial = value.src[0].src[0]
        ptr = red.dtype.ptr(size, AddrSpace.REG)
        acc = UOp(Ops.PARAM, ptr, (), ParamArg(self.n_accs, ptr, addrspace=AddrSpace.REG))
        self.n_accs += 1
        self.out.append(acc)
        self.scopes[-1].add(acc)
        if single:
            self.out.append(UOp(Ops.CUSTOM, dtypes.void, (partial, acc), (LANE_REDUCE, n, red.arg)))
        for g in range(0 if single else size // n):  # accumulators g*n .. g*n+n-1 from their lanes at partial[g*n*n ..]
            self.out.append(UOp(Ops.CUSTOM, dtypes.void, (partial, acc), (LANE_SUMS, n, g)))
        self.reduce_value[red] = acc.index(flat_index(out_regs)).load()
        return True

    def emit_reduce_group(self, ranges: tuple[UOp, ...], group: list[UOp]) -> None:
        if self.emit_lane_sums(ranges, group):
            return
        wmma_registers = {red.src[0].src[2] for red in group if red.src[0].op is Ops.WMMA}
        out_regs = sorted({r for red in group for r in self.deps(red) if axis_type(r) in REGISTER_AXES},
                          key=lambda r: (r in wmma_registers, register_order(r)))
        size = math.prod(range_end(r) for r in out_regs)  # register axes must have constant sizes
        flat = flat_index(out_regs)
        accs = []
        for red in group:
            ptr = red.dtype.ptr(size, AddrSpace.REG)
            acc = UOp(Ops.PARAM, ptr, (), ParamArg(self.n_accs, ptr, addrspace=AddrSpace.REG))
            self.n_accs += 1
            accs.append(acc)
        stashes = [st for red in group for st in self.stashes.get(red, ())]
        for param in [*accs, *(st.param for st in stashes)]:
            self.out.append(param)
            self.scopes[-1].add(param)
        # initialize
        inits = [acc.index(flat).store(UOp.const(reduce_identity(red.arg, red.dtype), red.dtype)) for red, acc in zip(group, accs)]
        self.emit_block(inits)
        # accumulate: real reduce loops outside, register axes (outputs and unrolled reduce axes) inside; a reduction
        # the updates read that does not move along a loop is computed before that loop opens
        loops = [r for r in ranges if r.op is Ops.RANGE and axis_type(r) not in REGISTER_AXES]
        self.open_loops(loops, [red.src[0] for red in group])
        # a WMMA writes all its registers at once: its slots start at the flat index with the register axis at 0
        base = (flat_index([r for r in out_regs if r not in wmma_registers]) * math.prod(range_end(r) for r in wmma_registers)).simplify()
        updates = [wmma_update(red.src[0], acc.index(base)) if red.src[0].op is Ops.WMMA
                   else acc.index(flat).store(accumulate(red, acc.index(flat).load())) for red, acc in zip(group, accs)]
        updates += [st.param.index(st.index).store(st.value) for st in stashes]
        # an unrolled reduce axis no update reads (a sum of a constant) still counts its iterations: emit_block opens only
        # the register loops the updates depend on, so open the others around them
        used = {r for u in updates for r in self.deps(u)}
        unread = [r for r in ranges if r.op is Ops.RANGE and axis_type(r) in REGISTER_AXES and r not in used and r not in self.open]
        for r in unread:
            self.open_range(r)
        self.emit_block(updates)
        for _ in [*unread, *loops]:
            self.close_range()
        self.stashed.update((st.out_value, st) for st in stashes)
        lanes = [r for r in ranges if r.op is Ops.SPECIAL]
        if lanes:
            self.combine_across_lanes(group, accs, lanes[0], flat, size)
            return
        for red, acc in zip(group, accs):
            self.reduce_value[red] = acc.index(flat).load()

    def combine_across_lanes(self, group: list[UOp], accs: list[UOp], lane: UOp, flat: UOp, size: int) -> None:
        """A grouped reduce: each work-item's partial result goes to local memory, then every work-item sums them."""
        count = int(lane.src[0].arg)
        # the other work-item dimensions of the group (LOCAL axes) each get their own slice of local memory
        others = sorted((u for u in self.ast.toposort() if u.op is Ops.SPECIAL and u.arg.startswith("lidx") and u is not lane),
                        key=lambda u: u.arg)
        base = UOp.const(0, dtypes.weakint)
        for other in others:
            base = base * int(other.src[0].arg) + other
        slices = math.prod(int(other.src[0].arg) for other in others)
        register_flat, flat = flat, (base * (count * size) + flat).simplify()
        partials, stores = [], []
        for red, acc in zip(group, accs):
            ptr = red.dtype.ptr(slices * count * size, AddrSpace.LOCAL)
            local = UOp(Ops.PARAM, ptr, (), ParamArg(self.n_locals, ptr, addrspace=AddrSpace.LOCAL))
            self.n_locals += 1
            self.out.append(local)
            self.scopes[0].add(local)
            partials.append(local)
            stores.append(local.index(lane * size + flat).store(acc.index(register_flat).load()))
        self.emit_block(stores)
        self.out.append(UOp(Ops.BARRIER, dtypes.void))
        step = UOp.range(count, self.next_axis, AxisType.REDUCE)
        self.next_axis += 1
        finals = [local.index(step * size + flat).load().reduce(step, arg=red.arg) for red, local in zip(group, partials)]
        self.emit_reductions(finals)
        # nobody may overwrite the partials (a later iteration of an enclosing loop) before every work-item has read them
        self.out.append(UOp(Ops.BARRIER, dtypes.void))
        for red, final in zip(group, finals):
            self.reduce_value[red] = self.reduce_value[final]


def _closed(end: UOp) -> list[UOp]:
    """The ranges an END chain closes (none for a bare STORE)."""
    ranges = []
    while end.op is Ops.END:
        ranges.extend(end.src[1:])
        end = end.src[0]
    return ranges


def linearize(ast: UOp, lane_sums: bool = False, stash: bool = False) -> list[UOp]:
    """The linear program of a kernel AST (see the module docstring for its shape). `lane_sums`: the renderer takes
    CUSTOM(LANE_SUMS) statements (see `Linearizer.emit_lane_sums`); `stash`: it keeps large REG arrays on a stack
    (see `Linearizer.plan_stashes`)."""
    lin = Linearizer(ast, lane_sums)
    if stash:
        for store in kernel_stores(ast):
            lin.plan_stashes(store)
    for node in ast.toposort():
        if node.op in _DEFINES and node.arg is not None and getattr(node.arg, "addrspace", AddrSpace.GLOBAL) is not AddrSpace.REG:
            lin.out.append(node)
            lin.scopes[0].add(node)
    for end, store in zip(ast.src, kernel_stores(ast)):
        # a store runs in the loops of the ranges it reads; a loop it does not read is left out (storing the same value
        # again changes nothing), unless the loop may run zero times: then the store must not run at all
        ranges = set(lin.deps(store)) | {r for r in _closed(end) if r.op is Ops.RANGE and r.src[0].vmin < 1}
        loops = sorted((r for r in ranges if axis_type(r) not in REGISTER_AXES), key=lambda r: r.arg[0])
        common = 0
        while common < min(len(lin.open), len(loops)) and lin.open[common] is loops[common]:
            common += 1
        while len(lin.open) > common:
            lin.close_range()
        lin.open_loops(loops[common:], [store])
        lin.emit_block([store])
    while lin.open:
        lin.close_range()
    return lin.out
