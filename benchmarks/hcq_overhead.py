"""Host-side submit cost of a jitted step of 1, 10 and 100 kernels on MOCKAMD (the hcq2 engine over the mock KFD GPU).

uv run --frozen python benchmarks/hcq_overhead.py

"ours" links the step once; a replay is the fence wait, the timeline bases and one call of the batch's compiled
submitter, which writes the run-time patches (inputs table, timelines), puts one INDIRECT_BUFFER on the compute ring
and stores the doorbell. The baseline re-encodes and re-links the batch on every call (what a runtime without
encode-once / link-once would do). There is no GPU peer here, so the ratio is baseline / ours.

The mock GPU picks a doorbell stored by compiled code up when the host next waits, so replays contain no emulation as
long as their fences are already met: after `synchronize()`, COPIES linked copies of the step are called back to back
(a step's own next run would wait for this one), and `host_us_per_call` is the best of those calls over ROUNDS rounds
(the machine is shared). Timing right after an emulation instead would measure cold CPU caches: emulating N kernels
evicts the host code's data. Also reported: the mock GPU's time per kernel (packet parsing + emulation), command-buffer bytes
per kernel and patches written per call. Needs clang-15 and ld.lld-15 (reported as missing otherwise).
"""

from __future__ import annotations

import gc
import json
import time

import numpy as np
from hcq_runtime import AMDCompiler, CompileError, Device, buffer_for, hcq2, link_linear
from uopir import Ops, UOp, dtypes

DEV, N, CALLS = "MOCKAMD", 32, 5
COPIES, ROUNDS = 4, 5


def scale(n: int) -> UOp:
    out, a = UOp.param(0, dtypes.float32.ptr(n)), UOp.param(1, dtypes.float32.ptr(n))
    i = UOp.range(n, 0)
    return UOp.sink(out.index(i).store(a.index(i).load() * 1.5 + 1.0).end(i))


class GPUClock:
    """Seconds spent inside the mock GPU (packet parsing and the emulator)."""

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


def host_seconds(runs: list) -> float:
    """The best time of one call among `runs` (different linked copies) called back to back after a `synchronize()`,
    over ROUNDS rounds. The garbage collector is off while timing, as in `timeit`."""
    device = Device[DEV]
    best = float("inf")
    gc.disable()
    try:
        for _ in range(ROUNDS):
            device.synchronize()
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
    copies = [linked] + [link_linear(lin, [a, b]) for lin, a, b in (step(n_kernels) for _ in range(COPIES - 1))]
    ours = host_seconds([lambda linked=linked: linked([x, out]) for linked in copies])
    gpu_before = clock.seconds
    for _ in range(CALLS):
        linked([x, out])
    Device[DEV].synchronize()
    gpu_per_kernel = (clock.seconds - gpu_before) / CALLS / n_kernels
    expected = np.ones(N, np.float32)
    for _ in range(n_kernels):
        expected = expected * np.float32(1.5) + np.float32(1.0)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5)

    def reencode() -> None:
        hcq2.compile_cache.clear()  # every call encodes, links and runs the batch again
        link_linear(linear, [first, last])([x, out])

    baseline = host_seconds([reencode])
    return {"ours_s": ours, "baseline_s": baseline, "gpu_per_kernel_s": gpu_per_kernel,
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
    print(f"{'kernels':>8} {'host us/call':>13} {'re-encode':>10} {'ratio':>6} {'mock GPU us/kernel':>19} {'cmd bytes/kernel':>17} "
          f"{'patches/call':>13}")
    for n, r in rows:
        print(f"{n:>8} {r['ours_s'] * 1e6:>13.1f} {r['baseline_s'] * 1e6:>10.1f} {r['baseline_s'] / r['ours_s']:>6.1f} "
              f"{r['gpu_per_kernel_s'] * 1e6:>19.0f} {r['bytes_per_kernel']:>17.0f} {r['patches_per_call']:>13}")
    for n, r in rows:
        case = f"{n}_kernels"
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "host_us_per_call", "value": r["ours_s"] * 1e6, "unit": "us",
                          "ours": r["ours_s"] * 1e6, "peer": "re-encode every call", "peer_value": r["baseline_s"] * 1e6,
                          "ratio": r["baseline_s"] / r["ours_s"]}))
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "mock_gpu_us_per_kernel", "value": r["gpu_per_kernel_s"] * 1e6,
                          "unit": "us"}))
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "command_bytes_per_kernel", "value": r["bytes_per_kernel"],
                          "unit": "B"}))
        print(json.dumps({"bench": "hcq_overhead", "case": case, "metric": "patches_per_call", "value": r["patches_per_call"], "unit": "words"}))


if __name__ == "__main__":
    main()
