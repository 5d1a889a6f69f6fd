"""CPU kernels from uopir's codegen vs numpy, in the same run: float32 matmul (GFLOP/s) and a 64 MiB add (GB/s).

uv run --frozen python benchmarks/cpu_kernels.py
"""

from __future__ import annotations

import json
import time

import numpy as np
from hcq_runtime import buffer_for, run_linear
from uopir import AxisType, Ops, UOp, dtypes


def best_of(fn, reps: int) -> float:
    fn()  # warm: compile, page in
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def kernel_call(ast: UOp, *arrays: np.ndarray, out_size: int) -> tuple[UOp, UOp]:
    bufs = [UOp.new_buffer("CPU", out_size, dtypes.float32)] + [UOp.new_buffer("CPU", a.size, dtypes.float32) for a in arrays]
    for buf, arr in zip(bufs[1:], arrays):
        buffer_for(buf).copyin(arr)
    linear = UOp(Ops.LINEAR, dtypes.void, (UOp(Ops.CALL, dtypes.void, (ast, *bufs)),))
    return linear, bufs[0]


def matmul_ast(n: int) -> UOp:
    out, a, b = (UOp.param(s, dtypes.float32.ptr(n * n)) for s in range(3))
    i, j, k = UOp.range(n, 0), UOp.range(n, 1), UOp.range(n, 2, AxisType.REDUCE)
    return UOp.sink(out.index(i * n + j).store((a.index(i * n + k).load() * b.index(k * n + j).load()).reduce(k)).end(i, j))


def add_ast(n: int) -> UOp:
    out, a, b = (UOp.param(s, dtypes.float32.ptr(n)) for s in range(3))
    i = UOp.range(n, 0)
    return UOp.sink(out.index(i).store(a.index(i).load() + b.index(i).load()).end(i))


def main() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for n in (512, 1024):
        a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        linear, out = kernel_call(matmul_ast(n), a, b, out_size=n * n)
        ours = best_of(lambda linear=linear: run_linear(linear), 5)
        np.testing.assert_allclose(buffer_for(out).numpy().reshape(n, n), a @ b, rtol=1e-3, atol=1e-3)
        peer = best_of(lambda a=a, b=b: a @ b, 5)
        flops = 2 * n**3
        rows.append((f"matmul_{n}", flops / ours / 1e9, flops / peer / 1e9, "GFLOP/s"))
    n = 64 * 1024 * 1024 // 4  # 64 MiB per operand
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    linear, out = kernel_call(add_ast(n), a, b, out_size=n)
    ours = best_of(lambda: run_linear(linear), 5)
    np.testing.assert_array_equal(buffer_for(out).numpy(), a + b)
    dest = np.empty_like(a)
    peer = best_of(lambda: np.add(a, b, out=dest), 5)
    moved = 3 * n * 4  # two reads and a write
    rows.append(("add_64MiB", moved / ours / 1e9, moved / peer / 1e9, "GB/s"))

    print(f"{'benchmark':14} {'ours':>10} {'numpy':>10} {'ratio':>7}  unit")
    for name, ours_v, peer_v, unit in rows:
        print(f"{name:14} {ours_v:10.2f} {peer_v:10.2f} {ours_v / peer_v:7.2f}  {unit}")
    for name, ours_v, peer_v, unit in rows:
        print(json.dumps({"bench": "cpu_kernels", "metric": name, "value": round(ours_v, 2), "unit": unit, "peer": "numpy",
                          "peer_value": round(peer_v, 2), "ratio": round(ours_v / peer_v, 3)}))


if __name__ == "__main__":
    main()
