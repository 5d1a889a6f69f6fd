"""The UOp IR: dtypes, hash-consed UOp graphs, pattern rewriting, symbolic algebra, calls and spec checks."""

from uopir.args import OPAQUE_CALL_BODIES, CallInfo, KernelInfo, ParamArg, ProgramInfo
from uopir.codegen import (
    IMAGE_CHANNEL,
    CodegenError,
    OperandPack,
    Opt,
    OptOps,
    apply_opts,
    gpu_heuristic_opts,
    heuristic_opts,
    image_params,
    kernel_form,
    kernel_name,
    linearize,
    lower_images,
    operand_packs,
    to_program,
)
from uopir.dtypes import (
    AddrSpace,
    ConstType,
    DType,
    ImageDType,
    PtrDType,
    can_lossless_cast,
    dtypes,
    float_to_fp8,
    fp8_to_float,
    least_upper_dtype,
    least_upper_float,
    strong_dtype,
    sum_acc_dtype,
    to_dtype,
    truncate,
)
from uopir.errors import CallError, DTypeError, GraphError, RewriteError, SpecError, SymbolicError, UOpIRError
from uopir.floatconv import bf16_bits_to_float, float_to_bf16, float_to_bf16_bits, float_to_fp16
from uopir.interp import exec_alu
from uopir.mathops import DEFERRED_OPERAND_TYPES
from uopir.operators import OperatorMixin
from uopir.ops import AxisType, GroupOp, Ops
from uopir.render import pretty_print, print_uops
from uopir.renderer import AMDOpenCLRenderer, CRenderer, OpenCLProgram, Renderer
from uopir.rewrite import PatternMatcher, UPat, graph_rewrite
from uopir.shapes import divides, mul_factors, prod, shape_str, size_factors
from uopir.spec import spec_kernel, spec_program, spec_shared, spec_tensor, type_verify
from uopir.symbolic import pm_lower_floor_ops, symbolic, symbolic_simple
from uopir.uop import UOp, resolve, ssimplify, sym_infer
from uopir.valid import pm_simplify_valid, simplify_valid, simplify_valid_idx

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "prod",
    "size_factors",
    "mul_factors",
    "divides",
    "shape_str",
    "DEFERRED_OPERAND_TYPES",
    # dtypes
    "AddrSpace", "ConstType", "DType", "ImageDType", "PtrDType", "dtypes", "to_dtype", "least_upper_dtype", "least_upper_float", "strong_dtype",
    "sum_acc_dtype", "can_lossless_cast", "truncate", "float_to_fp8", "fp8_to_float", "float_to_bf16", "float_to_bf16_bits",
    "bf16_bits_to_float", "float_to_fp16",
    # graphs
    "Ops", "GroupOp", "AxisType", "UOp", "OperatorMixin", "ParamArg", "CallInfo", "KernelInfo", "ProgramInfo", "OPAQUE_CALL_BODIES", "resolve",
    "ssimplify", "sym_infer",
    "exec_alu",
    # rewriting and symbolic
    "UPat", "PatternMatcher", "graph_rewrite", "symbolic", "symbolic_simple", "pm_lower_floor_ops", "simplify_valid",
    "simplify_valid_idx", "pm_simplify_valid",
    # spec and printing
    "type_verify", "spec_shared", "spec_tensor", "spec_kernel", "spec_program", "pretty_print", "print_uops",
    # kernel codegen and renderers
    "Opt", "OptOps", "apply_opts", "heuristic_opts", "gpu_heuristic_opts", "kernel_name", "kernel_form", "linearize", "to_program",
    "OperandPack", "operand_packs",
    "Renderer", "CRenderer", "AMDOpenCLRenderer", "OpenCLProgram", "CodegenError", "IMAGE_CHANNEL", "image_params", "lower_images",
    # errors
    "UOpIRError", "DTypeError", "GraphError", "CallError", "RewriteError", "SpecError", "SymbolicError",
]
