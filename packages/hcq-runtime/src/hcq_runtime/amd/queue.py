"""`AMDComputeQueue` (PM4) and `AMDCopyQueue` (SDMA): build a `CommandBuffer` of commands for one submit.

Every address or value may be a `Sym`, so a queue can be encoded once and completed by link-time and run-time
patches (`CommandBuffer.link` / `CommandBuffer.patch`) before each submit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import pm4, regs, sdma
from .cmdbuf import CommandBuffer, Sym, Word, qword
from .errors import AMDError

# the private segment buffer descriptor for architected flat scratch: (word1 bit 31: swizzle enable; word3 as LLVM/ROCm)
SCRATCH_RSRC_WORD2, SCRATCH_RSRC_WORD3 = 0xFFFFFFFF, 0x20C14000


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


class AMDComputeQueue:
    """PM4 commands for the compute queue of a gfx11/gfx12 GPU."""

    def __init__(self, target: tuple[int, int, int] = (11, 0, 0)):
        if target[0] not in (11, 12):
            raise AMDError(f"the PM4 encoders use the gfx10+ packet layouts; gfx{target[0]} is not supported yet")
        self.regs = regs.COMPUTE_REGS[target[0]]
        self.cmd = CommandBuffer()

    def exec(self, program: ProgramInfo, kernargs: int | Sym, groups: Sequence[int], local: Sequence[int], *,
             dispatch_packet: int | Sym | None = None, scratch: int | Sym = 0, tmpring_size: int = 0) -> AMDComputeQueue:
        """Dispatch `program` over `groups` workgroups of `local` work-items, its arguments at `kernargs`.

        The user SGPRs follow the descriptor's order: the private segment buffer (scratch), the dispatch packet pointer
        (`dispatch_packet`, required when the kernel reads it) and the kernarg pointer."""
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
                if isinstance(scratch, Sym):
                    raise AMDError("the scratch buffer descriptor needs the scratch address at encode time")
                user += [scratch & 0xFFFFFFFF, (scratch >> 32) | 1 << 31, SCRATCH_RSRC_WORD2, SCRATCH_RSRC_WORD3]
            else:
                raise AMDError(f"the kernel takes the {name} user SGPR, which this backend does not set up")
        emit, r = self.cmd.emit, self.regs
        emit(pm4.acquire_mem(regs.ACQUIRE_ALL & ~(regs.ACQUIRE_GLI_INV | regs.ACQUIRE_GL2_INV | regs.ACQUIRE_GL2_WB)))
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
        self.cmd.emit(pm4.release_mem(signal_address, value, regs.DATA_SEL_32_LOW, cache_flush=True))
        return self

    def timestamp(self, address: int | Sym) -> AMDComputeQueue:
        """Write the GPU clock (64-bit) at `address` once prior work is done."""
        self.cmd.emit(pm4.release_mem(0, 0, regs.DATA_SEL_NONE))
        self.cmd.emit(pm4.release_mem(address, 0, regs.DATA_SEL_GPU_CLOCK))
        self.cmd.emit(pm4.acquire_mem())
        return self


class AMDCopyQueue:
    """SDMA commands for the copy queue."""

    def __init__(self) -> None:
        self.cmd = CommandBuffer()

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
        self.cmd.emit(sdma.fence(signal_address, value))
        return self

    def timestamp(self, address: int | Sym) -> AMDCopyQueue:
        """Write the GPU clock (64-bit) at `address`."""
        self.cmd.emit(sdma.timestamp(address))
        return self
