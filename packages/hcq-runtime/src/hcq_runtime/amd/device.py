"""`AMDDevice`: queues, signals, memory and programs of one AMD GPU, over any `Driver` (mock or /dev/kfd).

The same code drives `MOCKAMD` (a `MockKFD`) and `AMD` (the real KFD): it allocates rings and pointers through the
driver, writes command words into the rings (with the native ring writer of `ring_code`), publishes the write pointer
and rings the doorbell, and waits on signals in host-visible memory with a timeout that reports where each queue
stands. Work reaches the device only through the hcq2 `QueueDevice` interface: batches the engine encodes
(`encode_kernel`, `submit_commands`, `submit_code`) and queues run as they are (`run_queue`); a program's `launch` is
a batch of one call.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from dataclasses import dataclass

import numpy as np
from uopir import AMDOpenCLRenderer

from ..allocator import LRUAllocator
from ..compiler import AMDCompiler
from ..errors import AllocationError
from ..hcq2.cmdbuf import CommandBuffer, PatchKind, Sym, Word, qword
from ..hcq2.hwqueue import COMPUTE, COPY, HWQueue, QueueDevice
from ..hcq2.submitter import SubmitCode
from . import pm4, regs
from .driver import Driver, GPUMemory, QueueDesc, QueueKind
from .errors import AMDError, QueueHangError
from .kfd import KFDDriver
from .loader import load_image
from .mock_gpu import SQTT_GENERATIONS, TraceEvent
from .mock_kfd import MockKFD
from .queue import AMDComputeQueue, AMDCopyQueue, ProgramInfo
from .ring_code import native_ring_put, ring_write

SIGNAL_SIZE = 16  # value (u64), timestamp (u64)
KERNARG_ALIGN = 256
DEFAULT_TIMEOUT_MS = 30_000
SCRATCH_PER_LANE = 1024  # private segment bytes per work-item the scratch area is sized for
SCRATCH_WAVES = 32  # waves that may hold scratch at once (the mock GPU runs one at a time)


@dataclass
class Signal:
    """A 16-byte signal in host-visible GPU memory: the value at `address`, a timestamp 8 bytes on."""

    address: int
    words: np.ndarray  # uint64 view of the two words

    @property
    def value(self) -> int:
        """The signal's current value (the GPU writes it; the host may too)."""
        return int(self.words[0])

    @value.setter
    def value(self, new: int) -> None:
        self.words[0] = new

    @property
    def timestamp_address(self) -> int:
        """Where timestamps for this signal are written."""
        return self.address + 8

    @property
    def timestamp(self) -> int:
        """The last timestamp written (GPU clock ticks, 100 MHz: `AMDDevice.timestamp_divider`)."""
        return int(self.words[1])


@dataclass
class RingQueue:
    """A hardware queue of the device: the driver's descriptor, its ring and pointer memory."""

    desc: QueueDesc
    ring: GPUMemory
    pointers: GPUMemory

    @property
    def put(self) -> int:
        """The host's write pointer: kept only in the queue's write-pointer memory, which compiled submitters update too."""
        return int(self.desc.write_ptr[0])

    @put.setter
    def put(self, value: int) -> None:
        self.desc.write_ptr[0] = value


class AMDAllocator(LRUAllocator[GPUMemory]):
    """GPU memory through the driver; host-visible, so copies in and out go through the host mapping."""

    def __init__(self, device: AMDDevice):
        super().__init__()
        self.device = device

    def _alloc(self, nbytes: int, options: object) -> GPUMemory:
        return self.device.driver.alloc(nbytes, host_visible=True)

    def _free(self, opaque: GPUMemory, nbytes: int, options: object) -> None:
        self.device.synchronize()  # the GPU may still be using it
        self.device.driver.free(opaque)

    def _view(self, opaque: GPUMemory) -> np.ndarray:
        if opaque.view is None:
            raise AllocationError("this allocation is not host-visible; copy through the SDMA queue instead")
        return opaque.view

    def copyin(self, dest: GPUMemory, src: memoryview) -> None:
        self.device.synchronize()
        self._write_new(dest, src)

    def _write_new(self, dest: GPUMemory, src: memoryview) -> None:
        self._view(dest)[:src.nbytes] = np.frombuffer(src, np.uint8)

    def copyout(self, dest: memoryview, src: GPUMemory) -> None:
        self.device.synchronize()
        np.frombuffer(dest, np.uint8)[:] = self._view(src)[:dest.nbytes]

    def offset(self, opaque: GPUMemory, offset: int, nbytes: int) -> GPUMemory:
        return opaque.offset(offset, nbytes)

    def address(self, opaque: GPUMemory) -> int:
        return opaque.va


