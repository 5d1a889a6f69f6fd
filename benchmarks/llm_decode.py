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

Against llama.cpp (`--peer llama.cpp`): our `llm-bench --benchmark --prefill --warmup --json` and llama.cpp's
`llama-bench -o json` alternate on the same GGUF with the same thread count, `--reps` times each (each run a fresh
process: our tgN median step and ppN median pass, llama-bench's tok/s of one repetition); prints both, the ratios
(ours / llama.cpp), and our decode GB/s (the file's tensor bytes read per token) against the copy bandwidth measured in
the same run (the best of three copies before each of our runs, their median per model: on a shared host the bandwidth
drifts by a third within minutes). The model defaults to SmolLM2-135M-Instruct Q4_1 (`smollm2:135m`); `--types Q8_0,F16` adds versions
made from it with llama.cpp's `llama-quantize --allow-requantize MODEL OUT TYPE` (cached next to llama.cpp's build,
the command printed). llama.cpp's tools come from `benchmarks/llama_cpp_parity.py build` (or `--llama-cpp DIR`).

    uv run --frozen python benchmarks/llm_decode.py --peer llama.cpp [--model FILE] [--types Q8_0,F16] [--reps 3]
"""

from __future__ import annotations

import os

# OpenBLAS threads fight over the two shared cores and make the numpy reference slower, not faster
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

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
        model.forward(ids, 0, last_only=True)
        if repetition >= 2:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def _quantized(tools: Path, model: Path, ggml_type: str) -> Path:
    """`model` requantized to `ggml_type` with llama-quantize (made once, kept in llama.cpp's cache)."""
    out = tools.parent.parent / "models" / f"{model.stem}.{ggml_type}.gguf"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        command = [str(tools / "llama-quantize"), "--allow-requantize", str(model), str(out), ggml_type]
        print("making", out.name, "with:", " ".join(command), flush=True)
        subprocess.run(command, check=True, capture_output=True)
    return out


def _ours(model: Path, tg: int, pp: int) -> dict[str, float]:
    """tok/s of one run of our CLI: {'tg': 1 / median step, 'pp': pp / median pass}."""
    out = subprocess.run([sys.executable, "-m", "llm_bench", "-m", str(model), "--benchmark", str(tg), "--prefill", str(pp), "--warmup", "--json"],
                         check=True, capture_output=True, text=True).stdout
    records = {r["test"]: r for r in json.loads(out)}
    tg_ns = statistics.median(records[f"tg{tg}"]["samples_ns"])
    pp_ns = statistics.median(records[f"pp{pp}"]["samples_ns"])
    return {"tg": 1e9 / tg_ns, "pp": pp * 1e9 / pp_ns}


def _llama_cpp(tools: Path, model: Path, tg: int, pp: int, threads: int) -> dict[str, float]:
    """tok/s of one llama-bench repetition of tgN and ppN."""
    out = subprocess.run([str(tools / "llama-bench"), "-m", str(model), "-t", str(threads), "-p", str(pp), "-n", str(tg), "-r", "1", "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    result = {}
    for record in json.loads(out):
        result["pp" if record["n_prompt"] else "tg"] = float(record["avg_ts"])
    return result


def versus_llama_cpp(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from llama_cpp_parity import tool_dir

    tools = tool_dir(args.llama_cpp)
    base = Path(args.model) if args.model else resolve_model("smollm2:135m")
    models = [base] + [_quantized(tools, base, t) for t in args.types.split(",") if t]
    load = os.getloadavg()[0]
    copy = CopyBandwidth()
    start = max(copy() for _ in range(5))
    figures = []
    print(f"memory bandwidth (numpy copy of 256 MiB, read + write): {start:.2f} GB/s at the start; each model's % of bw is against "
          f"the median of the copies before each of its runs; {args.threads} threads; {args.reps} alternating runs each; tg{args.tg}, pp{args.pp}")
    print(f"{'model':<44} {'ours tg':>8} {'llama tg':>9} {'ratio':>6} {'ours pp':>8} {'llama pp':>9} {'ratio':>6} {'ours GB/s':>10} {'% of bw':>8}")
    for model in models:
        ours, peer, rates = [], [], []
        for _ in range(args.reps):
            rates.append(max(copy() for _ in range(3)))  # the bandwidth next to each of our runs (it drifts on a shared host)
            ours.append(_ours(model, args.tg, args.pp))
            peer.append(_llama_cpp(tools, model, args.tg, args.pp, args.threads))
        bandwidth = statistics.median(rates)
        o = {k: statistics.median(r[k] for r in ours) for k in ("tg", "pp")}
        p = {k: statistics.median(r[k] for r in peer) for k in ("tg", "pp")}
        streamed = read_gguf(model).data_bytes  # every tensor is read per token, the tied embedding as the output matrix
        rate = o["tg"] * streamed / 1e9
        print(f"{model.name:<44} {o['tg']:>8.1f} {p['tg']:>9.1f} {o['tg'] / p['tg']:>6.2f} {o['pp']:>8.1f} {p['pp']:>9.1f} "
              f"{o['pp'] / p['pp']:>6.2f} {rate:>10.2f} {100 * rate / bandwidth:>7.1f}%")
        for test in ("tg", "pp"):
            n = args.tg if test == "tg" else args.pp
            figures.append({"bench": f"llm_vs_llama_cpp_{model.stem}", "metric": f"{test}{n}_tok_per_s", "value": round(o[test], 2), "unit": "tok/s",
                            "peer": "llama.cpp", "peer_value": round(p[test], 2), "ratio": round(o[test] / p[test], 3)})
        figures.append({"bench": f"llm_vs_llama_cpp_{model.stem}", "metric": "decode_GB_per_s", "value": round(rate, 3), "unit": "GB/s",
                        "peer": "numpy-copy-bandwidth", "peer_value": round(bandwidth, 3), "ratio": round(rate / bandwidth, 3)})
    print(f"load average at start/end {load:.2f}/{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for figure in figures:
        print(json.dumps(figure))


def main() -> None:
    parser = argparse.ArgumentParser(description="LLM decode and prefill speed: against the numpy reference, or llama.cpp with --peer")
    parser.add_argument("--peer", choices=("numpy", "llama.cpp"), default="numpy")
    parser.add_argument("--model", help="GGUF for --peer llama.cpp (default: smollm2:135m)")
    parser.add_argument("--types", default="", help="also llama-quantize the model to these types, e.g. Q8_0,F16")
    parser.add_argument("--llama-cpp", help="folder of llama.cpp's built tools (default: llama_cpp_parity.py's cache)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tg", type=int, default=32)
    parser.add_argument("--pp", type=int, default=64)
    args = parser.parse_args()
    if args.peer == "llama.cpp":
        versus_llama_cpp(args)
    else:
        versus_numpy()


def versus_numpy() -> None:
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
