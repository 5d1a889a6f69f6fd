"""LLM decode speed on the stack: tiny-llama and a ~100M-parameter llama-shaped F16 model on CPU (Tensor backend +
TinyJit) against the numpy reference in the same run, and the achieved GB/s against this machine's memory bandwidth
(a large numpy copy, measured in the same run). Goal: the 100M model at >= 50% of the measured bandwidth.

uv run --frozen python benchmarks/llm_decode.py
"""

from __future__ import annotations

import os

# OpenBLAS threads fight over the two shared cores and make the numpy reference slower, not faster
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from llm_bench import LanguageModel, NumpyModel, TensorModel, read_gguf, resolve_model  # noqa: E402

MAX_CONTEXT = 256
MODELS = (("tiny-llama", 32), ("random-llama-100m", 12))
BOS = 1


def memory_bandwidth() -> float:
    """GB/s of a 256 MiB float32 copy (bytes read + bytes written), best of 5, destination already paged in."""
    src = np.ones(64 * 1024 * 1024, dtype=np.float32)
    dst = np.zeros_like(src)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best / 1e9


def decode(model: LanguageModel, steps: int) -> tuple[float, float]:
    """Median seconds per decode step over `steps` greedy steps after a warm-up, and the median bytes-read rate (GB/s)."""
    for _ in zip(range(4), model.generate([BOS])):
        pass  # warm-up: capture the jit, compile, page in the weights
    times, rates = [], []
    generator = model.generate([BOS])
    next(generator)  # the prompt pass
    for position in range(1, steps + 1):
        start = time.perf_counter()
        next(generator)
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        rates.append(model.step_bytes(position) / elapsed / 1e9)
    return statistics.median(times), statistics.median(rates)


def main() -> None:
    bandwidth = memory_bandwidth()
    rows, figures = [], []
    for name, steps in MODELS:
        gguf = read_gguf(resolve_model(name))
        ours = TensorModel(gguf, MAX_CONTEXT, device="CPU")
        step, rate = decode(ours, steps)
        del ours
        ref_step, ref_rate = decode(NumpyModel(gguf, MAX_CONTEXT), steps)
        params = sum(t.n_elements for t in gguf.tensors.values())
        rows.append((name, params, 1 / step, 1 / ref_step, rate, ref_rate, rate / bandwidth))
        figures.append({"bench": f"llm_decode_{name}", "metric": "decode_tok_per_s", "value": round(1 / step, 2), "unit": "tok/s",
                        "peer": "numpy-reference", "peer_value": round(1 / ref_step, 2), "ratio": round(ref_step / step, 3)})
        figures.append({"bench": f"llm_decode_{name}", "metric": "decode_GB_per_s", "value": round(rate, 3), "unit": "GB/s",
                        "peer": "numpy-copy-bandwidth", "peer_value": round(bandwidth, 3), "ratio": round(rate / bandwidth, 3)})
    print(f"memory bandwidth (numpy copy of 256 MiB, read + write): {bandwidth:.2f} GB/s; context {MAX_CONTEXT}, greedy decode")
    print(f"{'model':<20} {'params':>11} {'CPU tok/s':>10} {'numpy tok/s':>12} {'CPU GB/s':>9} {'numpy GB/s':>11} {'CPU % of bw':>12}")
    for name, params, tps, ref_tps, rate, ref_rate, frac in rows:
        print(f"{name:<20} {params:>11,} {tps:>10.1f} {ref_tps:>12.1f} {rate:>9.2f} {ref_rate:>11.2f} {100 * frac:>11.1f}%")
    for figure in figures:
        print(json.dumps(figure))


if __name__ == "__main__":
    main()
