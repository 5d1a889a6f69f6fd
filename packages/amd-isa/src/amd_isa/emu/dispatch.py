"""`run_kernel`: dispatch a code object's kernel over a grid — workgroups, waves, user/system SGPRs, packed workitem
ids, barriers across a workgroup's waves, per-workgroup LDS and per-wave scratch.
"""

import struct
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..arch import arch_of
from ..codeobject import CodeObject, KernelDescriptor
from ..inst import decode
from .address_space import Memory
from .errors import EmulatorError
from .run_loop import DEFAULT_MAX_STEPS, Program, run_wave
from .scalar import END
from .trace import Tracer
from .wave_state import WaveState

# compute_pgm_rsrc2 bits (LLVM AMDGPUUsage, "compute_pgm_rsrc2").
RSRC2_WGID_X, RSRC2_WG_INFO, RSRC2_VGPR_WORKITEM_SHIFT = 7, 10, 11
AQL_PACKET_SIZE = 64
#: scalar operand codes of the trap temporaries gfx12 hardware fills with the workgroup id (ttmp0 is code 108)
TTMP7, TTMP9 = 115, 117


@dataclass
class KernelRun:
    """What a kernel run did: workgroups and waves launched, wave-instructions executed, and (if counted) the mix."""

    workgroups: int = 0
    waves: int = 0
    instructions: int = 0
    mix: Counter = field(default_factory=Counter)
    sqtt: bytes | None = None


def _dims(size: int | tuple[int, ...], what: str) -> tuple[int, int, int]:
    values = (size,) if isinstance(size, int) else tuple(size)
    if not 1 <= len(values) <= 3 or any(not isinstance(x, int) or x < 1 for x in values):
        raise EmulatorError(f"{what} must be 1 to 3 positive integers, got {size!r}")
    return (*values, *(1,) * (3 - len(values)))  # type: ignore[return-value]


def _dispatch_packet(local: tuple[int, int, int], grid: tuple[int, int, int], kd: KernelDescriptor, kernarg_addr: int) -> bytes:
    """An AQL kernel dispatch packet (hsa_kernel_dispatch_packet_t) for kernels that read sizes through the dispatch ptr."""
    packet = bytearray(AQL_PACKET_SIZE)
    struct.pack_into("<HHHHHH", packet, 0, 2, 3, *local, 0)
    struct.pack_into("<III", packet, 12, *grid)
    struct.pack_into("<II", packet, 24, kd.private_segment_fixed_size, kd.group_segment_fixed_size)
    struct.pack_into("<Q", packet, 40, kernarg_addr)
    return bytes(packet)


def _user_sgprs(kd: KernelDescriptor, dispatch_addr: int, kernarg_addr: int) -> list[int]:
    values: list[int] = []
    for name in kd.user_sgprs:
        if name == "private_segment_buffer":
            values += [0, 0, 0, 0]
        elif name == "dispatch_ptr":
            values += [dispatch_addr & 0xFFFFFFFF, dispatch_addr >> 32]
        elif name == "kernarg_segment_ptr":
            values += [kernarg_addr & 0xFFFFFFFF, kernarg_addr >> 32]
        elif name == "private_segment_size":
            values.append(kd.private_segment_fixed_size)
        else:
            values += [0, 0]
    return values


def _mix_name(inst) -> str:
    if inst.variant.startswith(("DPP", "SDWA")):
        suffix = "_dpp" if inst.variant.startswith("DPP") else "_sdwa"
        return inst.mnemonic.removesuffix("_e32").removesuffix("_e64") + suffix
    return inst.mnemonic


def _counting(program: Program, mix: Counter) -> Program:
    """A copy of the program whose closures also count executions per mnemonic (slower; for instruction-mix reports).
    DPP and SDWA forms count under their printed names (`v_add_u32_dpp`, `v_or_b32_sdwa`)."""
    names = [_mix_name(inst) for inst in program.instructions] + ["<end>"]

    def wrap(op, name):
        def run(st):
            mix[name] += 1
            return op(st)
        return run
    return program.with_ops([wrap(op, name) for op, name in zip(program.ops, names, strict=True)])


