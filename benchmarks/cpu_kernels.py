"""CPU kernels from uopir's codegen vs numpy, in the same run: float32 matmul (GFLOP/s), a 64 MiB add (GB/s) and the
F16 matrix-vector product of LLM decoding (GB/s of weights read).

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
    """A LINEAR running `ast` on a float32 output and `arrays` (float32 or float16) copied to the device."""
    dtype = {np.dtype(np.float32): dtypes.float32, np.dtype(np.float16): dtypes.float16}
    bufs = [UOp.new_buffer("CPU", out_size, dtypes.float32)] + [UOp.new_buffer("CPU", a.size, dtype[a.dtype]) for a in arrays]
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


def matvec_f16_ast(k: int, n: int) -> UOp:
    """y (n,) = x (k,) @ W (k, n) float16: the layout llm-bench streams its weights in (one contiguous row per input)."""
    out, x, w = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(k)), UOp.param(2, dtypes.float16.ptr(k * n))
    j, r = UOp.range(n, 0), UOp.range(k, 1, AxisType.REDUCE)
    value = (x.index(r).load() * w.index(r * n + j).load().cast(dtypes.float32)).reduce(r)
    return UOp.sink(out.index(j).store(value).end(j))


def matvec_f16(rng: np.random.Generator, k: int, n: int, reps: int = 20) -> tuple[float, float]:
    """GB/s of weights read: ours on the float16 matrix, numpy (BLAS sgemv) on its float32 copy, numpy's fastest way."""
    x, w = rng.standard_normal(k, dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32).astype(np.float16)
    linear, out = kernel_call(matvec_f16_ast(k, n), x, w, out_size=n)
    ours = best_of(lambda: run_linear(linear), reps)
    w32 = w.astype(np.float32)
    np.testing.assert_allclose(buffer_for(out).numpy(), x @ w32, rtol=1e-4, atol=1e-3)
    peer = best_of(lambda: x @ w32, reps)
    return w.nbytes / ours / 1e9, w32.nbytes / peer / 1e9


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
    # 14 MB of float16 weights (28 MB for numpy's float32 copy): both stay in this machine's last-level cache between reps
    k, n = 1536, 4608
    rows.append((f"matvec_f16_{n}x{k}", *matvec_f16(rng, k, n), "GB/s"))

    print(f"{'benchmark':20} {'ours':>10} {'numpy':>10} {'ratio':>7}  unit")
    for name, ours_v, peer_v, unit in rows:
        print(f"{name:20} {ours_v:10.2f} {peer_v:10.2f} {ours_v / peer_v:7.2f}  {unit}")
    for name, ours_v, peer_v, unit in rows:
        print(json.dumps({"bench": "cpu_kernels", "metric": name, "value": round(ours_v, 2), "unit": unit, "peer": "numpy",
                          "peer_value": round(peer_v, 2), "ratio": round(ours_v / peer_v, 3)}))


if __name__ == "__main__":
    main()
