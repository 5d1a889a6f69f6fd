"""The C renderer: a linear program as one C function (clang or gcc, C11 with GNU extensions).

Semantics it guarantees, whatever the C compiler does with undefined behaviour:
- Fixed-width integers wrap around in two's complement, as numpy's do: ADD, SUB, MUL, NEG, SHL and MULACC of signed
  or narrow types are computed in the unsigned type of their width (or `unsigned int`) and converted back, so signed
  overflow, which C leaves undefined and compilers fold away (`x + 1 > x`), never happens. `weakint` index math stays
  plain signed C: it never wraps, and the compiler may rely on that.
- Shifts by an amount outside [0, bits) give numpy's answers: 0 for SHL, 0 or -1 (by the sign) for SHR.
- Integer CDIV truncates toward zero and CMOD takes the dividend's sign (C's `/` and `%`, which is how tinygrad's
  UOp division behaves); a zero divisor gives 0 for CDIV and the dividend for CMOD, so `a == (a/b)*b + a%b` holds;
  the most negative value divided by -1 wraps to itself (remainder 0). The -1 guard is for signed types only.
  Python's floor division is lowered to these before rendering.
- MAX on floats propagates NaN (C's fmax would drop it).
- float16 is `_Float16` with a cast after every op (no excess precision); bfloat16 and the fp8 formats are stored as
  their bits and computed in float32 with the result of every op rounded back (see `c_support`).
- Casts from float to int truncate; a value outside the target's range is undefined, as in C and numpy.
- Contiguous upcast register loops are written with GCC vector types (see `cvector`), a block wider than one register
  as register-wide vectors (`_CProgram.chunk_lanes`); the rest are unrolled loops or, when long or deeply nested,
  loops the C compiler vectorizes (see `_CProgram.plan_unrolls`).
- The same source suits clang and GCC: where GCC 12's code was far slower, helpers choose by compiler (x86 builtins
  of the vector FMA, masked loads and stores, half-to-float conversion; a nested select for the scalar float max).
- A kernel with a gated access (a padded read, a masked store) keeps GCC from if-converting its loops
  (`GCC_KEEP_BRANCHES`): GCC 12.2's vectorizer miscompiled a reduction over an unrolled register loop of gated loads
  once it had if-converted them. Every other kernel is if-converted, so GCC vectorizes loops holding selects (a max
  pool's gradient, 139 -> 24 us).
- A vector load in a reduce loop that jumps across rows (a matrix-vector kernel's weight rows) prefetches what the next
  iteration reads, unless an outer loop reads the same addresses again (see `_CProgram.prefetch_next`).
ABI: `void NAME(void **bufs, const long long *vals, int core_id, int n_cores)`, buffers in slot order, variables by
name (see hcq_runtime's CPU device).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable

from uopir.dtypes import AddrSpace, DType, PtrDType, dtypes
from uopir.ops import AxisType, GroupOp, Ops
from uopir.uop import UOp

from ..codegen.kernel import REGISTER_AXES, CodegenError, variable_name
from ..codegen.linearize import LANE_REDUCE, LANE_SUMS, MAX_UNROLL
from ..codegen.opts import stride
from .base import Renderer
from .c_support import BF16_FAST, GENERIC, SMALL_FLOATS, small_float_helpers
from .cvector import MASK_INTS, STORAGE_ONLY_DTYPES, VectorBlock, element_dtype, find_vector_block, vector_dtype, vector_type

C_TYPES: dict[DType, str] = {
    dtypes.bool: "_Bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
    dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
    dtypes.uint64: "unsigned long long", dtypes.float16: "_Float16", dtypes.float32: "float", dtypes.float64: "double",
    dtypes.weakint: "long long", dtypes.weakfloat: "double",
}

_INFIX = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "==",
          Ops.XOR: "^", Ops.OR: "|", Ops.AND: "&", Ops.SHL: "<<", Ops.SHR: ">>"}
#: the ops whose results can leave their dtype's range: rendered in unsigned arithmetic, which wraps (see `wraps`)
_WRAPPING = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.SHL, Ops.MULACC})
_UNSIGNED = {dtypes.int8: dtypes.uint8, dtypes.int16: dtypes.uint16, dtypes.int32: dtypes.uint32, dtypes.int64: dtypes.uint64}
_MATH = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt", Ops.TRUNC: "trunc", Ops.POW: "pow"}


#: the most copies of a loop body a nest of completely unrolled register loops may hold on SIMD targets (a 4x24x32
#: scalar nest took clang 29 s to compile and ran 3x slower than with its lane loop left to the loop vectorizer)
UNROLL_BUDGET = 256
#: on SIMD targets an innermost scalar register loop this long or longer is left to the C compiler's loop vectorizer
LOOP_VECTORIZE_MIN = 16
#: a vector load whose address moves this many bytes or more per iteration of its reduce loop is prefetched one
#: iteration ahead: each weight row it starts is a new hardware prefetch stream, which only ramps up after misses (a
#: 100M-parameter F16 decode step on 2 cores: 18.9 ms instead of 21.3 ms with its weights in DRAM)
PREFETCH_MIN_JUMP = 1024
#: bytes one prefetch brings in
CACHE_LINE = 64
#: the most opening brackets one inlined expression may hold (it bounds their nesting): clang-15 and clang-19 refuse
#: more than 256 nested, and the statement around an expression adds a few
MAX_INLINE_BRACKETS = 192


#: GCC's builtins of the x86 FMA instructions by (dtype, vector bytes): the macro that says the target has them and the call
_X86_FMA = {(dtypes.float32, 16): ("__FMA__", "__builtin_ia32_vfmaddps({})"), (dtypes.float32, 32): ("__FMA__", "__builtin_ia32_vfmaddps256({})"),
            (dtypes.float64, 16): ("__FMA__", "__builtin_ia32_vfmaddpd({})"), (dtypes.float64, 32): ("__FMA__", "__builtin_ia32_vfmaddpd256({})"),
            (dtypes.float32, 64): ("__AVX512F__", "__builtin_ia32_vfmaddps512_mask({}, (unsigned short)-1, 4)"),
            (dtypes.float64, 64): ("__AVX512F__", "__builtin_ia32_vfmaddpd512_mask({}, (unsigned char)-1, 4)")}


#: the first lines of a CPU kernel with a gated access: GCC (not clang, which defines __GNUC__ too) keeps its loops'
#: branches instead of if-converting them. GCC 12.2 -O2 vectorized a reduction over a completely unrolled register loop
#: of gated loads wrongly once it had if-converted it (a padded int tensor summed over its padded axis: garbage or
#: [0, 8, 9, 18]); the C compiler ran with -fno-tree-loop-if-convert for every kernel from then on, which also kept GCC
#: from vectorizing any loop holding a select (a small CNN's max-pool gradient 139 us, clang's 64, if-converted 24)
GCC_KEEP_BRANCHES = ('#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC optimize ("no-tree-loop-if-convert")\n'
                     '#endif\n')


class CRenderer(Renderer):
    device = "CPU"
    native_dtypes = frozenset(C_TYPES) - {dtypes.weakint, dtypes.weakfloat}
    emulated_dtypes = frozenset(SMALL_FLOATS)
    # EXP2 and LOG2 come from uopir's polynomial decompositions (within 1.1 and 3.8 ulps of float32): plain ALU ops the
    # C compiler vectorizes, 4x (exp2) and 11x (log2) faster than libm's scalar calls over 1M floats on 2 cores
    code_for_op = frozenset(GroupOp.ALU - {Ops.THREEFRY, Ops.FLOORDIV, Ops.FLOORMOD, Ops.EXP2, Ops.LOG2})
    has_threads = True
    #: a matmul's strided operand is read from a copy packed in cache lines (see uopir.codegen.packing)
    packed_operand_bytes = 64
    types: dict[DType, str] = C_TYPES
    index_type = "long long"
    #: write vectorizable register loops with GCC vector types (see cvector)
    vectorize = True
    lane_sums = True
    stash = True

    def __init__(self, vector_width: int = 8, l2_bytes: int = 1 << 20):
        self.vector_width, self.l2_bytes = vector_width, l2_bytes
        # strips as wide as the column tile the opt heuristic picks (two vectors): with 16 lanes (AVX-512) its 32
        # columns over 16-column strips were read through `(n / 16) * rows + n % 16`, which clang vectorized into
        # gathers (1024^3 float32: 17.5 ms, 26% of the machine's peak)
        self.packed_operand_bytes = max(type(self).packed_operand_bytes, 8 * vector_width)

    def render(self, name: str, linear: list[UOp]) -> str:
        src = _CProgram(self, name, linear).render()
        if not self.global_dims and any(u.op is Ops.INDEX and len(u.src) > 2 for u in linear):
            src = GCC_KEEP_BRANCHES + src
        return src

    # ---- the language: subclasses for other C dialects override these ----
    def storage_type(self, dt: DType) -> str:
        if dt in SMALL_FLOATS:
            return self.types[dtypes.uint16] if dt.itemsize == 2 else self.types[dtypes.uint8]
        return self.types[dt]

    def value_type(self, dt: DType) -> str:
        """The type a value of `dt` has in expressions (emulated floats are computed as float)."""
        return "float" if dt in SMALL_FLOATS else self.types[dt]

    def float_literal(self, value: float, dt: DType) -> str:
        suffix = "" if dt in (dtypes.float64, dtypes.weakfloat) else "f"
        if math.isnan(value):
            return f"__builtin_nan{suffix}(\"\")"
        if math.isinf(value):
            return f"{'-' if value < 0 else ''}__builtin_inf{suffix}()"
        text = repr(float(value))  # the shortest decimal that reads back as the same double, so exact for every float
        text = f"{text}{suffix}" if any(c in text for c in ".e") else f"{text}.0{suffix}"
        return f"(({self.types[dtypes.float16]}){text})" if dt == dtypes.float16 else text

    def int_suffix(self, bits: int, unsigned: bool) -> str:
        return ("ull" if unsigned else "ll") if bits == 64 else ("u" if unsigned else "")

    def int_literal(self, value: int, dt: DType) -> str:
        if dt == dtypes.bool:
            return "1" if value else "0"
        bits = 64 if dt in (dtypes.weakint, dtypes.int64, dtypes.uint64) else 32
        unsigned = dtypes.is_unsigned(dt)
        suffix = self.int_suffix(bits, unsigned)
        if not unsigned and value == -(1 << (bits - 1)):
            return f"({value + 1}{suffix}-1)"  # the most negative value has no literal of its own
        text = f"{value}{suffix}"
        return f"(({self.types[dt]}){text})" if dt.itemsize < 4 and dt != dtypes.weakint else text

    def const_literal(self, value, dt: DType) -> str:
        if dtypes.is_float(dt):
            return self.float_literal(float(value), dt)
        return self.int_literal(int(value), dt)

    def bitcast_expr(self, x: str, src: DType, dst: DType) -> str:
        return f"({{ {self.types[src]} _s = {x}; {self.types[dst]} _d; __builtin_memcpy(&_d, &_s, sizeof _d); _d; }})"

    def vector_bitcast_expr(self, x: str, vtype: str) -> str:
        """The bits of vector `x` as vector type `vtype` (same size): a cast between GCC vector types."""
        return f"(({vtype})({x}))"

    def loop_header(self, name: str, end: str, unroll: int | None) -> str:
        loop = f"for ({self.index_type} {name} = 0; {name} < {end}; {name}++) {{"
        return f"_Pragma(\"GCC unroll {unroll}\") {loop}" if unroll else loop

    def prefetch(self, address: str) -> str | None:
        """A statement that starts loading the cache line at `address`, or None on targets without a cache to fill
        ahead (work-item targets)."""
        return None if self.global_dims else f"__builtin_prefetch({address});"

    def barrier(self) -> str:
        raise CodegenError("the C renderer has no work groups to synchronize: GROUP and LOCAL opts are for GPU renderers")

    def local_array(self, ctype: str, name: str, size: int) -> str:
        raise CodegenError("the C renderer has no local memory: GROUP and LOCAL opts are for GPU renderers")

    def special(self, name: str) -> str:
        """The expression for a SPECIAL index (the CPU has only the THREAD core index)."""
        if name != "core_id":
            raise CodegenError(f"the C renderer has no GPU dimension {name}")
        return "core_id"

    def function(self, name: str, helpers: str, body: list[str], buffers: list[UOp], variables: list[UOp], names: dict[UOp, str]) -> str:
        params, unpack = [], []
        for i, buf in enumerate(buffers):
            params.append(f"{self.storage_type(buf.dtype.base)} *restrict {names[buf]}")
            unpack.append(f"({self.storage_type(buf.dtype.base)} *)bufs[{i}]")
        for i, var in enumerate(variables):
            params.append(f"{self.value_type(var.dtype)} {names[var]}")
            unpack.append(f"({self.value_type(var.dtype)})vals[{i}]")
        params.append("int core_id")
        unpack.append("core_id")
        return (f"{helpers}\nstatic void {name}_body({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"
                f"void {name}(void **bufs, const long long *vals, int core_id, int n_cores) {{\n"
                f"  (void)bufs; (void)vals; (void)n_cores;\n  {name}_body({', '.join(unpack)});\n}}\n")


class _CProgram:
    def __init__(self, renderer: CRenderer, name: str, linear: list[UOp]):
        self.r, self.name, self.linear = renderer, name, linear
        self.names: dict[UOp, str] = {}
        self.uses = Counter(s for node in linear for s in node.src)
        self.counter = Counter[str]()
        self.helpers: dict[str, str] = {}
        self.inline_depth: dict[UOp, int] = {}
        self.body: list[str] = []
        self.depth = 1
        self.loops: list[UOp] = []  # the RANGEs open at the node being rendered, outermost first

    def fresh(self, prefix: str) -> str:
        n = self.counter[prefix]
        self.counter[prefix] += 1
        return f"{prefix}{n}"

    def need(self, dt: DType) -> None:
        if dt in SMALL_FLOATS:
            self.helpers.setdefault("generic", GENERIC)
            if dt == dtypes.bfloat16:
                self.helpers.setdefault("bf16_fast", BF16_FAST)
            self.helpers.setdefault(SMALL_FLOATS[dt][0], small_float_helpers(dt))

    def line(self, text: str) -> None:
        self.body.append("  " * self.depth + text)

    # ---- expressions ----
    def rounded(self, expr: str, dt: DType) -> str:
        """Round an op's result to `dt` (a no-op for dtypes C computes exactly); C promotes integers narrower than int,
        so their results wrap back to `dt` here."""
        if dtypes.is_int(dt) and dt.itemsize < 4:
            return f"(({self.r.types[dt]})({expr}))"
        if dt == dtypes.float16:
            return f"(({self.r.types[dtypes.float16]})({expr}))"
        if dt in SMALL_FLOATS:
            self.need(dt)
            return f"uop_round_{SMALL_FLOATS[dt][0]}({expr})"
        return expr

    def cast(self, x: str, src: DType, dst: DType) -> str:
        if dst == dtypes.bool:
            return f"({x} != 0)"
        if dst in SMALL_FLOATS:
            self.need(dst)
            name = SMALL_FLOATS[dst][0]
            if src in (dtypes.float64, dtypes.weakfloat):
                return f"uop_from_{name}(uop_to_{name}({x}))"
            return f"uop_round_{name}((float)({x}))" if dtypes.is_float(src) else f"uop_from_{name}(uop_to_{name}((double)({x})))"
        return f"(({self.r.value_type(dst)})({x}))"

    def bitcast(self, x: str, src: DType, dst: DType) -> str:
        if src in SMALL_FLOATS:
            self.need(src)
            x, src = f"uop_to_{SMALL_FLOATS[src][0]}_f({x})", (dtypes.uint16 if src.itemsize == 2 else dtypes.uint8)
        if dst in SMALL_FLOATS:
            self.need(dst)
            bits = dtypes.uint16 if dst.itemsize == 2 else dtypes.uint8
            return f"uop_from_{SMALL_FLOATS[dst][0]}({self.bitcast(x, src, bits)})"
        if src.itemsize != dst.itemsize:
            raise CodegenError(f"BITCAST from {src} to {dst} changes the size ({src.itemsize} vs {dst.itemsize} bytes)")
        return self.r.bitcast_expr(x, src, dst)

    def wrapping_type(self, dt: DType) -> str | None:
        """The unsigned C type a wrapping op of `dt` is computed in, or None when C's own arithmetic already wraps
        (uint32, uint64) or never needs to (floats, bool, weakint index math)."""
        if not dtypes.is_int(dt) or dt.scalar() is dtypes.weakint or dt in (dtypes.uint32, dtypes.uint64):
            return None
        return self.r.types[dtypes.uint64 if dt.itemsize == 8 else dtypes.uint32]

    def scalar_max_helper(self, dt: DType) -> str:
        """A function of two floats of `dt` returning the larger, or a NaN operand (`a` when it is NaN, else `b` when it
        is), as the inline select does. GCC 12 branched on `(a != a) | (a > b)` even written with `|` (a small CNN's
        max pool, 8 scalar accumulators over relu'd values: 265 us, clang 24 us); a select of a select is two blends
        with GCC (59 us) but made clang's code slower (28 us), so clang keeps the first form."""
        vt = self.r.value_type(dt)
        name = f"uop_max_{vt.replace(' ', '_')}"
        self.helpers.setdefault(name, f"static inline {vt} {name}({vt} a, {vt} b) {{\n#if defined(__clang__)\n"
                                      f"  return ((a != a) | (a > b)) ? a : b;\n#else\n  return (a != a) ? a : ((a > b) ? a : b);\n#endif\n}}\n")
        return name

    def wrapping_alu(self, node: UOp, a: list[str], unsigned: str) -> str:
        """ADD/SUB/MUL/NEG/SHL/MULACC of a signed or narrow int in unsigned arithmetic, converted back to the dtype
        (gcc and clang convert out-of-range values modulo 2**bits)."""
        op, vt = node.op, self.r.value_type(node.dtype)
        u = [f"(({unsigned})({x}))" for x in a]
        if op is Ops.NEG:
            return f"(({vt})(-{u[0]}))"
        if op is Ops.MULACC:
            return f"(({vt})({u[0]} * {u[1]} + {u[2]}))"
        if op is Ops.SHL:
            return self.shift(node, f"(({vt})({u[0]} << {a[1]}))", a)
        return f"(({vt})({u[0]} {_INFIX[op]} {u[1]}))"

    def shift(self, node: UOp, expr: str, a: list[str]) -> str:
        """`expr` (the shift of a[0] by a[1]) where the amount is in [0, bits), else numpy's answer for a shift that
        long: 0, or -1 for a negative value shifted right."""
        dt, amount = node.dtype, node.src[1]
        if dt.scalar() is dtypes.weakint:
            return expr
        bits = dt.itemsize * 8
        vt = self.r.value_type(dt)
        out_of_range = "0" if node.op is Ops.SHL or dtypes.is_unsigned(dt) else f"({a[0]} < 0 ? ({vt})-1 : ({vt})0)"
        if amount.op is Ops.CONST:
            return expr if 0 <= amount.arg < bits else out_of_range
        return f"(({self.r.types[dtypes.uint64]})({a[1]}) < {bits} ? {expr} : {out_of_range})"

    def alu(self, node: UOp, a: list[str]) -> str:
        op, dt = node.op, node.dtype
        src_dt = node.src[0].dtype
        is_float = dtypes.is_float(src_dt)
        if op in _WRAPPING and (unsigned := self.wrapping_type(dt)) is not None:
            return self.wrapping_alu(node, a, unsigned)
        if op in (Ops.SHL, Ops.SHR) and dtypes.is_int(dt):
            return self.shift(node, self.rounded(f"({a[0]} {_INFIX[op]} {a[1]})", dt), a)
        if op in _INFIX:
            expr = f"({a[0]} {_INFIX[op]} {a[1]})"
            return expr if op in GroupOp.Comparison else self.rounded(expr, dt)
        if op is Ops.NEG:
            # parenthesized: a negative literal after the minus would read as a decrement (`--7`)
            return f"(!{a[0]})" if dt == dtypes.bool else self.rounded(f"(-({a[0]}))", dt)
        if op is Ops.RECIPROCAL:
            return self.rounded(f"(1.0{'' if src_dt == dtypes.float64 else 'f'} / {a[0]})", dt)
        if op in _MATH:
            fn = f"__builtin_{_MATH[op]}{'' if src_dt == dtypes.float64 else 'f'}"
            args = ", ".join(a if src_dt != dtypes.float16 else [f"(float){x}" for x in a])
            return self.rounded(f"{fn}({args})", dt)
        if op is Ops.MAX:
            if is_float:  # NaN in either operand wins
                # `|`, not `||`: both tests are cheap and a short circuit made the compiler branch per element (a max
                # pool over random data mispredicted about every other element)
                either = f"((({a[0]} != {a[0]}) | ({a[0]} > {a[1]})) ? {a[0]} : {a[1]})"
                return self.rounded(either if self.r.vector_width <= 1 else f"{self.scalar_max_helper(src_dt)}({a[0]}, {a[1]})", dt)
            return f"({a[0]} > {a[1]} ? {a[0]} : {a[1]})"
        if op is Ops.CDIV:
            if is_float:
                return self.rounded(f"({a[0]} / {a[1]})", dt)
            if node.src[1].op is Ops.CONST and node.src[1].arg not in (0, -1):
                return self.rounded(f"({a[0]} / {a[1]})", dt)
            # C leaves x / 0 and INT_MIN / -1 undefined: 0, and the wrapped negation (which -x / -1 is)
            if not dtypes.is_int(dt) or dtypes.is_unsigned(dt):
                return f"({a[1]} == 0 ? 0 : {a[0]} / {a[1]})"
            neg = self.alu(node.src[0].alu(Ops.NEG), [a[0]])
            return self.rounded(f"({a[1]} == 0 ? 0 : {a[1]} == -1 ? {neg} : {a[0]} / {a[1]})", dt)
        if op is Ops.CMOD:
            if node.src[1].op is Ops.CONST and node.src[1].arg not in (0, -1):
                return self.rounded(f"({a[0]} % {a[1]})", dt)
            if not dtypes.is_int(dt) or dtypes.is_unsigned(dt):
                return f"({a[1]} == 0 ? {a[0]} : {a[0]} % {a[1]})"
            return self.rounded(f"({a[1]} == 0 ? {a[0]} : {a[1]} == -1 ? 0 : {a[0]} % {a[1]})", dt)
        if op is Ops.WHERE:
            return f"({a[0]} ? {a[1]} : {a[2]})"
        if op is Ops.MULACC:  # fused: one rounding
            if is_float:
                fn = "__builtin_fma" if src_dt == dtypes.float64 else "__builtin_fmaf"
                return self.rounded(f"{fn}({a[0]}, {a[1]}, {a[2]})", dt)
            return f"({a[0]} * {a[1]} + {a[2]})"
        raise CodegenError(f"the C renderer has no code for {op!r}: decompose it before rendering")

    # ---- statements ----
    def define(self, node: UOp, expr: str, prefix: str) -> None:
        name = self.fresh(prefix)
        self.line(f"{self.r.value_type(node.dtype)} {name} = {expr};")
        self.names[node] = name

    def access(self, index: UOp) -> tuple[str, str | None, DType]:
        """`buf[idx]` for an INDEX, its gate (or None) and the element dtype."""
        buf = index.src[0]
        target = f"{self.names[buf]}[{self.names[index.src[1]]}]" if len(index.src) > 1 else f"*{self.names[buf]}"
        gate = self.names[index.src[2]] if len(index.src) > 2 else None
        elem = buf.dtype.base if isinstance(buf.dtype, PtrDType) else buf.dtype
        return target, gate, elem

    def render_node(self, node: UOp) -> None:
        op = node.op
        srcs = [self.names.get(s, "") for s in node.src]
        if op is Ops.BARRIER:
            self.line(self.r.barrier())
            return
        if op is Ops.PARAM:
            if node.arg.addrspace is AddrSpace.LOCAL:
                return  # declared at the top of the function by `render`
            if node.arg.addrspace is AddrSpace.REG:
                name = self.names[node] = f"acc{node.arg.slot}"
                self.line(f"{self.r.value_type(node.dtype.base)} {name}[{node.dtype.size}];")
            return  # global buffers and scalar params are function arguments
        if op in (Ops.DEFINE_VAR, Ops.SPECIAL):
            return
        if op is Ops.CUSTOM and isinstance(node.arg, tuple) and node.arg[0] == LANE_SUMS:
            _, n, g = node.arg
            self.line(f"{self.lane_sums_helper(n)}(&{srcs[0]}[{g * n * n}], &{srcs[1]}[{g * n}]);")
            return
        if op is Ops.CUSTOM and isinstance(node.arg, tuple) and node.arg[0] == LANE_REDUCE:
            _, n, how = node.arg
            self.line(f"{srcs[1]}[0] = {self.lane_reduce_helper(n, how)}(&{srcs[0]}[0]);")
            return
        if op is Ops.CONST:
            self.names[node] = self.r.const_literal(node.arg, node.dtype)
            return
        if op is Ops.RANGE:
            name = self.names[node] = f"{'u' if node.arg[1] in REGISTER_AXES else 'r'}idx{node.arg[0]}"
            end = self.names[node.src[0]]
            unroll = self.unrolls.get(node)
            self.line(self.r.loop_header(name, end, unroll))
            self.depth += 1
            return
        if op is Ops.END:
            self.depth -= 1
            self.line("}")
            return
        if op is Ops.INDEX:
            self.names[node] = ""  # rendered by its LOAD or STORE
            return
        if self.block is not None and (node in self.block.values or op is Ops.STORE and node.src[0] in self.block.accesses):
            self.render_vector_node(node, srcs)
            return
        if op is Ops.LOAD:
            target, gate, elem = self.access(node.src[0])
            expr = self.decode(target, elem)
            if gate is not None:
                alt = srcs[1] if len(node.src) > 1 else self.r.const_literal(0, node.dtype)
                expr = f"({gate} ? {expr} : {alt})"
            self.define(node, expr, "val")
            return
        if op is Ops.STORE:
            target, gate, elem = self.access(node.src[0])
            stmt = f"{target} = {self.encode(srcs[1], elem)};"
            self.line(stmt if gate is None else f"if ({gate}) {stmt}")
            return
        if op is Ops.CAST:
            expr = self.cast(srcs[0], node.src[0].dtype, node.dtype)
        elif op is Ops.BITCAST:
            expr = self.bitcast(srcs[0], node.src[0].dtype, node.dtype)
        elif op in GroupOp.ALU:
            expr = self.alu(node, srcs)
        else:
            raise CodegenError(f"the C renderer cannot render {op!r} in a linear program")
        if self.uses[node] > 1 or self.too_deep(node, expr):
            self.define(node, expr, "alu" if op in GroupOp.ALU else "cast")
        else:
            self.names[node] = expr

    def lane_sums_helper(self, n: int) -> str:
        """A function setting out[i] to the sum of the n floats at lanes[i * n ..] for i < n: log2(n) rounds of
        shuffles and vector adds, each halving how many values every lane still stands for (the vector helpers of
        GCC 12+ and clang)."""
        name = f"uop_lane_sums_float_{n}"
        if name in self.helpers:
            return name
        vt, typedef = vector_type("float", n)
        vtu, typedef_u = vector_type("float", n, aligned=False)
        self.helpers.setdefault(vt, typedef)
        self.helpers.setdefault(vtu, typedef_u)
        lines = [f"static inline void {name}(const float *lanes, float *out) {{",
                 "#if !defined(__clang__) && defined(__GNUC__) && __GNUC__ < 12  /* no __builtin_shufflevector: lane by lane */",
                 f"  for (int i = 0; i < {n}; i++) {{ float s = 0.0f; for (int l = 0; l < {n}; l++) s += lanes[i * {n} + l]; out[i] = s; }}",
                 "#else", f"  {vt} v[{n}];"]
        lines.append(f"  for (int i = 0; i < {n}; i++) v[i] = *(const {vtu} *)&lanes[i * {n}];")
        count, step = n, 1
        while count > 1:
            # pair (x, y): take runs of `step` lanes alternately from x and y, once from each run's start and once
            # from `step` later, and add: lane i then stands for twice as many lanes of its accumulator
            first = [(i // (2 * step)) * 2 * step + i % step + (n if (i // step) % 2 else 0) for i in range(n)]
            a, b = ", ".join(map(str, first)), ", ".join(str(x + step) for x in first)
            lines.append(f"  for (int i = 0; i < {count // 2}; i++) v[i] = __builtin_shufflevector(v[2 * i], v[2 * i + 1], {a}) + "
                         f"__builtin_shufflevector(v[2 * i], v[2 * i + 1], {b});")
            count, step = count // 2, step * 2
        lines += [f"  *({vtu} *)out = v[0];", "#endif", "}", ""]
        self.helpers[name] = "\n".join(lines)
        return name

    def lane_reduce_helper(self, n: int, how: Ops) -> str:
        """A function returning the sum (ADD) or the maximum (MAX, NaN if any lane is) of n floats: log2(n) rounds, each
        combining a vector's low half with its high half (the vector helpers of GCC 12+ and clang; lane by lane
        otherwise)."""
        name = f"uop_lane_{how.name.lower()}_float_{n}"
        if name in self.helpers:
            return name

        lines = [f"static inline float {name}(const float *lanes) {{",
                 "#if !defined(__clang__) && defined(__GNUC__) && __GNUC__ < 12  /* no __builtin_shufflevector: lane by lane */",
                 "  float r = lanes[0];",
                 f"  for (int l = 1; l < {n}; l++) r = {'r + lanes[l]' if how is Ops.ADD else '(r != r || r > lanes[l]) ? r : lanes[l]'};",
                 "  return r;", "#else"]
        vtu, typedef_u = vector_type("float", n, aligned=False)
        self.helpers.setdefault(vtu, typedef_u)
        vt, typedef = vector_type("float", n)
        self.helpers.setdefault(vt, typedef)
        lines.append(f"  {vt} v{n} = *(const {vtu} *)lanes;")
        width = n
        while width > 1:
            half = width // 2
            if half > 1:
                ht, htypedef = vector_type("float", half)
                it, itypedef = vector_type("int", half)
                self.helpers.setdefault(ht, htypedef)
                self.helpers.setdefault(it, itypedef)
            else:
                ht, it = "float", "int"
            lo = f"__builtin_shufflevector(v{width}, v{width}, {', '.join(map(str, range(half)))})" if half > 1 else f"v{width}[0]"
            hi = f"__builtin_shufflevector(v{width}, v{width}, {', '.join(map(str, range(half, width)))})" if half > 1 else f"v{width}[1]"
            lines.append(f"  {ht} a{half} = {lo}, b{half} = {hi};")
            if how is Ops.ADD:
                lines.append(f"  {ht} v{half} = a{half} + b{half};")
            elif half > 1:  # a lane of a where it is NaN or bigger, else b's: as the plain update selects
                lines.append(f"  {it} k{half} = ({it})((a{half} != a{half}) | (a{half} > b{half}));")
                lines.append(f"  {ht} v{half} = ({ht})((({it})a{half} & k{half}) | (({it})b{half} & ~k{half}));")
            else:
                lines.append("  float v1 = (a1 != a1 || a1 > b1) ? a1 : b1;")
            width = half
        lines += ["  return v1;", "#endif", "}", ""]
        self.helpers[name] = "\n".join(lines)
        return name

    # ---- vector blocks ----
    def vtype(self, dt: DType, aligned: bool = True) -> str:
        assert self.block is not None
        name, typedef = vector_type(self.r.types[dt], self.block.width, aligned)
        self.helpers.setdefault(name, typedef)
        return name

    def vec(self, node: UOp, text: str) -> str:
        """`text` as a vector: values of the block already are, scalars are broadcast (as `x - 0`, which keeps the sign
        of a -0.0 that `0 + x` would lose)."""
        assert self.block is not None
        if (step := self.block.lifted.get(node)) is not None:  # index math at lane 0, plus each lane's step
            dt = vector_dtype(node.dtype)
            vt = self.vtype(dt)
            lanes = ", ".join(self.r.int_literal(step * lane, dt) for lane in range(self.block.width))
            return f"((({text}) - ({vt}){{}}) + ({vt}){{{lanes}}})"
        if node in self.block.values:
            return text
        if node.dtype in STORAGE_ONLY_DTYPES:
            # halves are not computed with (GCC computes a scalar half in float, and refuses the narrowing of `x - 0`
            # to a vector of halves): the vector is the float vector converted
            f32 = self.vtype(dtypes.float32)
            return f"__builtin_convertvector(((float)({text})) - ({f32}){{}}, {self.vtype(node.dtype)})"
        return f"(({text}) - ({self.vtype(node.dtype)}){{}})"

    def at_lane(self, node: UOp, lane: str) -> str:
        """A lane-dependent scalar of the block (index math or a gate) evaluated at lane `lane` (C text) instead of 0."""
        assert self.block is not None
        if node is self.block.lane:  # (relative to the vector's first lane when the block is several vectors)
            chunked = self.block.width < int(node.src[0].arg)
            return f"({self.names[node]} + {lane})" if chunked else f"(({self.r.index_type}){lane})"
        if node not in self.block.lane_scalars:
            return self.names[node]
        return self.alu(node, [self.at_lane(s, lane) for s in node.src])

    def lane_run(self, index: UOp) -> tuple[str, str, str] | None:
        """For a gated vector access: (whether the gate holds at every lane, the gate at lane `l`, `buf[idx + l]`),
        else None. The gate holds on one run of lanes (see cvector), so its two ends decide."""
        assert self.block is not None
        if len(index.src) < 3:
            return None
        gate = index.src[2]
        every = f"({self.names[gate]} && {self.at_lane(gate, str(self.block.width - 1))})"
        return every, self.at_lane(gate, "l"), f"{self.names[index.src[0]]}[{self.names[index.src[1]]} + l]"

    def gather(self, index: UOp, dtype: DType) -> str:
        """A gathered load of the open block (see cvector): its lanes read one by one, each at the offset and under the
        gate the lane's scalars give (a lane whose gate does not hold reads 0). The C compiler joins the lanes that read
        one element (`r // 2`) into one load and a shuffle."""
        assert self.block is not None
        buf, zero = self.names[index.src[0]], self.r.const_literal(0, dtype)
        lanes = []
        for lane in range(self.block.width):
            at = f"{buf}[{self.at_lane(index.src[1], str(lane))}]"
            lanes.append(at if len(index.src) < 3 else f"({self.at_lane(index.src[2], str(lane))} ? {at} : {zero})")
        return f"(({self.vtype(dtype)}){{{', '.join(lanes)}}})"

    def masked_access(self, elem: DType, store: bool) -> tuple[str, str, str] | None:
        """For a gated vector access of `elem`s in the open block: (the macro that says the target has it, GCC's builtin
        of the x86 masked load or store, the mask's C type), or None. GCC 12 wrote the lane-by-lane path of a gated
        access through the stack: a small CNN's weight gradient over 11-wide rows in 16-lane vectors ran 45x slower
        than clang's code for the same source, which clang turns into masked accesses itself (4.0 ms; the masked load
        77 us, clang 90 us)."""
        assert self.block is not None
        size = self.block.width * elem.itemsize
        kind = {dtypes.float32: "ps", dtypes.float64: "pd"}.get(elem)
        if kind is None or size not in (16, 32, 64) or self.r.vector_width <= 1:
            return None
        guard = "defined(__AVX512F__)" if size == 64 else "defined(__AVX512F__) && defined(__AVX512VL__)"
        builtin = f"__builtin_ia32_{'store' if store else 'load'}u{kind}{size * 8}_mask"
        return guard, builtin, "unsigned short" if self.block.width > 8 else "unsigned char"

    def half_to_float_helper(self) -> str:
        """A function converting the open block's vector of halves to floats: GCC (12, without AVX512-FP16) converted a
        vector of 16 halves lane by lane through its soft-float routine (an LLM's float16 matrix-vector product,
        4608x1536: 6.3 ms, clang 0.57); on x86 with F16C (8 lanes) or AVX-512 (16) it gets the conversion
        instruction's builtin (0.57 ms). Every half is a float exactly: the results are the same."""
        assert self.block is not None
        width = self.block.width
        vt, ht = self.vtype(dtypes.float32), self.vtype(dtypes.float16)
        st, typedef = vector_type("short", width)
        self.helpers.setdefault(st, typedef)
        name = f"uop_half_to_float_x{width}"
        guard, call = ("defined(__F16C__)", f"__builtin_ia32_vcvtph2ps256(({st})h)") if width == 8 else \
            ("defined(__AVX512F__)", f"__builtin_ia32_vcvtph2ps512_mask(({st})h, ({vt}){{}}, (unsigned short)-1, 4)")
        self.helpers.setdefault(name, f"static inline {vt} {name}({ht} h) {{\n#if !defined(__clang__) && (defined(__x86_64__) || "
                                      f"defined(__i386__)) && {guard}\n  return {call};\n#else\n"
                                      f"  return __builtin_convertvector(h, {vt});\n#endif\n}}\n")
        return name

    def partial_access(self, elem: DType, store: bool, gate_l: str, lane_by_lane: str, masked: Callable[[str, str], str]) -> None:
        """The `else` of a gated vector access for when its gate does not hold at every lane: the statement
        `lane_by_lane`, or where GCC has them (`masked_access`) the masked access `masked(builtin, mask)`, its mask the
        lanes (bit l for lane l) where the gate `gate_l` holds. The mask's loop is unrolled: GCC 12 kept it a loop, run again
        for every vector of the block at every step (a small CNN's first convolution over 26-wide rows, 7 vectors of 4:
        57 -> 19 us on one core; clang 18)."""
        assert self.block is not None
        found = self.masked_access(elem, store)
        if found is not None:
            guard, builtin, mask_type = found
            what = "store" if store else "load (the other lanes read 0, never fault)"
            self.line(f"#if !defined(__clang__) && {guard}  /* GCC: a masked {what} */")
            self.line(f"else {{ unsigned int m_ = 0; _Pragma(\"GCC unroll {self.block.width}\") for (int l = 0; l < {self.block.width}; l++) "
                      f"m_ |= (unsigned int)({gate_l}) << l; "
                      f"{masked(builtin, f'({mask_type})m_')}; }}")
            self.line("#else")
        self.line(f"else {lane_by_lane}")
        if found is not None:
            self.line("#endif")

    def render_vector_node(self, node: UOp, srcs: list[str]) -> None:
        op = node.op
        if op is Ops.STORE:
            target, _, elem = self.access(node.src[0])
            if (run := self.lane_run(node.src[0])) is not None:  # the whole vector, or the lanes the gate lets through
                every, gate_l, lane_target = run
                value = self.named(self.vec(node.src[1], srcs[1]), self.vtype(elem))
                self.line(f"if {every} *({self.vtype(elem, aligned=False)} *)&{target} = {value};")
                self.partial_access(elem, True, gate_l, f"for (int l = 0; l < {self.block.width}; l++) if ({gate_l}) {lane_target} = {value}[l];",
                                    lambda builtin, mask: f"{builtin}(&{target}, {value}, {mask})")
                return
            self.line(f"*({self.vtype(elem, aligned=False)} *)&{target} = {self.vec(node.src[1], srcs[1])};")
            return
        if op is Ops.LOAD:
            if node.src[0] in self.block.gathers:
                self.define_vector(node, self.gather(node.src[0], node.dtype), "val")
                return
            target, _, _ = self.access(node.src[0])
            if (run := self.lane_run(node.src[0])) is not None:  # lanes the gate does not let through read 0
                every, gate_l, lane_target = run
                name = self.fresh("val")
                self.line(f"{self.vtype(node.dtype)} {name};")
                self.line(f"if {every} {name} = *({self.vtype(node.dtype, aligned=False)} *)&{target};")
                zero = self.r.const_literal(0, node.dtype)
                lanes = f"for (int l = 0; l < {self.block.width}; l++) {name}[l] = {gate_l} ? {lane_target} : {zero};"
                self.partial_access(node.dtype, False, gate_l, lanes,
                                    lambda builtin, mask: f"{name} = {builtin}(&{target}, ({self.vtype(node.dtype)}){{}}, {mask})")
                self.names[node] = name
                return
            self.prefetch_next(node.src[0])
            self.define_vector(node, f"(*({self.vtype(node.dtype, aligned=False)} *)&{target})", "val")
            return
        if node.dtype == dtypes.bool or op in (Ops.WHERE, Ops.MAX, Ops.TRUNC):
            expr = self.select_expr(node, srcs)
            if self.uses[node] > 1 or self.too_deep(node, expr):
                self.define_vector(node, expr, "alu")
            else:
                self.names[node] = expr
            return
        vt = self.vtype(node.dtype)
        args = [self.vec(s, text) for s, text in zip(node.src, srcs)]
        if op is Ops.CAST and node.src[0].dtype == dtypes.bool:  # a mask's lanes are -1 and 0: negated, 1 and 0
            expr = f"__builtin_convertvector(-({args[0]}), {vt})"
        elif op is Ops.CAST:
            expr = f"__builtin_convertvector({args[0]}, {vt})"
            if node.src[0].dtype == dtypes.float16 and node.dtype == dtypes.float32 and self.block.width in (8, 16) and self.r.vector_width > 1:
                expr = f"{self.half_to_float_helper()}({args[0]})"
        elif op is Ops.BITCAST:
            expr = self.r.vector_bitcast_expr(args[0], vt)
        elif op in _WRAPPING and node.dtype in _UNSIGNED:
            # signed vector overflow is as undefined as scalar: compute in the unsigned vector of the same lanes
            uvt = self.vtype(_UNSIGNED[node.dtype])
            u = [f"(({uvt})({x}))" for x in args]
            expr = f"(({vt})(-{u[0]}))" if op is Ops.NEG else f"(({vt})({u[0]} {_INFIX[op]} {u[1]}))"
        elif op is Ops.NEG:
            expr = f"(-({args[0]}))"
        elif op in (Ops.CDIV, Ops.CMOD):  # by a constant other than 0 and -1 (see cvector): C's vector / and % are exact
            expr = f"({args[0]} {'/' if op is Ops.CDIV else '%'} {args[1]})"
        elif op is Ops.RECIPROCAL:
            expr = f"({self.vec(node.src[0].const_like(1), '1')} / {args[0]})"
        elif op is Ops.SQRT:
            expr = f"{self.vector_sqrt(vt, node.dtype)}({args[0]})"
        elif op is Ops.MULACC:
            fma = "__builtin_fma" if node.dtype == dtypes.float64 else "__builtin_fmaf"
            name = f"uop_fma_{vt[len('uop_'):]}"
            # one rounding per lane: clang fuses `a * b + c` under a local contract pragma; GCC on x86 gets the FMA
            # instruction's builtin for a vector of one register, other compilers the per-lane builtin, which GCC
            # vectorized in a matmul but not in a gated convolution (a small CNN's first convolution, 8 accumulators
            # of 4 lanes: 1.2 ms with the lane loop, 0.24 with the builtin; clang 36 us)
            x86 = _X86_FMA.get((node.dtype, self.block.width * node.dtype.itemsize))
            x86_text = "" if x86 is None else (f"#elif (defined(__x86_64__) || defined(__i386__)) && defined({x86[0]})\n"
                                               f"  return {x86[1].format('a, b, c')};\n")
            self.helpers.setdefault(name, f"static inline {vt} {name}({vt} a, {vt} b, {vt} c) {{\n#if defined(__clang__)\n"
                                          f"#pragma clang fp contract(fast)\n  return a * b + c;\n{x86_text}#else\n  {vt} r;\n"
                                          f"  for (int l = 0; l < {self.block.width}; l++) r[l] = {fma}(a[l], b[l], c[l]);\n"
                                          f"  return r;\n#endif\n}}\n")
            expr = f"{name}({', '.join(args)})"
        else:
            expr = f"({args[0]} {_INFIX[op]} {args[1]})"
        if self.uses[node] > 1 or self.too_deep(node, expr):
            self.define_vector(node, expr, "alu")
        else:
            self.names[node] = expr

    def mask_type(self, node: UOp) -> DType:
        assert self.block is not None
        return self.block.masks[node]

    def named(self, text: str, vtype: str) -> str:
        """`text` as a variable (an operand a select uses twice is computed once, and its text not nested twice)."""
        if text.isidentifier():
            return text
        name = self.fresh("alu")
        self.line(f"{vtype} {name} = {text};")
        return name

    def select_expr(self, node: UOp, srcs: list[str]) -> str:
        """Vector code for a comparison or logical op on masks (see cvector), a select, max or trunc."""
        assert self.block is not None
        op = node.op
        if node.dtype == dtypes.bool:
            mvt = self.vtype(mask := self.mask_type(node))
            if op in GroupOp.Comparison and node.src[0].dtype != dtypes.bool:
                return f"(({mvt})({self.vec(node.src[0], srcs[0])} {_INFIX[op]} {self.vec(node.src[1], srcs[1])}))"
            m = [self.mask(s, text, mask) for s, text in zip(node.src, srcs)]
            if op is Ops.NEG:
                return f"(~{m[0]})"
            if op in (Ops.CMPNE, Ops.CMPEQ):  # of two bools: their masks differ / agree
                return f"({m[0]} ^ {m[1]})" if op is Ops.CMPNE else f"(~({m[0]} ^ {m[1]}))"
            return f"({m[0]} {_INFIX[op]} {m[1]})"
        vt = self.vtype(node.dtype)
        mvt = self.vtype(mask := MASK_INTS[node.dtype.itemsize])
        if op is Ops.TRUNC:
            name = f"uop_trunc_{vt[len('uop_'):]}"
            self.helpers.setdefault(name, self.vector_trunc(name, vt, mvt, node.dtype))
            return f"{name}({self.vec(node.src[0], srcs[0])})"
        if op is Ops.WHERE:
            cond = self.named(self.mask(node.src[0], srcs[0], mask), mvt)
            a, b = self.vec(node.src[1], srcs[1]), self.vec(node.src[2], srcs[2])
        else:  # MAX: the first operand where it is greater, or (floats) NaN
            a, b = (self.named(self.vec(s, text), vt) for s, text in zip(node.src, srcs))
            greater = f"({a} > {b})" if dtypes.is_int(node.dtype) else f"(({a} != {a}) | ({a} > {b}))"
            cond = self.named(f"(({mvt}){greater})", mvt)
        return f"(({vt})(((({mvt})({a})) & {cond}) | ((({mvt})({b})) & ~{cond})))"

    def vector_sqrt(self, vt: str, dt: DType) -> str:
        """The name of a vector square root helper (defined once per vector type): the per-lane builtin over a lane
        array, which clang 15+ and GCC 12+ both turn into one packed square root per register (written as a loop over
        the vector's own lanes, clang 15 took each lane apart and kept sqrtss per lane)."""
        assert self.block is not None
        name = f"uop_sqrt_{vt[len('uop_'):]}"
        ctype, fn = ("double", "__builtin_sqrt") if dt == dtypes.float64 else ("float", "__builtin_sqrtf")
        vtu = self.vtype(dt, aligned=False)
        self.helpers.setdefault(name, f"static inline {vt} {name}({vt} a) {{\n  {ctype} t[{self.block.width}];\n"
                                      f"  *({vtu} *)t = a;\n  for (int l = 0; l < {self.block.width}; l++) t[l] = {fn}(t[l]);\n"
                                      f"  return *({vtu} *)t;\n}}\n")
        return name

    def vector_trunc(self, name: str, vt: str, mvt: str, dt: DType) -> str:
        """A vector trunc: clang vectorizes the per-lane builtin (one vroundps); GCC 12 calls it lane by lane, so it gets
        the conversion to integers and back where that is exact (|x| below 2**mantissa bits; larger values, infinities
        and NaN are integral or themselves already), with the sign bit put back (trunc(-0.5) is -0.0)."""
        assert self.block is not None
        fn, limit, bits = ("__builtin_trunc", "4503599627370496.0", 64) if dt == dtypes.float64 else ("__builtin_truncf", "8388608.0f", 32)
        sign = self.r.int_literal(-(1 << (bits - 1)), dtypes.int64 if bits == 64 else dtypes.int32)
        return (f"static inline {vt} {name}({vt} a) {{\n#if defined(__clang__)\n  {vt} r;\n"
                f"  for (int l = 0; l < {self.block.width}; l++) r[l] = {fn}(a[l]);\n  return r;\n#else\n"
                f"  {mvt} bits = ({mvt})a, sign = bits & (({mvt}){{}} + {sign});\n"
                f"  {mvt} whole = ({mvt})__builtin_convertvector(__builtin_convertvector(a, {mvt}), {vt}) | sign;\n"
                f"  {mvt} small = ({mvt})(({vt})(bits & ~sign) < (({vt}){{}} + {limit}));\n"
                f"  return ({vt})((whole & small) | (bits & ~small));\n#endif\n}}\n")

    def mask(self, node: UOp, text: str, mask: DType) -> str:
        """A bool operand as a mask of `mask` lanes: a mask of the block already is one; a scalar bool is broadcast to
        -1 (true) or 0 (false), converted to the lane's integer type first (GCC refuses a _Bool operand of a vector op)."""
        assert self.block is not None
        if node in self.block.lane_masks:  # a lane-dependent gate: evaluated at each lane
            lanes = ", ".join(f"-({self.r.types[mask]})({self.at_lane(node, str(lane))})" for lane in range(self.block.width))
            return f"(({self.vtype(mask)}){{{lanes}}})"
        return text if node in self.block.values else f"(({self.vtype(mask)}){{}} - ({self.r.types[mask]})({text}))"

    def prefetch_next(self, index: UOp) -> None:
        """Prefetch the lines a vector access reads in the next iteration of the innermost loop it is in, when that loop
        is a reduce loop that moves the access by PREFETCH_MIN_JUMP bytes or more."""
        assert self.block is not None
        loop = next((r for r in reversed(self.loops) if r.arg[1] not in REGISTER_AXES), None)
        if loop is None or loop.arg[1] is not AxisType.REDUCE or index.src[0].arg.addrspace is not AddrSpace.GLOBAL:
            return
        itemsize = index.src[0].dtype.base.itemsize
        step = stride(index.src[1], loop)
        if step is None or abs(step) * itemsize < PREFETCH_MIN_JUMP:
            return
        if any(stride(index.src[1], r) == 0 for r in self.loops if r is not loop and r.arg[1] not in REGISTER_AXES):
            # read again on every pass of an outer loop (a matmul's operand reused by each output tile): in cache after
            # the first pass, where the prefetches only cost issue slots (a weight gradient, 64 x 256 x 784: -20%)
            return
        for offset in range(0, self.block.width * itemsize, CACHE_LINE):
            ahead = self.r.int_literal(step + offset // itemsize, dtypes.int64)
            if (stmt := self.r.prefetch(f"&{self.names[index.src[0]]}[{self.names[index.src[1]]} + {ahead}]")) is not None:
                self.line(stmt)

    def too_deep(self, node: UOp, expr: str) -> bool:
        """Whether inlining `node` as `expr` would nest expressions deeper than compilers like: clang stops at 256
        brackets (-fbracket-depth; clang-22 allows more) and a vector operation wraps its operands in several (an
        unsigned int vector add is `((vt)(((uvt)(a)) + ((uvt)(b))))`), so the text's count of brackets bounds it too."""
        depth = 1 + max((self.inline_depth.get(s, 0) for s in node.src), default=0)
        if depth > 64 or expr.count("(") > MAX_INLINE_BRACKETS:
            return True
        self.inline_depth[node] = depth
        return False

    def define_vector(self, node: UOp, expr: str, prefix: str) -> None:
        name = self.fresh(prefix)
        self.line(f"{self.vtype(self.mask_type(node) if node.dtype == dtypes.bool else node.dtype)} {name} = {expr};")
        self.names[node] = name

    def decode(self, target: str, elem: DType) -> str:
        if elem in SMALL_FLOATS:
            self.need(elem)
            return f"uop_from_{SMALL_FLOATS[elem][0]}({target})"
        return target

    def encode(self, value: str, elem: DType) -> str:
        if elem in SMALL_FLOATS:
            self.need(elem)
            return f"uop_to_{SMALL_FLOATS[elem][0]}_f({value})"
        return value

    def chunk_lanes(self, block: VectorBlock) -> int:
        """Lanes of the vectors a block is written with: all of them, or on a SIMD target as many as one register holds
        of the block's widest elements when it has more. GCC 12 keeps a vector twice a register wide as two registers
        within an expression but goes through the stack between statements: a 1024^3 float32 matmul's 8x32 tile of
        32-lane accumulators ran at 12 ms instead of 6.7 (clang: 6.7 either way)."""
        if self.r.vector_width <= 1:
            return block.width
        widest = max((element_dtype(n).itemsize if n.op is Ops.INDEX else n.dtype.itemsize for n in block.values | block.accesses), default=4)
        lanes = max(1, self.r.vector_width * 4 // widest)
        return block.width if block.width <= lanes or block.width % lanes else lanes

    def plan_unrolls(self, vector_starts: set[int]) -> dict[UOp, int]:
        """The register loops to unroll completely (RANGE -> trip count); the others stay loops.

        Loops longer than MAX_UNROLL (a matrix-vector kernel's accumulator row) stay loops. On SIMD targets a scalar
        innermost register loop of LOOP_VECTORIZE_MIN or more lanes is also left as a loop, for the C compiler's loop
        vectorizer (unrolled, it only has the SLP vectorizer, which gives up on long bodies), and a nest of unrolled
        loops holds at most UNROLL_BUDGET copies of its body. GPU targets (vector width 1) unroll every register loop
        up to MAX_UNROLL, so their accumulators stay in registers."""
        simd = self.r.vector_width > 1
        unrolls: dict[UOp, int] = {}
        factors: list[int] = []  # the unroll factor of each open loop
        for i, node in enumerate(self.linear):
            if node.op is Ops.END:
                factors.pop()
                continue
            if node.op is not Ops.RANGE:
                continue
            size = int(node.src[0].arg) if node.arg[1] in REGISTER_AXES else 0
            unroll = node.arg[1] in REGISTER_AXES and i not in vector_starts and size <= MAX_UNROLL
            if unroll and simd:
                innermost = next(n for n in self.linear[i + 1:] if n.op in (Ops.RANGE, Ops.END)).op is Ops.END
                unroll = not (innermost and size >= LOOP_VECTORIZE_MIN) and math.prod(factors) * size <= UNROLL_BUDGET
            if unroll:
                unrolls[node] = size
            factors.append(size if unroll else 1)
        return unrolls

    def render(self) -> str:
        buffers = sorted((u for u in self.linear if u.op is Ops.PARAM and u.arg.addrspace is AddrSpace.GLOBAL
                          and isinstance(u.dtype, PtrDType)), key=lambda u: u.arg.slot)
        variables = sorted({u for u in self.linear if u.op is Ops.DEFINE_VAR or (u.op is Ops.PARAM and not isinstance(u.dtype, PtrDType))},
                           key=variable_name)
        for buf in buffers:
            self.names[buf] = f"data{buf.arg.slot}"
        for var in variables:
            self.names[var] = variable_name(var)
        for u in self.linear:
            if u.op is Ops.SPECIAL:
                self.names[u] = self.r.special(u.arg)
            elif u.op is Ops.PARAM and u.arg.addrspace is AddrSpace.LOCAL and u not in self.names:
                self.names[u] = f"lds{u.arg.slot}"
                self.line(self.r.local_array(self.r.value_type(u.dtype.base), self.names[u], u.dtype.size))
        blocks = {i: found for i, node in enumerate(self.linear)
                  if node.op is Ops.RANGE and self.r.vectorize and (found := find_vector_block(self.linear, i)) is not None}
        self.unrolls = self.plan_unrolls(set(blocks))
        self.block: VectorBlock | None = None
        vector_ends = {end for _, end in blocks.values()}
        for i, node in enumerate(self.linear):
            if node.op is Ops.RANGE:
                self.loops.append(node)
            elif node.op is Ops.END:
                self.loops.pop()
            if i in blocks:
                block, _ = blocks[i]
                name = self.names[node] = f"uidx{node.arg[0]}"
                chunk = self.chunk_lanes(block)
                if chunk < block.width:  # register-sized vectors, the loop over them unrolled
                    end, step = (self.r.int_literal(n, dtypes.int64) for n in (block.width, chunk))
                    self.line(f"_Pragma(\"GCC unroll {block.width // chunk}\") for ({self.r.index_type} {name} = 0; {name} < {end}; "
                              f"{name} += {step}) {{  /* {block.width} lanes as {block.width // chunk} vectors of {chunk} */")
                    block = dataclasses.replace(block, width=chunk)
                else:
                    self.line(f"{{ const {self.r.index_type} {name} = 0;  /* {block.width} lanes as one vector */")
                self.block = block
                self.depth += 1
                continue
            if i in vector_ends:
                self.block = None
            self.render_node(node)
        return self.r.function(self.name, "".join(self.helpers.values()), self.body, buffers, variables, self.names)
