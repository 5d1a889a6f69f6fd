"""Map SQTT packets to the instructions they record, by following each wave's program counter through the code.

Rules (those the test data's `mapped_insts` was counted with): only packets of CU 0 / SIMD 0 are followed (a
packet without a cu or simd field counts as CU 0 / SIMD 0). WAVESTART puts the wave at the first instruction of
`.text`. Each INST (except OTHER_* ops, which ran on another SIMD), VALUINST and IMMEDIATE maps to the wave's PC and
advances it by the instruction's size; a JUMP INST on a branch advances by size + simm16 * 4. Instructions that never
produce a packet (s_delay_alu, s_wait_alu, s_barrier_wait) are stepped over. IMMEDIATE_MASK maps once per set bit of
its wave mask, CDNA_ISSUE once per wave whose two issue bits are 3. An RDNA WAVEEND maps to the wave's final PC
(s_endpgm); a CDNA_WAVEEND only ends the wave, as in the seed (CDNA issue tracking does not reach s_endpgm reliably).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from ..codeobject import CodeObject
from ..errors import CodeObjectError, DecodeError
from ..inst import Inst, decode_one
from . import packets as P
from .decoder import decode
from .enums import InstOp, InstOpRDNA4, op_name
from .errors import SqttCodeObjectError, SqttMapError
from .layouts import layout_of

# instructions the hardware retires without an SQTT packet
#: instructions that issue no SQTT packet
SILENT = frozenset({"s_delay_alu", "s_wait_alu", "s_barrier_wait"})


class CodeText(Protocol):
    """What the mapper needs of a code object: its `.text` bytes and their load address."""

    text: bytes
    text_addr: int


@dataclass(frozen=True)
class InstructionInfo:
    """The instruction a packet recorded: its address in the code object, the wave that issued it, and the decoded instruction."""

    pc: int
    wave: int
    inst: Inst


def code_map(code: CodeText, target: str) -> dict[int, Inst]:
    """Address -> instruction for the `.text` of a code object, decoded until the first bytes that are not code."""
    text, base = bytes(code.text), code.text_addr
    found: dict[int, Inst] = {}
    offset = 0
    while offset + 4 <= len(text):
        try:
            inst = decode_one(text, target, offset)
        except DecodeError:
            break  # padding or data after the last instruction
        found[base + offset] = inst
        offset += inst.size()
    return found


# what each packet type means to the mapper; other types never map
_ROLES: dict[type[P.Packet], str] = {
    P.WAVESTART: "start", P.WAVESTART_RDNA4: "start", P.CDNA_WAVESTART: "start", P.WAVEEND: "end", P.WAVEEND_RDNA4: "end",
    P.CDNA_WAVEEND: "drop", P.IMMEDIATE_MASK: "mask", P.CDNA_ISSUE: "issue",
    P.VALUINST: "one", P.IMMEDIATE: "one", P.INST: "inst", P.INST_RDNA4: "inst",
}  # fmt: skip
# INST op values of memory ops executed on another SIMD: not the traced wave's next instruction
_OTHER_SIMD_OPS: dict[type[P.Packet], frozenset[int]] = {
    kind: frozenset(v for v in range(1 << 8) if op_name(enum, v).startswith("OTHER_"))
    for kind, enum in ((P.INST, InstOp), (P.INST_RDNA4, InstOpRDNA4))
}
_JUMPS: dict[type[P.Packet], tuple[int, int]] = {P.INST: (InstOp.JUMP, InstOp.JUMP_NO), P.INST_RDNA4: (InstOpRDNA4.JUMP, InstOpRDNA4.JUMP_NO)}


def _follows(packet: P.Packet) -> bool:
    return getattr(packet, "cu", 0) == 0 and getattr(packet, "simd", 0) == 0


@dataclass(frozen=True)
class _Step:
    inst: Inst
    size: int
    silent: bool
    branch: bool


class _Waves:
    """Program counters of the waves in flight on the followed SIMD, keyed by (simd, wave)."""

    def __init__(self, pcs: dict[int, Inst]):
        # mnemonics and sizes once per instruction, not once per packet
        self.steps = {pc: _Step(inst, inst.size(), (name := inst.mnemonic) in SILENT, "branch" in name) for pc, inst in pcs.items()}
        self.entry = next(iter(pcs))
        self.pc: dict[tuple[int, int], int] = {}

    def start(self, key: tuple[int, int]) -> None:
        self.pc[key] = self.entry

    def current(self, key: tuple[int, int], packet: P.Packet) -> tuple[int, _Step]:
        """The wave's next instruction that records a packet (silent ones are stepped over)."""
        pc = self.pc[key]
        step = self.steps.get(pc)
        while step is not None and step.silent:
            pc += step.size
            step = self.steps.get(pc)
        if step is None:
            raise SqttMapError(f"{packet!r} puts wave {key[1]} at pc {pc:#x}, outside the decoded .text; pass the code object of the traced kernel")
        self.pc[key] = pc
        return pc, step

    def issue(self, key: tuple[int, int], packet: P.Packet, branch_taken: bool = False) -> InstructionInfo:
        """Map the wave's next instruction to `packet` and step past it (to the branch target when taken)."""
        pc, step = self.current(key, packet)
        advance = step.size
        if branch_taken:
            offset = step.inst.simm16 & 0xFFFF
            advance += 4 * (offset - 0x10000 if offset & 0x8000 else offset)
        self.pc[key] = pc + advance
        return InstructionInfo(pc, key[1], step.inst)

    def end(self, key: tuple[int, int], packet: P.Packet) -> InstructionInfo:
        pc, step = self.current(key, packet)
        del self.pc[key]
        return InstructionInfo(pc, key[1], step.inst)


