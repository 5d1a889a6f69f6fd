"""OpenCL C for AMD GPUs, compiled by clang for amdgcn without device libraries.

With no libclc or ROCm device libraries to link, the kernel may use only what clang lowers to instructions by itself:
work-item ids come from `__builtin_amdgcn_*` builtins, sqrt/trunc/fma from `__builtin_*` (LLVM intrinsics), and
exp2/log2/sin/pow are decomposed by the codegen (`code_for_op` leaves them out). Types are OpenCL's (`long` is 64-bit,
`half` needs cl_khr_fp16); bitcasts use `as_<type>`. One work-item computes one element of the output axes that
became GPU dimensions; the kernel arguments are the buffers (global pointers, 8 bytes each) in slot order, then the
variables as 64-bit `long`s — the HSA kernarg layout the runtime fills.

Tensor cores (gfx11): a STACK is an OpenCL vector literal and a WMMA statement calls clang's
`__builtin_amdgcn_wmma_*_w32` builtin on vectors built from (and written back to) the accumulator slots. bfloat16
operands go in as their bits (`short16`); 16-bit accumulators use the low half of each of the 8 registers (even
vector elements, OPSEL 0).
"""

from __future__ import annotations

from uopir.dtypes import DType, dtypes
from uopir.ops import Ops
from uopir.uop import UOp

from ..codegen.kernel import CodegenError
from ..codegen.tc import RDNA3_TENSOR_CORES, REGISTERS, TensorCore
from .cstyle import CRenderer, _CProgram

OPENCL_TYPES: dict[DType, str] = {
    dtypes.bool: "bool", dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short", dtypes.uint16: "ushort",
    dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long", dtypes.uint64: "ulong", dtypes.float16: "half",
    dtypes.float32: "float", dtypes.float64: "double", dtypes.weakint: "long", dtypes.weakfloat: "double",
}
_DIM_BUILTIN = {"gidx": "__builtin_amdgcn_workgroup_id_", "lidx": "__builtin_amdgcn_workitem_id_"}


class AMDOpenCLRenderer(CRenderer):
    """Kernels for AMD GPUs as OpenCL C (`clang -target amdgcn-amd-amdhsa -x cl -nogpulib`)."""

    device = "AMD"
    has_threads = False
    global_dims = True
    packed_operand_bytes = 0  # work-items of a wave read neighbouring columns together: no strided walk to undo
    code_for_op = CRenderer.code_for_op - {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW}
    types = OPENCL_TYPES
    index_type = "long"

    def __init__(self, arch: str = "gfx1100", local_size: int = 32):
        super().__init__(vector_width=1)
        self.arch, self.local_size = arch, local_size
        #: WMMA exists from RDNA3 (gfx11) on; gfx12 changed the lane layouts, which `tc` does not describe
        self.tensor_cores: tuple[TensorCore, ...] = RDNA3_TENSOR_CORES if arch.startswith("gfx11") else ()

    def render(self, name: str, linear: list[UOp]) -> str:
        return OpenCLProgram(self, name, linear).render()

    def opencl_vector(self, dt: DType) -> str:
        """The OpenCL vector type of `dt` (bfloat16 lanes as their bits)."""
        return f"{'short' if dt.scalar() == dtypes.bfloat16 else self.types[dt.scalar()]}{dt.count}"

    def int_suffix(self, bits: int, unsigned: bool) -> str:
        return ("ul" if unsigned else "l") if bits == 64 else ("u" if unsigned else "")

    def bitcast_expr(self, x: str, src: DType, dst: DType) -> str:
        return f"as_{self.types[dst]}(({self.types[src]})({x}))"

    def vector_bitcast_expr(self, x: str, vtype: str) -> str:
        # in OpenCL C `(float4)(v)` is a vector literal (a conversion), so reinterpret with the astype builtin
        return f"__builtin_astype({x}, {vtype})"

    def loop_header(self, name: str, end: str, unroll: int | None) -> str:
        loop = f"for (long {name} = 0; {name} < {end}; {name}++) {{"
        return f"_Pragma(\"unroll\") {loop}" if unroll else loop

    def special(self, name: str) -> str:
        kind, dim = name[:4], name[4:]
        if kind not in _DIM_BUILTIN or dim not in ("0", "1", "2"):
            raise CodegenError(f"the AMD OpenCL renderer has no index {name}")
        return f"((long){_DIM_BUILTIN[kind]}{'xyz'[int(dim)]}())"

    def barrier(self) -> str:
        # a workgroup barrier with the LDS fences OpenCL's barrier(CLK_LOCAL_MEM_FENCE) implies (no opencl-c.h here)
        return ('__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); '
                '__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");')

    def local_array(self, ctype: str, name: str, size: int) -> str:
        return f"__local {ctype} {name}[{size}];"

    def function(self, name: str, helpers: str, body: list[str], buffers: list[UOp], variables: list[UOp], names: dict[UOp, str]) -> str:
        params = [f"__global {self.storage_type(b.dtype.base)} *restrict {names[b]}" for b in buffers]
        params += [f"long {names[v]}" for v in variables]
        pragma = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n" if "half" in "".join(body) + "".join(params) else ""
        return f"{pragma}{helpers}\n__kernel void {name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"


