"""The renderer interface: what a device's code generator supports and how it writes a linear program as source."""

from __future__ import annotations

from uopir.dtypes import DType
from uopir.ops import Ops
from uopir.uop import UOp


class Renderer:
    """Turns a linear program (see `uopir.codegen.linearize`) into source text for one device.

    device: the device family the source is for; native_dtypes: dtypes the target computes natively;
    emulated_dtypes: dtypes stored natively but computed through float32 with exact rounding; code_for_op: the
    ALU ops the target has (the codegen decomposes the others before rendering); has_threads: whether THREAD opts
    apply (CPU cores); vector_width: float32 lanes of the widest vector register, for the opt heuristic; global_dims:
    output axes become GPU workgroup/work-item indices, with up to local_size work-items per workgroup;
    tensor_cores: the matrix units (`uopir.codegen.tc.TensorCore`) the TC opt may use; packed_operand_bytes: when
    nonzero, a reduce kernel that reads a large operand across its rows reads a copy packed in runs of this many bytes
    (`uopir.codegen.packing`; the scheduler makes the copies); lane_sums: it renders CUSTOM(LANE_SUMS) statements
    (the lanes of n accumulators added at once, see `uopir.codegen.linearize`); supports_images: it renders the texel
    reads (LOAD of a vector from an image INDEX), channel picks (CUSTOM(IMAGE_CHANNEL)) and texel writes (STORE of a
    STACK) `uopir.codegen.images` lowers image PARAMs' accesses to; l2_bytes: the second-level cache of one core, for
    the opt heuristic's loop order (see `heuristic_opts`); stash: a kernel may keep a costly value its reduction's loop
    computes in a REG array of up to `uopir.codegen.linearize.STASH_MAX` elements for its output loop to read back
    (a stack array on a CPU; a GPU would spill it).
    """

    device: str = ""
    native_dtypes: frozenset[DType] = frozenset()
    emulated_dtypes: frozenset[DType] = frozenset()
    code_for_op: frozenset[Ops] = frozenset()
    has_threads: bool = False
    vector_width: int = 1
    global_dims: bool = False
    local_size: int = 1
    tensor_cores: tuple = ()
    packed_operand_bytes: int = 0
    l2_bytes: int = 1 << 20
    lane_sums: bool = False
    stash: bool = False
    #: it renders texel reads and writes of `ImageDType` PARAMs (see `uopir.codegen.images`)
    supports_images: bool = False

    def supported_dtypes(self) -> frozenset[DType]:
        """Every dtype a kernel on this target can use: the native ones and the emulated ones (tinygrad's method)."""
        return self.native_dtypes | self.emulated_dtypes

    def render(self, name: str, linear: list[UOp]) -> str:
        """Source text defining the program `name` from `linear`; the argument order is the program's ABI."""
        raise NotImplementedError
