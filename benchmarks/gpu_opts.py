"""GPU kernel opts on the emulated RDNA3 GPU: wave-instructions and trace cycles of optimized vs unoptimized kernels.

Run: uv run --frozen python benchmarks/gpu_opts.py
Each case is a Tensor program whose one kernel is captured (TinyJit on MOCKAMD), lowered with no opts, with the GPU
heuristic's opts and with the case's opts (tensor cores for the matmuls), compiled by clang-15 for gfx1100 and run in
the amd-isa wave emulator, which counts wave-instructions and records an SQTT trace (its cycles are the trace's
clock). There is no GPU peer: the baseline is the same kernel without opts, in the same run. Needs clang-15 and
ld.lld-15; without them every figure is reported as missing.
"""

from __future__ import annotations

import json
import shutil
import struct

import numpy as np
from amd_isa import sqtt
from amd_isa.emu import Memory, run_kernel
from hcq_runtime import AMDCompiler, Device
from uop_scheduler import Tensor, TinyJit, dtypes
from uopir import Ops, Opt, OptOps, UOp, to_program

RNG = np.random.default_rng(0)
HALF = dtypes.float16


def half(*shape: int) -> np.ndarray:
    return RNG.random(shape).astype(np.float16)


def single(*shape: int) -> np.ndarray:
    return RNG.random(shape, dtype=np.float32)


# name -> (program, inputs, the case's opts); the opts are the seed's cases (test_kernel_opts, test_tensor_cores)
CASES = {
    "matmul_64_f16": (lambda a, b: a @ b, (half(64, 64), half(64, 64)), [Opt(OptOps.TC, 0, 0)]),
    "matmul_64_f32": (lambda a, b: a @ b, (single(64, 64), single(64, 64)), [Opt(OptOps.GROUPTOP, 2, 32), Opt(OptOps.UNROLL, 2, 2)]),
    "matmul_17x23x29_tc_padded": (lambda a, b: a @ b, (half(17, 23), half(23, 29)), [Opt(OptOps.TC, 0, 2)]),
    "matmul_17x23x29_tc_full_upcast": (lambda a, b: a @ b, (half(17, 23), half(23, 29)),
                                       [Opt(OptOps.TC, 0, 2), Opt(OptOps.PADTO, 0, 4), Opt(OptOps.UPCAST, 0, 0)]),
    "conv2d_f16_16ch": (lambda x, w: x.conv2d(w), (half(1, 16, 4, 20), half(16, 16, 3, 3)), [Opt(OptOps.TC, 0, 2)]),
    "sum_plus_max_7x11x13": (lambda a: a.sum((1, 2)) + a.max((1, 2)), (single(7, 11, 13),),
                             [Opt(OptOps.LOCAL, 0, 0), Opt(OptOps.UNROLL, 1, 0), Opt(OptOps.GROUPTOP, 2, 0), Opt(OptOps.PADTO, 7, 32)]),
    "flip_pad_sum_17x19": (lambda a: a.flip(0).pad(((2, 3), (0, 0))).sum(0), (single(17, 19),),
                           [Opt(OptOps.GROUPTOP, 1, 0), Opt(OptOps.PADTO, 0, 8), Opt(OptOps.UPCAST, 0, 12), Opt(OptOps.LOCAL, 0, 0)]),
    "conv2d_stride2": (lambda x, w: x.conv2d(w, padding=1, stride=2), (single(1, 3, 15, 15), single(4, 3, 3, 3)),
                       [Opt(OptOps.GROUPTOP, 5, 0), Opt(OptOps.LOCAL, 1, 0)]),
    "cumsum_13x17": (lambda a: a.cumsum(1), (single(13, 17),), [Opt(OptOps.UNROLL, 2, 0), Opt(OptOps.UPCAST, 0, 0), Opt(OptOps.PADTO, 1, 4)]),
}


