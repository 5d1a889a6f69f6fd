"""The one ring writer of the AMD backend: C that puts command words on a queue's ring and publishes the write pointer.

`RING_PUT` defines `uop_ring_put`. Compiled submitters include it and call it for each part (`ring_write`), followed
by the doorbell store; eager submits (`AMDDevice._submit_words`) call the same function compiled once per process
(`native_ring_put`) and ring the doorbell from Python. The write pointer is read from, and published to, the queue's
write-pointer memory (the host keeps no other copy), so compiled and eager submits interleave on one ring.

A PM4 ring counts dwords and a packet may wrap around its end; an SDMA ring counts bytes and a packet must not straddle
the end, so the tail is padded with NOPs (zeros), published, and the packet starts over at the front. Each put stores
the new write pointer and then the doorbell. A ring without room for the words returns -1 with the words unwritten
(the padding, once there is room for it, is put either way: a retry starts at the front); otherwise the new write
pointer. `tests/test_amd_ring.py` keeps the same rules in Python, as the oracle the native writer is tested against.
"""

from __future__ import annotations

import ctypes
import functools
from typing import TYPE_CHECKING, Any

from ..hcq2.submitter import SubmitCode

if TYPE_CHECKING:
    from .device import RingQueue

RING_PUT = r"""
static int64_t uop_ring_put(volatile uint32_t *ring, uint64_t size, const volatile uint64_t *rptr, volatile uint64_t *wptr,
                            volatile uint64_t *doorbell, const volatile uint32_t *words, uint64_t n, int sdma) {
  uint64_t put = *wptr;
  if (sdma) {
    uint64_t at = (put / 4) % size;
    if (at + n > size) {
      if ((put - *rptr) / 4 + (size - at) > size) return -1;
      for (uint64_t i = at; i < size; i++) ring[i] = 0;
      put += 4 * (size - at);
      at = 0;
      __atomic_thread_fence(__ATOMIC_SEQ_CST);
      *wptr = put;
      *doorbell = put;
    }
    if ((put - *rptr) / 4 + n > size) return -1;
    for (uint64_t i = 0; i < n; i++) ring[at + i] = words[i];
    put += 4 * n;
  } else {
    if (put - *rptr + n > size) return -1;
    for (uint64_t i = 0; i < n; i++) ring[(put + i) % size] = words[i];
    put += n;
  }
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  *wptr = put;
  *doorbell = put;
  return (int64_t)put;
}
"""

_EXPORT = """
int64_t ring_put(uint64_t ring, uint64_t size, uint64_t rptr, uint64_t wptr, uint64_t doorbell, uint64_t words, uint64_t n,
                 int64_t sdma) {
  return uop_ring_put((volatile uint32_t *)(uintptr_t)ring, size, (const volatile uint64_t *)(uintptr_t)rptr,
                      (volatile uint64_t *)(uintptr_t)wptr, (volatile uint64_t *)(uintptr_t)doorbell,
                      (const volatile uint32_t *)(uintptr_t)words, n, (int)sdma);
}
"""


@functools.cache
def native_ring_put() -> Any:
    """`ring_put(ring, size, rptr, wptr, doorbell, words, n, sdma)` -> new write pointer or -1 (host addresses as ints): the ring
    writer compiled on its own, once per process (the host C compiler's cache keeps it across processes)."""
    from ..compiler import CCompiler  # noqa: PLC0415
    from ..cpu import load_shared_object  # noqa: PLC0415

    lib = load_shared_object(CCompiler().compile("#include <stdint.h>\n" + RING_PUT + _EXPORT))
    fn = lib.ring_put
    fn.argtypes = [ctypes.c_uint64] * 7 + [ctypes.c_int64]
    fn.restype = ctypes.c_int64
    return fn


def ring_write(code: SubmitCode, queue: RingQueue, source: int, dwords: int, *, sdma: bool) -> None:
    """Emit the put of `dwords` command words at host address `source` on `queue`'s ring (with its doorbell store); a
    full ring stops the submitter with NO_ROOM."""
    desc = queue.desc
    code.helper("uop_ring_put", RING_PUT)
    code.emit(f"if (uop_ring_put({code.pointer(desc.ring.ctypes.data, 'uint32_t')}, {len(desc.ring)}u, "
              f"{code.pointer(desc.read_ptr.ctypes.data, 'uint64_t')}, {code.pointer(desc.write_ptr.ctypes.data, 'uint64_t')}, "
              f"{code.pointer(desc.doorbell.address, 'uint64_t')}, {code.pointer(source, 'uint32_t')}, {dwords}u, {int(sdma)}) < 0) "
              f"{code.stop('NO_ROOM')}")
