"""The CPU device: C source compiled to shared objects, loaded with ctypes, run on native threads.

Program ABI (what a renderer for this device emits): every program exports
`void NAME(void **bufs, const long long *vals, int core_id, int n_cores)` -- buffer addresses in the
program's globals order, variable values in its variables order, and for a THREAD kernel the index of
this core among `n_cores`. Launches with `n_cores > 1` go through a small native launcher that runs the
cores on a persistent pthread pool, so no Python thread is involved and the GIL is released for the whole launch.
The pool's threads claim the cores' parts as they come, so a thread another process holds up delays nothing, and
between launches they spin for a while (`UOP_CPU_SPIN_US`, default 1000) before they sleep.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import tempfile
import threading
import weakref
from typing import Any

import numpy as np
from uopir import CRenderer, Ops, ProgramInfo, UOp, dtypes

from .allocator import LRUAllocator
from .compiled import CompiledDevice
from .compiler import C_FLAGS, CCompiler
from .errors import AllocationError, DeviceError

_ALIGN = 64  # one cache line; also enough for the widest GCC vector type the C renderer emits
# allocations from this size up are anonymous mappings of their own. numpy would advise transparent huge pages for
# its arrays of 4 MiB and more, and then the first write anywhere in such a buffer makes 2 MiB resident: a KV cache
# the tokens so far fill a few rows of would cost 2 MiB per touched region instead of what they wrote. A mapping of
# its own is also given back to the OS the moment it is freed.
_MAP_MIN = 1 << 20


class CPUMemory:
    """One allocation: a numpy byte array whose start is aligned to `_ALIGN`."""

    __slots__ = ("owner", "address", "nbytes")

    def __init__(self, owner: np.ndarray, address: int, nbytes: int):
        self.owner, self.address, self.nbytes = owner, address, nbytes


def _trim_heap() -> None:
    """Give the C heap's free memory back to the OS (glibc's malloc_trim; nothing elsewhere). Allocations under 1 MiB
    come from it: freed, they stay resident in its free lists."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):
        pass


class CPUAllocator(LRUAllocator[CPUMemory]):
    def free_cache(self) -> None:
        """Release every cached allocation, and the heap memory the small ones held (a captured prompt's shared
        intermediates: SmolLM2 resident 214 -> 141 MB after its first 64-token prefill)."""
        super().free_cache()
        _trim_heap()

    def _alloc(self, nbytes: int, options: Any) -> CPUMemory:
        if nbytes >= _MAP_MIN:
            # page-aligned, zero-filled by the OS page by page as first touched, unmapped when the array goes
            raw = np.frombuffer(mmap.mmap(-1, nbytes), dtype=np.uint8)
            return CPUMemory(raw, raw.ctypes.data, nbytes)
        raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
        start = -raw.ctypes.data % _ALIGN
        return CPUMemory(raw, raw.ctypes.data + start, nbytes)

    def copyin(self, dest: CPUMemory, src: memoryview) -> None:
        ctypes.memmove(dest.address, np.frombuffer(src, dtype=np.uint8).ctypes.data, src.nbytes)

    def copyout(self, dest: memoryview, src: CPUMemory) -> None:
        ctypes.memmove(np.frombuffer(dest, dtype=np.uint8).ctypes.data, src.address, dest.nbytes)

    def host_view(self, opaque: CPUMemory, nbytes: int) -> np.ndarray:
        return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(opaque.address))

    def offset(self, opaque: CPUMemory, offset: int, nbytes: int) -> CPUMemory:
        if offset + nbytes > opaque.nbytes:
            raise AllocationError(f"offset view [{offset}, {offset + nbytes}) is outside an allocation of {opaque.nbytes} bytes")
        return CPUMemory(opaque.owner, opaque.address + offset, nbytes)

    def address(self, opaque: CPUMemory) -> int:
        return opaque.address

    def from_address(self, address: int, nbytes: int) -> CPUMemory:
        if not address:
            raise AllocationError("cannot use memory at address 0")
        return CPUMemory(None, address, nbytes)


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
#include <stdatomic.h>
#include <time.h>
/* A persistent pool running the parts (core ids) of one kernel at a time; the caller's thread works too, and launches
   are serialized. Parts are claimed, not assigned: `state` holds the job's generation, part count and next unclaimed
   part, and every thread claims parts with a compare-and-swap until none is left. So a worker that is descheduled
   (another process on the core) or still waking up costs parallelism, never a wait: the caller only waits for parts
   that were claimed. Waking a sleeping thread costs tens of microseconds (a woken worker then ran its part of the first
   kernel at half speed: an eager attention's first kernel took 55-88 us instead of 22), and eager code launches its
   kernels after a few hundred microseconds of Python, so after each job a worker spins on `state` for `spin_ns`
   (`uop_set_spin`; OpenMP's default spins far longer) before it sleeps on `start_cv`, and the caller spins the same
   way on `unfinished` before it sleeps on `done_cv`. Sleepers re-check under `mu`, which every wake-up takes, so no
   wake-up is lost. */
