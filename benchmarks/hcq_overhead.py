"""Host-side submit cost of a jitted step of 1, 10 and 100 kernels on MOCKAMD (the hcq2 engine over the mock KFD GPU).

uv run --frozen python benchmarks/hcq_overhead.py

"ours" links the step once and per call writes only the run-time patches (inputs table, timelines) and submits one
INDIRECT_BUFFER; the baseline re-encodes and re-links the batch on every call (what a runtime without encode-once /
link-once would do). There is no GPU peer here, so the ratio is baseline / ours.

The mock GPU runs on the host's thread: a doorbell executes the packets and emulates the kernels before it returns.
Two host figures come out of that:
- `host_us_per_call` (the figure to read): the mock GPU is held (`MockGPU.held()`) while several linked copies of the
  step are submitted back to back, as a real GPU would run beside the host; only then does the queued work execute.
  Nothing of the GPU's runs inside the timed calls.
- `host_us_interleaved`: the GPU executes inside each call and its time is subtracted. This figure grows with the kernel
  count although the host work does not: emulating N kernels evicts the host code's data from the CPU caches, and the
  next call runs cold (a 1-kernel step timed right after a 100-kernel emulation costs what the 100-kernel step costs).
Also reported: the mock GPU's time per kernel (packet parsing + emulation), command-buffer bytes per kernel and patches
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
COPIES, HELD_ROUNDS = 4, 3  # linked copies of a step submitted back to back while the GPU is held; rounds of that


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


def held_host_seconds(runs: list, gpu) -> float:
    """The best time of one call among `runs` submitted back to back while the mock GPU is held (it executes their work
    after the block, untimed). Each run is a different linked copy: a linked step waits for its own previous run."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(HELD_ROUNDS):
            Device[DEV].synchronize()
            with gpu.held():
                for run in runs:
                    start = time.perf_counter()
                    run()
                    best = min(best, time.perf_counter() - start)
    finally:
        gc.enable()
    return best


def measure(n_kernels: int, clock: GPUClock) -> dict[str, float]:
    linear, first, last = step(n_kernels)
    linked = link_linear(linear, [first, last])
    x = buffer_for(UOp.new_buffer(DEV, N, dtypes.float32)).copyin(np.ones(N, np.float32))
    out = buffer_for(UOp.new_buffer(DEV, N, dtypes.float32)).ensure_allocated()
    copies = [link_linear(*(lambda lin, a, b: (lin, [a, b]))(*step(n_kernels))) for _ in range(COPIES - 1)]
    runs = [lambda linked=linked: linked([x, out]) for linked in [linked, *copies]]
    for run in runs:
        run()  # warm
    held = held_host_seconds(runs, Device[DEV].driver.gpu)
    gpu_before = clock.seconds
    ours = host_seconds(runs[0], clock)
    gpu_per_kernel = (clock.seconds - gpu_before) / (CALLS + 1) / n_kernels
    expected = np.ones(N, np.float32)
    for _ in range(n_kernels):
        expected = expected * np.float32(1.5) + np.float32(1.0)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5)

    def reencode() -> None:
        hcq2.compile_cache.clear()  # every call encodes, links and runs the batch again
        hcq2.link_cache.clear()
        link_linear(linear, [first, last])([x, out])

    baseline = host_seconds(reencode, clock)
    return {"held_s": held, "ours_s": ours, "baseline_s": baseline, "gpu_per_kernel_s": gpu_per_kernel,
            "bytes_per_kernel": linked.batches[0].command_bytes / n_kernels, "patches_per_call": linked.patches_written,
            "submits": linked.submits}


def main() -> None:
    try:
        AMDCompiler("gfx1100")
    except CompileError as e:
        print(json.dumps({"bench": "hcq_overhead", "metric": "host_us_per_call", "value": None, "unit": "us", "peer": "missing",
                          "error": str(e)}))
        return
    clock = GPUClock(Device[DEV].driver.gpu)
    rows = [(n, measure(n, clock)) for n in (1, 10, 100)]
    print(f"{'kernels':>8} {'host us/call':>13} {'interleaved':>12} {'re-encode':>10} {'ratio':>6} {'mock GPU us/kernel':>19} "
          f"{'cmd bytes/kernel':>17} {'patches/call':>13}")
    for n, r in rows:
        print(f"{n:>8} {r['held_s'] * 1e6:>13.1f} {r['ours_s'] * 1e6:>12.1f} {r['baseline_s'] * 1e6:>10.1f} {r['baseline_s'] / r['ours_s']:>6.1f} "
              f"{r['gpu_per_kernel_s'] * 1e6:>19.0f} {r['bytes_per_kernel']:>17.0f} {r['patches_per_call']:>13}")
    print("host us/call: GPU held during the submits; interleaved: the mock GPU ran inside each call (its time subtracted)")
    for n, r in rows:
        case = f"{n}_kernels"
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "host_us_per_call", "value": r["held_s"] * 1e6, "unit": "us"}))
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "host_us_interleaved", "value": r["ours_s"] * 1e6, "unit": "us",
                          "ours_s": r["ours_s"], "peer": "re-encode every call", "peer_s": r["baseline_s"],
                          "peer_value": r["baseline_s"] * 1e6, "ratio": r["baseline_s"] / r["ours_s"]}))
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "mock_gpu_us_per_kernel", "value": r["gpu_per_kernel_s"] * 1e6,
                          "unit": "us"}))
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "command_bytes_per_kernel", "value": r["bytes_per_kernel"],
                          "unit": "B"}))
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "patches_per_call", "value": r["patches_per_call"], "unit": "words"}))


if __name__ == "__main__":
    main()
