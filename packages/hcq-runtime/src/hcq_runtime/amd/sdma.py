"""SDMA packets (sdma 5 / 6 of gfx10+, and sdma 4 of gfx9 where it differs): each encoder returns the packet's command words (ints or `Sym`s)."""

from __future__ import annotations

from ..hcq2.cmdbuf import Sym, Word, qword
from . import regs


def sdma_header(name: str, sub_op: int = 0, extra: int = 0) -> int:
    """Header dword: op | sub_op << 8 | packet-specific bits."""
    return regs.SDMA[name] | (sub_op << regs.SDMA_SUB_OP_SHIFT) | extra


def copy_linear(dst: int | Sym, src: int | Sym, nbytes: int) -> list[Word]:
    """COPY_LINEAR of `nbytes` (1..SDMA_MAX_COPY) from `src` to `dst`; split larger copies into several packets."""
    if not 0 < nbytes <= regs.SDMA_MAX_COPY:
        raise ValueError(f"one COPY_LINEAR moves 1..{regs.SDMA_MAX_COPY:#x} bytes, not {nbytes}")
    return [sdma_header("COPY", regs.SDMA_SUBOP_COPY_LINEAR), nbytes - 1, 0, *qword(src), *qword(dst)]


def copy(dst: int | Sym, src: int | Sym, nbytes: int) -> list[Word]:
    """As many COPY_LINEAR packets as `nbytes` needs."""
    words: list[Word] = []
    for start in range(0, nbytes, regs.SDMA_MAX_COPY):
        step = min(regs.SDMA_MAX_COPY, nbytes - start)
        words += copy_linear(dst + start if start else dst, src + start if start else src, step)
    return words


def fence(address: int | Sym, value: Word, *, gfx9: bool = False) -> list[Word]:
    """FENCE: write the 32-bit `value` to `address` once prior packets are done (uncached, so the host sees it).

    The sdma 4 engine of gfx9 has no MTYPE field in the header."""
    extra = 0 if gfx9 else regs.SDMA_MTYPE_UC << regs.SDMA_FENCE_MTYPE_SHIFT
    return [sdma_header("FENCE", extra=extra), *qword(address), value]


def poll_regmem(address: int | Sym, reference: Word, *, mask: int = 0xFFFFFFFF, function: int = regs.WAIT_GEQ,
                interval: int = 4, retry: int = 0xFFF) -> list[Word]:
    """POLL_REGMEM on memory: stall the queue until `(mem32[address] & mask) <function> reference`."""
    if function not in regs.WAIT_FUNCTIONS:
        raise ValueError(f"POLL_REGMEM function {function} is not one of {sorted(regs.WAIT_FUNCTIONS)}")
    head = sdma_header("POLL_REGMEM", extra=(function << regs.SDMA_POLL_FUNC_SHIFT) | (1 << regs.SDMA_POLL_MEM_SHIFT))
    return [head, *qword(address), reference, mask, (interval << regs.SDMA_POLL_INTERVAL_SHIFT) | (retry << regs.SDMA_POLL_RETRY_SHIFT)]


def timestamp(address: int | Sym) -> list[Word]:
    """TIMESTAMP (get global): write the 64-bit GPU clock to `address`."""
    return [sdma_header("TIMESTAMP", regs.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL), *qword(address)]


def trap(context: int) -> list[Word]:
    """TRAP: raise an interrupt with `context` (the KFD event id)."""
    return [sdma_header("TRAP"), context & regs.SDMA_TRAP_CONTEXT_MASK]


def nop(dwords: int = 1) -> list[Word]:
    """A NOP occupying `dwords` dwords (header count = dwords - 1)."""
    if not 1 <= dwords <= regs.SDMA_NOP_COUNT_MASK + 1:
        raise ValueError(f"an SDMA NOP spans 1..{regs.SDMA_NOP_COUNT_MASK + 1} dwords, not {dwords}")
    return [sdma_header("NOP", extra=(dwords - 1) << regs.SDMA_NOP_COUNT_SHIFT), *([0] * (dwords - 1))]
