"""Host-side submit cost of a jitted step of 1, 10 and 100 kernels on MOCKAMD (the hcq2 engine over the mock KFD GPU).

uv run --frozen python benchmarks/hcq_overhead.py

"ours" links the step once and per call writes only the run-time patches (inputs table, timelines) and submits one
INDIRECT_BUFFER; the baseline re-encodes and re-links the batch on every call (what a runtime without encode-once /
link-once would do). Both exclude the emulated execution: time spent inside the mock GPU is measured and subtracted.
There is no GPU peer here, so the ratio is baseline / ours. Also reported: command-buffer bytes per kernel and patches
written per call. Needs clang-15 and ld.lld-15 (reported as missing otherwise).
"""

from __future__ import annotations

import gc
import json
import time

import numpy as np
from hcq_runtime import AMDCompiler, CompileError, Device, buffer_for, hcq2, link_linear
from uopir import Ops, UOp, dtypes

DEV, N, CALLS = "MOCKAMD", 32, 5


def scale(n: int) -> UOp:
    out, a = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(n))
    i = UOp.range(n, 0)
    return UOp.sink(out.index(i).store(a.index(i).load() * 1.5 + 1.0).end(i))


class GPUClock:
    """Seconds spent inside the mock GPU (the emulator), so host time can be separated from it."""

    def __init__(self, gpu):
        self.seconds, original = 0.0, gpu.run

        def timed_run():
            start = time.perf_counter()
            try:
                original()
            finally:
                self.seconds += time.perf_counter() - start

        gpu.run = timed_run


def step(n_kernels: int) -> tuple[UOp, UOp, UOp]:
    bufs = [UOp.new_buffer(DEV, N, dtypes.float32) for _ in range(n_kernels + 1)]
    calls = [UOp(Ops.CALL, dtypes.void, (scale(N), bufs[i + 1], bufs[i])) for i in range(n_kernels)]
    return UOp(Ops.LINEAR, dtypes.void, tuple(calls)), bufs[0], bufs[-1]


def host_seconds(run, clock: GPUClock, calls: int = CALLS) -> float:
    """The best host-only time of `calls` runs (the machine is shared: the minimum is the least disturbed). The garbage
    collector is off while timing, as in `timeit`: the emulator's garbage would otherwise be collected on the host's time."""
    run()  # warm
    best = float("inf")
    gc.disable()
    try:
        for _ in range(calls):
            start, gpu = time.perf_counter(), clock.seconds
            run()
            best = min(best, (time.perf_counter() - start) - (clock.seconds - gpu))
    finally:
        gc.enable()
    return best


def measure(n_kernels: int, clock: GPUClock) -> dict[str, float]:
    linear, first, last = step(n_kernels)
    linked = link_linear(linear, [first, last])
    x = buffer_for(UOp.new_buffer(DEV, N, dtypes.float32)).copyin(np.ones(N, np.float32))
    out = buffer_for(UOp.new_buffer(DEV, N, dtypes.float32)).ensure_allocated()
    ours = host_seconds(lambda: linked([x, out]), clock)
    expected = np.ones(N, np.float32)
    for _ in range(n_kernels):
        expected = expected * np.float32(1.5) + np.float32(1.0)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5)

    def reencode() -> None:
        hcq2.compile_cache.clear()  # every call encodes, links and runs the batch again
        hcq2.link_cache.clear()
        link_linear(linear, [first, last])([x, out])

    baseline = host_seconds(reencode, clock)
    return {"ours_s": ours, "baseline_s": baseline, "bytes_per_kernel": linked.batches[0].command_bytes / n_kernels,
            "patches_per_call": linked.patches_written, "submits": linked.submits}


def main() -> None:
    try:
        AMDCompiler("gfx1100")
    except CompileError as e:
        print(json.dumps({"bench": "hcq_overhead", "metric": "host_us_per_call", "value": None, "unit": "us", "peer": "missing",
                          "error": str(e)}))
        return
    clock = GPUClock(Device[DEV].driver.gpu)
    rows = [(n, measure(n, clock)) for n in (1, 10, 100)]
    print(f"{'kernels':>8} {'ours us/call':>13} {'re-encode us/call':>18} {'ratio':>7} {'cmd bytes/kernel':>17} {'patches/call':>13}")
    for n, r in rows:
        print(f"{n:>8} {r['ours_s'] * 1e6:>13.1f} {r['baseline_s'] * 1e6:>18.1f} {r['baseline_s'] / r['ours_s']:>7.1f} "
              f"{r['bytes_per_kernel']:>17.0f} {r['patches_per_call']:>13}")
    for n, r in rows:
        case = f"{n}_kernels"
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "host_us_per_call", "value": r["ours_s"] * 1e6, "unit": "us",
                          "ours_s": r["ours_s"], "peer": "re-encode every call", "peer_s": r["baseline_s"],
                          "peer_value": r["baseline_s"] * 1e6, "ratio": r["baseline_s"] / r["ours_s"]}))
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "command_bytes_per_kernel", "value": r["bytes_per_kernel"],
                          "unit": "B"}))
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "patches_per_call", "value": r["patches_per_call"], "unit": "words"}))


if __name__ == "__main__":
    main()
