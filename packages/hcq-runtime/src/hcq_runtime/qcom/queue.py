"""`QCOMComputeQueue`: the CP packets of one submit on an Adreno 6xx, with each dispatch's kernel arguments laid out
as runs at byte offsets in a data area the commands address; `HostCopyQueue`: the copies of a QCOM device.

Values known later are `Sym`s: `link("data")` is where the kernel arguments land (after the commands when the queue is
built alone, wherever the hcq2 engine places its batch data otherwise), `link("stack")`, `link("dummy")` and
`link("border_color")` are the device's private-memory stack, cache-flush target and sampler border colours, resolved
once when the device links the commands; anything else (a timeline value) may be a run-time `Sym`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ..hcq2.cmdbuf import CommandBuffer, Sym, Word, link, qword
from ..hcq2.hwqueue import HWQueue
from . import packets as pk
from .errors import QCOMError
from .program_lib import QCOMProgramInfo

#: each dispatch's arguments start at a multiple of this many bytes of the data area (and the data area after the commands)
KERNARGS_ALIGN = 0x100
#: the work-group id and local id registers an OpenCL program reads (SP_REG_PROG_ID_0..3: none of the graphics ids)
PROG_ID_WORDS = (0xFCFCFCFC, 0xFCFCFCFC, 0xFCFCFCFC, pk.INVALID_REGID)
CONSTLEN_VEC4S = 256  # the constant file the program may address; the 8-bit CONSTLEN field holds it as 256 & 0xFF
CS_TSIZE, CS_USIZE = 0x80, 0x40

Piece = Word | bytes  # a run of kernel arguments is made of dwords, patched words and raw bytes (16-bit constants)


@dataclass(frozen=True)
class Image:
    """A buffer read as a 2-D RGBA image (texture) or written as one (UAV): `height` x `width` texels of 4 floats of
    `itemsize` bytes (2: half, 4: float), rows `pitch` bytes apart (default: packed rows)."""

    address: int | Sym
    height: int
    width: int
    itemsize: int = 4
    pitch: int | None = None

    def descriptor(self, uav: bool) -> list[Word]:
        """The 16-dword A6XX texture constant of this image (a UAV descriptor leaves the swizzle and tiling zero)."""
        row_bytes = self.width * 4 * self.itemsize
        pitch = row_bytes if self.pitch is None else self.pitch
        if pitch & 63 or pitch < row_bytes:
            raise QCOMError(f"an image row of {row_bytes} bytes cannot have a pitch of {pitch} bytes: the pitch is a multiple of 64 bytes "
                            "that holds the row; allocate the image with its ImageDType")
        fmt = pk.FMT6_32_32_32_32_FLOAT if self.itemsize == 4 else pk.FMT6_16_16_16_16_FLOAT
        word0 = fmt << pk.TEX_CONST_0_FMT_SHIFT
        if not uav:  # swizzle x, y, z, w to themselves, and bit 3 set as Qualcomm's OpenCL driver sets it
            word0 |= 0x8 | sum(channel << shift for channel, shift in enumerate(pk.TEX_CONST_0_SWIZ_SHIFTS))
        pitchalign = (pitch & -pitch).bit_length() - 1 - 6
        return [word0, self.width << pk.TEX_CONST_1_WIDTH_SHIFT | self.height << pk.TEX_CONST_1_HEIGHT_SHIFT,
                pk.A6XX_TEX_2D << pk.TEX_CONST_2_TYPE_SHIFT | pitch << pk.TEX_CONST_2_PITCH_SHIFT | pitchalign << pk.TEX_CONST_2_PITCHALIGN_SHIFT,
                0, *qword(self.address), 0x400000 << pk.TEX_CONST_6_PLANE_PITCH_SHIFT, 13, 0, 0, 0, 0, 0, 0, 0, 0]


def layout_kernargs(runs: Sequence[tuple[int, Sequence[Piece]]], size: int) -> CommandBuffer:
    """The `size` bytes of a dispatch's constant space: each run's pieces at its byte offset, zeros between and after.

    Runs may come in any order; overlapping runs, or a run past `size`, are an error (an argument would be lost)."""
    out, end = CommandBuffer(), 0
    for offset, pieces in sorted((run for run in runs if run[1]), key=lambda run: run[0]):
        if offset < end:
            raise QCOMError(f"a kernel-argument run at byte {offset} overlaps the one ending at byte {end}")
        out.data += bytes(offset - end)
        for piece in pieces:
            if isinstance(piece, bytes):
                out.data += piece
            else:
                out.emit([piece])
        end = len(out.data)
    if end > size:
        raise QCOMError(f"the kernel arguments need {end} bytes, more than the program's {size}-byte constant space")
    out.data += bytes(size - end)
    return out


class QCOMComputeQueue(HWQueue):
    """CP commands for the compute pipe of an Adreno 6xx: dispatches, signals, waits, timestamps, barriers."""

    def __init__(self) -> None:
        super().__init__()
        self.data = CommandBuffer()  # the dispatches' kernel arguments (unless exec is given the batch's data area)
        #: bytes of private-memory stack the dispatches need (the device grows its stack to this)
        self.stack_bytes = 0

    def _cache_flush(self, *, write_back: bool = True, invalidate: bool = False, sync: bool = True, memsync: bool = False) -> None:
        emit = self.cmd.emit
        if write_back:  # a timestamped flush writes back dirty lines; its write lands in the device's dummy page
            emit(pk.event_write(pk.CACHE_FLUSH_TS, link("dummy"), 0))
        if invalidate:
            emit(pk.event_write(pk.CACHE_INVALIDATE))
        if memsync:
            emit(pk.pkt7(pk.CP_WAIT_MEM_WRITES))
        if sync:
            emit(pk.pkt7(pk.CP_WAIT_FOR_IDLE))

    def memory_barrier(self) -> QCOMComputeQueue:
        """Write back and invalidate the caches and wait for the GPU to go idle."""
        self._cache_flush(write_back=True, invalidate=True, sync=True, memsync=True)
        return self

    def signal(self, address: int | Sym, value: Word) -> QCOMComputeQueue:
        """Once prior work is done, write `value` (32 bits) to the signal at `address`."""
        self.cmd.emit(pk.pkt7(pk.CP_WAIT_FOR_IDLE))
        self.cmd.emit(pk.event_write(pk.CACHE_FLUSH_TS, address, value))
        self._cache_flush(write_back=True, sync=False)
        return self

    def wait(self, address: int | Sym, value: Word) -> QCOMComputeQueue:
        """Stall the queue until the signal's 32-bit value is >= `value`."""
        self.cmd.emit(pk.wait_reg_mem(address, value))
        return self

    def timestamp(self, address: int | Sym) -> QCOMComputeQueue:
        """Once prior work is done, write the 64-bit always-on counter (19.2 MHz) to `address`."""
        self.cmd.emit(pk.pkt7(pk.CP_WAIT_FOR_IDLE))
        self.cmd.emit(pk.reg_to_mem(pk.REG_CP_ALWAYS_ON_COUNTER, 2, address))
        return self

    def kernargs(self, program: QCOMProgramInfo, buffers: Sequence[int | Sym], values: Sequence[int | Sym],
                 textures: Sequence[Image] = (), uavs: Sequence[Image] = ()) -> CommandBuffer:
        """The dispatch's constant space: the compiler's constants, buffer addresses and scalar values at the offsets
        the program's descriptors give, texture and UAV descriptors and samplers after them."""
        if len(buffers) + len(values) != len(program.buf_offs):
            raise QCOMError(f"kernel {program.name!r} takes {len(program.buf_offs)} arguments, got {len(buffers)} buffers and {len(values)} values")
        if (len(textures), len(uavs)) != (program.tex_cnt, program.ibo_cnt):
            raise QCOMError(f"kernel {program.name!r} reads {program.tex_cnt} textures and writes {program.ibo_cnt} images, "
                            f"got {len(textures)} and {len(uavs)}")
        runs: list[tuple[int, Sequence[Piece]]] = [(offset, [struct.pack("<I" if size == 4 else "<H", value)])
                                                   for value, offset, size in program.consts]
        runs += [(offset, qword(arg)) for offset, arg in zip(program.buf_offs, [*buffers, *values], strict=True)]
        runs.append((program.samp_off, list(program.samplers)))
        runs.append((program.tex_off, [w for image in textures for w in image.descriptor(uav=False)]))
        runs.append((program.ibo_off, [w for image in uavs for w in image.descriptor(uav=True)]))
        return layout_kernargs(runs, program.kernargs_size)

    def exec(self, program: QCOMProgramInfo, image_address: int | Sym, buffers: Sequence[int | Sym], values: Sequence[int | Sym],
             groups: Sequence[int], local: Sequence[int], *, textures: Sequence[Image] = (), uavs: Sequence[Image] = (),
             data: CommandBuffer | None = None) -> QCOMComputeQueue:
        """Dispatch `program` (its image at `image_address`) over `groups` work-groups of `local` work-items; its
        arguments go into `data` (default: the queue's own data area) at the next 256-byte boundary."""
        if len(groups) != 3 or len(local) != 3:
            raise QCOMError(f"dispatch sizes are 3-D: got {len(groups)} work-group counts and {len(local)} work-group sizes")
        if math.prod(local) > program.max_threads or any(not 1 <= n <= 1024 for n in local):
            raise QCOMError(f"a work-group of {tuple(local)} is too large for {program.name!r} (at most {program.max_threads} work-items)")
        area = self.data if data is None else data
        area.data += bytes(-len(area) % KERNARGS_ALIGN)
        args = link("data", 8) + len(area)
        area.extend(self.kernargs(program, buffers, values, textures, uavs))
        self.stack_bytes = max(self.stack_bytes, program.stack_bytes)

        emit = self.cmd.emit
        emit(pk.pkt7(pk.CP_SET_MARKER, pk.RM6_COMPUTE << pk.SET_MARKER_MODE_SHIFT))
        emit(pk.pkt4(pk.REG_SP_UPDATE_CNTL, pk.SP_UPDATE_CNTL_CS_STATE | pk.SP_UPDATE_CNTL_CS_UAV))
        emit(pk.pkt4(pk.REG_SP_UPDATE_CNTL, 0))
        emit(pk.pkt4(pk.REG_SP_CS_TSIZE, CS_TSIZE))
        emit(pk.pkt4(pk.REG_SP_CS_USIZE, CS_USIZE))
        emit(pk.pkt4(pk.REG_SP_MODE_CNTL, pk.ISAMMODE_CL << pk.SP_MODE_CNTL_ISAMMODE_SHIFT))
        emit(pk.pkt4(pk.REG_SP_PERFCTR_SHADER_MASK, pk.SP_PERFCTR_SHADER_MASK_CS))
        emit(pk.pkt4(pk.REG_TPL1_MODE_CNTL, pk.ISAMMODE_CL << pk.TPL1_MODE_CNTL_ISAMMODE_SHIFT))
        emit(pk.pkt4(pk.REG_TPL1_DBG_ECO_CNTL, 0))
        emit(pk.pkt7(pk.CP_WAIT_FOR_IDLE))

        ndrange0 = (3 << pk.NDRANGE_0_KERNELDIM_SHIFT | (local[0] - 1) << pk.NDRANGE_0_LOCALSIZEX_SHIFT
                    | (local[1] - 1) << pk.NDRANGE_0_LOCALSIZEY_SHIFT | (local[2] - 1) << pk.NDRANGE_0_LOCALSIZEZ_SHIFT)
        emit(pk.pkt4(pk.REG_SP_CS_NDRANGE_0, ndrange0, groups[0] * local[0], 0, groups[1] * local[1], 0, groups[2] * local[2], 0,
                     pk.CL_CONST_CONFIG_0, pk.INVALID_REGID | pk.THREAD64 << pk.WGE_CNTL_THREADSIZE_SHIFT, *groups))
        cntl0 = (pk.THREAD64 << pk.CS_CNTL_0_THREADSIZE_SHIFT | program.hregs << pk.CS_CNTL_0_HALFREGFOOTPRINT_SHIFT
                 | program.fregs << pk.CS_CNTL_0_FULLREGFOOTPRINT_SHIFT | program.branchstack << pk.CS_CNTL_0_BRANCHSTACK_SHIFT)
        cntl1 = pk.CONSTLEN_256 << pk.CS_CNTL_1_CONSTANTRAMMODE_SHIFT | program.shared_size << pk.CS_CNTL_1_SHARED_SIZE_SHIFT
        emit(pk.pkt4(pk.REG_SP_CS_CNTL_0, cntl0, cntl1, 0, program.prg_offset, *qword(image_address), program.pvtmem_per_item,
                     *qword(link("stack")), program.pvtmem_total))

        # the arguments sit in the command buffer's data area, so the constant upload is sized to them, not to the whole
        # constant file (CONSTLEN_VEC4S): a larger load would read past the end of the data
        emit(pk.load_state6(pk.ST6_CONSTANTS, pk.SB6_CS_SHADER, program.kernargs_size // pk.CONSTANT_UNIT, args))
        emit(pk.load_state6(pk.ST6_SHADER, pk.SB6_CS_SHADER, program.instr_units, image_address))
        emit(pk.pkt4(pk.REG_SP_REG_PROG_ID_0, *PROG_ID_WORDS, (CONSTLEN_VEC4S & pk.CS_CONST_CONFIG_CONSTLEN_MASK) | pk.CS_CONST_CONFIG_ENABLED))
        emit(pk.pkt4(pk.REG_SP_CS_PVT_MEM_STACK_OFFSET, program.hw_stack_offset))
        emit(pk.pkt4(pk.REG_SP_CS_INSTR_SIZE, program.instr_units))
        if program.samp_cnt:
            emit(pk.load_state6(pk.ST6_SHADER, pk.SB6_CS_TEX, program.samp_cnt, args + program.samp_off))
            emit(pk.pkt4(pk.REG_SP_CS_SAMPLER_BASE, *qword(args + program.samp_off)))
            emit(pk.pkt4(pk.REG_TPL1_CS_BORDER_COLOR_BASE, *qword(link("border_color"))))
        if program.tex_cnt:
            emit(pk.load_state6(pk.ST6_CONSTANTS, pk.SB6_CS_TEX, min(16, program.tex_cnt), args + program.tex_off))
            emit(pk.pkt4(pk.REG_SP_CS_TEXMEMOBJ_BASE, *qword(args + program.tex_off)))
        if program.ibo_cnt:
            emit(pk.load_state6(pk.ST6_UAV, pk.SB6_CS_SHADER, program.ibo_cnt, args + program.ibo_off))
            emit(pk.pkt4(pk.REG_SP_CS_UAV_BASE, *qword(args + program.ibo_off)))
        emit(pk.pkt4(pk.REG_SP_CS_CONFIG, pk.CS_CONFIG_ENABLED | program.samp_cnt << pk.CS_CONFIG_NSAMP_SHIFT
                     | program.tex_cnt << pk.CS_CONFIG_NTEX_SHIFT | program.ibo_cnt << pk.CS_CONFIG_NUAV_SHIFT))
        emit(pk.pkt7(pk.CP_RUN_OPENCL, 0))
        self._cache_flush(write_back=True, sync=False)
        return self

    def build(self) -> tuple[CommandBuffer, int]:
        """The submit's bytes (commands, a NOP up to the argument alignment, the data area) and how many of them are
        commands (the IB the CP runs); "data" is then the IB's address plus that many bytes."""
        out = CommandBuffer()
        out.extend(self.cmd)
        if pad := -len(out) % KERNARGS_ALIGN // 4:
            out.emit(pk.pkt7(pk.CP_NOP, *[0] * (pad - 1)))
        ib_bytes = len(out)
        out.extend(self.data)
        return out, ib_bytes


class HostCopyQueue(HWQueue):
    """The copy queue of a QCOM device is the CPU: kgsl maps every GPU object at its GPU address in the process (the
    USE_CPU_MAP flag), so a copy is a memmove once the GPU work it waits for is done, and its signal a host write
    (tinygrad's QCOM allocator copies the same way). Commands are recorded here and run by the device."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, int, int, int]] = []

    def wait(self, signal_address: int | Sym, value: Word) -> HostCopyQueue:
        self.ops.append(("wait", _plain(signal_address), _plain(value), 0))
        return self

    def copy(self, dst: int | Sym, src: int | Sym, nbytes: int) -> HostCopyQueue:
        self.ops.append(("copy", _plain(dst), _plain(src), nbytes))
        return self

    def signal(self, signal_address: int | Sym, value: Word) -> HostCopyQueue:
        self.ops.append(("signal", _plain(signal_address), _plain(value), 0))
        return self


def _plain(word: Word) -> int:
    if isinstance(word, Sym):
        raise QCOMError(f"a host copy runs once as encoded: {word.what!r} must be a plain value, not a patch")
    return word
