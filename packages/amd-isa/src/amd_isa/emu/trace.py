"""Trace mode: record an SQTT packet stream (RDNA3 layout) while a kernel runs, so emulated runs can be decoded,
mapped to instructions and viewed with the `amd_isa.sqtt` tools.

Every wave is traced as if it ran on CU 0 / SIMD 0 (the SIMD the mapper follows), one issue per cycle: WAVESTART,
one packet per issued instruction (VALUINST for VALU, IMMEDIATE for s_nop/s_waitcnt-like SOPP, INST with the
instruction's kind otherwise, JUMP / JUMP_NO for branches), and WAVEEND at s_endpgm. s_delay_alu issues no packet,
as on the hardware.
"""

from collections.abc import Callable

from ..inst import Inst
from ..sqtt import encode
from ..sqtt import packets as P
from ..sqtt.ops import InstOp
from .errors import EmulatorError
from .names import canonical
from .program import Program
from .scalar import END
from .state import WaveState

_SILENT = ("s_delay_alu",)


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


class Tracer:
    """Collects SQTT packets for a kernel run; `stream()` encodes them (LAYOUT_HEADER first)."""

    def __init__(self) -> None:
        self.packets: list[P.Packet] = [P.LAYOUT_HEADER.make(0, layout=3)]
        self.time = 0

    def emit(self, kind: type[P.Packet], **fields: int) -> None:
        self.time += 1
        self.packets.append(kind.make(self.time, delta=1, **fields))

    def start(self, st: WaveState) -> None:
        """Record a wave start; `st.trace_slot` is its wave id in the trace."""
        self.emit(P.WAVESTART, wave=st.trace_slot)

    def stream(self) -> bytes:
        """The SQTT byte stream of everything recorded."""
        return encode(self.packets, "rdna3")

    def wrap(self, program: Program) -> Program:
        """A copy of `program` whose closures also record their issue."""
        if program.instructions and program.instructions[0].arch.name != "rdna3":
            raise EmulatorError("trace mode writes the RDNA3 SQTT layout; trace an RDNA3 (gfx11) kernel")
        ops = [self._wrap_one(op, inst) for op, inst in zip(program.ops, program.instructions, strict=False)]
        return program.with_ops([*ops, program.ops[-1]])

    def _wrap_one(self, op: Callable, inst: Inst) -> Callable:
        name, fmt = canonical(inst), inst.fmt
        emit = self.emit
        if name in _SILENT:
            return op
        if name.startswith("s_endpgm"):
            def run_end(st: WaveState):
                result = op(st)
                if result == END:
                    emit(P.WAVEEND, wave=st.trace_slot)
                return result
            return run_end
        if fmt == "SOPP" and "branch" in name:
            def run_branch(st: WaveState):
                result = op(st)
                emit(P.INST, wave=st.trace_slot, op=InstOp.JUMP if result is not None else InstOp.JUMP_NO)
                return result
            return run_branch
        if fmt.startswith("VOP") or fmt in ("VOPD", "VINTERP"):
            def run_valu(st: WaveState):
                emit(P.VALUINST, wave=st.trace_slot)
                return op(st)
            return run_valu
        kind = _inst_op(inst)
        if kind is None:
            def run_immediate(st: WaveState):
                emit(P.IMMEDIATE, wave=st.trace_slot)
                return op(st)
            return run_immediate

        def run_inst(st: WaveState):
            emit(P.INST, wave=st.trace_slot, op=kind)
            return op(st)
        return run_inst
