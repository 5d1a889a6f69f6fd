"""Kernel codegen: optimizations, lowering a kernel AST to a linear program, and `to_program`."""

from .images import IMAGE_CHANNEL, image_params, lower_images
from .kernel import CodegenError, kernel_form
from .linearize import linearize
from .opts import Opt, OptOps, apply_opts, gpu_heuristic_opts, heuristic_opts
from .packing import OperandPack, operand_packs
from .program import kernel_name, to_program

__all__ = ["CodegenError", "IMAGE_CHANNEL", "image_params", "lower_images", "kernel_form", "OperandPack", "operand_packs",
           "Opt", "OptOps", "apply_opts", "gpu_heuristic_opts", "heuristic_opts", "kernel_name", "linearize", "to_program"]
