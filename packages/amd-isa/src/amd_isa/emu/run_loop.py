"""A program pre-decoded into closures, the wave run loop, and `run_program` for instruction lists.

Decoding and operand resolution happen once, in `Program`; the run loop only calls closures. A closure returns None to
fall through to the next instruction, an instruction index for a taken branch or PC write, or END / BARRIER.
"""

from collections.abc import Callable, Sequence

import numpy as np

from ..inst import Inst, decode
from .address_space import Memory
from .buffer_insts import compile_buffer
from .ds import compile_ds
from .errors import EmulatorError, UnsupportedInstructionError, unsupported
from .image_insts import compile_image
from .mfma import compile_mfma
from .names import canonical
from .scalar import BARRIER, END, SOPP_NOPS, compile_sop1, compile_sop2, compile_sopc, compile_sopk, compile_sopp
from .smem import compile_smem
from .vector import compile_valu
from .vmem import compile_vmem
from .vop3p import compile_vop3p, compile_vopd
from .wave_state import WaveState

Op = Callable[[WaveState], int | None]
DEFAULT_MAX_STEPS = 50_000_000


class Program:
    """Instructions placed at `base` (byte address of the first one), each compiled once into a closure.

    `index_of(pc)` maps a byte address to an instruction index; `ops[i]` runs instruction i. One extra closure past the
    end ends the wave, so a list without s_endpgm runs to its end.
    """

    def __init__(self, instructions: Sequence[Inst], base: int = 0):
        self.instructions = list(instructions)
        self.base = base
        self.pcs: list[int] = []
        pc = base
        for inst in self.instructions:
            self.pcs.append(pc)
            pc += inst.size()
        self.end_pc = pc
        self._index = {p: i for i, p in enumerate(self.pcs)}
        self._index[pc] = len(self.instructions)
        self.ops: list[Op] = [self._compile(inst, p) for inst, p in zip(self.instructions, self.pcs, strict=True)]
        self.ops.append(lambda st: END)
        self.advance = self._advances()

    def _advances(self) -> list[int]:
        """How far the run loop moves after instruction i falls through: 1 plus the no-op instructions (s_waitcnt,
        s_delay_alu, cache invalidates, ...) right after it, which then count as executed without a call each."""
        silent = [is_noop(inst) for inst in self.instructions] + [False]
        advance = [1] * len(self.ops)
        for i in range(len(self.instructions) - 1, -1, -1):
            if silent[i + 1]:
                advance[i] = 1 + advance[i + 1]
        return advance

    def with_ops(self, ops: list[Op]) -> "Program":
        """A copy running `ops` instead (instrumented closures); every instruction is then called, none skipped."""
        copy = object.__new__(Program)
        copy.__dict__.update(self.__dict__)
        copy.ops = ops
        copy.advance = [1] * len(ops)
        return copy

    @classmethod
    def from_bytes(cls, code: bytes, arch: str, base: int = 0) -> "Program":
        """Decode machine code and compile it."""
        return cls(decode(code, arch), base)

    def index_of(self, pc: int) -> int:
        """The instruction index at byte address `pc`; raises EmulatorError if no instruction starts there."""
        index = self._index.get(pc)
        if index is None:
            raise EmulatorError(f"jump to {pc:#x}, which is not the start of an instruction in the program "
                                f"({self.base:#x}..{self.end_pc:#x})")
        return index

    def _compile(self, inst: Inst, pc: int) -> Op:
        fmt = inst.fmt
        try:
            if fmt == "SOP2":
                return compile_sop2(inst, pc)
            if fmt == "SOP1":
                return compile_sop1(inst, pc, self.index_of)
            if fmt == "SOPC":
                return compile_sopc(inst, pc)
            if fmt == "SOPK":
                return compile_sopk(inst, pc, self.index_of)
            if fmt == "SOPP":
                return compile_sopp(inst, pc, self.index_of)
            if fmt == "SMEM":
                return compile_smem(inst, pc)
            if fmt in ("VOP1", "VOP2", "VOP3", "VOP3SD", "VOPC"):
                return compile_valu(inst, pc)
            if fmt == "VOP3P":
                return compile_vop3p(inst, pc)
            if fmt == "VOP3PX2":
                return compile_mfma(inst, pc)
            if fmt == "VOPD":
                return compile_vopd(inst, pc)
            if fmt in ("GLOBAL", "FLAT", "SCRATCH", "VGLOBAL", "VFLAT", "VSCRATCH"):
                return compile_vmem(inst, pc)
            if fmt == "DS":
                return compile_ds(inst, pc)
            if fmt in ("MUBUF", "MTBUF", "VBUFFER"):
                return compile_buffer(inst, pc)
            if fmt in ("MIMG", "VIMAGE"):
                return compile_image(inst, pc)
        except UnsupportedInstructionError as err:
            return _deferred(err)
        return _deferred(unsupported(inst, pc, f"{fmt} instructions are not emulated"))