def run_kernel(code_object: bytes | CodeObject, kernargs: bytes, global_size: int | tuple[int, ...], local_size: int | tuple[int, ...],
               memory: Memory, *, kernel: str | None = None, dynamic_lds: int = 0, count_mix: bool = False, trace: bool = False,
               max_steps: int = DEFAULT_MAX_STEPS) -> KernelRun:
    """Run a kernel of an HSA code object over `global_size` work-items in workgroups of `local_size` (OpenCL convention).

    `kernargs` are the kernel's argument bytes (pointers are addresses returned by `memory.map`); they are copied into
    `memory`. Workgroups run one after another; the waves of a workgroup run until each reaches s_barrier or s_endpgm,
    then all are released. Returns a `KernelRun` with counts, the per-mnemonic mix if `count_mix`, and with `trace` an
    RDNA3 or RDNA4 SQTT stream of the run in `sqtt` (decode it with `amd_isa.sqtt`; every wave appears on CU 0 / SIMD 0).
    """
    co = code_object if isinstance(code_object, CodeObject) else CodeObject.from_bytes(code_object)
    if not co.descriptors:
        raise EmulatorError("the code object has no kernel descriptor (<name>.kd symbol)")
    name = kernel or next(iter(co.descriptors))
    if name not in co.descriptors:
        raise EmulatorError(f"no kernel {name!r} in the code object; it has {', '.join(co.descriptors)}")
    kd = co.descriptors[name]
    arch = arch_of(co.target or "rdna3")
    wave = 32 if kd.wave32 else 64
    local, grid = _dims(local_size, "local_size"), _dims(global_size, "global_size")
    if any(g % size for g, size in zip(grid, local, strict=True)):
        raise EmulatorError(f"global_size {grid} is not a multiple of local_size {local} in every dimension")
    program = Program(decode(co.text, arch), base=co.text_addr)
    entry = program.index_of(co.kernels[name]["entry"])
    mix: Counter = Counter()
    if count_mix:
        program = _counting(program, mix)
    tracer = Tracer(arch) if trace else None
    if tracer is not None:
        program = tracer.wrap(program)
    kernarg_addr, kernarg_buf = memory.alloc(max(len(kernargs), 16) + 256)
    kernarg_buf[:len(kernargs)] = np.frombuffer(bytes(kernargs), np.uint8)
    dispatch_addr, dispatch_buf = memory.alloc(AQL_PACKET_SIZE)
    dispatch_buf[:] = np.frombuffer(_dispatch_packet(local, grid, kd, kernarg_addr), np.uint8)
    user = _user_sgprs(kd, dispatch_addr, kernarg_addr)
    rsrc2 = kd.compute_pgm_rsrc2
    groups = [(x, y, z) for z in range(grid[2] // local[2]) for y in range(grid[1] // local[1]) for x in range(grid[0] // local[0])]
    threads = local[0] * local[1] * local[2]
    tid = np.arange(-(-threads // wave) * wave)
    tx, ty, tz = tid % local[0], (tid // local[0]) % local[1], tid // (local[0] * local[1])
    id_dims = (rsrc2 >> RSRC2_VGPR_WORKITEM_SHIFT) & 3
    packed_ids = (tx | (ty << 10 if id_dims >= 1 else 0) | (tz << 20 if id_dims >= 2 else 0)).astype(np.uint32)
    result = KernelRun()
    with np.errstate(all="ignore"):
        for group in groups:
            lds = np.zeros(-(-(kd.group_segment_fixed_size + dynamic_lds) // 4) * 4, np.uint8)
            waves = []
            for w in range(len(tid) // wave):
                st = WaveState(wave, arch)
                st.memory = memory
                st.attach_lds(lds)
                st.scratch = np.zeros((wave, kd.private_segment_fixed_size), np.uint8)
                for i, value in enumerate(user):
                    st.s[i] = value
                at = kd.user_sgpr_count
                for dim in range(3):
                    if rsrc2 >> (RSRC2_WGID_X + dim) & 1:
                        st.s[at] = group[dim]
                        at += 1
                if rsrc2 >> RSRC2_WG_INFO & 1:
                    at += 1
                if arch == "rdna4":  # gfx12's architected SGPRs: the workgroup id in TTMP9 (x) and TTMP7 (y, z << 16)
                    st.s[TTMP9], st.s[TTMP7] = group[0], group[1] | group[2] << 16
                st.v[0] = packed_ids[w * wave:(w + 1) * wave]
                live = min(wave, threads - w * wave)
                st.set_exec((1 << live) - 1)
                st.trace_slot = w
                if tracer is not None:
                    tracer.start(st)
                waves.append([st, entry])
            pending = list(range(len(waves)))
            while pending:
                still = []
                for i in pending:
                    status, waves[i][1] = run_wave(waves[i][0], program, waves[i][1], max_steps)
                    if status != END:
                        still.append(i)
                pending = still
            result.workgroups += 1
            result.waves += len(waves)
            result.instructions += sum(st.steps for st, _ in waves)
    result.mix = mix
    result.sqtt = tracer.stream() if tracer is not None else None
    return result
