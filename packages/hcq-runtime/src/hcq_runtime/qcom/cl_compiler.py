"""`CLCompiler`: OpenCL C → an Adreno program library, by the platform's OpenCL driver (libOpenCL.so on the device).

The driver builds the program for its GPU and hands back the binary (`CL_PROGRAM_BINARIES`), which is the library
`program.parse_lib` reads; the geometry of the kernel's image arguments (from the source) follows it as a table.
Nothing here runs without the vendor driver; importing the module is always safe.
"""

from __future__ import annotations

import ctypes
import ctypes.util

from ..compiler import Compiler
from ..errors import CompileError
from .image import image_args, with_image_table

CL_SUCCESS, CL_DEVICE_TYPE_GPU = 0, 1 << 2
CL_PROGRAM_BINARY_SIZES, CL_PROGRAM_BINARIES, CL_PROGRAM_BUILD_LOG = 0x1165, 0x1166, 0x1183
LIBRARY_PATHS = ("libOpenCL.so", "/vendor/lib64/libOpenCL.so", "/system/vendor/lib64/libOpenCL.so")


def _load_opencl() -> ctypes.CDLL:
    for path in (ctypes.util.find_library("OpenCL"), *LIBRARY_PATHS):
        if path:
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    raise CompileError("compiling for QCOM needs the device's OpenCL driver (libOpenCL.so); on other machines use MOCKQCOM")


class CLCompiler(Compiler):
    """Builds OpenCL C with the first GPU of the first OpenCL platform."""

    def __init__(self) -> None:
        self.cl = _load_opencl()
        platform, self.device = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self.cl.clGetPlatformIDs(1, ctypes.byref(platform), None), "clGetPlatformIDs")
        self._check(self.cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_GPU, 1, ctypes.byref(self.device), None), "clGetDeviceIDs")
        status = ctypes.c_int32()
        self.cl.clCreateContext.restype = ctypes.c_void_p
        self.context = ctypes.c_void_p(self.cl.clCreateContext(None, 1, ctypes.byref(self.device), None, None, ctypes.byref(status)))
        self._check(status.value, "clCreateContext")
        self.cache_key = f"qcom-cl\0{self.device.value}"

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != CL_SUCCESS:
            raise CompileError(f"{what} failed with OpenCL status {status}")

    def compile_uncached(self, src: str) -> bytes:
        status = ctypes.c_int32()
        self.cl.clCreateProgramWithSource.restype = ctypes.c_void_p
        source = ctypes.c_char_p(src.encode())
        program = ctypes.c_void_p(self.cl.clCreateProgramWithSource(self.context, 1, ctypes.byref(source), None, ctypes.byref(status)))
        self._check(status.value, "clCreateProgramWithSource")
        try:
            if self.cl.clBuildProgram(program, 1, ctypes.byref(self.device), None, None, None) != CL_SUCCESS:
                log = ctypes.create_string_buffer(1 << 16)
                self.cl.clGetProgramBuildInfo(program, self.device, CL_PROGRAM_BUILD_LOG, len(log), log, None)
                raise CompileError(f"the OpenCL driver rejected the kernel: {log.value.decode(errors='replace').strip()}")
            size = ctypes.c_size_t()
            self._check(self.cl.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, ctypes.sizeof(size), ctypes.byref(size), None),
                        "clGetProgramInfo(BINARY_SIZES)")
            binary = ctypes.create_string_buffer(size.value)
            pointer = ctypes.c_char_p(ctypes.addressof(binary))
            self._check(self.cl.clGetProgramInfo(program, CL_PROGRAM_BINARIES, ctypes.sizeof(pointer), ctypes.byref(pointer), None),
                        "clGetProgramInfo(BINARIES)")
            return with_image_table(binary.raw, image_args(src))
        finally:
            self.cl.clReleaseProgram(program)
