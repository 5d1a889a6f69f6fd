"""PM4 compute packets (gfx10+ layouts: gfx11 / gfx12; the gfx9 forms where they differ): each encoder returns the packet's command words.

A word is an int or a `Sym` (a value patched in later), so the same encoders build both fixed streams and
streams with link-time / run-time holes. Field layouts come from `regs`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..hcq2.cmdbuf import Sym, Word, dwords, qword
from . import regs


def header(opcode: int, body_dwords: int) -> int:
    """The type-3 header of a compute packet with `body_dwords` dwords after it."""
    if not 1 <= body_dwords <= regs.PM4_COUNT_MASK + 1:
        raise ValueError(f"a PM4 packet body has 1..{regs.PM4_COUNT_MASK + 1} dwords, not {body_dwords}")
    return (regs.PM4_TYPE3 << regs.PM4_TYPE_SHIFT) | ((body_dwords - 1) << regs.PM4_COUNT_SHIFT) | (opcode << regs.PM4_OPCODE_SHIFT) \
        | regs.PM4_SHADER_TYPE_COMPUTE


def packet(name: str, body: Sequence[Word]) -> list[Word]:
    """A type-3 packet `name` (a key of `regs.PM4`) with `body`."""
    return [header(regs.PM4[name], dwords(body)), *body]


def nop(body_dwords: int = 1) -> list[Word]:
    """A NOP that skips `body_dwords` dwords (padding)."""
    return packet("NOP", [0] * body_dwords)


def set_sh_reg(address: int, *values: Word) -> list[Word]:
    """SET_SH_REG: write consecutive SH registers starting at absolute dword `address`."""
    if not values:
        raise ValueError("SET_SH_REG needs at least one value")
    if not regs.SH_REG_START <= address < regs.SH_REG_END or address + dwords(values) > regs.SH_REG_END:
        raise ValueError(f"registers {address:#x}+{dwords(values)} are outside the SH register space")
    return packet("SET_SH_REG", [address - regs.SH_REG_START, *values])


def dispatch_direct(groups: Sequence[Word], *, wave32: bool = True) -> list[Word]:
    """DISPATCH_DIRECT of `groups` = (x, y, z) workgroups (COMPUTE_NUM_THREAD_* hold the workgroup size)."""
    initiator = regs.INITIATOR_COMPUTE_SHADER_EN | regs.INITIATOR_FORCE_START_AT_000 | (regs.INITIATOR_CS_W32_EN if wave32 else 0)
    return packet("DISPATCH_DIRECT", [*groups, initiator])


def acquire_mem(gcr_cntl: int = regs.ACQUIRE_ALL, base: int = 0, size: int = (1 << 64) - 1, *, gfx9: bool = False) -> list[Word]:
    """ACQUIRE_MEM: invalidate / write back the caches named in `gcr_cntl` over [base, base + size).

    On gfx9 `gcr_cntl` is the CP_COHER_CNTL word (`regs.GFX9_COHER_*`), which leads a 6-dword body (no GCR word)."""
    if gfx9:
        return packet("ACQUIRE_MEM", [gcr_cntl, *qword(size), *qword(base), regs.GFX9_ACQUIRE_POLL_INTERVAL])
    return packet("ACQUIRE_MEM", [0, *qword(size), *qword(base), 0, gcr_cntl])


def release_mem(address: int | Sym, value: int | Sym, data_sel: int, *, int_sel: int = regs.INT_SEL_NONE, ctxid: int = 0,
                cache_flush: bool = False, gfx9: bool = False) -> list[Word]:
    """RELEASE_MEM at end of pipe: once prior work is done, write `value` (or the GPU clock) to `address`.

    `data_sel` is `DATA_SEL_32_LOW` (signals), `DATA_SEL_64`, `DATA_SEL_GPU_CLOCK` (timestamps) or `DATA_SEL_NONE`.
    gfx9 flushes with the EOP TC write-back / non-coherent actions instead of GCR bits and has no interrupt context."""
    flush = (regs.GFX9_EOP_TC_WB_ACTION | regs.GFX9_EOP_TC_NC_ACTION) if gfx9 else regs.RELEASE_GCR_FLUSH_ALL
    event = regs.EVENT_CACHE_FLUSH_AND_INV_TS | (regs.EVENT_INDEX_END_OF_PIPE << 8) | (flush if cache_flush else 0)
    ctxid = 0 if gfx9 else ctxid
    select = (data_sel << regs.RELEASE_DATA_SEL_SHIFT) | (int_sel << regs.RELEASE_INT_SEL_SHIFT)
    return packet("RELEASE_MEM", [event, select, *qword(address), *qword(value), ctxid])


def wait_reg_mem(address: int | Sym, reference: Word, *, mask: int = 0xFFFFFFFF, function: int = regs.WAIT_GEQ,
                 poll_interval: int = 4) -> list[Word]:
    """WAIT_REG_MEM on memory: stall the queue until `(mem32[address] & mask) <function> reference`."""
    if function not in regs.WAIT_FUNCTIONS:
        raise ValueError(f"WAIT_REG_MEM function {function} is not one of {sorted(regs.WAIT_FUNCTIONS)}")
    info = (function << regs.WAIT_FUNCTION_SHIFT) | (1 << regs.WAIT_MEM_SPACE_SHIFT)
    return packet("WAIT_REG_MEM", [info, *qword(address), reference, mask, poll_interval])


def event_write(event_type: int, event_index: int) -> list[Word]:
    """EVENT_WRITE (e.g. CS_PARTIAL_FLUSH: wait for prior dispatches to finish)."""
    return packet("EVENT_WRITE", [event_type | (event_index << 8)])


def indirect_buffer(address: int | Sym, size_dwords: int) -> list[Word]:
    """INDIRECT_BUFFER: run `size_dwords` dwords of commands at `address`, then continue after this packet."""
    if not 0 < size_dwords <= regs.INDIRECT_BUFFER_SIZE_MASK:
        raise ValueError(f"an indirect buffer holds 1..{regs.INDIRECT_BUFFER_SIZE_MASK} dwords, not {size_dwords}")
    return packet("INDIRECT_BUFFER", [*qword(address), size_dwords | regs.INDIRECT_BUFFER_VALID])