CACHE_CONTROLS = frozenset({"buffer_gl0_inv", "buffer_gl1_inv", "buffer_wbinvl1", "buffer_wbinvl1_vol", "buffer_wbl2", "buffer_inv",
                            "s_dcache_inv", "s_gl1_inv", "s_dcache_wb", "s_icache_inv", "global_inv", "global_wb", "global_wbinv"})


def is_noop(inst: Inst) -> bool:
    """Whether an instruction has no architectural effect in the emulator (waits, scheduling hints, cache controls)."""
    name = canonical(inst)
    if inst.fmt == "SOPP":
        return name in SOPP_NOPS or name.startswith("s_wait") or name == "s_barrier_wait"
    if inst.fmt == "SOPK":
        return name.startswith("s_waitcnt")
    return name in CACHE_CONTROLS


def _deferred(err: EmulatorError) -> Op:
    """An instruction that cannot run raises only if it is reached, so unused code (e.g. trap handlers) does not fail."""
    def run(st: WaveState) -> None:
        raise err
    return run


def run_wave(st: WaveState, program: Program, index: int, max_steps: int = DEFAULT_MAX_STEPS) -> tuple[int, int]:
    """Run a wave from instruction `index` until s_endpgm (END) or s_barrier (BARRIER); return (status, resume index)."""
    ops, advance = program.ops, program.advance
    steps = 0
    try:
        while True:
            result = ops[index](st)
            if result is None:
                step = advance[index]
                steps += step
                index += step
                continue
            steps += 1
            if result >= 0:
                index = result
            else:
                if result == BARRIER:
                    index += 1
                break
            if steps > max_steps:
                raise EmulatorError(f"wave ran {max_steps} instructions without ending; raise max_steps or look for an endless loop")
    finally:
        st.steps += steps
        st.pc = program.pcs[index] if index < len(program.pcs) else program.end_pc
    return result, index


def run_program(instructions: Sequence[Inst] | bytes, n_lanes: int = 32, arch: str = "rdna3", *, state: WaveState | None = None,
                memory: Memory | None = None, lds_size: int = 65536, scratch_size: int = 0,
                max_steps: int = DEFAULT_MAX_STEPS) -> WaveState:
    """Run one wave over a list of instructions (or machine code) and return its final `WaveState`.

    All lanes start active and every register starts at zero unless `state` is given. s_barrier is a no-op for a
    single wave; the program ends at s_endpgm or when it runs past its last instruction.
    """
    if n_lanes not in (32, 64):
        raise EmulatorError(f"n_lanes must be 32 or 64, not {n_lanes}")
    program = Program(decode(instructions, arch) if isinstance(instructions, bytes | bytearray) else instructions)
    st = state if state is not None else WaveState(n_lanes, arch)
    st.memory = memory if memory is not None else st.memory
    if st.lds.size == 0:
        st.attach_lds(np.zeros(lds_size, np.uint8))
    if scratch_size and st.scratch.shape[1] < scratch_size:
        st.scratch = np.zeros((st.n_lanes, scratch_size), np.uint8)
    index = 0
    with np.errstate(all="ignore"):
        while True:
            status, index = run_wave(st, program, index, max_steps)
            if status == END:
                return st