static _Atomic long long spin_ns = 50000LL;
void uop_set_spin(long long ns) { atomic_store(&spin_ns, ns < 0 ? 0 : ns); }
/* `uop_wake`, a hint that a launch is coming (eager code calls it when it starts a realize, a few hundred microseconds
   before its kernels): a sleeping worker wakes and spins again, so the launch finds it ready instead of waking it (the
   caller ran the first kernel's parts alone meanwhile: 161 instead of 85 us for an MLP step's first matmul). */
static _Atomic unsigned long long wakes;
static int sleeping;  /* workers waiting on start_cv, under mu */
typedef void (*uop_kernel)(void **, const long long *, int, int);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER, launch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static uop_kernel job_fn; static void **job_bufs; static const long long *job_vals; static int job_n;
static _Atomic unsigned long long state;  /* generation << 32 | parts << 16 | next unclaimed part */
static _Atomic int unfinished;
static int n_workers;
static unsigned long long generation_of(unsigned long long s) { return s >> 32; }
static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}
static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
/* The part of job `gen` this thread now owns, or -1 when that job has none left (or is over). */
static int claim(unsigned long long gen) {
  unsigned long long s = atomic_load_explicit(&state, memory_order_acquire);
  for (;;) {
    if (generation_of(s) != gen || (s & 0xffff) >= ((s >> 16) & 0xffff)) return -1;
    if (atomic_compare_exchange_weak_explicit(&state, &s, s + 1, memory_order_acq_rel, memory_order_acquire))
      return (int)(s & 0xffff);
  }
}
/* A claimed part keeps the caller waiting, so the job's fields stay valid while it runs. */
static void run_parts(unsigned long long gen) {
  for (int part; (part = claim(gen)) >= 0;) {
    job_fn(job_bufs, job_vals, part, job_n);
    if (atomic_fetch_sub_explicit(&unfinished, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&mu);
      pthread_cond_signal(&done_cv);
      pthread_mutex_unlock(&mu);
    }
  }
}
static void *uop_worker(void *arg) {
  (void)arg;
  unsigned long long seen = 0;
  for (;;) {
    long long deadline = now_ns() + atomic_load_explicit(&spin_ns, memory_order_relaxed);
    unsigned long long woken = atomic_load(&wakes);
    for (int i = 1; generation_of(atomic_load_explicit(&state, memory_order_acquire)) == seen; i++) {
      relax();
      if (i % 256 != 0) continue;
      if (atomic_load(&wakes) != woken) {  /* a launch is coming: spin on */
        woken = atomic_load(&wakes);
        deadline = now_ns() + atomic_load_explicit(&spin_ns, memory_order_relaxed);
      } else if (now_ns() > deadline) {
        pthread_mutex_lock(&mu);
        sleeping++;
        while (generation_of(atomic_load(&state)) == seen && atomic_load(&wakes) == woken) pthread_cond_wait(&start_cv, &mu);
        sleeping--;
        pthread_mutex_unlock(&mu);
        woken = atomic_load(&wakes);
        deadline = now_ns() + atomic_load_explicit(&spin_ns, memory_order_relaxed);
      }
    }
    seen = generation_of(atomic_load_explicit(&state, memory_order_acquire));
    run_parts(seen);
  }
  return 0;
}
void uop_wake(void) {
  atomic_fetch_add(&wakes, 1);  /* (before taking mu: a worker checks it under mu before it sleeps) */
  pthread_mutex_lock(&mu);
  if (sleeping) pthread_cond_broadcast(&start_cv);
  pthread_mutex_unlock(&mu);
}
int uop_parallel(uop_kernel fn, void **bufs, const long long *vals, int n) {
  if (n < 1 || n > 0xffff) return -1;
  pthread_mutex_lock(&launch_mu);
  pthread_mutex_lock(&mu);
  while (n_workers < n - 1) {
    pthread_t thread;
    if (pthread_create(&thread, 0, uop_worker, 0) != 0) {
      pthread_mutex_unlock(&mu); pthread_mutex_unlock(&launch_mu); return -1;
    }
    pthread_detach(thread);
    n_workers++;
  }
  job_fn = fn; job_bufs = bufs; job_vals = vals; job_n = n;
  atomic_store_explicit(&unfinished, n, memory_order_relaxed);
  unsigned long long gen = (generation_of(atomic_load(&state)) + 1) & 0xffffffffull;
  atomic_store_explicit(&state, gen << 32 | (unsigned long long)n << 16, memory_order_release);
  pthread_cond_broadcast(&start_cv);
  pthread_mutex_unlock(&mu);
  run_parts(gen);
  long long deadline = now_ns() + atomic_load_explicit(&spin_ns, memory_order_relaxed);
  for (int i = 1; atomic_load_explicit(&unfinished, memory_order_acquire) != 0; i++) {
    relax();
    if (i % 256 == 0 && now_ns() > deadline) {
      pthread_mutex_lock(&mu);
      while (atomic_load(&unfinished) != 0) pthread_cond_wait(&done_cv, &mu);
      pthread_mutex_unlock(&mu);
    }
  }
  pthread_mutex_unlock(&launch_mu);
  return 0;
}
"""


#: microseconds the launcher's threads spin for the next kernel before they sleep (`UOP_CPU_SPIN_US` overrides it)
DEFAULT_SPIN_US = 1000


def spin_microseconds() -> int:
    """How long the launcher's threads wait for the next kernel spinning before they sleep: `UOP_CPU_SPIN_US` (0: sleep
    at once, for a machine shared with other busy processes), else DEFAULT_SPIN_US. A wait spent asleep makes the next
    launch pay the wake-up (an eager attention measured 1.55 ms instead of 1.73 with 1 ms of spinning instead of 50 us)."""
    raw = os.environ.get("UOP_CPU_SPIN_US", "").strip()
    if not raw:
        return DEFAULT_SPIN_US
    try:
        value = int(raw)
    except ValueError:
        raise DeviceError(f"UOP_CPU_SPIN_US={raw!r}: expected a whole number of microseconds") from None
    if value < 0:
        raise DeviceError(f"UOP_CPU_SPIN_US={raw!r}: expected a whole number of microseconds (0 or more)")
    return value


@functools.cache
def host_vector_width() -> int:
    """float32 lanes of this CPU's widest vector registers (16 with AVX-512, else 8), for the opt heuristic; at most
    `$UOP_CPU_VECTOR_WIDTH` (see `narrowed_vector_width`)."""
    if (narrowed := narrowed_vector_width()) is not None:
        return narrowed
    return _cpuinfo_vector_width()


def _cpuinfo_vector_width() -> int:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return 8
    return 16 if " avx512f" in flags else 8


@functools.cache
def narrowed_vector_width() -> int | None:
    """`$UOP_CPU_VECTOR_WIDTH` (8 or 16) when it is set below this CPU's width: the CPU device then renders and compiles
    as on a machine without AVX-512 (8-lane vectors, `-mno-avx512f`), so an AVX-512 machine runs the code paths an AVX2
    machine takes (`UOP_CPU_VECTOR_WIDTH=8 uv run --frozen pytest`); None when unset or not narrower."""
    raw = os.environ.get("UOP_CPU_VECTOR_WIDTH", "").strip()
    if not raw:
        return None
    if raw not in ("8", "16"):
        raise DeviceError(f"UOP_CPU_VECTOR_WIDTH={raw!r}: expected 8 (as without AVX-512) or 16 (AVX-512)")
    return int(raw) if int(raw) < _cpuinfo_vector_width() else None


@functools.cache
def host_l2_bytes() -> int:
    """One core's second-level cache in bytes (Linux sysfs), 1 MiB when it cannot be read: the opt heuristic's matmul
    loop order depends on it."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            if not entry.startswith("index"):
                continue
            with open(f"{base}/{entry}/level") as f:
                level = f.read().strip()
            with open(f"{base}/{entry}/type") as f:
                kind = f.read().strip()
            if level == "2" and kind in ("Unified", "Data"):
                with open(f"{base}/{entry}/size") as f:
                    size = f.read().strip().upper()
                scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
                return int(size.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return 1 << 20


def c_program(name: str, source: str, n_buffers: int, outs: tuple[int, ...], n_cores: int = 1) -> UOp:
    """A hand-written C kernel as a PROGRAM node for this device (run it with `Tensor.custom_kernel`): `source`
    defines `void name(void **bufs, const long long *vals, int core_id, int n_cores)` (the ABI above) over `n_buffers`
    buffers, writing those at positions `outs` and only reading the rest; it is launched on `n_cores` cores, each
    calling it with its own `core_id`."""
    if not 0 < n_buffers or any(not 0 <= o < n_buffers for o in outs):
        raise DeviceError(f"a C program over {n_buffers} buffers cannot write buffers {outs}")
    info = ProgramInfo(name, globals=tuple(range(n_buffers)), outs=tuple(sorted(outs)),
                       ins=tuple(i for i in range(n_buffers) if i not in outs), global_size=(max(1, n_cores), 1, 1), local_size=(1, 1, 1))
    return UOp(Ops.PROGRAM, dtypes.void, (UOp.sink(), UOp(Ops.LINEAR, dtypes.void, ()), UOp(Ops.SOURCE, dtypes.void, (), source)), info)


def binary_program(name: str, source: str, binary: bytes, n_buffers: int, outs: tuple[int, ...], global_size: tuple[int, int, int],
                   local_size: tuple[int, int, int], target: str = "") -> UOp:
    """A kernel already in machine code (a code object amd-isa assembled) as a PROGRAM node, to run with
    `Tensor.custom_kernel` on the device it was made for: `name` is its kernel symbol, `source` its text (shown by
    DEBUG=4), and it reads `n_buffers` buffers, writing those at `outs`, launched over `global_size` workgroups of
    `local_size` work-items."""
    if not 0 < n_buffers or any(not 0 <= o < n_buffers for o in outs):
        raise DeviceError(f"a program over {n_buffers} buffers cannot write buffers {outs}")
    info = ProgramInfo(name, globals=tuple(range(n_buffers)), outs=tuple(sorted(outs)), ins=tuple(i for i in range(n_buffers) if i not in outs),
                       global_size=global_size, local_size=local_size, target=target)
    return UOp(Ops.PROGRAM, dtypes.void, (UOp.sink(), UOp(Ops.LINEAR, dtypes.void, ()), UOp(Ops.SOURCE, dtypes.void, (), source),
                                          UOp(Ops.BINARY, dtypes.void, (), binary)), info)


#: the CPU compiler's flags under a narrowed vector width (`narrowed_vector_width`): no AVX-512, no 512-bit preference
NARROW_FLAGS = (*(f for f in C_FLAGS if not f.startswith("-mprefer-vector-width")), "-mno-avx512f")


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


_opened_devices: weakref.WeakSet[CPUDevice] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # a launcher build under way in the parent (see `hcq_runtime.prepare_cpu`) has no thread in a forked child: the
    # child gets a free lock and builds the launcher itself when it needs it
    for dev in list(_opened_devices):
        dev._launcher_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class CPUDevice(CompiledDevice):
    """`CPU`, `CPU:1`, ...: each name is a separate device with its own allocator."""

    def __init__(self, name: str):
        self.name = name
        self.allocator = CPUAllocator()
        # (narrowed: compiled without AVX-512 too, as on a machine that has none)
        self.compiler = CCompiler(C_FLAGS if narrowed_vector_width() is None else NARROW_FLAGS, direct_link=True)
        self.renderer = CRenderer(vector_width=host_vector_width(), l2_bytes=host_l2_bytes())
        self.n_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self._launcher_lock = threading.Lock()
        _opened_devices.add(self)

    def program(self, name: str, binary: bytes) -> CPUProgram:
        """Load a compiled binary and return its entry point `name`."""
        return CPUProgram(self, name, binary)

    @property
    def launcher(self) -> Any:
        """The native launcher of multi-core kernels (`uop_parallel`), compiled at its first use; a build under way (see
        `hcq_runtime.prepare_cpu`) is waited for, never repeated."""
        if (fn := self.__dict__.get("_launcher")) is not None:
            return fn
        with self._launcher_lock:
            if (fn := self.__dict__.get("_launcher")) is None:
                lib = load_shared_object(self.compiler.compile(_LAUNCHER_SRC))
                lib.uop_set_spin.argtypes = [ctypes.c_longlong]
                lib.uop_set_spin(spin_microseconds() * 1000)
                fn = lib.uop_parallel
                fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
                fn.restype = ctypes.c_int
                lib.uop_wake.argtypes, lib.uop_wake.restype = [], None
                self._wake = lib.uop_wake
                self.__dict__["_launcher"] = fn
        return fn

    def expect_work(self) -> None:
        """A hint that kernels will launch soon (a realize has started): the launcher's sleeping threads wake and spin,
        so the launch does not wait for their wake-up. Nothing until a kernel has used the launcher."""
        if (wake := self.__dict__.get("_wake")) is not None:
            wake()

    def synchronize(self) -> None:
        """CPU programs run to completion before their call returns."""
