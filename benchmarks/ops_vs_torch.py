"""Single Tensor ops on the CPU, ours vs PyTorch: a sweep for ops that are far slower than they should be.

uv run --frozen python benchmarks/ops_vs_torch.py --torch-python V/bin/python [OP ...]
(V: `python3 -m venv V && V/bin/pip install torch==2.13.0 numpy`, as for vs_torch.py; without it PyTorch is reported
as missing and only our times are printed.)

Each op runs on the same numpy data in both libraries (PyTorch at 2 threads, in its own interpreter): warm medians of
timed calls after warm-up calls, each call building its graph again and realizing it (ours; a result kept alive
between calls would be found already computed), and the largest difference between the two results. An op more than
3x slower than PyTorch is flagged. This sweep found indexing by a tensor, long cumsums and interpolate doing n^2 work
(2000x, minutes, 10x PyTorch) where they read n elements. Ends with one JSON line per op.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

FLAG_RATIO = 3.0


def data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"a": rng.standard_normal((1024, 1024)).astype(np.float32), "b": rng.standard_normal((1024, 1024)).astype(np.float32),
            "v": rng.standard_normal(1 << 20).astype(np.float32), "img": rng.standard_normal((16, 32, 64, 64)).astype(np.float32),
            "w3": (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32), "idx": rng.integers(0, 1024, 4096).astype(np.int32),
            "emb": rng.standard_normal((32000, 256)).astype(np.float32), "tok": rng.integers(0, 32000, 512).astype(np.int32)}


def ops(lib: str) -> dict:
    """name -> a zero-argument call computing the op once in `lib` ("ours" or "torch"), returning its result."""
    d = data()
    if lib == "ours":
        from uop_scheduler import Tensor

        t = {k: Tensor(v).realize() for k, v in d.items()}
        a, b, v, img, w3, idx, emb, tok = (t[k] for k in ("a", "b", "v", "img", "w3", "idx", "emb", "tok"))
        return {
            "sum": lambda: a.sum(1), "max": lambda: a.max(0), "argmax": lambda: a.argmax(1), "softmax": lambda: a.softmax(-1),
            "exp": lambda: a.exp(), "tanh": lambda: a.tanh(), "sigmoid": lambda: a.sigmoid(), "add": lambda: a + b,
            "where": lambda: (a > 0).where(a, b), "cat": lambda: a.cat(b, dim=0), "transpose": lambda: a.T.contiguous(),
            "layernorm": lambda: a.layernorm(), "var": lambda: a.var(1), "cumsum_rows": lambda: a.cumsum(1),
            "cumsum_1m": lambda: v.cumsum(0), "topk10": lambda: a.topk(10)[0], "sort_rows": lambda: a.sort(1)[0], "sort_1m": lambda: v.sort(0)[0],
            "gather_rows": lambda: a[idx], "embedding": lambda: emb[tok], "matmul": lambda: a @ b, "conv2d": lambda: img.conv2d(w3, padding=1),
            "max_pool2d": lambda: img.max_pool2d(2), "interpolate": lambda: img.interpolate((128, 128), mode="nearest"),
            "one_hot": lambda: idx.one_hot(1024),
        }
    import torch
    import torch.nn.functional as F  # noqa: N812

    torch.set_num_threads(2)
    t = {k: torch.tensor(x.astype(np.int64) if x.dtype == np.int32 else x) for k, x in d.items()}
    a, b, v, img, w3, idx, emb, tok = (t[k] for k in ("a", "b", "v", "img", "w3", "idx", "emb", "tok"))
    return {
        "sum": lambda: a.sum(1), "max": lambda: a.amax(0), "argmax": lambda: a.argmax(1), "softmax": lambda: a.softmax(-1),
        "exp": lambda: a.exp(), "tanh": lambda: a.tanh(), "sigmoid": lambda: a.sigmoid(), "add": lambda: a + b,
        "where": lambda: torch.where(a > 0, a, b), "cat": lambda: torch.cat([a, b], 0), "transpose": lambda: a.T.contiguous(),
        "layernorm": lambda: F.layer_norm(a, (1024,)), "var": lambda: a.var(1), "cumsum_rows": lambda: a.cumsum(1),
        "cumsum_1m": lambda: v.cumsum(0), "topk10": lambda: a.topk(10)[0], "sort_rows": lambda: a.sort(1)[0], "sort_1m": lambda: v.sort(0)[0],
        "gather_rows": lambda: a[idx], "embedding": lambda: emb[tok], "matmul": lambda: a @ b, "conv2d": lambda: F.conv2d(img, w3, padding=1),
        "max_pool2d": lambda: F.max_pool2d(img, 2), "interpolate": lambda: F.interpolate(img, size=(128, 128), mode="nearest"),
        "one_hot": lambda: F.one_hot(idx.long(), 1024),
    }


def time_op(lib: str, fn, calls: int) -> tuple[float, np.ndarray]:
    """(median seconds of `calls` calls after 3 warm-up calls, the result as numpy)."""
    def once():
        out = fn()
        return out.realize() if lib == "ours" else out

    for _ in range(3):
        once()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        once()  # (the result is dropped: ours would find a live result computed already at the next call)
        times.append(time.perf_counter() - start)
    return statistics.median(times), np.asarray(once().numpy())


def worker(names: list[str], calls: int) -> None:
    """PyTorch's side: one JSON line {name: [median seconds, result file]} for the ops asked."""
    import tempfile

    table, out = ops("torch"), {}
    tmp = tempfile.mkdtemp(prefix="ops-vs-torch-")
    for name in names:
        seconds, value = time_op("torch", table[name], calls)
        path = os.path.join(tmp, f"{name}.npy")
        np.save(path, value)
        out[name] = [seconds, path]
    print(json.dumps(out))


