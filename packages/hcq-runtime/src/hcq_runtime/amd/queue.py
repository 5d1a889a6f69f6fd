"""`AMDComputeQueue` (PM4) and `AMDCopyQueue` (SDMA): the AMD `HWQueue`s, building a `CommandBuffer` of commands.

Every address or value may be a `Sym`, so a queue can be encoded once and completed by link-time and run-time
patches (`CommandBuffer.link` / `CommandBuffer.patch`) before each submit. gfx11 / gfx12 use the gfx10+ packet forms;
gfx9 (CDNA) the soc15 forms of ACQUIRE_MEM and RELEASE_MEM and its own register addresses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..hcq2.cmdbuf import Sym, Word, qword
from ..hcq2.hwqueue import HWQueue
from . import pm4, regs, sdma
from .errors import AMDError

# the private segment buffer descriptor (word1 bit 31: swizzle enable; word3 as LLVM/ROCm): gfx10+ FORMAT 32_UINT, OOB_SELECT 2,
# ADD_TID; gfx9 DST_SEL XYZW, NUM_FORMAT UINT, DATA_FORMAT 32, ELEMENT_SIZE 1, INDEX_STRIDE 3 (64 lanes), ADD_TID
SCRATCH_RSRC_WORD2, SCRATCH_RSRC_WORD3 = 0xFFFFFFFF, 0x20C14000
GFX9_SCRATCH_RSRC_WORD3 = 4 | 5 << 3 | 6 << 6 | 7 << 9 | 4 << 12 | 4 << 15 | 1 << 19 | 3 << 21 | 1 << 23
SCRATCH_SWIZZLE = 1 << 63  # bit 31 of descriptor word 1, as one 64-bit add so a patched address keeps it


@dataclass(frozen=True)
class ProgramInfo:
    """What a dispatch needs to know about a loaded kernel: where its code is and its descriptor's settings."""

    address: int | Sym
    rsrc1: int
    rsrc2: int
    rsrc3: int
    wave32: bool
    user_sgprs: tuple[str, ...]
    kernarg_size: int


