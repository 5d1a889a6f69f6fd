"""The CPU device: C source compiled to shared objects, loaded with ctypes, run on native threads.

Program ABI (what a renderer for this device emits): every program exports
`void NAME(void **bufs, const long long *vals, int core_id, int n_cores)` -- buffer addresses in the
program's globals order, variable values in its variables order, and for a THREAD kernel the index of
this core among `n_cores`. Launches with `n_cores > 1` go through a small native launcher that runs the
cores on pthreads, so no Python thread is involved and the GIL is released for the whole launch.
"""

from __future__ import annotations

import ctypes
import functools
import os
import tempfile
from typing import Any

import numpy as np

from .allocator import LRUAllocator
from .compiler import CCompiler
from .errors import AllocationError, DeviceError

_ALIGN = 64  # one cache line; also enough for the widest GCC vector type the C renderer emits


class CPUMemory:
    """One allocation: a numpy byte array whose start is aligned to `_ALIGN`."""

    __slots__ = ("owner", "address", "nbytes")

    def __init__(self, owner: np.ndarray, address: int, nbytes: int):
        self.owner, self.address, self.nbytes = owner, address, nbytes


class CPUAllocator(LRUAllocator[CPUMemory]):
    def _alloc(self, nbytes: int, options: Any) -> CPUMemory:
        raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
        start = -raw.ctypes.data % _ALIGN
        return CPUMemory(raw, raw.ctypes.data + start, nbytes)

    def copyin(self, dest: CPUMemory, src: memoryview) -> None:
        ctypes.memmove(dest.address, np.frombuffer(src, dtype=np.uint8).ctypes.data, src.nbytes)

    def copyout(self, dest: memoryview, src: CPUMemory) -> None:
        ctypes.memmove(np.frombuffer(dest, dtype=np.uint8).ctypes.data, src.address, dest.nbytes)

    def offset(self, opaque: CPUMemory, offset: int, nbytes: int) -> CPUMemory:
        if offset + nbytes > opaque.nbytes:
            raise AllocationError(f"offset view [{offset}, {offset + nbytes}) is outside an allocation of {opaque.nbytes} bytes")
        return CPUMemory(opaque.owner, opaque.address + offset, nbytes)

    def address(self, opaque: CPUMemory) -> int:
        return opaque.address


def load_shared_object(binary: bytes) -> ctypes.CDLL:
    """dlopen a shared object held in memory.

    Each load gets a fresh file name: the dynamic loader returns an already loaded library when the
    path matches one it has seen, so reusing a path (or a /proc/self/fd number) would run stale code."""
    fd, path = tempfile.mkstemp(prefix="uop-program-", suffix=".so")
    try:
        os.write(fd, binary)
        os.close(fd)
        return ctypes.CDLL(path)
    finally:
        os.unlink(path)


_LAUNCHER_SRC = r"""
#include <pthread.h>
typedef void (*uop_kernel)(void **, const long long *, int, int);
struct uop_job { uop_kernel fn; void **bufs; const long long *vals; int core, n; };
static void *uop_run_job(void *arg) { struct uop_job *j = arg; j->fn(j->bufs, j->vals, j->core, j->n); return 0; }
/* runs fn on n cores: cores 1..n-1 on new threads, core 0 on the caller's thread */
int uop_parallel(uop_kernel fn, void **bufs, const long long *vals, int n) {
  pthread_t threads[256]; struct uop_job jobs[256];
  if (n > 256) n = 256;
  for (int i = 1; i < n; i++) {
    jobs[i] = (struct uop_job){fn, bufs, vals, i, n};
    if (pthread_create(&threads[i], 0, uop_run_job, &jobs[i]) != 0) return -1;
  }
  fn(bufs, vals, 0, n);
  for (int i = 1; i < n; i++) pthread_join(threads[i], 0);
  return 0;
}
"""


class CPUProgram:
    """A loaded CPU program, called with buffer addresses and variable values."""

    def __init__(self, device: CPUDevice, name: str, binary: bytes):
        self.name, self.lib = name, load_shared_object(binary)
        try:
            self.fn = getattr(self.lib, name)
        except AttributeError:
            raise DeviceError(f"program binary has no function {name!r}") from None
        self.fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        self.fn.restype = None
        self.device = device

    def __call__(self, addresses: list[int], vals: list[int] = (), n_cores: int = 1) -> None:
        bufs = (ctypes.c_void_p * max(len(addresses), 1))(*addresses)
        values = (ctypes.c_longlong * max(len(vals), 1))(*vals)
        if n_cores <= 1:
            self.fn(bufs, values, 0, 1)
        elif self.device.launcher(ctypes.cast(self.fn, ctypes.c_void_p), bufs, values, n_cores) != 0:
            raise DeviceError(f"could not start {n_cores} threads for {self.name}")


class CPUDevice:
    """`CPU`, `CPU:1`, ...: each name is a separate device with its own allocator."""

    def __init__(self, name: str):
        self.name = name
        self.allocator = CPUAllocator()
        self.compiler = CCompiler()
        self.n_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

    def program(self, name: str, binary: bytes) -> CPUProgram:
        """Load a compiled binary and return its entry point `name`."""
        return CPUProgram(self, name, binary)

    @functools.cached_property
    def launcher(self) -> Any:
        fn = load_shared_object(self.compiler.compile(_LAUNCHER_SRC)).uop_parallel
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        fn.restype = ctypes.c_int
        return fn

    def synchronize(self) -> None:
        """CPU programs run to completion before their call returns."""
