"""Trace mode: record an SQTT packet stream (the RDNA3, RDNA4 or CDNA layout, by the kernel's architecture) while a
kernel runs, so emulated runs can be decoded, mapped to instructions and viewed with the `amd_isa.sqtt` tools.

Every wave is traced as if it ran on CU 0 / SIMD 0 (the SIMD the mapper follows), one issue per cycle: WAVESTART,
one packet per issued instruction (VALUINST for VALU, IMMEDIATE for s_nop/s_waitcnt-like SOPP, INST with the
instruction's kind otherwise, JUMP / JUMP_NO for branches), and WAVEEND at s_endpgm. s_delay_alu, s_wait_alu and
s_barrier_wait issue no packet, as on the hardware.

CDNA streams (gfx90a, gfx94x, gfx950) record what the CDNA mapper follows: CDNA_WAVESTART, one CDNA_ISSUE per issued
instruction with the wave's two issue bits set, and CDNA_WAVEEND after s_endpgm; a CDNA_MISC advances the clock by 4
cycles per issue. CDNA issue packets say nothing of branches, so a trace maps back to its code exactly while the waves
take no branch (waves 0-9 of a workgroup: the issue packet has bits for ten).
"""

from collections.abc import Callable

from ..inst import Inst
from ..sqtt import encode
from ..sqtt import packets as P
from ..sqtt.enums import InstOp, InstOpRDNA4
from ..sqtt.mapping import SILENT
from .errors import EmulatorError
from .names import canonical
from .run_loop import Program
from .scalar import END
from .wave_state import WaveState


def _inst_op(inst: Inst) -> InstOp | None:
    """The INST packet kind of a non-VALU instruction (None: it is recorded as IMMEDIATE)."""
    fmt, name = inst.fmt, canonical(inst)
    if fmt == "SOPP":
        if name == "s_barrier":
            return InstOp.BARRIER
        if name in ("s_sendmsg", "s_sendmsghalt"):
            return InstOp.MESSAGE
        return None
    if fmt in ("SOP1", "SOP2", "SOPC", "SOPK"):
        return InstOp.SALU_WR_EXEC if inst.fields.get("sdst") == 126 else InstOp.SALU
    if fmt == "SMEM":
        return InstOp.SMEM_RD
    if fmt == "DS":
        return InstOp.LDS_RD if "load" in name or "_rtn" in name else InstOp.LDS_WR_1
    if fmt in ("GLOBAL", "FLAT", "SCRATCH"):
        return InstOp.FLAT_RD_2 if "load" in name else InstOp.FLAT_WR_3
    return None


#: the RDNA4 numbering of the INST kinds the tracer emits (RDNA4 has no separate EXEC-writing SALU kind)
_RDNA4_OPS = {InstOp.SALU: InstOpRDNA4.SALU, InstOp.SALU_WR_EXEC: InstOpRDNA4.SALU, InstOp.SMEM_RD: InstOpRDNA4.SMEM,
              InstOp.JUMP: InstOpRDNA4.JUMP, InstOp.JUMP_NO: InstOpRDNA4.JUMP_NO, InstOp.MESSAGE: InstOpRDNA4.MESSAGE,
              InstOp.BARRIER: InstOpRDNA4.BARRIER_WAIT, InstOp.FLAT_RD_2: InstOpRDNA4.FLAT_RD_2, InstOp.FLAT_WR_3: InstOpRDNA4.FLAT_WR_3,
              InstOp.LDS_RD: InstOpRDNA4.LDS_RD, InstOp.LDS_WR_1: InstOpRDNA4.LDS_WR_1}  # fmt: skip
#: per layout: the LAYOUT_HEADER value and the packet types of a wave start, a wave end and a non-VALU instruction
_LAYOUTS = {"rdna3": (3, P.WAVESTART, P.WAVEEND, P.INST), "rdna4": (4, P.WAVESTART_RDNA4, P.WAVEEND_RDNA4, P.INST_RDNA4),
            "cdna": (2, P.CDNA_WAVESTART, P.CDNA_WAVEEND, None)}
#: waves a CDNA_ISSUE packet has issue bits for
CDNA_ISSUE_WAVES = 10