def _issue_one(waves: _Waves, packet: P.Packet) -> InstructionInfo | None:
    """Map an INST / VALUINST / IMMEDIATE packet (None for a wave whose start the trace did not record)."""
    key = (0, packet.wave)  # type: ignore[attr-defined]
    if key not in waves.pc:
        return None
    _, step = waves.current(key, packet)
    jumps = _JUMPS.get(type(packet))
    is_jump = jumps is not None and packet.op in jumps  # type: ignore[attr-defined]
    if step.branch and not is_jump:
        raise SqttMapError(f"{packet!r} maps to branch {step.inst} but is not a JUMP / JUMP_NO packet; pass the code object of the traced kernel")
    if is_jump and not step.branch:
        raise SqttMapError(f"{packet!r} is a JUMP / JUMP_NO packet but maps to {step.inst}, not a branch; pass the code object of the traced kernel")
    return waves.issue(key, packet, branch_taken=is_jump and packet.op == jumps[0])  # type: ignore[attr-defined,index]


def map_insts(blob: bytes, code_object: CodeText | bytes, target: str) -> Iterator[tuple[P.Packet, InstructionInfo | None]]:
    """Decode a trace and pair each packet with the instruction it recorded (or None), by the module's rules.

    `code_object` is the traced kernel's code object: ELF bytes, a `CodeObject`, or anything with `.text` and
    `.text_addr`; `target` is its gfx target or family. Every packet is yielded at least once; IMMEDIATE_MASK and
    CDNA_ISSUE yield once per wave they record. Raises SqttMapError (and nothing else for any trace bytes) when the
    trace walks a wave outside the code, a branch without a JUMP packet or a JUMP packet onto a non-branch, and its
    subclass SqttCodeObjectError (also a CodeObjectError) for code object bytes that cannot be read.
    """
    layout = layout_of(target)
    if isinstance(code_object, bytes | bytearray | memoryview):
        try:
            code_object = CodeObject.from_bytes(bytes(code_object))
        except CodeObjectError as e:
            raise SqttCodeObjectError(f"the code object cannot be read: {e}") from None
    pcs = code_map(code_object, target)
    if not pcs:
        raise SqttMapError("the code object's .text holds no instructions; pass the code object of the traced kernel")
    waves = _Waves(pcs)
    for packet in decode(blob, layout):
        role = _ROLES.get(type(packet))
        if role is None or not _follows(packet):
            yield packet, None
        elif role == "one" or (role == "inst" and packet.op not in _OTHER_SIMD_OPS[type(packet)]):  # type: ignore[attr-defined]
            yield packet, _issue_one(waves, packet)
        elif role == "inst":
            yield packet, None
        elif role == "start":
            waves.start((packet.simd, packet.wave))  # type: ignore[attr-defined]
            yield packet, None
        elif role == "end":
            key = (packet.simd, packet.wave)  # type: ignore[attr-defined]
            yield packet, (waves.end(key, packet) if key in waves.pc else None)
        elif role == "drop":
            waves.pc.pop((packet.simd, packet.wave), None)  # type: ignore[attr-defined]
            yield packet, None
        else:
            issued = packet.issued_waves() if role == "issue" else [w for w in range(16) if packet.mask >> w & 1]  # type: ignore[attr-defined]
            simd = getattr(packet, "simd", 0)
            infos = [waves.issue((simd, wave), packet) for wave in issued if (simd, wave) in waves.pc]
            yield from ((packet, info) for info in infos) if infos else ((packet, None),)