def peer_results(torch_python: str | None, script: str, options: list[str], names: list[str]) -> dict[str, list]:
    """PyTorch's side of a sweep: `script --worker *options *names` run by `torch_python`, its last output line read as
    JSON ({name: [seconds, ...]}); {} when no interpreter is given or the worker fails (said on stderr)."""
    if not torch_python:
        return {}
    result = subprocess.run([torch_python, script, "--worker", *options, *names], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"  PyTorch failed: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.returncode}", file=sys.stderr)
        return {}
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ops", nargs="*", help="the ops to run (default: all)")
    parser.add_argument("--torch-python", default=os.environ.get("TORCH_PYTHON"), help="a Python interpreter with torch installed")
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    table = ops("torch" if args.worker else "ours")
    names = args.ops or list(table)
    if unknown := [n for n in names if n not in table]:
        print(f"error: unknown op(s) {', '.join(unknown)}; choose from {', '.join(table)}", file=sys.stderr)
        raise SystemExit(1)
    if args.worker:
        worker(names, args.calls)
        return
    theirs = peer_results(args.torch_python, __file__, ["--calls", str(args.calls)], names)
    print(f"{'op':13} {'ours ms':>10} {'PyTorch ms':>11} {'ratio':>8} {'max |diff|':>11}")
    lines = []
    for name in names:
        seconds, value = time_op("ours", table[name], args.calls)
        peer = theirs.get(name)
        ratio = seconds / peer[0] if peer else None
        diff = None
        if peer:
            ref = np.load(peer[1])
            diff = float(np.max(np.abs(value.astype(np.float64) - ref.astype(np.float64)))) if ref.shape == value.shape else float("inf")
        flag = "  <<< slow" if ratio is not None and ratio > FLAG_RATIO else ""
        print(f"{name:13} {seconds * 1e3:10.3f} {peer[0] * 1e3 if peer else float('nan'):11.3f} "
              f"{ratio if ratio is not None else float('nan'):8.2f} {diff if diff is not None else float('nan'):11.3g}{flag}", flush=True)
        lines.append({"bench": "ops_vs_torch", "case": name, "metric": "warm_median", "value": round(seconds * 1e3, 4), "unit": "ms",
                      "peer": "PyTorch 2.13 (CPU)" if peer else "PyTorch (missing)", "peer_value": round(peer[0] * 1e3, 4) if peer else None,
                      "ratio": round(ratio, 3) if ratio is not None else None, "max_abs_diff": diff})
    for line in lines:
        print(json.dumps(line))


if __name__ == "__main__":
    main()