class AMDComputeQueue(HWQueue):
    """PM4 commands for the compute queue of a gfx9 (CDNA), gfx11 or gfx12 GPU."""

    def __init__(self, target: tuple[int, int, int] = (11, 0, 0)):
        if target[0] not in regs.COMPUTE_REGS:
            raise AMDError(f"no PM4 encoders for gfx{target[0]}: supported are gfx{', gfx'.join(map(str, sorted(regs.COMPUTE_REGS)))}")
        super().__init__()
        self.gfx9 = target[0] == 9
        self.regs = regs.COMPUTE_REGS[target[0]]

    def memory_barrier(self) -> list[Word]:
        """ACQUIRE_MEM before a dispatch: invalidate the caches that may hold stale data (not L2 write-back)."""
        if self.gfx9:
            return pm4.acquire_mem(regs.GFX9_COHER_SH_ICACHE | regs.GFX9_COHER_SH_KCACHE | regs.GFX9_COHER_TCL1, gfx9=True)
        return pm4.acquire_mem(regs.ACQUIRE_ALL & ~(regs.ACQUIRE_GLI_INV | regs.ACQUIRE_GL2_INV | regs.ACQUIRE_GL2_WB))

    def exec(self, program: ProgramInfo, kernargs: int | Sym, groups: Sequence[int], local: Sequence[int], *,
             dispatch_packet: int | Sym | None = None, scratch: int | Sym = 0, tmpring_size: int = 0) -> AMDComputeQueue:
        """Dispatch `program` over `groups` workgroups of `local` work-items, its arguments at `kernargs`.

        The user SGPRs follow the descriptor's order: the private segment buffer (scratch), the dispatch packet pointer
        (`dispatch_packet`, required when the kernel reads it), the kernarg pointer and, on gfx9 targets without
        architected flat scratch (gfx90a), the flat scratch base (`scratch`; the kernel adds its wave's offset)."""
        if len(groups) != 3 or len(local) != 3:
            raise AMDError(f"dispatch sizes are 3-D: got {len(groups)} workgroup counts and {len(local)} workgroup sizes")
        user: list[Word] = []
        for name in program.user_sgprs:
            if name == "kernarg_segment_ptr":
                user += qword(kernargs)
            elif name == "dispatch_ptr":
                if dispatch_packet is None:
                    raise AMDError("the kernel reads the dispatch packet: pass dispatch_packet= (64 bytes after its kernargs)")
                user += qword(dispatch_packet)
            elif name == "private_segment_buffer":
                user += [*qword(scratch + SCRATCH_SWIZZLE), SCRATCH_RSRC_WORD2, GFX9_SCRATCH_RSRC_WORD3 if self.gfx9 else SCRATCH_RSRC_WORD3]
            elif name == "flat_scratch_init" and self.gfx9:
                user += qword(scratch)
            else:
                raise AMDError(f"the kernel takes the {name} user SGPR, which this backend does not set up")
        emit, r = self.cmd.emit, self.regs
        emit(self.memory_barrier())
        address = program.address >> 8
        emit(pm4.set_sh_reg(r.pgm_lo, *qword(address)))
        emit(pm4.set_sh_reg(r.pgm_rsrc1, program.rsrc1, program.rsrc2))
        emit(pm4.set_sh_reg(r.pgm_rsrc3, program.rsrc3))
        emit(pm4.set_sh_reg(r.tmpring_size, tmpring_size))
        emit(pm4.set_sh_reg(r.dispatch_scratch_base_lo, *qword(scratch >> 8)))
        emit(pm4.set_sh_reg(r.restart_x, 0, 0, 0))
        if user:
            emit(pm4.set_sh_reg(r.user_data_0, *user))
        emit(pm4.set_sh_reg(r.resource_limits, 0))
        emit(pm4.set_sh_reg(r.start_x, 0, 0, 0, *local, 0, 0))
        emit(pm4.dispatch_direct(groups, wave32=program.wave32))
        emit(pm4.event_write(regs.EVENT_CS_PARTIAL_FLUSH, regs.EVENT_INDEX_CS_PARTIAL_FLUSH))
        return self

    def wait(self, signal_address: int | Sym, value: Word) -> AMDComputeQueue:
        """Stall the queue until the signal's 32-bit value is >= `value`."""
        self.cmd.emit(pm4.wait_reg_mem(signal_address, value, function=regs.WAIT_GEQ))
        return self

    def signal(self, signal_address: int | Sym, value: int | Sym) -> AMDComputeQueue:
        """Once prior work is done (caches written back), set the signal to `value` (low 32 bits)."""
        self.cmd.emit(pm4.release_mem(signal_address, value, regs.DATA_SEL_32_LOW, cache_flush=True, gfx9=self.gfx9))
        return self

    def timestamp(self, address: int | Sym) -> AMDComputeQueue:
        """Write the GPU clock (64-bit) at `address` once prior work is done."""
        self.cmd.emit(pm4.release_mem(0, 0, regs.DATA_SEL_NONE, gfx9=self.gfx9))
        self.cmd.emit(pm4.release_mem(address, 0, regs.DATA_SEL_GPU_CLOCK, gfx9=self.gfx9))
        self.cmd.emit(pm4.acquire_mem(regs.GFX9_COHER_ALL, gfx9=True) if self.gfx9 else pm4.acquire_mem())
        return self


class AMDCopyQueue(HWQueue):
    """SDMA commands for the copy queue of a gfx9 (sdma 4), gfx11 or gfx12 GPU."""

    def __init__(self, target: tuple[int, int, int] = (11, 0, 0)):
        super().__init__()
        self.gfx9 = target[0] == 9

    def copy(self, dst: int | Sym, src: int | Sym, nbytes: int) -> AMDCopyQueue:
        """Copy `nbytes` from `src` to `dst` (GPU addresses)."""
        self.cmd.emit(sdma.copy(dst, src, nbytes))
        return self

    def wait(self, signal_address: int | Sym, value: Word) -> AMDCopyQueue:
        """Stall the queue until the signal's 32-bit value is >= `value`."""
        self.cmd.emit(sdma.poll_regmem(signal_address, value, function=regs.WAIT_GEQ))
        return self

    def signal(self, signal_address: int | Sym, value: Word) -> AMDCopyQueue:
        """Once prior copies are done, set the signal to `value` (32 bits)."""
        self.cmd.emit(sdma.fence(signal_address, value, gfx9=self.gfx9))
        return self

    def timestamp(self, address: int | Sym) -> AMDCopyQueue:
        """Write the GPU clock (64-bit) at `address`."""
        self.cmd.emit(sdma.timestamp(address))
        return self