class AMDProgram:
    """A kernel loaded into GPU memory: its image (descriptor + code) and the dispatch settings of its descriptor."""

    def __init__(self, device: AMDDevice, binary: bytes, name: str | None = None):
        loaded = load_image(binary, name)
        if loaded.target is not None and loaded.target.split(":")[0] != device.arch:
            raise AMDError(f"kernel {loaded.name!r} was built for {loaded.target}, this device is {device.arch}; "
                           f"compile with AMDCompiler({device.arch!r})")
        self.device, self.name, kd = device, loaded.name, loaded.descriptor
        self.image = device.driver.alloc(len(loaded.image), host_visible=True)
        assert self.image.view is not None
        self.image.view[:len(loaded.image)] = np.frombuffer(loaded.image, np.uint8)
        lds_blocks = ((kd.group_segment_fixed_size + 511) // 512) & 0x1FF
        self.info = ProgramInfo(address=self.image.va + loaded.entry_offset,
                                rsrc1=kd.compute_pgm_rsrc1 | (regs.RSRC1_PRIV if device.target[0] == 11 else 0),
                                rsrc2=kd.compute_pgm_rsrc2 | (lds_blocks << 15), rsrc3=kd.compute_pgm_rsrc3, wave32=kd.wave32,
                                user_sgprs=tuple(kd.user_sgprs), kernarg_size=kd.kernarg_size)
        self.private_segment_size = kd.private_segment_fixed_size

    def launch(self, addresses: list[int], values: list[int], global_size: tuple[int, int, int], local_size: tuple[int, int, int], *,
               wait: bool = True) -> None:
        """The CompiledDevice launch, for kernels run by hand (the queue runner encodes calls itself): a batch of one call
        (`hcq2.engine.launch_program`) over raw device addresses (the HSA kernarg layout of the AMD OpenCL renderer:
        8-byte buffer addresses in globals order, then the variables as 8-byte ints), `global_size` workgroups of
        `local_size` items; with `wait`, return once it has finished."""
        from ..hcq2.engine import launch_program  # noqa: PLC0415 (the engine imports the runners, which import devices)

        launch_program(self.device, self, addresses, values, tuple(global_size), tuple(local_size), wait=wait)


class AMDDevice(QueueDevice):
    """One AMD GPU: a compute queue, an SDMA copy queue, a timeline signal, an allocator, program loading; kernels are
    rendered as OpenCL C and compiled with clang-15 for the device's target (`renderer`, `compiler`). As a
    `QueueDevice` it is driven by the hcq2 engine: PM4 for COMPUTE, SDMA for COPY, a signal per queue."""

    timestamp_divider = 100.0  # RELEASE_MEM's GPU clock and SDMA TIMESTAMP count at 100 MHz on gfx9, gfx11 and gfx12

    def __init__(self, name: str = "MOCKAMD", driver: Driver | None = None, *, ring_size: int = 1 << 20):
        self.name = name
        self.driver = driver if driver is not None else open_driver(name)
        major, minor = self.driver.version()
        if major != 1:
            raise AMDError(f"KFD interface {major}.{minor} is not supported (need 1.x); update the kernel driver")
        self.driver.acquire_vm()
        self.target = self.driver.target
        self.arch = regs.target_name(self.target)
        self.compute = self._create_queue(QueueKind.COMPUTE, ring_size)
        self.copy_queue = self._create_queue(QueueKind.COPY, ring_size)
        self._signal_page = self.driver.alloc(0x1000, uncached=True)
        self._signals_used = 0
        self.timeline = self.new_signal()
        self.timeline_value = 1
        self.queue_signals = {COMPUTE: self.new_signal(), COPY: self.new_signal()}
        self._scratch: GPUMemory | None = None
        self.allocator = AMDAllocator(self)
        self.renderer = AMDOpenCLRenderer(self.arch)
        self._program_names: dict[int, str] = {}

    @functools.cached_property
    def compiler(self) -> AMDCompiler:  # type: ignore[override]
        """clang-15 for this target, found on first compile (so a device opens on machines without it)."""
        return AMDCompiler(self.arch)

    def _create_queue(self, kind: QueueKind, ring_size: int) -> RingQueue:
        ring = self.driver.alloc(ring_size, uncached=True)
        pointers = self.driver.alloc(0x1000, uncached=True)
        return RingQueue(self.driver.create_queue(kind, ring, pointers), ring, pointers)

    # -- signals --------------------------------------------------------------------------------------------

    def new_signal(self, value: int = 0) -> Signal:
        """A fresh signal in the device's signal page."""
        if (self._signals_used + 1) * SIGNAL_SIZE > self._signal_page.size:
            raise AMDError(f"all {self._signal_page.size // SIGNAL_SIZE} signals of the device are in use")
        mem = self._signal_page.offset(self._signals_used * SIGNAL_SIZE, SIGNAL_SIZE)
        assert mem.view is not None
        self._signals_used += 1
        signal = Signal(mem.va, mem.view.view(np.uint64))
        signal.value = value
        return signal

    def next_timeline(self) -> int:
        """The timeline value the next submit signals (and advances the counter)."""
        self.timeline_value += 1
        return self.timeline_value - 1

    def wait(self, signal: Signal, value: int, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        """Spin until `signal` reaches `value`; QueueHangError (saying where each queue stands) after `timeout_ms`."""
        deadline = time.perf_counter() + timeout_ms / 1000
        while signal.value < value:
            self.driver.poll()
            if signal.value >= value:
                break
            if time.perf_counter() > deadline:
                states = "; ".join(self.driver.queue_state(q.desc) for q in (self.compute, self.copy_queue))
                raise QueueHangError(f"{self.name}: signal at {signal.address:#x} is {signal.value}, waited {timeout_ms} ms for {value}: {states}")

    def synchronize(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        """Wait until everything submitted so far has finished."""
        self.wait(self.timeline, self.timeline_value - 1, timeout_ms)

    # -- submission -----------------------------------------------------------------------------------------

    def _submit_words(self, words: np.ndarray, kind: QueueKind, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        """Put command words (uint32) on the queue's ring with the native ring writer (`ring_code`: the same C compiled
        submitters run), waiting while the ring is full, then ring the doorbell from Python too (the mock GPU runs the
        work at once; a second store of the same pointer is harmless on hardware)."""
        queue = self.compute if kind is QueueKind.COMPUTE else self.copy_queue
        desc = queue.desc
        size = len(desc.ring)
        if len(words) >= size:
            raise AMDError(f"a submit of {len(words)} dwords does not fit a ring of {size}; split it or use a larger ring_size")
        words = np.ascontiguousarray(words, np.uint32)
        put = native_ring_put()
        args = (desc.ring.ctypes.data, size, desc.read_ptr.ctypes.data, desc.write_ptr.ctypes.data, desc.doorbell.address,
                words.ctypes.data, len(words), int(kind is QueueKind.COPY))
        deadline = time.perf_counter() + timeout_ms / 1000
        while (new := put(*args)) < 0:
            self.driver.poll()
            if time.perf_counter() > deadline:
                raise QueueHangError(f"{self.name}: the ring stays full: {self.driver.queue_state(desc)}")
        desc.doorbell.ring(new)

    def _reserve(self, queue: RingQueue, dwords: int, unit: int, timeout_ms: int) -> int:
        """Wait until `dwords` fit behind the engine's read pointer; return the ring index to write at."""
        size = len(queue.desc.ring)
        deadline = time.perf_counter() + timeout_ms / 1000
        while (queue.put - int(queue.desc.read_ptr[0])) // unit + dwords > size:
            self.driver.poll()
            if time.perf_counter() > deadline:
                raise QueueHangError(f"{self.name}: the ring stays full: {self.driver.queue_state(queue.desc)}")
        return (queue.put // unit) % size

    # -- programs and work ----------------------------------------------------------------------------------

    def profile_traces(self) -> list[TraceEvent]:
        """The SQTT trace of every dispatch so far (MOCKAMD opened with PROFILE=1), named after the launched program,
        with ` n2`, ` n3`, ... for its repeated runs."""
        gpu = getattr(self.driver, "gpu", None)
        if gpu is None:
            raise AMDError("profiling traces come from the mock GPU: open MOCKAMD with PROFILE=1")
        if self.target[0] not in SQTT_GENERATIONS:
            raise AMDError(f"{self.name}: the emulator writes SQTT traces of gfx9 (CDNA), gfx11 and gfx12 targets, not {self.arch}; "
                           "its kernels' times are in profile_events()")
        runs: dict[str, int] = {}
        events = []
        for event in gpu.traces:
            name = self._program_names.get(event.base, event.name)
            runs[name] = runs.get(name, 0) + 1
            events.append(dataclasses.replace(event, name=name if runs[name] == 1 else f"{name} n{runs[name]}"))
        return events

    def program(self, name: str | None, binary: bytes) -> AMDProgram:
        """Load kernel `name` (None: the only one) of a code object."""
        program = AMDProgram(self, binary, name)
        self._program_names[program.info.address] = program.name
        return program

    # -- the hcq2 QueueDevice interface -----------------------------------------------------------------------

    def hw_queue(self, kind: str) -> HWQueue:
        return AMDComputeQueue(self.target) if kind == COMPUTE else AMDCopyQueue(self.target)

    def queue_signal(self, kind: str) -> Signal:
        return self.queue_signals[kind]

    @property
    def scratch(self) -> GPUMemory:
        """The scratch (private segment) area every dispatch addresses, made on first use."""
        if self._scratch is None:
            self._scratch = self.driver.alloc(SCRATCH_PER_LANE * 64 * SCRATCH_WAVES)
        return self._scratch

    @property
    def tmpring_size(self) -> int:
        """COMPUTE_TMPRING_SIZE for the scratch area: how many waves, and each wave's share."""
        align = regs.SCRATCH_WAVE_ALIGN[self.target[0]]
        wave_size = -(-SCRATCH_PER_LANE * 64 // align)
        return (wave_size << regs.TMPRING_WAVESIZE_SHIFT) | SCRATCH_WAVES

    def encode_kernel(self, queue: HWQueue, data: CommandBuffer, program: AMDProgram, address: Word, addresses: list[Word],
                      values: list[Word], global_size: tuple[int, int, int], local_size: tuple[int, int, int]) -> None:
        """Kernel arguments (8-byte addresses, then 8-byte values, zero-padded to the descriptor's kernarg size) go into
        `data` at a 256-byte boundary; the dispatch addresses them as `data` + offset, its code as `address`."""
        if program.private_segment_size > SCRATCH_PER_LANE:
            raise AMDError(f"kernel {program.name!r} needs {program.private_segment_size} bytes of scratch per lane, the device "
                           f"provides {SCRATCH_PER_LANE}")
        assert isinstance(queue, AMDComputeQueue)
        start = len(data) + (-len(data) % KERNARG_ALIGN)
        data.emit([0] * ((start - len(data)) // 4))
        data.emit([word for value in [*addresses, *values] for word in qword(value)])
        end = start + max(program.info.kernarg_size, len(data) - start)
        data.emit([0] * (-(-(end - len(data)) // 4)))
        kernargs = Sym("data", PatchKind.LINK, 8, add=start)
        dispatch = None
        if "dispatch_ptr" in program.info.user_sgprs:
            packet_at = len(data) + (-len(data) % 64)
            data.emit([0] * ((packet_at - len(data)) // 4))
            words = list(np.frombuffer(_dispatch_packet(global_size, local_size, 0), np.uint32))
            data.emit([int(w) for w in words[:10]] + [kernargs] + [int(w) for w in words[12:]])
            dispatch = Sym("data", PatchKind.LINK, 8, add=packet_at)
        info = dataclasses.replace(program.info, address=address)
        queue.exec(info, kernargs, global_size, local_size, dispatch_packet=dispatch, scratch=Sym("scratch", PatchKind.LINK, 8),
                   tmpring_size=self.tmpring_size)

    def program_address(self, program: AMDProgram) -> int:
        return int(program.info.address)  # type: ignore[arg-type]

    def link_state(self, names: set[str]) -> tuple[dict[str, int], list[GPUMemory]]:
        values: dict[str, int] = {}
        keep: list[GPUMemory] = []
        for name in names:
            if name == "scratch":
                values[name] = self.scratch.va
                keep.append(self.scratch)
            elif name == "signal:timeline":
                values[name] = self.timeline.address
            elif name.startswith("signal:") and name[7:] in self.queue_signals:
                values[name] = self.queue_signals[name[7:]].address
            else:
                raise AMDError(f"a command buffer links {name!r}, which is no state of {self.name}")
        return values, keep

    def alloc_memory(self, nbytes: int) -> GPUMemory:
        return self.driver.alloc(nbytes, host_visible=True)

    def free_memory(self, memory: GPUMemory) -> None:
        self.synchronize()
        self.driver.free(memory)

    def submit_commands(self, kind: str, memory: GPUMemory, offset: int, nbytes: int) -> None:
        """COMPUTE runs the commands in place through one INDIRECT_BUFFER packet; SDMA has no indirect buffers on the
        queues the backend creates, so COPY commands are copied into the ring."""
        if kind == COMPUTE:
            self._submit_words(np.array(pm4.indirect_buffer(memory.va + offset, nbytes // 4), np.uint32), QueueKind.COMPUTE)
        else:
            assert memory.view is not None
            self._submit_words(memory.view[offset:offset + nbytes].view(np.uint32), QueueKind.COPY)

    def submit_code(self, kind: str, memory: GPUMemory, offset: int, nbytes: int, code: SubmitCode) -> None:
        """As `submit_commands`: COMPUTE puts a prebuilt INDIRECT_BUFFER packet on the ring, COPY the commands themselves."""
        assert memory.view is not None
        if kind == COMPUTE:
            packet = np.array(pm4.indirect_buffer(memory.va + offset, nbytes // 4), np.uint32)
            code.keep(packet)
            ring_write(code, self.compute, packet.ctypes.data, len(packet), sdma=False)
        else:
            if nbytes // 4 >= len(self.copy_queue.desc.ring):
                raise AMDError(f"{nbytes} bytes of SDMA commands do not fit a ring of {4 * len(self.copy_queue.desc.ring)}; use a larger ring_size")
            ring_write(code, self.copy_queue, memory.view.ctypes.data + offset, nbytes // 4, sdma=True)

    def make_room(self, kind: str) -> None:
        """Wait until the queue's engine has read everything on its ring."""
        queue = self.compute if kind == COMPUTE else self.copy_queue
        unit = 1 if kind == COMPUTE else 4
        self._reserve(queue, len(queue.desc.ring), unit, DEFAULT_TIMEOUT_MS)

    def run_queue(self, kind: str, queue: HWQueue) -> None:
        self._submit_words(np.frombuffer(bytes(queue.cmd.data), np.uint32), QueueKind(kind))

    def close(self) -> None:
        """Destroy the queues (the driver frees the rest with the process)."""
        for queue in (self.compute, self.copy_queue):
            self.driver.destroy_queue(queue.desc)


def _dispatch_packet(groups: tuple[int, int, int], local: tuple[int, int, int], kernarg_address: int) -> bytes:
    """hsa_kernel_dispatch_packet_t for kernels that read their sizes through the dispatch pointer."""
    packet = bytearray(64)
    np.frombuffer(packet, np.uint16)[2:5] = local
    np.frombuffer(packet, np.uint32)[3:6] = [g * s for g, s in zip(groups, local, strict=True)]
    np.frombuffer(packet, np.uint64)[5] = kernarg_address
    return bytes(packet)


def open_driver(name: str) -> Driver:
    """The driver for a device name: `AMD`/`AMD:N` the real /dev/kfd; `MOCKAMD`, `MOCKAMD:N` a `MockKFD` of the target
    `MOCKAMD_ARCH` names (default gfx1100), `MOCKAMD:<gfx target>` or `MOCKAMD:<gfx target>:N` one of that target
    (`MOCKAMD:gfx90a`, `MOCKAMD:gfx940`: CDNA, wave64)."""
    prefix, _, rest = name.partition(":")
    prefix = prefix.upper()
    if prefix == "MOCKAMD":
        arch = rest.partition(":")[0] if rest.lower().startswith("gfx") else os.environ.get("MOCKAMD_ARCH", "") or "gfx1100"
        try:
            target = regs.parse_target(arch)
        except ValueError as e:
            raise AMDError(f"{name!r}: {e}") from None
        return MockKFD(target)
    if prefix == "AMD" and (not rest or rest.isdigit()):
        return KFDDriver(int(rest or 0))
    raise AMDError(f"{name!r} is not an AMD device name; use AMD, AMD:N, MOCKAMD, MOCKAMD:N or MOCKAMD:<gfx target>[:N]")
