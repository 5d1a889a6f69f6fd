"""`QCOMDevice`: one Adreno 6xx GPU through kgsl (`QCOM`: /dev/kgsl-3d0, `MOCKQCOM`: `MockKGSL`), driven by the hcq2
engine as a `QueueDevice` with one CP queue.

Commands are `QCOMComputeQueue`s; linking places them (and the kernel arguments they address as "data") in device
memory and writes the link-time values: the private-memory stack, the cache-flush dummy page, the border-colour page
and the signals, which the linked commands keep references to. A submit writes the run-time values (timeline) and
issues IOCTL_KGSL_GPU_COMMAND with the IB on the device's draw context; replays of linked batches issue it from their
compiled submitter, through a function pointer (libc's ioctl, or the mock's callback) with the file descriptor and
context id from the device's `variables` and a request prebuilt at link. Copies run on the host (`HostCopyQueue`):
every GPU object is mapped in the process at its GPU address. Image buffers (allocated with an `ImageDType` as the
option) keep their rows at the driver's pitch; a dispatch binds a program's image arguments as texture or UAV
descriptors with the geometry its library declares (`bind_images`).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from uopir import ImageDType

from ..allocator import LRUAllocator
from ..compiler import Compiler
from ..errors import AllocationError
from ..hcq2.cmdbuf import CommandBuffer, PatchKind, Word
from ..hcq2.hwqueue import COMPUTE, COPY, HWQueue, Memory, QueueDevice
from ..hcq2.memory import GPUMemory
from ..hcq2.submitter import SubmitCode
from . import kgsl
from .cl_compiler import CLCompiler
from .errors import QCOMError, UnsupportedGPUError
from .image import image_nbytes, pitch, pitched_rows, split_image_table
from .mock_compiler import MockQCOMCompiler
from .mock_kgsl import MockKGSL
from .program_lib import BUFTYPE_BUF, BUFTYPE_TEX, QCOMProgramInfo, parse_lib
from .queue import HostCopyQueue, Image, QCOMComputeQueue
from .renderer import QCOMRenderer

#: the always-on counter REG_TO_MEM timestamps read ticks at 19.2 MHz: ticks / 19.2 = microseconds
TIMESTAMP_DIVIDER = 19.2
FIRST_UNSUPPORTED = (7, 3)  # chip ids from 7.3 on are the a7xx generation (CP_EVENT_WRITE7, new register layout)
DEFAULT_TIMEOUT_MS = 30_000
CONTEXT_PRIORITY = 8
STATE_PAGE = 0x1000
SIGNAL_STRIDE = 64  # one cache line per signal


def ticks_to_us(ticks: int) -> float:
    """Microseconds in `ticks` of the always-on counter."""
    return ticks / TIMESTAMP_DIVIDER


class Signal:
    """A 32-bit value in GPU memory (CP_EVENT_WRITE writes 32 bits) at `address`, read and written by the host."""

    def __init__(self, address: int):
        self.address = address
        self._word = ctypes.c_uint32.from_address(address)  # GPU objects are CPU-mapped at their GPU address

    @property
    def value(self) -> int:
        return self._word.value

    @value.setter
    def value(self, new: int) -> None:
        self._word.value = new


@dataclass
class LinkedCommands:
    """A queue placed in device memory with its link-time values written: `memory` holds the IB (`ib_bytes`) and then
    the data area; `refs` are the device objects its link-time addresses point at (kept alive with it)."""

    cmd: CommandBuffer
    memory: Memory
    ib_bytes: int
    refs: dict[str, Any] = field(default_factory=dict)


@dataclass
class ImageMemory(GPUMemory):
    """The GPU memory of an image: `image.height` rows `pitch(image)` bytes apart."""

    image: ImageDType | None = None


class QCOMAllocator(LRUAllocator[GPUMemory]):
    """kgsl GPU objects, CPU-mapped: copies go through the mapping once the GPU is idle. An allocation whose options
    are an `ImageDType` is laid out as that image (rows at the driver's pitch); copies move its rows packed."""

    def __init__(self, device: QCOMDevice):
        super().__init__()
        self.device = device

    def _alloc(self, nbytes: int, options: object) -> GPUMemory:
        if isinstance(options, ImageDType):
            if nbytes != options.height * options.row_bytes:
                raise AllocationError(f"{nbytes} bytes are not the {options.height * options.row_bytes} bytes of {options!r}")
            mem = self.device.gpu_alloc(image_nbytes(options))
            return ImageMemory(mem.va, mem.size, mem.handle, mem.view, options)
        return self.device.gpu_alloc(nbytes)

    def _free(self, opaque: GPUMemory, nbytes: int, options: object) -> None:
        self.device.synchronize()
        self.device.gpu_free(opaque)

    def copyin(self, dest: GPUMemory, src: memoryview) -> None:
        self.device.synchronize()
        self._write_new(dest, src)

    def _write_new(self, dest: GPUMemory, src: memoryview) -> None:
        data = np.frombuffer(src, np.uint8)
        if isinstance(dest, ImageMemory) and dest.image is not None:
            pitched_rows(_view(dest), dest.image)[:] = data.reshape(dest.image.height, dest.image.row_bytes)
        else:
            _view(dest)[:src.nbytes] = data

    def copyout(self, dest: memoryview, src: GPUMemory) -> None:
        self.device.synchronize()
        out = np.frombuffer(dest, np.uint8)
        if isinstance(src, ImageMemory) and src.image is not None:
            out.reshape(src.image.height, src.image.row_bytes)[:] = pitched_rows(_view(src), src.image)
        else:
            out[:] = _view(src)[:dest.nbytes]

    def offset(self, opaque: GPUMemory, offset: int, nbytes: int) -> GPUMemory:
        return opaque.offset(offset, nbytes)

    def address(self, opaque: GPUMemory) -> int:
        return opaque.va


def _view(mem: Memory) -> np.ndarray:
    if mem.view is None:
        raise AllocationError("this GPU object has no CPU mapping")
    return mem.view


class QCOMProgram:
    """A kernel in GPU memory: its library's dispatch settings (`info`) and its image."""

    def __init__(self, device: QCOMDevice, name: str, lib: bytes):
        self.device, self.name = device, name
        lib, images = split_image_table(lib)
        self.info: QCOMProgramInfo = parse_lib(lib, name, images)
        # the shader load reads whole 128-byte units
        self.image = device.gpu_alloc(-(-len(self.info.image) // 128) * 128)
        _view(self.image)[:len(self.info.image)] = np.frombuffer(self.info.image, np.uint8)

    def launch(self, addresses: list[int], values: list[int], global_size: tuple[int, int, int], local_size: tuple[int, int, int], *,
               wait: bool = True) -> None:
        """The CompiledDevice launch, for kernels run by hand (the queue runner encodes calls itself): a batch of one call
        (`hcq2.engine.launch_program`) with buffer addresses then variable values (the OpenCL kernel's parameter order),
        `global_size` work-groups of `local_size` work-items; with `wait`, return once it has finished."""
        from ..hcq2.engine import launch_program  # noqa: PLC0415 (the engine imports the runners, which import devices)

        launch_program(self.device, self, addresses, values, tuple(global_size), tuple(local_size), wait=wait)


class QCOMDevice(QueueDevice):
    """An Adreno 6xx GPU: a draw context, GPU objects, a timeline signal; kernels rendered as OpenCL C."""

    has_copy_queue = False  # copies between buffers of the device are host memmoves, outside the batches
    timestamp_divider = TIMESTAMP_DIVIDER

    def __init__(self, name: str = "MOCKQCOM", kgsl_file: kgsl.KGSLFile | None = None, *, rt_nbytes: int | None = None):
        self.name = name
        self.file = kgsl_file if kgsl_file is not None else open_kgsl(name)
        info = kgsl.DevInfo()
        kgsl.call(self.file, "DEVICE_GETPROPERTY", type=kgsl.PROP_DEVICE_INFO, value=ctypes.addressof(info), sizebytes=ctypes.sizeof(info))
        self.chip_id = info.chip_id
        self.gpu_id = (info.chip_id >> 24, info.chip_id >> 16 & 0xFF, info.chip_id >> 8 & 0xFF)
        if self.gpu_id[:2] >= FIRST_UNSUPPORTED:
            raise UnsupportedGPUError(f"{name}: chip id {info.chip_id:#010x} is an Adreno 7xx or later; the QCOM backend drives Adreno 6xx only")
        flags = (kgsl.CONTEXT_PREAMBLE | kgsl.CONTEXT_PWR_CONSTRAINT | kgsl.CONTEXT_NO_FAULT_TOLERANCE | kgsl.CONTEXT_NO_GMEM_ALLOC
                 | kgsl.field(CONTEXT_PRIORITY, kgsl.CONTEXT_PRIORITY_SHIFT, kgsl.CONTEXT_PRIORITY_MASK)
                 | kgsl.field(kgsl.CONTEXT_PREEMPT_STYLE_FINEGRAIN, kgsl.CONTEXT_PREEMPT_STYLE_SHIFT, kgsl.CONTEXT_PREEMPT_STYLE_MASK))
        self.ctx = kgsl.call(self.file, "DRAWCTXT_CREATE", flags=flags).drawctxt_id
        self._set_max_power()
        if rt_nbytes is not None:
            self.rt_nbytes = rt_nbytes
        self._mappings: dict[int, kgsl.Mapping] = {}
        self._last_timestamp = ctypes.c_uint32(0)  # compiled submitters store the timestamps of their submits here
        self.allocator = QCOMAllocator(self)
        self.renderer = QCOMRenderer("a{}{}{}".format(*self.gpu_id))
        self._signals = self.gpu_alloc(STATE_PAGE, uncached=True)
        self.timeline = Signal(self._signals.va)
        self.queue_signals = {kind: Signal(self._signals.va + SIGNAL_STRIDE * (i + 1)) for i, kind in enumerate((COMPUTE, COPY))}
        self.timeline_value = 1
        self._stack: GPUMemory | None = None
        #: bytes of private-memory stack the deepest program encoded so far needs
        self.stack_need = 0

    @functools.cached_property
    def compiler(self) -> Compiler:  # type: ignore[override]
        """MOCKQCOM: the host C compiler through the OpenCL shim; QCOM: the platform's OpenCL compiler."""
        return MockQCOMCompiler() if isinstance(self.file, MockKGSL) else CLCompiler()

    def _set_max_power(self) -> None:
        level = ctypes.c_uint32(kgsl.CONSTRAINT_PWR_MAX)
        constraint = kgsl.PwrConstraint(type=kgsl.CONSTRAINT_PWRLEVEL, context_id=self.ctx, data=ctypes.addressof(level), size=4)
        kgsl.call(self.file, "SETPROPERTY", type=kgsl.PROP_PWR_CONSTRAINT, value=ctypes.addressof(constraint), sizebytes=ctypes.sizeof(constraint))

    # -- memory ---------------------------------------------------------------------------------------------

    def gpu_alloc(self, size: int, *, uncached: bool = False) -> GPUMemory:
        """A CPU-mapped GPU object of at least `size` bytes (whole pages); its GPU address is its CPU address."""
        size = -(-max(size, 1) // kgsl.PAGE) * kgsl.PAGE
        flags = kgsl.field(12, kgsl.MEMALIGN_SHIFT, kgsl.MEMALIGN_MASK) | kgsl.MEMFLAGS_USE_CPU_MAP
        if uncached:
            flags |= kgsl.field(kgsl.CACHEMODE_UNCACHED, kgsl.CACHEMODE_SHIFT, kgsl.CACHEMODE_MASK)
        obj = kgsl.call(self.file, "GPUOBJ_ALLOC", size=size, flags=flags, mmapsize=size)
        mapping = self.file.mmap(size, obj.id * kgsl.PAGE)
        self._mappings[obj.id] = mapping
        return GPUMemory(mapping.address, size, obj.id, mapping.view[:size])

    def gpu_free(self, mem: GPUMemory) -> None:
        """Unmap and free a GPU object made by `gpu_alloc`."""
        mapping = self._mappings.pop(mem.handle, None)
        if mapping is None:
            raise AllocationError(f"GPU object {mem.handle} at {mem.va:#x} is not live (freed twice?)")
        self.file.munmap(mapping)
        kgsl.call(self.file, "GPUOBJ_FREE", id=mem.handle)

    def alloc_memory(self, nbytes: int) -> GPUMemory:
        return self.gpu_alloc(nbytes)

    def free_memory(self, memory: GPUMemory) -> None:
        self.synchronize()
        self.gpu_free(memory)

    @functools.cached_property
    def dummy(self) -> GPUMemory:
        """The page timestamped cache flushes write into."""
        return self.gpu_alloc(STATE_PAGE)

    @functools.cached_property
    def border_color(self) -> GPUMemory:
        """Sampler border colours: zeros, so clamped reads outside an image are black."""
        return self.gpu_alloc(STATE_PAGE)

    def ensure_stack(self, nbytes: int) -> GPUMemory:
        """The private-memory stack, grown to at least `nbytes` (one stack for the device, sized for its deepest program).

        An outgrown stack stays mapped: commands linked against it may be replayed and still point at it."""
        if self._stack is None or self._stack.size < nbytes:
            self._stack = self.gpu_alloc(nbytes)
        return self._stack

    # -- the hcq2 QueueDevice interface ---------------------------------------------------------------------

    def hw_queue(self, kind: str) -> HWQueue:
        return QCOMComputeQueue() if kind == COMPUTE else HostCopyQueue()

    def queue_signal(self, kind: str) -> Signal:
        return self.queue_signals[kind]

    def encode_kernel(self, queue: HWQueue, data: CommandBuffer, program: QCOMProgram, address: Word, addresses: Sequence[Word],
                      values: Sequence[Word], global_size: tuple[int, int, int], local_size: tuple[int, int, int]) -> None:
        """The dispatch's kernel arguments go into the batch's `data`; the program image is at `address`."""
        assert isinstance(queue, QCOMComputeQueue)
        self.stack_need = max(self.stack_need, program.info.stack_bytes)
        buffers, textures, uavs = bind_images(program.info, addresses)
        queue.exec(program.info, address, buffers, values, global_size, local_size, textures=textures, uavs=uavs, data=data)  # type: ignore[arg-type]

    def program_address(self, program: QCOMProgram) -> int:
        return program.image.va

    def link_state(self, names: set[str]) -> tuple[dict[str, int], list[Any]]:
        refs = self._state(names)
        return {name: ref.address if isinstance(ref, Signal) else ref.va for name, ref in refs.items()}, list(refs.values())

    def _state(self, names: set[str]) -> dict[str, Any]:
        refs: dict[str, Any] = {}
        for name in names:
            if name == "stack":
                refs[name] = self.ensure_stack(self.stack_need)
            elif name in ("dummy", "border_color"):
                refs[name] = getattr(self, name)
            elif name == "signal:timeline":
                refs[name] = self.timeline
            elif name.startswith("signal:") and name[7:] in self.queue_signals:
                refs[name] = self.queue_signals[name[7:]]
            else:
                raise QCOMError(f"a command buffer links {name!r}, which is no state of {self.name}")
        return refs

    def run_queue(self, kind: str, queue: HWQueue) -> None:
        if isinstance(queue, HostCopyQueue):
            self._run_host_copies(queue)
        else:
            assert isinstance(queue, QCOMComputeQueue)
            linked = self._link(queue)
            self.submit_commands(COMPUTE, linked.memory, 0, linked.ib_bytes)

    def submit_commands(self, kind: str, memory: Memory, offset: int, nbytes: int) -> None:
        """IOCTL_KGSL_GPU_COMMAND with one IB: the `nbytes` of commands at `memory` + `offset`."""
        if kind != COMPUTE:
            raise QCOMError(f"{self.name} has one CP queue (COMPUTE); its copies run on the host, not as {kind} commands")
        command = kgsl.CommandObject(gpuaddr=memory.va + offset, size=nbytes, flags=kgsl.CMDLIST_IB)
        request = kgsl.call(self.file, "GPU_COMMAND", cmdlist=ctypes.addressof(command), cmdsize=ctypes.sizeof(command), numcmds=1,
                            context_id=self.ctx)
        self.last_timestamp = request.timestamp

    @property
    def last_timestamp(self) -> int:
        """The kgsl timestamp of the last submit on the draw context."""
        return self._last_timestamp.value

    @last_timestamp.setter
    def last_timestamp(self, value: int) -> None:
        self._last_timestamp.value = value

    @property
    def variables(self) -> dict[str, int]:
        """The device's values compiled submitters read: the kgsl file descriptor and draw context, the ioctl function."""
        return {"kgsl_fd": self.file.fd, "kgsl_ctx": self.ctx, "ioctl": self.file.ioctl_address}

    def submit_code(self, kind: str, memory: Memory, offset: int, nbytes: int, code: SubmitCode) -> None:
        """As `submit_commands`: the request and its command object are built here once; each run fills the context id,
        calls ioctl and records the timestamp kgsl gave the submit."""
        if kind != COMPUTE:
            raise QCOMError(f"{self.name} has one CP queue (COMPUTE); its copies run on the host, not as {kind} commands")
        command = kgsl.CommandObject(gpuaddr=memory.va + offset, size=nbytes, flags=kgsl.CMDLIST_IB)
        request = kgsl.GPUCommand(cmdlist=ctypes.addressof(command), cmdsize=ctypes.sizeof(command), numcmds=1)
        code.keep((command, request))
        number = kgsl.IOCTLS["GPU_COMMAND"][0]
        variables = self.variables
        req = code.const(ctypes.addressof(request))
        code.emit(f"*(volatile uint32_t *)(uintptr_t)({req} + {kgsl.GPUCommand.context_id.offset}) = (uint32_t){code.const(variables['kgsl_ctx'])};",
                  f"int (*ioctl_fn)(int, unsigned long, void *) = (int (*)(int, unsigned long, void *))(uintptr_t){code.const(variables['ioctl'])};",
                  f"if (ioctl_fn((int){code.const(variables['kgsl_fd'])}, {number:#x}ul, (void *)(uintptr_t){req}) < 0) "
                  f"{{ detail[1] = errno; {code.stop('FAILED')} }}",
                  f"*{code.pointer(ctypes.addressof(self._last_timestamp), 'uint32_t')} = "
                  f"*(volatile uint32_t *)(uintptr_t)({req} + {kgsl.GPUCommand.timestamp.offset});")

    def submit_error(self, kind: str, errno: int) -> Exception:
        return self.file.ioctl_error(kgsl.IOCTLS["GPU_COMMAND"][0], errno)

    def wait(self, signal: Any, value: int, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        """Block until `signal.value >= value`: kgsl sleeps until the last submit retires, then the signal must show it."""
        if signal.value < value and self.last_timestamp:
            kgsl.call(self.file, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=self.ctx, timestamp=self.last_timestamp, timeout=timeout_ms)
        if signal.value < value:
            raise QCOMError(f"{self.name}: signal at {signal.address:#x} is {signal.value} after kgsl retired timestamp {self.last_timestamp}; "
                            f"waited for {value}: a queue is stuck")

    def synchronize(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        """Wait until everything submitted so far has finished."""
        self.wait(self.timeline, self.timeline_value - 1, timeout_ms)

    def _run_host_copies(self, queue: HostCopyQueue) -> None:
        for op, a, b, nbytes in queue.ops:
            if op == "wait":
                self.wait(Signal(a), b)
            elif op == "copy":
                ctypes.memmove(a, b, nbytes)
            else:
                Signal(a).value = b

    def next_timeline(self) -> int:
        """The timeline value the next submit signals (and advances the counter)."""
        self.timeline_value += 1
        return self.timeline_value - 1

    def _link(self, queue: QCOMComputeQueue) -> LinkedCommands:
        """`run_queue`'s placing of a queue as it is: its IB, then its own data, in the runtime pool, link values written."""
        cmd, ib_bytes = queue.build()
        if not ib_bytes:
            raise QCOMError("cannot link an empty queue")
        memory = self.rt_pool.carve(len(cmd))
        view = _view(memory)
        view[:len(cmd)] = np.frombuffer(bytes(cmd.data), np.uint8)
        self.stack_need = max(self.stack_need, queue.stack_bytes)
        refs = self._state(cmd.names(PatchKind.LINK) - {"data"})
        values, _ = self.link_state(set(refs))
        cmd.link({"data": memory.va + ib_bytes, **values}, into=view)
        return LinkedCommands(cmd, memory, ib_bytes, refs)

    def program(self, name: str, binary: bytes) -> QCOMProgram:
        """Load kernel `name` of a compiled library."""
        return QCOMProgram(self, name, binary)

    def close(self) -> None:
        """Destroy the draw context and close the kgsl file (the driver frees the process's GPU objects)."""
        kgsl.call(self.file, "DRAWCTXT_DESTROY", drawctxt_id=self.ctx)
        self.file.close()


def bind_images(info: QCOMProgramInfo, addresses: Sequence[Word]) -> tuple[list[Word], list[Image], list[Image]]:
    """The buffer arguments of a dispatch split by kind: plain buffers (addresses in the constants), textures and
    UAVs (descriptors of the images at those addresses, with the geometry the program declares)."""
    buffers: list[Word] = []
    textures: list[Image] = []
    uavs: list[Image] = []
    geometry = iter(info.images)
    for address, kind in zip(addresses, (*info.arg_kinds, *[BUFTYPE_BUF] * len(addresses))):  # values follow the buffers
        if kind == BUFTYPE_BUF:
            buffers.append(address)
            continue
        image = next(geometry).image
        bound = Image(address, image.height, image.width, image.base.itemsize, pitch(image))  # type: ignore[arg-type]
        (textures if kind == BUFTYPE_TEX else uavs).append(bound)
    return buffers, textures, uavs


def open_kgsl(name: str) -> kgsl.KGSLFile:
    """The kgsl file for a device name: `MOCKQCOM...` gets a `MockKGSL`, `QCOM` the real /dev/kgsl-3d0."""
    prefix = name.upper().partition(":")[0]
    if prefix == "MOCKQCOM":
        return MockKGSL()
    if prefix == "QCOM":
        return kgsl.DevKGSL()
    raise QCOMError(f"{name!r} is not a QCOM device name; use QCOM or MOCKQCOM")