def capture_kernel(fn, arrays: tuple[np.ndarray, ...]) -> UOp:
    """The kernel AST of `fn` on MOCKAMD (the programs here are one kernel each)."""
    jit = TinyJit(fn)
    tensors = [Tensor(a, device="MOCKAMD") for a in arrays]
    jit(*tensors)
    jit(*tensors)
    assert jit.captured is not None
    (kernel,) = [call.src[0] for call in jit.captured.linear.src if call.src[0].op is Ops.SINK]
    return kernel


def emulate(compiler: AMDCompiler, ast: UOp, opts: list[Opt] | None) -> tuple[int, int, np.ndarray]:
    """(wave-instructions, trace cycles, output) of the kernel lowered with `opts` on fresh random inputs."""
    program = to_program(ast, Device["MOCKAMD"].renderer, opts=opts)
    info = program.arg
    params = sorted((u for u in ast.toposort() if u.op is Ops.PARAM), key=lambda p: p.arg.slot)
    data = np.random.default_rng(1)
    arrays = {p.arg.slot: data.random(p.dtype.size).astype(np.float16 if p.dtype.base == HALF else np.float32) for p in params}
    for slot in info.outs:
        arrays[slot][:] = 0
    memory = Memory()
    kernargs = b"".join(struct.pack("<Q", memory.map(arrays[slot])) for slot in info.globals)
    grid = tuple(g * size for g, size in zip(info.global_size, info.local_size))
    run = run_kernel(compiler.compile(program.src[2].arg), kernargs, grid, info.local_size, memory, trace=True)
    cycles = max(packet.time for packet in sqtt.decode(run.sqtt))
    return run.instructions, cycles, arrays[info.outs[0]].astype(np.float32)


def emit(case: str, metric: str, value: int | None, baseline: int | None) -> None:
    ratio = None if value is None or not baseline else round(value / baseline, 4)
    unit = "wave-inst" if metric.startswith("wave") else "cycles"
    print(json.dumps({"bench": "gpu_opts", "case": case, "metric": metric, "value": value, "unit": unit, "peer": "no opts",
                      "peer_value": baseline, "ratio": ratio}))


def main() -> int:
    if shutil.which("clang-15") is None or shutil.which("ld.lld-15") is None:
        print("clang-15 / ld.lld-15 not found: cannot build AMD kernels")
        for case in CASES:
            emit(case, "wave_instructions", None, None)
        return 0
    compiler = AMDCompiler("gfx1100")
    rows = []
    for case, (fn, arrays, opts) in CASES.items():
        ast = capture_kernel(fn, arrays)
        plain = emulate(compiler, ast, [])
        default = emulate(compiler, ast, None)
        chosen = emulate(compiler, ast, opts)
        for result in (default, chosen):  # opts never change results beyond float reassociation
            np.testing.assert_allclose(result[2], plain[2], rtol=2e-2, atol=2e-2)
        rows.append((case, plain, default, chosen))
    print(f"{'case':<32}{'no opts':>12}{'default':>12}{'case opts':>12}{'default/no':>12}{'case/no':>10}   (wave-instructions)")
    for case, plain, default, chosen in rows:
        print(f"{case:<32}{plain[0]:>12,}{default[0]:>12,}{chosen[0]:>12,}{default[0] / plain[0]:>12.3f}{chosen[0] / plain[0]:>10.3f}")
    print(f"\n{'case':<32}{'no opts':>12}{'default':>12}{'case opts':>12}   (cycles in the emulator's SQTT trace)")
    for case, plain, default, chosen in rows:
        print(f"{case:<32}{plain[1]:>12,}{default[1]:>12,}{chosen[1]:>12,}")
    print()
    for case, plain, default, chosen in rows:
        emit(case, "wave_instructions_default_opts", default[0], plain[0])
        emit(case, "wave_instructions_case_opts", chosen[0], plain[0])
        emit(case, "trace_cycles_default_opts", default[1], plain[1])
        emit(case, "trace_cycles_case_opts", chosen[1], plain[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
