"""The C a compiled submitter runs to put commands on an AMD queue: the twin of `AMDDevice.submit_words`.

The write pointer is read from, and published to, the queue's write-pointer memory (the host keeps no other copy), so
compiled and Python submits interleave on one ring. A PM4 ring counts dwords and a packet may wrap around its end; an
SDMA ring counts bytes and a packet must not straddle the end, so the tail is padded with NOPs (zeros) and the packet
starts over at the front. A ring without room for the words ends the call with NO_ROOM before anything is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hcq2.submitter import SubmitCode

if TYPE_CHECKING:
    from .device import RingQueue


def ring_write(code: SubmitCode, queue: RingQueue, source: int, dwords: int, *, sdma: bool) -> None:
    """Emit the copy of `dwords` command words at host address `source` into `queue`'s ring, the write-pointer update
    and the doorbell store."""
    desc = queue.desc
    size = len(desc.ring)
    code.emit(f"volatile uint32_t *ring = {code.pointer(desc.ring.ctypes.data, 'uint32_t')};",
              f"const volatile uint32_t *words = {code.pointer(source, 'uint32_t')};",
              f"volatile uint64_t *rptr = {code.pointer(desc.read_ptr.ctypes.data, 'uint64_t')};",
              f"volatile uint64_t *wptr = {code.pointer(desc.write_ptr.ctypes.data, 'uint64_t')};",
              "uint64_t put = *wptr;")
    if sdma:
        code.emit(f"uint64_t at = (put / 4) % {size}u, pad = at + {dwords}u > {size}u ? {size}u - at : 0;",
                  f"if ((put - *rptr) / 4 + pad + {dwords}u > {size}u) {code.stop('NO_ROOM')}",
                  "for (uint64_t i = 0; i < pad; i++) ring[at + i] = 0;",
                  "if (pad) at = 0;",
                  f"for (uint64_t i = 0; i < {dwords}u; i++) ring[at + i] = words[i];",
                  f"put += 4 * (pad + {dwords}u);")
    else:
        code.emit(f"if (put - *rptr + {dwords}u > {size}u) {code.stop('NO_ROOM')}",
                  f"for (uint64_t i = 0; i < {dwords}u; i++) ring[(put + i) % {size}u] = words[i];",
                  f"put += {dwords}u;")
    code.emit("__atomic_thread_fence(__ATOMIC_SEQ_CST);",
              "*wptr = put;",
              f"*{code.pointer(desc.doorbell.address, 'uint64_t')} = put;")
