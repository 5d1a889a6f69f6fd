"""`MockCP`: the command processor of the mock Adreno 6xx. It parses an IB's packets exactly (type, count and parity
bits, known opcodes and registers, body sizes), keeps the compute register file, and executes the compute packets:
state loads read GPU memory (and fault outside it), CP_RUN_OPENCL runs the loaded image (a MOCKQCOM shared object)
over the dispatch the registers describe, with the constants the last CP_LOAD_STATE6 uploaded and the texture and UAV
descriptors it loaded (checked by `check_image_descriptor`, then decoded by the kernel's read_image / write_image).

The always-on counter CP_REG_TO_MEM copies (`MockCP.clock`, 19.2 MHz) advances by the emulated work, not host time:
`PACKET_NS` for every type-7 packet but a wait, and for a dispatch `DISPATCH_NS` plus `ITEM_NS` per work-item (the
kernel runs natively on the host, so its work-item count is the mock's measure of its work).
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cpu import load_shared_object
from . import packets as pk
from .errors import GPUFaultError, MalformedPacketError
from .mock_compiler import ENTRY, NPOINTERS, POINTERS

#: opcode -> the body sizes (dwords) it may have; None: any
BODY_DWORDS: dict[int, tuple[int, ...] | None] = {
    pk.CP_NOP: None, pk.CP_SET_MARKER: (1,), pk.CP_WAIT_FOR_IDLE: (0,), pk.CP_WAIT_MEM_WRITES: (0,), pk.CP_EVENT_WRITE: (1, 4),
    pk.CP_WAIT_REG_MEM: (6,), pk.CP_REG_TO_MEM: (3,), pk.CP_LOAD_STATE6_FRAG: (3,), pk.CP_RUN_OPENCL: (1,),
}
#: (state type, state block) of the compute state CP_LOAD_STATE6 may load -> bytes per unit
STATE_UNITS = {(pk.ST6_CONSTANTS, pk.SB6_CS_SHADER): pk.CONSTANT_UNIT, (pk.ST6_SHADER, pk.SB6_CS_SHADER): pk.SHADER_UNIT,
               (pk.ST6_SHADER, pk.SB6_CS_TEX): 16, (pk.ST6_CONSTANTS, pk.SB6_CS_TEX): 64, (pk.ST6_UAV, pk.SB6_CS_SHADER): 64}
TICKS_PER_NS = 0.0192  # the always-on counter runs at 19.2 MHz
DISPATCH_HISTORY = 256
PACKET_NS, DISPATCH_NS, ITEM_NS = 10, 1000, 1  # the emulated work the always-on counter counts (module docstring)

Memory = Callable[[int, int], np.ndarray]  # (address, nbytes) -> writable uint8 view; raises GPUFaultError when unmapped


@dataclass
class StateLoad:
    """One CP_LOAD_STATE6: what was loaded, from where, and (for constants) the bytes read."""

    state_type: int
    block: int
    units: int
    address: int
    data: bytes = b""


@dataclass
class Dispatch:
    """A CP_RUN_OPENCL the mock ran: its sizes, its constant upload, the stack and image it used."""

    groups: tuple[int, int, int]
    local: tuple[int, int, int]
    consts: StateLoad
    image_address: int
    stack_address: int
    stack_bytes: int
    loads: list[StateLoad] = field(default_factory=list)


def _u64(lo: int, hi: int) -> int:
    return lo | hi << 32


#: texture formats the mock samples -> bytes per texel
IMAGE_FORMATS = {pk.FMT6_16_16_16_16_FLOAT: 8, pk.FMT6_32_32_32_32_FLOAT: 16}


def check_image_descriptor(words: list[int], name: str, memory: Memory) -> None:
    """Reject an A6XX texture constant the mock cannot sample, naming it: a format other than RGBA half / float, a
    type other than 2-D, an empty image, a pitch that is not a multiple of 64 bytes holding a row (or whose PITCHALIGN
    field disagrees with it), or texels outside GPU memory."""
    fmt = words[0] >> pk.TEX_CONST_0_FMT_SHIFT & 0xFF
    width, height = words[1] >> pk.TEX_CONST_1_WIDTH_SHIFT & 0x7FFF, words[1] >> pk.TEX_CONST_1_HEIGHT_SHIFT & 0x7FFF
    kind, pitch, pitchalign = words[2] >> pk.TEX_CONST_2_TYPE_SHIFT & 0x7, words[2] >> pk.TEX_CONST_2_PITCH_SHIFT & 0x3FFFFF, words[2] & 0xF
    if fmt not in IMAGE_FORMATS:
        raise MalformedPacketError(f"{name}: format {fmt} is not FMT6_16_16_16_16_FLOAT or FMT6_32_32_32_32_FLOAT")
    if kind != pk.A6XX_TEX_2D or not width or not height:
        raise MalformedPacketError(f"{name}: a {width} x {height} image of type {kind}, expected a non-empty 2-D (type {pk.A6XX_TEX_2D}) image")
    row = width * IMAGE_FORMATS[fmt]
    if pitch % 64 or pitch < row or pitchalign != (pitch & -pitch).bit_length() - 7:
        raise MalformedPacketError(f"{name}: pitch {pitch} (PITCHALIGN {pitchalign}) does not hold a {row}-byte row at a multiple of 64 bytes")
    address = _u64(words[4], words[5])
    try:
        memory(address, pitch * (height - 1) + row)
    except GPUFaultError as e:
        raise GPUFaultError(f"{name}: the {width} x {height} image at {address:#x} is not GPU memory: {e}") from None


class MockCP:
    """Parses and executes IBs against `memory`."""

    def __init__(self, memory: Memory):
        self.memory = memory
        self.regs: dict[int, int] = {}
        self.loads: list[StateLoad] = []  # since the last dispatch
        #: the last DISPATCH_HISTORY dispatches (tests inspect them; a long run does not grow without bound)
        self.dispatches: deque[Dispatch] = deque(maxlen=DISPATCH_HISTORY)
        self._libraries: dict[bytes, tuple[Any, list[int]]] = {}
        #: nanoseconds of emulated work so far (the always-on counter is `clock`)
        self.elapsed_ns = 0

    @property
    def clock(self) -> int:
        """The always-on counter: 19.2 MHz ticks of emulated work."""
        return int(self.elapsed_ns * TICKS_PER_NS)

    def execute(self, ib_address: int, ib_bytes: int) -> None:
        """Run the packets of the IB at `ib_address` (`ib_bytes` long)."""
        if ib_bytes % 4:
            raise MalformedPacketError(f"an IB is whole dwords, this one has {ib_bytes} bytes")
        words = [int(w) for w in self.memory(ib_address, ib_bytes).view(np.uint32)]
        at = 0
        while at < len(words):
            header = words[at]
            kind = header >> 28
            if kind == pk.TYPE4:
                count, register = header & pk.PKT4_MAX_COUNT, (header >> 8) & 0x3FFFF
                if (header >> 7) & 1 != pk.parity(count) or (header >> 27) & 1 != pk.parity(register):
                    raise MalformedPacketError(f"type-4 packet at dword {at} of the IB at {ib_address:#x}: header {header:#010x} has a bad "
                                               "parity bit")
                name = f"type-4 write of {count} registers at {register:#x}"
                self._check_fits(name, at, count, len(words), ib_address)
                self._write_registers(register, words[at + 1:at + 1 + count], at, ib_address)
            elif kind == pk.TYPE7:
                count, opcode = header & pk.PKT7_MAX_COUNT, (header >> 16) & 0x7F
                if (header >> 15) & 1 != pk.parity(count) or (header >> 23) & 1 != pk.parity(opcode) or (header >> 24) & 0xF:
                    raise MalformedPacketError(f"type-7 packet at dword {at} of the IB at {ib_address:#x}: header {header:#010x} has a bad "
                                               "parity bit or reserved bits set")
                name = pk.OPCODE_NAMES.get(opcode, f"opcode {opcode:#x}")
                self._check_fits(name, at, count, len(words), ib_address)
                if opcode not in BODY_DWORDS:
                    raise MalformedPacketError(f"{name} at dword {at} of the IB at {ib_address:#x}: the mock CP does not execute it")
                allowed = BODY_DWORDS[opcode]
                if allowed is not None and count not in allowed:
                    raise MalformedPacketError(f"{name} at dword {at} of the IB at {ib_address:#x} has {count} body dwords, expected "
                                               f"{' or '.join(map(str, allowed))}")
                self._command(opcode, words[at + 1:at + 1 + count], f"{name} at dword {at} of the IB at {ib_address:#x}")
            else:
                raise MalformedPacketError(f"dword {at} of the IB at {ib_address:#x} ({header:#010x}) is not a type-4 or type-7 packet header")
            at += 1 + count

    @staticmethod
    def _check_fits(name: str, at: int, count: int, total: int, ib_address: int) -> None:
        if at + 1 + count > total:
            raise MalformedPacketError(f"{name} at dword {at} of the IB at {ib_address:#x} runs {at + 1 + count - total} dwords past the IB's end")

    def _write_registers(self, register: int, values: list[int], at: int, ib_address: int) -> None:
        for base, (_, span) in pk.COMPUTE_REGISTERS.items():
            if base <= register and register + len(values) <= base + span:
                break
        else:
            raise MalformedPacketError(f"type-4 write of {len(values)} registers at {register:#x} (dword {at} of the IB at {ib_address:#x}) "
                                       "touches registers outside the A6xx compute state")
        for i, value in enumerate(values):
            self.regs[register + i] = value

    def _reg64(self, register: int) -> int:
        return _u64(self.regs.get(register, 0), self.regs.get(register + 1, 0))

    def _command(self, opcode: int, body: list[int], where: str) -> None:
        if opcode != pk.CP_WAIT_REG_MEM:
            self.elapsed_ns += PACKET_NS
        if opcode == pk.CP_SET_MARKER and body[0] >> pk.SET_MARKER_MODE_SHIFT & 0xF != pk.RM6_COMPUTE:
            raise MalformedPacketError(f"{where}: the mock runs compute only (RM6_COMPUTE), not marker mode {body[0]:#x}")
        if opcode == pk.CP_EVENT_WRITE:
            event = body[0] & 0xFF
            if len(body) == 4:
                if event != pk.CACHE_FLUSH_TS:
                    raise MalformedPacketError(f"{where}: only CACHE_FLUSH_TS writes a value, not event {event:#x}")
                self.memory(_u64(body[1], body[2]), 4).view(np.uint32)[0] = body[3]
            elif event not in (pk.CACHE_FLUSH_TS, pk.CACHE_INVALIDATE):
                raise MalformedPacketError(f"{where}: unknown event {event:#x}")
        elif opcode == pk.CP_WAIT_REG_MEM:
            if body[0] != pk.WRITE_GE << pk.WAIT_REG_MEM_FUNCTION_SHIFT | pk.POLL_MEMORY << pk.WAIT_REG_MEM_POLL_SHIFT:
                raise MalformedPacketError(f"{where}: the mock polls memory for >= only, not mode {body[0]:#x}")
            value = int(self.memory(_u64(body[1], body[2]), 4).view(np.uint32)[0]) & body[4]
            if value < body[3]:  # the mock runs one IB to completion: nothing else could ever write the signal
                raise GPUFaultError(f"{where} waits for {body[3]} at {_u64(body[1], body[2]):#x}, which holds {value}: the queue would hang")
        elif opcode == pk.CP_REG_TO_MEM:
            if body[0] != pk.REG_CP_ALWAYS_ON_COUNTER | 2 << pk.REG_TO_MEM_CNT_SHIFT | pk.REG_TO_MEM_64B:
                raise MalformedPacketError(f"{where}: the mock copies only the 64-bit always-on counter, not {body[0]:#x}")
            self.memory(_u64(body[1], body[2]), 8).view(np.uint64)[0] = self.clock
        elif opcode == pk.CP_LOAD_STATE6_FRAG:
            self._load_state(body, where)
        elif opcode == pk.CP_RUN_OPENCL:
            self._run(where)

    def _load_state(self, body: list[int], where: str) -> None:
        word0 = body[0]
        state_type, source = word0 >> pk.LOAD_STATE6_STATE_TYPE_SHIFT & 3, word0 >> pk.LOAD_STATE6_STATE_SRC_SHIFT & 3
        block, units = word0 >> pk.LOAD_STATE6_STATE_BLOCK_SHIFT & 0xF, word0 >> pk.LOAD_STATE6_NUM_UNIT_SHIFT
        if source != pk.SS6_INDIRECT or word0 & 0x3FFF:
            raise MalformedPacketError(f"{where}: the mock loads state from memory only (SS6_INDIRECT, no destination offset)")
        unit = STATE_UNITS.get((state_type, block))
        if unit is None:
            raise MalformedPacketError(f"{where}: state type {state_type} into block {block} is not compute state")
        address = _u64(body[1], body[2])
        try:
            data = bytes(self.memory(address, units * unit))
        except GPUFaultError as e:
            raise GPUFaultError(f"{where} reads {units} units of {unit} bytes at {address:#x}: {e}") from None
        self.loads.append(StateLoad(state_type, block, units, address, data))

    def _run(self, where: str) -> None:
        regs = self.regs
        consts = next((s for s in reversed(self.loads) if (s.state_type, s.block) == (pk.ST6_CONSTANTS, pk.SB6_CS_SHADER)), None)
        shader = next((s for s in reversed(self.loads) if (s.state_type, s.block) == (pk.ST6_SHADER, pk.SB6_CS_SHADER)), None)
        if consts is None or shader is None:
            raise MalformedPacketError(f"{where}: no constants or no shader were loaded for the dispatch")
        image_address = self._reg64(pk.REG_SP_CS_BASE)
        if shader.address != image_address or regs.get(pk.REG_SP_CS_INSTR_SIZE) != shader.units:
            raise MalformedPacketError(f"{where}: the loaded shader ({shader.units} units at {shader.address:#x}) is not the one "
                                       f"SP_CS_BASE / SP_CS_INSTR_SIZE name ({regs.get(pk.REG_SP_CS_INSTR_SIZE)} at {image_address:#x})")
        config = regs.get(pk.REG_SP_CS_CONFIG, 0)
        if not config & pk.CS_CONFIG_ENABLED or not regs.get(pk.REG_SP_CS_CONST_CONFIG, 0) & pk.CS_CONST_CONFIG_ENABLED:
            raise MalformedPacketError(f"{where}: SP_CS_CONFIG or SP_CS_CONST_CONFIG does not enable the compute shader")
        ndrange = regs.get(pk.REG_SP_CS_NDRANGE_0, 0)
        local = (ndrange >> 2 & 0x3FF, ndrange >> 12 & 0x3FF, ndrange >> 22 & 0x3FF)
        local = (local[0] + 1, local[1] + 1, local[2] + 1)
        groups = tuple(regs.get(pk.REG_SP_CS_KERNEL_GROUP_X + d, 0) for d in range(3))
        sizes = tuple(regs.get(pk.REG_SP_CS_NDRANGE_0 + 1 + 2 * d, 0) for d in range(3))
        if sizes != tuple(g * n for g, n in zip(groups, local, strict=True)) or 0 in groups:
            raise MalformedPacketError(f"{where}: global sizes {sizes} are not work-groups {groups} times work-group size {local}")
        stack_address, stack_bytes = self._reg64(pk.REG_SP_CS_PVT_MEM_BASE), 4 * regs.get(pk.REG_SP_CS_PVT_MEM_STACK_OFFSET, 0)
        try:
            self.memory(stack_address, stack_bytes)
        except GPUFaultError as e:
            raise GPUFaultError(f"{where}: the private-memory stack ({stack_bytes} bytes at {stack_address:#x}) is not mapped: {e}") from None
        self._check_bindings(config, where)
        offset = regs.get(pk.REG_SP_CS_PROGRAM_COUNTER_OFFSET, 0)
        image = shader.data[offset:]
        entry, pointers = self._entry(image)
        for at in pointers:
            address = int.from_bytes(consts.data[at:at + 8], "little")
            try:
                self.memory(address, 1)
            except GPUFaultError:
                raise GPUFaultError(f"{where}: the buffer argument at constant byte {at} points at {address:#x}, which is not GPU memory") from None
        textures, uavs = self._image_state(config, where)
        dims = (ctypes.c_uint32 * 6)(*local, *groups)
        const_file = ctypes.create_string_buffer(consts.data, len(consts.data))
        status = entry(const_file, dims, textures, uavs)
        self.elapsed_ns += DISPATCH_NS + ITEM_NS * math.prod(sizes)
        self.dispatches.append(Dispatch(groups, local, consts, image_address, stack_address, stack_bytes, self.loads))  # type: ignore[arg-type]
        self.loads = []
        if status:
            raise GPUFaultError(f"{where}: the kernel found its constants corrupt (status {status}): the kernel arguments are not where the "
                                "program's descriptors put them")

    def _check_bindings(self, config: int, where: str) -> None:
        counts = {"samplers": (config >> pk.CS_CONFIG_NSAMP_SHIFT & 0x1F, (pk.ST6_SHADER, pk.SB6_CS_TEX)),
                  "textures": (config >> pk.CS_CONFIG_NTEX_SHIFT & 0xFF, (pk.ST6_CONSTANTS, pk.SB6_CS_TEX)),
                  "UAVs": (config >> pk.CS_CONFIG_NUAV_SHIFT & 0x7F, (pk.ST6_UAV, pk.SB6_CS_SHADER))}
        for what, (count, key) in counts.items():
            loaded = sum(s.units for s in self.loads if (s.state_type, s.block) == key)
            if count and loaded < min(count, 16):
                raise MalformedPacketError(f"{where}: SP_CS_CONFIG declares {count} {what} but {loaded} were loaded")

    def _image_state(self, config: int, where: str) -> tuple[Any, Any]:
        """The texture and UAV descriptors the dispatch loaded, each checked (`check_image_descriptor`)."""
        out = []
        for what, key, count in (("texture", (pk.ST6_CONSTANTS, pk.SB6_CS_TEX), config >> pk.CS_CONFIG_NTEX_SHIFT & 0xFF),
                                 ("UAV", (pk.ST6_UAV, pk.SB6_CS_SHADER), config >> pk.CS_CONFIG_NUAV_SHIFT & 0x7F)):
            load = next((s for s in reversed(self.loads) if (s.state_type, s.block) == key), None)
            data = b"" if load is None else load.data[:count * 64]
            if len(data) < count * 64:
                raise MalformedPacketError(f"{where}: SP_CS_CONFIG declares {count} {what}s but the last {what} load holds {len(data) // 64}")
            for k in range(count):
                check_image_descriptor(list(struct.unpack_from("<16I", data, 64 * k)), f"{where}: {what} descriptor {k}", self.memory)
            out.append(ctypes.create_string_buffer(data, max(len(data), 4)))
        return out[0], out[1]

    def _entry(self, image: bytes) -> tuple[Any, list[int]]:
        """The entry point of a MOCKQCOM image and the constant offsets of its pointer arguments (loaded once)."""
        digest = hashlib.sha256(image).digest()
        if (loaded := self._libraries.get(digest)) is None:
            try:
                library = load_shared_object(image)
                fn = getattr(library, ENTRY)
                count = ctypes.c_uint32.in_dll(library, NPOINTERS).value
                pointers = list((ctypes.c_uint32 * count).in_dll(library, POINTERS))
            except (OSError, AttributeError, ValueError):
                raise GPUFaultError(f"the shader image ({len(image)} bytes) is not a MOCKQCOM program") from None
            fn.argtypes, fn.restype = [ctypes.c_void_p] * 4, ctypes.c_int
            loaded = self._libraries[digest] = (fn, pointers)
        return loaded
