"""`MockGPU`: executes the real PM4 and SDMA byte streams of the queues of a `MockKFD`.

Whenever it runs (a doorbell rung from Python, a host wait), the GPU reads each queue's doorbell word in the mock
KFD's doorbell page and executes its ring from the read pointer to that value, packet by packet.
Malformed packets raise `MalformedPacketError` naming the packet and its ring offset. WAIT_REG_MEM and POLL_REGMEM
stall their queue until the awaited memory holds the value (another queue, or the host, may write it later); RELEASE_MEM
and FENCE write signals; COPY_LINEAR copies; DISPATCH_DIRECT runs the kernel in the amd-isa emulator with the state the
SET_SH_REG packets set: the code at COMPUTE_PGM_LO/HI, the user SGPRs of COMPUTE_USER_DATA_*, the workgroup size of
COMPUTE_NUM_THREAD_*, and the workgroup counts of the packet.

The GPU clock timestamps read (`MockGPU.clock`) advances by the emulated work, not host time (see `DISPATCH_TICKS`).

Mock-only choices: the kernel descriptor is found next to the code (the 64-byte-aligned descriptor in the same
allocation whose entry offset points at COMPUTE_PGM), since the emulator needs the descriptor's user-SGPR layout; the
kernel's arguments are read at its kernarg pointer and handed to the emulator, which places its own copy. The emulator's
view of GPU memory is mapped once and reused until an allocation comes or goes. Everything runs synchronously on the
host thread.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from amd_isa import AmdIsaError, CodeObject, DecodeError, KernelDescriptor, Symbol, decode_one, emu

from . import regs
from .driver import QueueDesc, QueueKind
from .errors import AMDError, GPUFaultError, KFDError, MalformedPacketError

if TYPE_CHECKING:
    from .mock_kfd import MockKFD

STT_FUNC = 2
COMPARE: dict[int, Callable[[int, int], bool]] = {
    0: lambda value, ref: True,
    1: lambda value, ref: value < ref,
    2: lambda value, ref: value <= ref,
    3: lambda value, ref: value == ref,
    4: lambda value, ref: value != ref,
    5: lambda value, ref: value >= ref,
    6: lambda value, ref: value > ref,
}


# The GPU clock counts at 100 MHz (10 ns a tick), as the backend's timestamp divider assumes. The mock advances it by
# the work it emulates rather than by host time, so timestamps are deterministic: a tick for every packet but a wait,
# a dispatch's launch plus its wave-instructions at one per cycle of a nominal 2 GHz shader clock, a copy's bytes at a
# nominal 16 GB/s.
DISPATCH_TICKS = 100
INSTRUCTIONS_PER_TICK = 20
COPY_BYTES_PER_TICK = 160
#: gfx major versions whose dispatches the emulator traces (it writes the RDNA3, RDNA4 and CDNA SQTT layouts)
SQTT_GENERATIONS = (9, 11, 12)


@dataclass
class _Queue:
    desc: QueueDesc
    rptr: int = 0        # dwords (compute) or bytes (SDMA), never wrapped
    wptr: int = 0        # the last doorbell value
    regs: dict[int, int] = field(default_factory=dict)
    ib: tuple[int, int] | None = None  # (address, size in dwords) of the indirect buffer being executed
    ib_pos: int = 0
    stalled: str | None = None
    error: str | None = None  # set when the queue met a malformed packet or a fault: it executes nothing more
    packets: int = 0


@dataclass(frozen=True)
class _Kernel:
    code: CodeObject
    name: str
    descriptor: KernelDescriptor


@dataclass(frozen=True)
class TraceEvent:
    """The SQTT stream of one emulated dispatch (the target's layout, decode with `amd_isa.sqtt`), tied to its program:
    `name` names the kernel (the device renames it after the launched program), `code` the code object, `base` the
    program address the dispatch ran."""

    name: str
    code: CodeObject
    base: int
    sqtt: bytes


class MockGPU:
    """The engines behind a `MockKFD`: one PM4 compute processor and one SDMA engine per queue.

    With `profile` on, every dispatch also records a `TraceEvent` in `traces` (the emulator's SQTT trace mode writes
    the RDNA3, RDNA4 and CDNA layouts)."""

    @property
    def profile(self) -> bool:
        """Whether dispatches record SQTT traces: PROFILE set (not 0) when the kernel is dispatched, as batch timestamps
        decide when a batch is encoded (a GPU opened before PROFILE was set traces too), on a target with a trace
        layout."""
        return os.environ.get("PROFILE", "0") not in ("", "0") and self.kfd.target[0] in SQTT_GENERATIONS

    def __init__(self, kfd: MockKFD):
        self.kfd = kfd
        self.queues: dict[int, _Queue] = {}
        self._kernels: dict[int, _Kernel] = {}
        #: kernels dispatched and packets executed so far (tests and the benchmark read them)
        self.dispatches = 0
        #: the GPU clock (100 MHz ticks of emulated work) RELEASE_MEM and SDMA TIMESTAMP write
        self.clock = 0
        self.traces: list[TraceEvent] = []
        self.gfx9 = kfd.target[0] == 9
        self._held = False
        self._body_dwords = regs.PM4_BODY_DWORDS_BY_GFX[kfd.target[0]]
        self._memory: tuple[int, emu.Memory] | None = None  # (allocation generation, every allocation mapped)

    def add_queue(self, desc: QueueDesc) -> None:
        """Start fetching from a new queue (its pointers start at 0)."""
        self.queues[desc.queue_id] = _Queue(desc)

    def remove_queue(self, queue_id: int) -> None:
        """Stop fetching from a destroyed queue."""
        del self.queues[queue_id]

    def memory_freed(self, va: int, size: int) -> None:
        """An allocation went away: forget kernels whose code was in it (addresses are never reused, so new
        allocations cannot change code found earlier)."""
        self._kernels = {pc: kernel for pc, kernel in self._kernels.items() if not va <= pc < va + size}

    def doorbell(self, queue_id: int) -> None:
        """The host stored a new write pointer into the queue's doorbell: execute up to it (and anything that unblocks)."""
        queue = self.queues.get(queue_id)
        if queue is None:
            raise KFDError(f"doorbell of queue {queue_id}, which does not exist")
        if queue.error is not None:
            raise GPUFaultError(f"queue {queue_id} stopped after an earlier error ({queue.error}); recreate the device")
        self.run()

    def _latch_doorbell(self, queue_id: int, queue: _Queue) -> None:
        value = int(self.kfd.doorbells[queue_id])
        if value < queue.wptr:
            queue.error = f"the doorbell went back from {queue.wptr} to {value}"
            raise MalformedPacketError(f"queue {queue_id}: {queue.error}; write pointers only grow")
        queue.wptr = value

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Within this block doorbells only queue work, as on a GPU that runs beside the host rather than on its thread;
        the queued work runs when the block ends. A host wait inside the block times out (nothing executes)."""
        self._held = True
        try:
            yield
        finally:
            self._held = False
            self.run()

    def run(self) -> None:
        """Advance every queue until none can make progress (all done, or stalled on waits); nothing while `held`."""
        if self._held:
            return
        for queue_id, queue in self.queues.items():
            if queue.error is None:
                self._latch_doorbell(queue_id, queue)
        progressed = True
        while progressed:
            progressed = False
            for queue in list(self.queues.values()):
                if queue.error is not None:
                    continue
                advance = self._advance_compute if queue.desc.kind is QueueKind.COMPUTE else self._advance_sdma
                try:
                    progressed |= advance(queue)
                except AMDError as e:
                    queue.error = str(e)
                    raise

    def queue_state(self, queue_id: int) -> str:
        """Where a queue stands, for hang reports."""
        q = self.queues[queue_id]
        unit = "dwords" if q.desc.kind is QueueKind.COMPUTE else "bytes"
        state = f"{q.desc.kind.name} queue {queue_id} executed up to {q.rptr} of {q.wptr} {unit}"
        if q.error:
            return f"{state}, stopped by an error: {q.error}"
        return state + (f", stalled at {q.stalled}" if q.stalled else "")

    # -- memory -----------------------------------------------------------------------------------------------

    def _u32(self, address: int, where: str) -> int:
        if address & 3:
            raise MalformedPacketError(f"{where}: address {address:#x} is not 4-byte aligned")
        try:
            return int(self.kfd.bytes_at(address, 4).view(np.uint32)[0])
        except KFDError as e:
            raise GPUFaultError(f"{where}: {e}") from None

    def _write(self, address: int, value: int, nbytes: int, where: str) -> None:
        if address % nbytes:
            raise MalformedPacketError(f"{where}: address {address:#x} is not {nbytes}-byte aligned")
        try:
            self.kfd.bytes_at(address, nbytes)[:] = np.frombuffer(value.to_bytes(nbytes, "little"), np.uint8)
        except KFDError as e:
            raise GPUFaultError(f"{where}: {e}") from None

    # -- PM4 --------------------------------------------------------------------------------------------------

    def _advance_compute(self, q: _Queue) -> bool:
        ring = q.desc.ring
        progressed = False
        while True:
            if q.ib is not None:
                address, size = q.ib
                try:
                    words = self.kfd.bytes_at(address, size * 4).view(np.uint32)
                except KFDError as e:
                    raise GPUFaultError(f"INDIRECT_BUFFER of compute queue {q.desc.queue_id}: {e}") from None
                q.ib_pos, moved = self._run_pm4(q, lambda i, words=words: int(words[i]), q.ib_pos, size, f"IB {address:#x}", in_ib=True)
                progressed |= moved
                if q.ib_pos < size:
                    break
                q.ib, q.ib_pos = None, 0
                q.rptr += 1 + regs.PM4_BODY_DWORDS["INDIRECT_BUFFER"]
                progressed = True
            q.rptr, moved = self._run_pm4(q, lambda i: int(ring[i % len(ring)]), q.rptr, q.wptr, "ring", in_ib=False)
            progressed |= moved
            if q.ib is None:
                break
        q.desc.read_ptr[0] = q.rptr
        return progressed

    def _run_pm4(self, q: _Queue, read: Callable[[int], int], pos: int, end: int, stream: str, *, in_ib: bool) -> tuple[int, bool]:
        """Execute packets of a stream from `pos` to `end`; stop early at an unmet wait or an INDIRECT_BUFFER."""
        moved = False
        while pos < end:
            where = f"compute queue {q.desc.queue_id} {stream} dword {pos}"
            head = read(pos)
            if head >> regs.PM4_TYPE_SHIFT != regs.PM4_TYPE3:
                raise MalformedPacketError(f"{where}: header {head:#010x} is a type-{head >> 30} packet; only type-3 packets are executed")
            opcode, count = (head >> regs.PM4_OPCODE_SHIFT) & 0xFF, ((head >> regs.PM4_COUNT_SHIFT) & regs.PM4_COUNT_MASK) + 1
            name = regs.PM4_OPCODES.get(opcode)
            if name is None:
                raise MalformedPacketError(f"{where}: unknown PM4 opcode {opcode:#04x} (header {head:#010x})")
            where = f"{name} at {where}"
            if pos + 1 + count > end:
                raise MalformedPacketError(f"{where}: the packet has {count} body dwords but the stream ends after {end - pos - 1}")
            expected = self._body_dwords.get(name)
            if expected is not None and count != expected:
                generation = "gfx9" if self.gfx9 else "gfx10+"
                raise MalformedPacketError(f"{where}: a {generation} {name} has {expected} body dwords, this one has {count}")
            body = [read(pos + 1 + i) for i in range(count)]
            if name == "INDIRECT_BUFFER":
                if in_ib:
                    raise MalformedPacketError(f"{where}: indirect buffers do not nest on the mock GPU")
                self._enter_ib(q, body, where)
                return pos, True
            if not self._pm4(q, name, body, where):
                q.stalled = where
                return pos, moved
            q.stalled = None
            q.packets += 1
            pos += 1 + count
            moved = True
        return pos, moved

    def _enter_ib(self, q: _Queue, body: list[int], where: str) -> None:
        if not body[2] & regs.INDIRECT_BUFFER_VALID:
            raise MalformedPacketError(f"{where}: the VALID bit (23) of the size dword {body[2]:#010x} is clear")
        address, size = body[0] | body[1] << 32, body[2] & regs.INDIRECT_BUFFER_SIZE_MASK
        if address & 3 or size == 0:
            raise MalformedPacketError(f"{where}: an indirect buffer needs a 4-byte aligned address and a size, got {address:#x}, {size}")
        q.ib, q.ib_pos = (address, size), 0

    def _pm4(self, q: _Queue, name: str, body: list[int], where: str) -> bool:
        """Execute one packet; False means it is a wait whose condition does not hold yet."""
        if name != "WAIT_REG_MEM":
            self.clock += 1
        if name == "SET_SH_REG":
            if len(body) < 2:
                raise MalformedPacketError(f"{where}: SET_SH_REG needs a register offset and at least one value")
            start = regs.SH_REG_START + (body[0] & 0xFFFF)
            if start + len(body) - 1 > regs.SH_REG_END:
                raise MalformedPacketError(f"{where}: registers {start:#x}+{len(body) - 1} run past the SH register space")
            for i, value in enumerate(body[1:]):
                q.regs[start + i] = value
        elif name == "DISPATCH_DIRECT":
            self._dispatch(q, body, where)
        elif name == "WAIT_REG_MEM":
            return self._wait(body, where)
        elif name == "RELEASE_MEM":
            self._release(body, where)
        elif name == "EVENT_WRITE" and len(body) not in (1, 3):
            raise MalformedPacketError(f"{where}: EVENT_WRITE has 1 or 3 body dwords, this one has {len(body)}")
        # NOP, ACQUIRE_MEM and EVENT_WRITE order caches and pipelines, which the synchronous mock does not have
        return True

    def _wait(self, body: list[int], where: str) -> bool:
        info = body[0]
        function, space, operation = info & 7, (info >> regs.WAIT_MEM_SPACE_SHIFT) & 3, (info >> regs.WAIT_OPERATION_SHIFT) & 3
        if function not in COMPARE:
            raise MalformedPacketError(f"{where}: compare function {function} is reserved")
        if space == 0 and operation == regs.WAIT_OPERATION_WRITE_WAIT_WRITE_REG:
            return True  # an HDP flush request/acknowledge pair: the mock has no HDP, the flush is done at once
        if space != 1:
            raise MalformedPacketError(f"{where}: only memory polls are executed (mem_space {space}, operation {operation})")
        value = self._u32(body[1] | body[2] << 32, where)
        return COMPARE[function](value & body[4], body[3])

    def _release(self, body: list[int], where: str) -> None:
        if self.gfx9 and (gcr := body[0] & regs.RELEASE_CACHE_FIELD & ~regs.GFX9_EOP_ACTIONS):
            raise MalformedPacketError(f"{where}: bits {gcr:#x} of the event dword are gfx10+ GCR controls; gfx9 flushes with the "
                                       "EOP TC actions (regs.GFX9_EOP_*)")
        select = body[1]
        data_sel, int_sel = (select >> regs.RELEASE_DATA_SEL_SHIFT) & 7, (select >> regs.RELEASE_INT_SEL_SHIFT) & 7
        address, value = body[2] | body[3] << 32, body[4] | body[5] << 32
        if data_sel == regs.DATA_SEL_32_LOW:
            self._write(address, value & 0xFFFFFFFF, 4, where)
        elif data_sel == regs.DATA_SEL_64:
            self._write(address, value, 8, where)
        elif data_sel == regs.DATA_SEL_GPU_CLOCK:
            self._write(address, self.clock, 8, where)
        elif data_sel != regs.DATA_SEL_NONE:
            raise MalformedPacketError(f"{where}: data_sel {data_sel} is not emulated (use none, 32-bit, 64-bit or the GPU clock)")
        if int_sel != regs.INT_SEL_NONE and body[6]:
            self.kfd.fire_event(body[6])

    # -- dispatch ---------------------------------------------------------------------------------------------

    def _dispatch(self, q: _Queue, body: list[int], where: str) -> None:
        cr = regs.COMPUTE_REGS[self.kfd.target[0]]

        def reg(address: int, what: str) -> int:
            if address not in q.regs:
                raise MalformedPacketError(f"{where}: {what} was never set (SET_SH_REG {address:#x} first)")
            return q.regs[address]

        initiator = body[3]
        if not initiator & regs.INITIATOR_COMPUTE_SHADER_EN:
            raise MalformedPacketError(f"{where}: COMPUTE_SHADER_EN (bit 0) of the initiator {initiator:#x} is clear")
        if self.gfx9 and initiator & regs.INITIATOR_CS_W32_EN:
            raise MalformedPacketError(f"{where}: CS_W32_EN (bit 15) of the initiator is reserved on gfx9, which runs wave64 only")
        if initiator & regs.INITIATOR_USE_THREAD_DIMENSIONS:
            raise MalformedPacketError(f"{where}: thread-count dispatches (USE_THREAD_DIMENSIONS) are not emulated; pass workgroup counts")
        program = (reg(cr.pgm_lo + 1, "COMPUTE_PGM_HI") << 32 | reg(cr.pgm_lo, "COMPUTE_PGM_LO")) << 8
        rsrc2 = reg(cr.pgm_rsrc2, "COMPUTE_PGM_RSRC2")
        local = tuple(reg(cr.num_thread_x + i, f"COMPUTE_NUM_THREAD_{'XYZ'[i]}") & 0xFFFF for i in range(3))
        groups = tuple(body[:3])
        if 0 in local or 0 in groups:
            raise MalformedPacketError(f"{where}: empty dispatch (workgroups {groups}, workgroup size {local})")
        kernel = self._kernel(program, where)
        kd = kernel.descriptor
        if bool(initiator & regs.INITIATOR_CS_W32_EN) != kd.wave32:
            raise MalformedPacketError(f"{where}: CS_W32_EN says wave{32 if initiator & regs.INITIATOR_CS_W32_EN else 64} "
                                       f"but the kernel was built for wave{32 if kd.wave32 else 64}")
        # the descriptor's RSRC1 / RSRC3 reach the hardware only through their registers (RSRC3 moved on gfx9; RSRC1's PRIV
        # bit is the backend's gfx11 CWSR workaround)
        for address, value, what in ((cr.pgm_rsrc1, kd.compute_pgm_rsrc1, "RSRC1"), (cr.pgm_rsrc3, kd.compute_pgm_rsrc3, "RSRC3")):
            got = reg(address, f"COMPUTE_PGM_{what}")
            if got & ~regs.RSRC1_PRIV != value & ~regs.RSRC1_PRIV:
                raise MalformedPacketError(f"{where}: COMPUTE_PGM_{what} ({address:#x}) is {got:#x}, the kernel descriptor says {value:#x}")
        user_count = (rsrc2 >> regs.RSRC2_USER_SGPR_SHIFT) & regs.RSRC2_USER_SGPR_MASK
        user = [q.regs.get(cr.user_data_0 + i, 0) for i in range(user_count)]
        at, kernarg_ptr = 0, None
        for name in kd.user_sgprs:
            if name == "kernarg_segment_ptr" and at + 1 < user_count:
                kernarg_ptr = user[at] | user[at + 1] << 32
            at += regs.USER_SGPR_DWORDS[name]
        if at > user_count:
            raise MalformedPacketError(f"{where}: the kernel takes {at} user SGPRs ({', '.join(kd.user_sgprs)}), COMPUTE_PGM_RSRC2 sets {user_count}")
        kernargs = b""
        if kernarg_ptr is not None and kd.kernarg_size:
            try:
                kernargs = bytes(self.kfd.bytes_at(kernarg_ptr, kd.kernarg_size))
            except KFDError as e:
                raise GPUFaultError(f"{where}: reading {kd.kernarg_size} bytes of kernel arguments: {e}") from None
        memory = self._emulator_memory()
        profile = self.profile
        try:
            run = emu.run_kernel(kernel.code, kernargs, tuple(g * s for g, s in zip(groups, local, strict=True)), local, memory,
                                 kernel=kernel.name, trace=profile)
        except AmdIsaError as e:
            raise GPUFaultError(f"{where}: the kernel at {program:#x} faulted: {e}") from None
        self.dispatches += 1
        self.clock += DISPATCH_TICKS + -(-run.instructions // INSTRUCTIONS_PER_TICK)
        if profile:
            self.traces.append(TraceEvent(kernel.name, kernel.code, program, run.sqtt))

    def _emulator_memory(self) -> emu.Memory:
        """Every allocation mapped at its GPU address, for one dispatch. The mapping is made once per allocation set;
        a dispatch gets a copy with its own region list, since the emulator maps the kernel's arguments into it."""
        if self._memory is None or self._memory[0] != self.kfd.generation:
            memory = emu.Memory()
            for mem in self.kfd.allocations():
                memory.map(mem.view, address=mem.va)
            self._memory = (self.kfd.generation, memory)
        dispatch = copy.copy(self._memory[1])
        dispatch.regions = list(dispatch.regions)
        return dispatch

    def _kernel(self, program: int, where: str) -> _Kernel:
        """The kernel whose code starts at `program`, with the descriptor loaded before it in the same allocation."""
        if (found := self._kernels.get(program)) is not None:
            return found
        try:
            mem, offset = self.kfd.lookup(program, 4)
        except KFDError as e:
            raise GPUFaultError(f"{where}: COMPUTE_PGM {program:#x}: {e}") from None
        view = mem.view
        assert view is not None
        starts = np.arange(0, offset - regs.KD_SIZE + 1, 64, dtype=np.int64)
        if starts.size:
            entries = view[starts[:, None] + regs.KD_ENTRY_OFFSET + np.arange(8)].copy().view("<i8").reshape(-1)
            hits = np.nonzero(entries == offset - starts)[0]
        else:
            hits = np.zeros(0, np.int64)
        if not hits.size:
            raise GPUFaultError(f"{where}: no kernel descriptor in the allocation at {mem.va:#x} points at COMPUTE_PGM {program:#x}; "
                                "load the code object's image (descriptor and code) into one allocation")
        start = int(starts[hits[-1]])
        descriptor = KernelDescriptor.from_bytes(bytes(view[start:start + regs.KD_SIZE]))
        target = regs.target_name(self.kfd.target)
        code = bytes(view[offset:])
        end = 0
        while end < len(code):
            try:
                inst = decode_one(code, target, end)
            except DecodeError:
                break
            if inst.mnemonic == "s_code_end":
                break
            end += inst.size()
        if end == 0:
            raise GPUFaultError(f"{where}: no {target} instructions at COMPUTE_PGM {program:#x}")
        name = f"kernel_{program:x}"
        co = CodeObject(text=code[:end], text_addr=program, target=target, symbols={name: Symbol(name, program, end, STT_FUNC, ".text")},
                        descriptors={name: descriptor})
        kernel = self._kernels[program] = _Kernel(co, name, descriptor)
        return kernel

    # -- SDMA -------------------------------------------------------------------------------------------------

    def _advance_sdma(self, q: _Queue) -> bool:
        ring = q.desc.ring
        n = len(ring)
        progressed = False
        while q.rptr < q.wptr:
            index = (q.rptr // 4) % n
            where = f"SDMA queue {q.desc.queue_id} ring byte {q.rptr % (4 * n)}"
            head = int(ring[index])
            op, sub_op = head & 0xFF, (head >> regs.SDMA_SUB_OP_SHIFT) & 0xFF
            name = regs.SDMA_OPS.get(op)
            if name is None or name == "INDIRECT":
                raise MalformedPacketError(f"{where}: SDMA opcode {op} (header {head:#010x}) is not executed")
            where = f"{name} at {where}"
            if name == "NOP":
                length = 1 + ((head >> regs.SDMA_NOP_COUNT_SHIFT) & regs.SDMA_NOP_COUNT_MASK)
            elif name == "WRITE":
                length = 4 + (int(ring[(index + 3) % n]) if index + 3 < n else 0) + 1
            else:
                length = regs.SDMA_PACKET_DWORDS[name]
            if index + length > n:
                raise MalformedPacketError(f"{where}: the {length}-dword packet straddles the end of the ring; pad with NOPs")
            if q.rptr + 4 * length > q.wptr:
                raise MalformedPacketError(f"{where}: the packet has {length} dwords but the doorbell ends the stream after {(q.wptr - q.rptr) // 4}")
            words = [int(w) for w in ring[index:index + length]]
            if not self._sdma(name, sub_op, words, where):
                q.stalled = where
                break
            q.stalled = None
            q.packets += 1
            q.rptr += 4 * length
            progressed = True
        q.desc.read_ptr[0] = q.rptr
        return progressed

    def _sdma(self, name: str, sub_op: int, words: list[int], where: str) -> bool:
        if name != "POLL_REGMEM":
            self.clock += 1
        if name == "COPY":
            if sub_op != regs.SDMA_SUBOP_COPY_LINEAR:
                raise MalformedPacketError(f"{where}: COPY sub-op {sub_op} is not emulated (only COPY_LINEAR, 0)")
            nbytes = (words[1] & regs.SDMA_COPY_COUNT_MASK) + 1
            src, dst = words[3] | words[4] << 32, words[5] | words[6] << 32
            try:
                data = self.kfd.bytes_at(src, nbytes).copy()
                self.kfd.bytes_at(dst, nbytes)[:] = data
            except KFDError as e:
                raise GPUFaultError(f"{where}: {e}") from None
            self.clock += -(-nbytes // COPY_BYTES_PER_TICK)
        elif name == "WRITE":
            address = words[1] | words[2] << 32
            for i, value in enumerate(words[4:]):
                self._write(address + 4 * i, value, 4, where)
        elif name == "FENCE":
            if self.gfx9 and words[0] >> 16:
                raise MalformedPacketError(f"{where}: header {words[0]:#010x} sets bits above the sub-op; the sdma 4 FENCE of gfx9 has no MTYPE")
            self._write(words[1] | words[2] << 32, words[3], 4, where)
        elif name == "TRAP":
            self.kfd.fire_event(words[1] & regs.SDMA_TRAP_CONTEXT_MASK)
        elif name == "POLL_REGMEM":
            function = (words[0] >> regs.SDMA_POLL_FUNC_SHIFT) & 7
            if not words[0] >> regs.SDMA_POLL_MEM_SHIFT & 1:
                raise MalformedPacketError(f"{where}: register polls are not emulated (set MEM_POLL, bit 31)")
            if function not in COMPARE:
                raise MalformedPacketError(f"{where}: compare function {function} is reserved")
            return COMPARE[function](self._u32(words[1] | words[2] << 32, where) & words[4], words[3])
        elif name == "TIMESTAMP":
            if sub_op != regs.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL:
                raise MalformedPacketError(f"{where}: TIMESTAMP sub-op {sub_op} is not emulated (only GET_GLOBAL, 2)")
            self._write(words[1] | words[2] << 32, self.clock, 8, where)
        return True
