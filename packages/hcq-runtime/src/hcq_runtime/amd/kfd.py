"""`KFDDriver`: the driver interface on a real GPU through /dev/kfd ioctls (Linux amdkfd, interface 1.x).

Struct layouts and ioctl numbers follow the kernel's `include/uapi/linux/kfd_ioctl.h`. Nothing here runs without an
AMD GPU; the module only defines classes, so importing it is always safe.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
from pathlib import Path

import numpy as np

from ..ffi import IOC_READ, IOC_WRITE, ioctl_number
from .driver import KFD_QUEUE_TYPE, Doorbell, Driver, GPUMemory, QueueDesc, QueueKind
from .errors import KFDError

TOPOLOGY = Path("/sys/devices/virtual/kfd/kfd/topology/nodes")
PAGE = mmap.PAGESIZE

ALLOC_VRAM, ALLOC_GTT = 1 << 0, 1 << 1
ALLOC_WRITABLE, ALLOC_EXECUTABLE, ALLOC_PUBLIC, ALLOC_NO_SUBSTITUTE = 1 << 31, 1 << 30, 1 << 29, 1 << 28
ALLOC_COHERENT, ALLOC_UNCACHED = 1 << 26, 1 << 25
EVENT_SIGNAL = 0
MAX_QUEUE_PERCENTAGE, QUEUE_PRIORITY = 100, 7
EOP_BUFFER_SIZE = 0x1000
MAP_NORESERVE, MAP_FIXED = 0x4000, 0x10


class GetVersion(ctypes.Structure):
    """struct kfd_ioctl_get_version_args."""

    _fields_ = [("major_version", ctypes.c_uint32), ("minor_version", ctypes.c_uint32)]


class CreateQueue(ctypes.Structure):
    """struct kfd_ioctl_create_queue_args."""

    _fields_ = [("ring_base_address", ctypes.c_uint64), ("write_pointer_address", ctypes.c_uint64),
                ("read_pointer_address", ctypes.c_uint64), ("doorbell_offset", ctypes.c_uint64),
                ("ring_size", ctypes.c_uint32), ("gpu_id", ctypes.c_uint32), ("queue_type", ctypes.c_uint32),
                ("queue_percentage", ctypes.c_uint32), ("queue_priority", ctypes.c_uint32), ("queue_id", ctypes.c_uint32),
                ("eop_buffer_address", ctypes.c_uint64), ("eop_buffer_size", ctypes.c_uint64),
                ("ctx_save_restore_address", ctypes.c_uint64), ("ctx_save_restore_size", ctypes.c_uint32),
                ("ctl_stack_size", ctypes.c_uint32), ("sdma_engine_id", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


class DestroyQueue(ctypes.Structure):
    """struct kfd_ioctl_destroy_queue_args."""

    _fields_ = [("queue_id", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


class CreateEvent(ctypes.Structure):
    """struct kfd_ioctl_create_event_args."""

    _fields_ = [("event_page_offset", ctypes.c_uint64), ("event_trigger_data", ctypes.c_uint32), ("event_type", ctypes.c_uint32),
                ("auto_reset", ctypes.c_uint32), ("node_id", ctypes.c_uint32), ("event_id", ctypes.c_uint32),
                ("event_slot_index", ctypes.c_uint32)]


class EventData(ctypes.Structure):
    """kfd_event_data: a 32-byte union (exception data / signal age), an extension pointer, the event id."""

    _fields_ = [("payload", ctypes.c_uint8 * 32), ("kfd_event_data_ext", ctypes.c_uint64), ("event_id", ctypes.c_uint32),
                ("pad", ctypes.c_uint32)]


class WaitEvents(ctypes.Structure):
    """struct kfd_ioctl_wait_events_args."""

    _fields_ = [("events_ptr", ctypes.c_uint64), ("num_events", ctypes.c_uint32), ("wait_for_all", ctypes.c_uint32),
                ("timeout", ctypes.c_uint32), ("wait_result", ctypes.c_uint32)]


class AcquireVM(ctypes.Structure):
    """struct kfd_ioctl_acquire_vm_args."""

    _fields_ = [("drm_fd", ctypes.c_uint32), ("gpu_id", ctypes.c_uint32)]


class AllocMemory(ctypes.Structure):
    """struct kfd_ioctl_alloc_memory_of_gpu_args."""

    _fields_ = [("va_addr", ctypes.c_uint64), ("size", ctypes.c_uint64), ("handle", ctypes.c_uint64), ("mmap_offset", ctypes.c_uint64),
                ("gpu_id", ctypes.c_uint32), ("flags", ctypes.c_uint32)]


class FreeMemory(ctypes.Structure):
    """struct kfd_ioctl_free_memory_of_gpu_args."""

    _fields_ = [("handle", ctypes.c_uint64)]


class MapMemory(ctypes.Structure):
    """kfd_ioctl_map_memory_to_gpu_args and kfd_ioctl_unmap_memory_from_gpu_args (same layout)."""

    _fields_ = [("handle", ctypes.c_uint64), ("device_ids_array_ptr", ctypes.c_uint64), ("n_devices", ctypes.c_uint32),
                ("n_success", ctypes.c_uint32)]


class RuntimeEnable(ctypes.Structure):
    """struct kfd_ioctl_runtime_enable_args."""

    _fields_ = [("r_debug", ctypes.c_uint64), ("mode_mask", ctypes.c_uint32), ("capabilities_mask", ctypes.c_uint32)]


def _kfd_ioctl(direction: int, nr: int, struct_t: type[ctypes.Structure]) -> int:
    return ioctl_number(direction, ord("K"), nr, struct_t)


#: name -> (ioctl number, argument struct)
IOCTLS: dict[str, tuple[int, type[ctypes.Structure]]] = {
    name: (_kfd_ioctl(direction, nr, struct_t), struct_t) for name, direction, nr, struct_t in (
        ("GET_VERSION", IOC_READ, 0x01, GetVersion),
        ("CREATE_QUEUE", IOC_READ | IOC_WRITE, 0x02, CreateQueue),
        ("DESTROY_QUEUE", IOC_READ | IOC_WRITE, 0x03, DestroyQueue),
        ("CREATE_EVENT", IOC_READ | IOC_WRITE, 0x08, CreateEvent),
        ("WAIT_EVENTS", IOC_READ | IOC_WRITE, 0x0C, WaitEvents),
        ("ACQUIRE_VM", IOC_WRITE, 0x15, AcquireVM),
        ("ALLOC_MEMORY_OF_GPU", IOC_READ | IOC_WRITE, 0x16, AllocMemory),
        ("FREE_MEMORY_OF_GPU", IOC_WRITE, 0x17, FreeMemory),
        ("MAP_MEMORY_TO_GPU", IOC_READ | IOC_WRITE, 0x18, MapMemory),
        ("UNMAP_MEMORY_FROM_GPU", IOC_READ | IOC_WRITE, 0x19, MapMemory),
        ("RUNTIME_ENABLE", IOC_READ | IOC_WRITE, 0x25, RuntimeEnable),
    )
}


def _libc_mmap() -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.mmap
    fn.restype = ctypes.c_void_p
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    return fn


def _host_view(address: int, size: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(address))


class _KFDDoorbell(Doorbell):
    def __init__(self, words: np.ndarray):
        self.words, self.address = words, words.ctypes.data

    def ring(self, value: int) -> None:
        self.words[0] = value


class KFDDriver(Driver):
    """/dev/kfd for the `index`-th GPU node of the KFD topology."""

    def __init__(self, index: int = 0):
        try:
            nodes = sorted((p for p in TOPOLOGY.iterdir() if int((p / "gpu_id").read_text() or 0)), key=lambda p: int(p.name))
        except OSError as e:
            raise KFDError(f"no KFD topology ({e.strerror}): is the amdgpu driver loaded? use MOCKAMD to run without a GPU") from None
        if index >= len(nodes):
            raise KFDError(f"AMD:{index} does not exist: the KFD topology lists {len(nodes)} GPU(s)")
        node = nodes[index]
        self.gpu_id = int((node / "gpu_id").read_text())
        self.props = {key: int(value) for key, value in (line.split() for line in (node / "properties").read_text().splitlines() if line.strip())}
        version = self.props["gfx_target_version"]
        self.target = (version // 10000, (version // 100) % 100, version % 100)
        try:
            self.kfd = os.open("/dev/kfd", os.O_RDWR | os.O_CLOEXEC)
            self.drm = os.open(f"/dev/dri/renderD{self.props['drm_render_minor']}", os.O_RDWR | os.O_CLOEXEC)
        except OSError as e:
            raise KFDError(f"cannot open the GPU ({e.filename}: {e.strerror}); add yourself to the render and video groups") from None
        self._mmap = _libc_mmap()
        self._gpu_ids = (ctypes.c_uint32 * 1)(self.gpu_id)
        self._doorbell_page: tuple[int, mmap.mmap] | None = None
        self._event_page: GPUMemory | None = None

    def _ioctl(self, name: str, **fields: int) -> ctypes.Structure:
        number, struct_t = IOCTLS[name]
        args = struct_t(**fields)
        try:
            fcntl.ioctl(self.kfd, number, args)
        except OSError as e:
            raise KFDError(f"AMDKFD_IOC_{name} failed: {e.strerror}") from None
        return args

    def version(self) -> tuple[int, int]:
        got = self._ioctl("GET_VERSION")
        return got.major_version, got.minor_version

    def acquire_vm(self) -> None:
        self._ioctl("ACQUIRE_VM", drm_fd=self.drm, gpu_id=self.gpu_id)
        if self.version() >= (1, 14):
            self._ioctl("RUNTIME_ENABLE", mode_mask=0)

    def _map_anonymous(self, size: int, prot: int, flags: int, address: int = 0, fd: int = -1, offset: int = 0) -> int:
        result = self._mmap(address, size, prot, flags, fd, offset)
        if result in (None, ctypes.c_void_p(-1).value):
            raise KFDError(f"mmap of {size} bytes failed: {os.strerror(ctypes.get_errno())}")
        return result

    def alloc(self, size: int, *, host_visible: bool = True, uncached: bool = False) -> GPUMemory:
        size = -(-size // PAGE) * PAGE
        flags = ALLOC_WRITABLE | ALLOC_EXECUTABLE | ALLOC_NO_SUBSTITUTE
        flags |= (ALLOC_COHERENT | ALLOC_UNCACHED | ALLOC_GTT) if uncached else ALLOC_VRAM
        flags |= ALLOC_PUBLIC if host_visible else 0
        # reserve the virtual range first: KFD maps the buffer at the same address for the GPU and the host
        va = self._map_anonymous(size, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE)
        mem = self._ioctl("ALLOC_MEMORY_OF_GPU", va_addr=va, size=size, gpu_id=self.gpu_id, flags=flags)
        if host_visible:
            self._map_anonymous(size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | MAP_FIXED, va, self.drm, mem.mmap_offset)
        mapped = self._ioctl("MAP_MEMORY_TO_GPU", handle=mem.handle, device_ids_array_ptr=ctypes.addressof(self._gpu_ids), n_devices=1)
        if mapped.n_success != 1:
            raise KFDError(f"mapping {size} bytes at {va:#x} to the GPU failed")
        return GPUMemory(va, size, mem.handle, _host_view(va, size) if host_visible else None)

    def free(self, mem: GPUMemory) -> None:
        self._ioctl("UNMAP_MEMORY_FROM_GPU", handle=mem.handle, device_ids_array_ptr=ctypes.addressof(self._gpu_ids), n_devices=1)
        self._ioctl("FREE_MEMORY_OF_GPU", handle=mem.handle)
        ctypes.CDLL(None).munmap(ctypes.c_void_p(mem.va), ctypes.c_size_t(mem.size))

    def _context_save_sizes(self) -> tuple[int, int, int]:
        """(context save area, control stack, debug area) sizes for a compute queue, from the topology properties."""
        simd_per_cu = self.props.get("simd_per_cu", 2)
        cus = self.props["simd_count"] // simd_per_cu
        waves = cus * self.props["max_waves_per_simd"] * simd_per_cu
        vgpr_per_cu = 0x60000 if self.target in {(11, 0, 0), (11, 0, 1), (11, 5, 1), (12, 0, 0), (12, 0, 1)} else 0x40000
        wg_data = -(-(vgpr_per_cu + 0x4000 + 0x10000 + 0x1000) * cus // PAGE) * PAGE
        ctl_stack = -(-(12 * waves + 8 + 40) // PAGE) * PAGE
        return wg_data + ctl_stack, ctl_stack, -(-(waves * 32) // 64) * 64

    def create_queue(self, kind: QueueKind, ring: GPUMemory, pointers: GPUMemory) -> QueueDesc:
        if ring.view is None or pointers.view is None:
            raise KFDError("a queue needs a host-visible ring and read/write pointers")
        extra: dict[str, int] = {}
        owned: tuple[GPUMemory, ...] = ()
        if kind is QueueKind.COMPUTE:
            ctx_size, ctl_stack, debug = self._context_save_sizes()
            eop, cwsr = self.alloc(EOP_BUFFER_SIZE, host_visible=False), self.alloc(ctx_size + debug, host_visible=False)
            owned = (eop, cwsr)
            extra = {"eop_buffer_address": eop.va, "eop_buffer_size": eop.size, "ctx_save_restore_address": cwsr.va,
                     "ctx_save_restore_size": ctx_size, "ctl_stack_size": ctl_stack}
        queue = self._ioctl("CREATE_QUEUE", ring_base_address=ring.va, ring_size=ring.size, gpu_id=self.gpu_id, queue_type=KFD_QUEUE_TYPE[kind],
                            queue_percentage=MAX_QUEUE_PERCENTAGE, queue_priority=QUEUE_PRIORITY, read_pointer_address=pointers.va,
                            write_pointer_address=pointers.va + 8, **extra)
        base = queue.doorbell_offset & ~0x1FFF  # the doorbells of a process are two pages
        if self._doorbell_page is None:
            self._doorbell_page = (base, mmap.mmap(self.kfd, 0x2000, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=base))
        page = self._doorbell_page[1]
        doorbell = np.frombuffer(page, np.uint64, count=1, offset=queue.doorbell_offset - self._doorbell_page[0])
        words = pointers.view[:16].view(np.uint64)
        return QueueDesc(queue.queue_id, kind, ring.view.view(np.uint32), words[0:1], words[1:2], _KFDDoorbell(doorbell), owned)

    def destroy_queue(self, queue: QueueDesc) -> None:
        self._ioctl("DESTROY_QUEUE", queue_id=queue.queue_id)
        for mem in queue.memory:
            self.free(mem)

    def create_event(self) -> tuple[int, int]:
        if self._event_page is None:
            self._event_page = self.alloc(0x8000, uncached=True)
            self._ioctl("CREATE_EVENT", event_page_offset=self._event_page.handle)
        event = self._ioctl("CREATE_EVENT", event_type=EVENT_SIGNAL, auto_reset=1)
        return event.event_id, self._event_page.va + 8 * event.event_slot_index

    def wait_event(self, event_id: int, timeout_ms: int) -> bool:
        data = EventData(event_id=event_id)
        result = self._ioctl("WAIT_EVENTS", events_ptr=ctypes.addressof(data), num_events=1, wait_for_all=1, timeout=timeout_ms)
        return result.wait_result == 0

    def close(self) -> None:
        os.close(self.drm)
        os.close(self.kfd)