class OpenCLProgram(_CProgram):
    """The C program writer plus the tensor-core nodes (STACK and WMMA). Public so renderers of OpenCL dialects can add
    the nodes they render (the QCOM renderer: image texel reads and writes): its `render_node(node)` writes one node of
    the linear program with `line`, `fresh` and the `names` of the nodes before it."""

    r: AMDOpenCLRenderer

    def render_node(self, node: UOp) -> None:
        if node.op is Ops.STACK:
            elements = [self.lane_bits(self.names[s], node.dtype.scalar()) for s in node.src]
            vt = self.r.opencl_vector(node.dtype)
            name = self.names[node] = self.fresh("stack")
            self.line(f"{vt} {name} = ({vt})({', '.join(elements)});")
        elif node.op is Ops.WMMA:
            self.render_wmma(node)
        else:
            super().render_node(node)

    def lane_bits(self, value: str, dt: DType) -> str:
        """A vector lane's value: bfloat16 values go into WMMA vectors as their bits."""
        return f"(short){self.encode(value, dt)}" if dt == dtypes.bfloat16 else value

    def render_wmma(self, node: UOp) -> None:
        """acc[base .. base+7] += A @ B for the lane: a vector from the slots, the builtin, the slots from its result."""
        tc: TensorCore = node.arg
        index = node.src[2]
        acc, base = self.names[index.src[0]], self.names[index.src[1]]
        slots = [f"{acc}[{base} + {i}]" for i in range(REGISTERS)]
        result = self.fresh("wmma")
        if tc.dtype_out == dtypes.float32:
            vt, positions = self.r.opencl_vector(dtypes.float32.vec(REGISTERS)), list(range(REGISTERS))
            c, extra = f"({vt})({', '.join(slots)})", ""
        else:  # 16-bit accumulators sit in the low half of each register: the even elements of a 16-vector
            vt, positions = self.r.opencl_vector(tc.dtype_out.vec(2 * REGISTERS)), list(range(0, 2 * REGISTERS, 2))
            # accumulator slots of an emulated dtype hold its bits, as the C renderer's stores encode them
            lanes = [f"(short){s}" if tc.dtype_out == dtypes.bfloat16 else s for s in slots]
            c, extra = f"({vt})({', '.join(x for lane in lanes for x in (lane, '0'))})", ", false"  # OPSEL 0: the low halves
        a, b = (self.names[s] for s in node.src[:2])
        self.line(f"{vt} {result} = {tc.builtin}({a}, {b}, {c}{extra});")
        for slot, position in zip(slots, positions):
            cast = "(ushort)" if tc.dtype_out == dtypes.bfloat16 else ""
            self.line(f"{slot} = {cast}{result}.s{position:x};")
