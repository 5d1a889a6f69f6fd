"""The CPU device: C source compiled to shared objects, loaded with ctypes, run on native threads.

Program ABI (what a renderer for this device emits): every program exports
`void NAME(void **bufs, const long long *vals, int core_id, int n_cores)` -- buffer addresses in the
program's globals order, variable values in its variables order, and for a THREAD kernel the index of
this core among `n_cores`. Launches with `n_cores > 1` go through a small native launcher that runs the
cores on a persistent pthread pool, so no Python thread is involved and the GIL is released for the whole launch.
"""

from __future__ import annotations

import ctypes
import functools
import os
import tempfile
from typing import Any

import numpy as np
from uopir import CRenderer

from .allocator import LRUAllocator
from .compiled import CompiledDevice
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
/* A persistent pool: workers sleep on a condition variable between launches, so a THREAD kernel costs a wake-up,
   not a pthread_create per core. Launches are serialized; core 0 runs on the caller's thread. */
typedef void (*uop_kernel)(void **, const long long *, int, int);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER, launch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static uop_kernel job_fn; static void **job_bufs; static const long long *job_vals;
static int job_n, pending, n_workers;
static unsigned long long generation;
static void *uop_worker(void *arg) {
  int core = (int)(long)arg;
  unsigned long long seen = 0;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (generation == seen) pthread_cond_wait(&start_cv, &mu);
    seen = generation;
    if (core < job_n) {
      uop_kernel fn = job_fn; void **bufs = job_bufs; const long long *vals = job_vals; int n = job_n;
      pthread_mutex_unlock(&mu);
      fn(bufs, vals, core, n);
      pthread_mutex_lock(&mu);
      if (--pending == 0) pthread_cond_signal(&done_cv);
    }
  }
  return 0;
}
int uop_parallel(uop_kernel fn, void **bufs, const long long *vals, int n) {
  pthread_mutex_lock(&launch_mu);
  pthread_mutex_lock(&mu);
  while (n_workers < n - 1) {
    pthread_t thread;
    if (pthread_create(&thread, 0, uop_worker, (void *)(long)(n_workers + 1)) != 0) {
      pthread_mutex_unlock(&mu); pthread_mutex_unlock(&launch_mu); return -1;
    }
    pthread_detach(thread);
    n_workers++;
  }
  job_fn = fn; job_bufs = bufs; job_vals = vals; job_n = n; pending = n - 1; generation++;
  pthread_cond_broadcast(&start_cv);
  pthread_mutex_unlock(&mu);
  fn(bufs, vals, 0, n);
  pthread_mutex_lock(&mu);
  while (pending) pthread_cond_wait(&done_cv, &mu);
  pthread_mutex_unlock(&mu);
  pthread_mutex_unlock(&launch_mu);
  return 0;
}
"""


@functools.cache
def host_vector_width() -> int:
    """float32 lanes of this CPU's widest vector registers (16 with AVX-512, else 8), for the opt heuristic."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return 8
    return 16 if " avx512f" in flags else 8


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

    def launch(self, addresses: list[int], values: list[int], global_size: tuple[int, int, int], local_size: tuple[int, int, int]) -> None:
        """The CompiledDevice launch: a THREAD kernel's global size is its core count."""
        self(addresses, values, n_cores=global_size[0])


class CPUDevice(CompiledDevice):
    """`CPU`, `CPU:1`, ...: each name is a separate device with its own allocator."""

    def __init__(self, name: str):
        self.name = name
        self.allocator = CPUAllocator()
        self.compiler = CCompiler()
        self.renderer = CRenderer(vector_width=host_vector_width())
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
