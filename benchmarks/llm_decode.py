"""LLM decode speed on the stack: tiny-llama and a ~100M-parameter llama-shaped model (F16, and Q8_0 kept quantized
in the graph) on CPU (Tensor backend + TinyJit) against the numpy reference in the same run, and the achieved GB/s
against this machine's memory bandwidth (a large numpy copy, measured in the same run). Goal: the 100M model at >= 50%
of the measured bandwidth. The main case also runs in the DRAM regime (`-dram`): the bandwidth copy runs again
(untimed) before every timed step, so the weights come from memory rather than the last-level cache; those copies'
median rate, the bandwidth at the time of the steps, is reported next to the start-of-run figure. The decode runs on
both cores and the copy on one, so other processes on the cores slow the decode alone: the load average is printed too
(on a 2-core VM, the captured 100M step with evicted caches took 8.8 ms with both cores free and 21 ms next to one busy
process). Also the batched prefill (ppN: a prompt in one forward) of the F16 model against the numpy reference.

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
# (model, decode steps, KV cache size, caches evicted before each step): the ctx2048 case shows the decode cost does not
# grow with the cache's size
MODELS = (("tiny-llama", 32, MAX_CONTEXT, False), ("random-llama-100m", 12, MAX_CONTEXT, False),
          ("random-llama-100m", 12, MAX_CONTEXT, True), ("random-llama-100m-q8", 12, MAX_CONTEXT, False),
          ("random-llama-100m", 12, 2048, False))
PREFILL = ("random-llama-100m", 64)  # model, prompt tokens
BOS = 1


class CopyBandwidth:
    """A 256 MiB float32 copy (twice the data of a 260 MB last-level cache, so it also evicts it); each call returns
    and records its GB/s (bytes read + bytes written), the destination already paged in."""

    def __init__(self) -> None:
        self.src = np.ones(64 * 1024 * 1024, dtype=np.float32)
        self.dst = np.zeros_like(self.src)
        self.rates: list[float] = []

    def __call__(self) -> float:
        start = time.perf_counter()
        np.copyto(self.dst, self.src)
        self.rates.append(2 * self.src.nbytes / (time.perf_counter() - start) / 1e9)
        return self.rates[-1]


def memory_bandwidth() -> float:
    """GB/s of the 256 MiB copy, best of 5."""
    copy = CopyBandwidth()
    return max(copy() for _ in range(5))


def decode(model: LanguageModel, steps: int, evict: CopyBandwidth | None = None) -> tuple[float, float]:
    """Median seconds per decode step over `steps` greedy steps after a warm-up, and the median bytes-read rate (GB/s).
    `evict`: run (untimed) before each step, pushing the weights out of the caches."""
    for _ in zip(range(4), model.generate([BOS])):
        pass  # warm-up: capture the jit, compile, page in the weights
    times, rates = [], []
    generator = model.generate([BOS])
    next(generator)  # the prompt pass
    for position in range(1, steps + 1):
        if evict is not None:
            evict()
        start = time.perf_counter()
        next(generator)
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        rates.append(model.step_bytes(position) / elapsed / 1e9)
    return statistics.median(times), statistics.median(rates)


def prefill(model: LanguageModel, n_tokens: int) -> float:
    """Median seconds to run an `n_tokens` prompt from an empty cache, after two untimed passes (compile, capture)."""
    ids = [BOS] + [(7 * i) % 200 + 10 for i in range(n_tokens - 1)]
    times = []
    for repetition in range(5):
        model.reset()
        start = time.perf_counter()
        model.forward(ids, 0)
        if repetition >= 2:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    load = os.getloadavg()[0]
    bandwidth = memory_bandwidth()
    rows, figures, notes = [], [], []
    for name, steps, context, cold in MODELS:
        gguf = read_gguf(resolve_model(name))
        evict = CopyBandwidth() if cold else None
        ours = TensorModel(gguf, context, device="CPU")
        step, rate = decode(ours, steps, evict)
        del ours
        ref_step, ref_rate = decode(NumpyModel(gguf, context), steps, evict)
        params = sum(t.n_elements for t in gguf.tensors.values())
        name = (name if context == MAX_CONTEXT else f"{name}-ctx{context}") + ("-dram" if cold else "")
        rows.append((name, params, 1 / step, 1 / ref_step, rate, ref_rate, rate / bandwidth))
        figures.append({"bench": f"llm_decode_{name}", "metric": "decode_tok_per_s", "value": round(1 / step, 2), "unit": "tok/s",
                        "peer": "numpy-reference", "peer_value": round(1 / ref_step, 2), "ratio": round(ref_step / step, 3)})
        figures.append({"bench": f"llm_decode_{name}", "metric": "decode_GB_per_s", "value": round(rate, 3), "unit": "GB/s",
                        "peer": "numpy-copy-bandwidth", "peer_value": round(bandwidth, 3), "ratio": round(rate / bandwidth, 3)})
        if evict is not None:  # the copies run between our timed steps (the first `steps`): the bandwidth meanwhile
            during = statistics.median(evict.rates[:steps])
            notes.append(f"{name}: the copies between its steps ran at {during:.2f} GB/s (median): {100 * rate / during:.1f}% of that")
            figures.append({"bench": f"llm_decode_{name}", "metric": "decode_GB_per_s_vs_copies_between_steps", "value": round(rate, 3),
                            "unit": "GB/s", "peer": "numpy-copy-bandwidth-between-steps", "peer_value": round(during, 3),
                            "ratio": round(rate / during, 3)})
    print(f"memory bandwidth (numpy copy of 256 MiB, read + write): {bandwidth:.2f} GB/s; context {MAX_CONTEXT} unless named, greedy decode; "
          f"load average at start/end {load:.2f}/{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'model':<26} {'params':>11} {'CPU tok/s':>10} {'numpy tok/s':>12} {'CPU GB/s':>9} {'numpy GB/s':>11} {'CPU % of bw':>12}")
    for name, params, tps, ref_tps, rate, ref_rate, frac in rows:
        print(f"{name:<26} {params:>11,} {tps:>10.1f} {ref_tps:>12.1f} {rate:>9.2f} {ref_rate:>11.2f} {100 * frac:>11.1f}%")
    for note in notes:
        print(note)
    name, n_tokens = PREFILL
    gguf = read_gguf(resolve_model(name))
    ours_s = prefill(TensorModel(gguf, MAX_CONTEXT, device="CPU"), n_tokens)
    ref_s = prefill(NumpyModel(gguf, MAX_CONTEXT), n_tokens)
    print(f"{name} pp{n_tokens}: CPU {n_tokens / ours_s:.1f} tok/s, numpy {n_tokens / ref_s:.1f} tok/s")
    figures.append({"bench": f"llm_prefill_{name}", "metric": f"pp{n_tokens}_tok_per_s", "value": round(n_tokens / ours_s, 2), "unit": "tok/s",
                    "peer": "numpy-reference", "peer_value": round(n_tokens / ref_s, 2), "ratio": round(ref_s / ours_s, 3)})
    for figure in figures:
        print(json.dumps(figure))


if __name__ == "__main__":
    main()
