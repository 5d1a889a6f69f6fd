"""Wave-emulator throughput: wave-instructions per second on a clang-compiled tiled matmul (gfx1100), with the mix.

Run: uv run --frozen python benchmarks/emulator.py [--n 64] [--repeat 3]
Needs clang-15 and ld.lld-15 to build the kernel; without them the figure is reported as missing. There is no peer:
tinygrad's RDNA3 emulator lives in its test tree (test/mockgpu), not in the pip package, so the peer fields are null.
"""

import argparse
import json
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from amd_isa.codeobject import CodeObject
from amd_isa.emu import Memory, run_kernel

KERNEL = Path(__file__).resolve().parent.parent / "packages" / "amd-isa" / "tests" / "kernels" / "tiled_matmul.cl"
GOAL = 200_000


def build_kernel() -> bytes | None:
    clang, lld = shutil.which("clang-15"), shutil.which("ld.lld-15")
    if clang is None or lld is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        obj, lib = Path(tmp) / "k.o", Path(tmp) / "k.so"
        subprocess.run([clang, "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib", "-O2", "-x", "cl", "-c", str(KERNEL),
                        "-o", str(obj)], check=True, capture_output=True)
        subprocess.run([lld, "-shared", str(obj), "-o", str(lib)], check=True, capture_output=True)
        return lib.read_bytes()


def emit(metric: str, value: float | None, unit: str) -> None:
    print(json.dumps({"bench": "emulator", "metric": metric, "value": value, "unit": unit, "peer": None, "peer_value": None, "ratio": None}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="matrix size (a multiple of 16)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; the best is reported")
    args = parser.parse_args()
    blob = build_kernel()
    if blob is None:
        print("clang-15 / ld.lld-15 not found: cannot build the benchmark kernel", file=sys.stderr)
        emit("tiled_matmul_wave_insts_per_s", None, "wave-inst/s")
        return 0
    code = CodeObject.from_bytes(blob)
    n = args.n
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(n, n)).astype(np.float32), rng.normal(size=(n, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    mem = Memory()
    kernargs = struct.pack("<QQQi", mem.map(a), mem.map(b), mem.map(c), n)
    best, best_cpu, count = float("inf"), float("inf"), 0
    for _ in range(args.repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        run = run_kernel(code, kernargs, (n, n), (16, 16), mem)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
        count = run.instructions
    error = float(np.abs(c - a.astype(np.float64) @ b).max())
    mix = run_kernel(code, kernargs, (n, n), (16, 16), mem, count_mix=True).mix
    rate = count / best
    print(f"tiled matmul {n}x{n}: {run.workgroups} workgroups, {run.waves} waves, {count} wave-instructions, max |error| {error:.2e}")
    print(f"{'instruction':<28}{'count':>10}{'share':>9}")
    for name, k in mix.most_common(15):
        print(f"{name:<28}{k:>10}{k / count:>9.1%}")
    print(f"\n{'metric':<34}{'value':>14}")
    print(f"{'wave-instructions / s (best)':<34}{rate:>14,.0f}")
    # On a shared machine the wall clock includes time other processes hold the CPU; CPU time does not.
    print(f"{'wave-instructions / CPU-s (best)':<34}{count / best_cpu:>14,.0f}")
    print(f"{'goal':<34}{GOAL:>14,}  ({'met' if rate >= GOAL else 'not met'})")
    emit("tiled_matmul_wave_insts_per_s", round(rate), "wave-inst/s")
    emit("tiled_matmul_wave_insts_per_cpu_s", round(count / best_cpu), "wave-inst/cpu-s")
    emit("tiled_matmul_wave_insts", count, "wave-inst")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
