"""`QCOMRenderer`: kernels as portable OpenCL C for Adreno GPUs (Qualcomm's OpenCL compiler on a phone, the host C
compiler through a shim header on MOCKQCOM).

It is the AMD OpenCL renderer with the standard work-item functions (`get_group_id`, `get_local_id`) and
`barrier(CLK_LOCAL_MEM_FENCE)` in place of the amdgcn builtins; the kernel arguments are the same (buffers as global
pointers, then the variables as `long`). Images (read_imagef / write_imagef for the IMAGE path) are a follow-up.
"""

from __future__ import annotations

from uopir import AMDOpenCLRenderer, CodegenError

_DIM_FUNCTION = {"gidx": "get_group_id", "lidx": "get_local_id"}


class QCOMRenderer(AMDOpenCLRenderer):
    """OpenCL C for Adreno 6xx (`arch` is the GPU's name, e.g. "a630")."""

    device = "QCOM"

    def __init__(self, arch: str = "a630"):
        super().__init__(arch)

    def special(self, name: str) -> str:
        kind, dim = name[:4], name[4:]
        if kind not in _DIM_FUNCTION or dim not in ("0", "1", "2"):
            raise CodegenError(f"the QCOM OpenCL renderer has no index {name}")
        return f"((long){_DIM_FUNCTION[kind]}({dim}))"

    def barrier(self) -> str:
        return "barrier(CLK_LOCAL_MEM_FENCE);"