class Tracer:
    """Collects SQTT packets for a kernel run of `arch` ("rdna3" or "rdna4"); `stream()` encodes them (LAYOUT_HEADER first)."""

    def __init__(self, arch: str = "rdna3") -> None:
        if arch not in _LAYOUTS:
            raise EmulatorError(f"trace mode writes the RDNA3, RDNA4 and CDNA SQTT layouts, not {arch}'s")
        self.arch = arch
        layout, self._start, self._end, self._inst = _LAYOUTS[arch]
        self.packets: list[P.Packet] = [P.LAYOUT_HEADER.make(0, layout=layout)]
        self.time = 0

    def emit(self, kind: type[P.Packet], **fields: int) -> None:
        if self.arch == "cdna":
            self._emit_cdna(kind, fields)
            return
        self.time += 1
        self.packets.append(kind.make(self.time, delta=1, **fields))

    def _emit_cdna(self, kind: type[P.Packet], fields: dict[str, int]) -> None:
        """The CDNA form of an RDNA-style event: wave start and end as they are, any issued instruction as a
        CDNA_ISSUE of the wave (after a CDNA_MISC advancing the clock by 4 cycles)."""
        wave = fields["wave"]
        if kind in (P.CDNA_WAVESTART, P.CDNA_WAVEEND):
            self.packets.append(kind.make(self.time, wave=wave))
            return
        if wave >= CDNA_ISSUE_WAVES:
            raise EmulatorError(f"a CDNA trace records the issues of waves 0-{CDNA_ISSUE_WAVES - 1} of a workgroup, not wave {wave}")
        self.time += 4
        self.packets.append(P.CDNA_MISC.make(self.time, delta=1))
        self.packets.append(P.CDNA_ISSUE.make(self.time, inst=3 << (2 * wave)))

    def start(self, st: WaveState) -> None:
        """Record a wave start; `st.trace_slot` is its wave id in the trace."""
        self.emit(self._start, wave=st.trace_slot)

    def stream(self) -> bytes:
        """The SQTT byte stream of everything recorded."""
        return encode(self.packets, self.arch)

    def wrap(self, program: Program) -> Program:
        """A copy of `program` whose closures also record their issue."""
        if program.instructions and program.instructions[0].arch.name != self.arch:
            raise EmulatorError(f"this tracer writes the {self.arch} layout; the kernel is {program.instructions[0].arch.name}")
        ops = [self._wrap_one(op, inst) for op, inst in zip(program.ops, program.instructions, strict=False)]
        return program.with_ops([*ops, program.ops[-1]])

    def _op(self, op: InstOp) -> int:
        return _RDNA4_OPS[op] if self.arch == "rdna4" else op

    def _wrap_one(self, op: Callable, inst: Inst) -> Callable:
        name, fmt = canonical(inst), inst.fmt
        emit, end, inst_packet = self.emit, self._end, self._inst
        if name in SILENT:
            return op
        if name.startswith("s_endpgm"):
            cdna = self.arch == "cdna"

            def run_end(st: WaveState):
                result = op(st)
                if result == END:
                    if cdna:  # the CDNA mapper does not map a wave end to s_endpgm: its issue is recorded first
                        emit(P.IMMEDIATE, wave=st.trace_slot)
                    emit(end, wave=st.trace_slot)
                return result
            return run_end
        if fmt == "SOPP" and "branch" in name:
            jump, no_jump = self._op(InstOp.JUMP), self._op(InstOp.JUMP_NO)

            def run_branch(st: WaveState):
                result = op(st)
                emit(inst_packet, wave=st.trace_slot, op=jump if result is not None else no_jump)
                return result
            return run_branch
        if fmt.startswith("VOP") or fmt in ("VOPD", "VINTERP"):
            def run_valu(st: WaveState):
                emit(P.VALUINST, wave=st.trace_slot)
                return op(st)
            return run_valu
        kind = _inst_op(inst)
        if kind is not None:
            kind = self._op(kind)
        if kind is None:
            def run_immediate(st: WaveState):
                emit(P.IMMEDIATE, wave=st.trace_slot)
                return op(st)
            return run_immediate

        def run_inst(st: WaveState):
            emit(inst_packet, wave=st.trace_slot, op=kind)
            return op(st)
        return run_inst
