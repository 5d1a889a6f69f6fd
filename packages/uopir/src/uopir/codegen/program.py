"""`to_program`: a kernel AST to a PROGRAM UOp (the AST, its linear program, the rendered source, ProgramInfo)."""

from __future__ import annotations

from uopir.args import KernelInfo, ProgramInfo
from uopir.dtypes import PtrDType, dtypes
from uopir.ops import Ops
from uopir.rewrite import PatternMatcher, UPat, graph_rewrite
from uopir.spec import spec_kernel, type_verify
from uopir.symbolic import pm_lower_floor_ops, symbolic
from uopir.uop import UOp

from ..renderer.base import Renderer
from .decompose import decompose
from .estimates import kernel_estimates
from .gpudims import add_gpu_dims, launch_dims
from .images import image_params, lower_images
from .kernel import REDUCE_AXES, CodegenError, axis_type, buffer_access, buffer_params, kernel_ranges, kernel_stores, kernel_variables
from .linearize import linearize
from .onehot import pm_collapse_onehot
from .opts import Opt, apply_opts, gpu_heuristic_opts, heuristic_opts


def kernel_name(ast: UOp) -> str:
    """tinygrad-style: `E_` for elementwise kernels, `r_` with a reduction, then the axis sizes; a hand-written kernel
    named by its SINK's `KernelInfo` keeps that name."""
    if isinstance(ast.arg, KernelInfo) and ast.arg.name:
        return ast.arg.name
    ranges = kernel_ranges(ast)
    prefix = "r" if any(axis_type(r) in REDUCE_AXES for r in ranges) else "E"
    dims = [str(r.src[0].arg) if r.src[0].op is Ops.CONST else r.src[0].render() for r in ranges]
    return "_".join([prefix, *dims]).translate(str.maketrans({c: "" for c in " ()*+-/%<>"})) if dims else prefix


def lower_kernel(ast: UOp) -> UOp:
    """Index math simplified, then Python floor division lowered to C division (what every renderer expects).

    Two passes: symbolic turns C division of non-negative values back into floor division, so running both rule sets
    together would undo the lowering."""
    return graph_rewrite(graph_rewrite(ast, symbolic, name="simplify kernel"), pm_lower_floor_ops, name="lower floor division")


def _ungated_load(load: UOp, index: UOp) -> UOp | None:
    """A gated scalar LOAD whose address is inside its buffer whatever the gate says, as a plain LOAD and a select: the
    read is harmless when the gate is off, and compilers vectorize a select where they keep a branch around a load that
    may fault (GCC keeps every gated kernel branchy, see `GCC_KEEP_BRANCHES`). A plain load of the same address
    elsewhere in the kernel then serves both."""
    buffer, offset, gate = index.src
    if not isinstance(ptr := buffer.dtype, PtrDType) or not isinstance(ptr.size, int) or ptr.size <= 0 or load.dtype.count != 1 \
            or offset.dtype.count != 1:
        return None
    if not (isinstance(lo := offset.vmin, int) and isinstance(hi := offset.vmax, int) and 0 <= lo and hi < ptr.size):
        return None
    alt = load.src[1] if len(load.src) > 1 else load.const_like(0)
    return gate.where(load.replace(src=(index.replace(src=(buffer, offset)),)), alt)


pm_ungate_loads = PatternMatcher([
    (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, src=(UPat(), UPat(), UPat()), name="index"),), allow_any_len=True, name="load"), _ungated_load),
])


def to_program(ast: UOp, renderer: Renderer, opts: list[Opt] | tuple[Opt, ...] | None = None, n_cores: int = 1) -> UOp:
    """Lower `ast` for `renderer` and return PROGRAM(ast, LINEAR(...), SOURCE(text), arg=ProgramInfo).

    opts None picks them with the heuristic (THREAD only when the renderer has threads and n_cores > 1)."""
    type_verify(ast, spec_kernel)
    kernel_stores(ast)
    params = buffer_params(ast)
    variables = kernel_variables(ast)
    access = buffer_access(ast)
    # indexing by a tensor (a one-hot summed over the indexed axis) reads the indexed row instead of the whole axis; the
    # name is the collapsed kernel's (its loops)
    collapsed = graph_rewrite(ast, pm_collapse_onehot, name="collapse one-hot reductions")
    name = kernel_name(collapsed)
    lowered = lower_kernel(collapsed)
    # only renderers with tensor cores declare them
    tensor_cores = renderer.tensor_cores
    if opts is None:
        if renderer.global_dims:
            opts = gpu_heuristic_opts(lowered, renderer.local_size, tensor_cores)
        else:
            opts = heuristic_opts(lowered, n_cores if renderer.has_threads else 1, renderer.vector_width, renderer.l2_bytes)
    optimized = decompose(apply_opts(lowered, opts, tensor_cores), renderer.code_for_op)
    if renderer.global_dims:
        optimized = add_gpu_dims(optimized, renderer.local_size)
    kernel = lower_kernel(optimized)
    if not renderer.global_dims:  # (CPU renderers: kernels for GPUs keep their gated loads)
        kernel = graph_rewrite(kernel, pm_ungate_loads, name="ungate loads")
    if image_params(kernel):
        if not renderer.supports_images:
            raise CodegenError(f"kernel {name} reads or writes images (ImageDType PARAMs), which the {renderer.device or type(renderer).__name__} "
                               "renderer has no image path for")
        kernel = lower_kernel(lower_images(kernel))
    linear = linearize(kernel, lane_sums=renderer.lane_sums, stash=renderer.stash)
    global_size, local_size = launch_dims(linear)
    source = renderer.render(name, linear)
    ops, mem = kernel_estimates(lowered)
    info = ProgramInfo(name, globals=tuple(p.arg.slot for p in params), vars=tuple(variables), outs=access.outs, ins=access.ins,
                       global_size=global_size, local_size=local_size, target=renderer.device, ops=ops, mem=mem)
    return UOp(Ops.PROGRAM, dtypes.void, (ast, UOp(Ops.LINEAR, dtypes.void, tuple(linear)), UOp(Ops.SOURCE, dtypes.void, (), source)), info)
