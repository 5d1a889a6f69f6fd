"""Eager loops a PyTorch user writes, ours vs PyTorch: a step per call whose Python values change from call to call.

uv run --frozen python benchmarks/eager_loops_vs_torch.py --torch-python V/bin/python [LOOP ...]
(V: `python3 -m venv V && V/bin/pip install torch==2.13.0 numpy`, as for vs_torch.py; without it PyTorch is reported
as missing and only our times are printed.)

A graph compiler bakes what it sees into its kernels; a loop whose step differs only in a Python number (a batch's
offset into the dataset, the key of the random numbers a dropout draws, the row read back) must not compile a kernel
per step. Each loop runs the same steps on the same data in both libraries (PyTorch at 2 threads, in its own
interpreter): warm medians per step after 3 warm-up steps, and for the training loops the losses of their first steps
(the dropout loop draws other random numbers than PyTorch, so its losses are not compared). Found: a training step
over a dataset's batches took 462 ms (a kernel compiled per offset), one with dropout 179 ms (per key), writing each
batch's activations into an output buffer (`fill`) 60-70 ms (per offset written), a sampler's update by two new Python
floats per step (`sampler`) 60-170 ms (per value). Ends with one JSON line per loop.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from ops_vs_torch import peer_results  # (benchmarks/, this script's directory, is first on the path)

ROWS, BATCH, CHECKED = 6400, 64, 3  # dataset rows, batch rows, training steps whose losses are compared
LOOPS = ("batches", "dropout", "rows", "items", "fill", "sampler")
SAMPLER_STEPS = 50  # the sampler loop's schedule of scales (its step i uses entry i mod this)


def sampler_scales(i: int) -> tuple[float, float]:
    """The sampler loop's two Python floats at step `i` (a diffusion sampler's per-step coefficients)."""
    t = (i % SAMPLER_STEPS) / SAMPLER_STEPS
    return 1.0 - 0.02 * t, 0.05 * (1.0 - t) ** 2


def data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((ROWS, 784)).astype(np.float32), "y": rng.integers(0, 10, ROWS).astype(np.int32),
            "w1": (rng.standard_normal((256, 784)) * 0.05).astype(np.float32), "w2": (rng.standard_normal((10, 256)) * 0.05).astype(np.float32),
            "v": rng.standard_normal(4096).astype(np.float32)}


def loops(lib: str) -> dict:
    """name -> a factory of a fresh loop: a zero-argument call running the next step and returning a float (a loss or
    a value read back), in `lib` ("ours" or "torch")."""
    d = data()
    if lib == "ours":
        from uop_scheduler import Tensor, nn

        def training(dropout: float):
            def make():
                x, y = Tensor(d["x"], requires_grad=False).realize(), Tensor(d["y"], requires_grad=False).realize()
                w1, w2 = Tensor(d["w1"], requires_grad=True).realize(), Tensor(d["w2"], requires_grad=True).realize()
                opt, step = nn.optim.Adam([w1, w2], lr=1e-3), iter(range(1 << 30))

                def run() -> float:
                    i = next(step) % (ROWS // BATCH)
                    xb, yb = x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]
                    Tensor.training = True
                    opt.zero_grad()
                    h = xb.linear(w1.T).relu()
                    loss = (h.dropout(dropout) if dropout else h).linear(w2.T).sparse_categorical_crossentropy(yb)
                    loss.backward()
                    loss.realize(*opt.schedule_step())
                    return float(loss.item())
                return run
            return make

        def rows():
            x, step = Tensor(d["x"]).realize(), iter(range(1 << 30))
            return lambda: float(x[next(step) % ROWS].numpy()[0])

        def items():
            v, step = Tensor(d["v"]).realize(), iter(range(1 << 30))
            return lambda: float(v[next(step) % 4096].item())

        def fill():
            x, w1, step = Tensor(d["x"]).realize(), Tensor(d["w1"]).realize(), iter(range(1 << 30))
            out = Tensor.zeros(ROWS, 256).contiguous().realize()

            def run() -> float:
                i = next(step) % (ROWS // BATCH)
                out[i * BATCH:(i + 1) * BATCH] = x[i * BATCH:(i + 1) * BATCH].linear(w1.T).relu()
                return float(out[i * BATCH, 0].item())
            return run

        def sampler():
            x, e, step = Tensor(d["x"][:256]).realize(), Tensor(d["x"][256:512]).realize(), iter(range(1 << 30))

            def run() -> float:
                nonlocal x
                a, b = sampler_scales(next(step))
                x = (x * a + e * b).realize()
                return float(x[0, 0].item())
            return run

        return {"batches": training(0.0), "dropout": training(0.2), "rows": rows, "items": items, "fill": fill, "sampler": sampler}
    import torch
    import torch.nn.functional as F  # noqa: N812

    torch.set_num_threads(2)

    def torch_training(dropout: float):
        def make():
            x, y = torch.from_numpy(d["x"]), torch.from_numpy(d["y"].astype(np.int64))
            w1, w2 = torch.tensor(d["w1"], requires_grad=True), torch.tensor(d["w2"], requires_grad=True)
            opt, step = torch.optim.Adam([w1, w2], lr=1e-3), iter(range(1 << 30))

            def run() -> float:
                i = next(step) % (ROWS // BATCH)
                xb, yb = x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]
                opt.zero_grad()
                h = F.relu(F.linear(xb, w1))
                loss = F.cross_entropy(F.linear(F.dropout(h, dropout) if dropout else h, w2), yb)
                loss.backward()
                opt.step()
                return float(loss.item())
            return run
        return make

    def torch_rows():
        x, step = torch.from_numpy(d["x"]), iter(range(1 << 30))
        return lambda: float(x[next(step) % ROWS].numpy()[0])

    def torch_items():
        v, step = torch.from_numpy(d["v"]), iter(range(1 << 30))
        return lambda: float(v[next(step) % 4096].item())

    def torch_fill():
        x, w1, step = torch.from_numpy(d["x"]), torch.from_numpy(d["w1"]), iter(range(1 << 30))
        out = torch.zeros(ROWS, 256)

        def run() -> float:
            i = next(step) % (ROWS // BATCH)
            out[i * BATCH:(i + 1) * BATCH] = F.relu(F.linear(x[i * BATCH:(i + 1) * BATCH], w1))
            return float(out[i * BATCH, 0].item())
        return run

    def torch_sampler():
        x, e, step = torch.from_numpy(d["x"][:256].copy()), torch.from_numpy(d["x"][256:512]), iter(range(1 << 30))

        def run() -> float:
            nonlocal x
            a, b = sampler_scales(next(step))
            x = x * a + e * b
            return float(x[0, 0].item())
        return run

    return {"batches": torch_training(0.0), "dropout": torch_training(0.2), "rows": torch_rows, "items": torch_items,
            "fill": torch_fill, "sampler": torch_sampler}


def time_loop(make, steps: int) -> tuple[float, list[float]]:
    """(median seconds per step of `steps` steps after 3 warm-up steps, the first CHECKED values of a fresh loop)."""
    first = make()
    values = [first() for _ in range(CHECKED)]
    run = make()
    for _ in range(3):
        run()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), values


def worker(names: list[str], steps: int) -> None:
    """PyTorch's side: one JSON line {name: [median seconds, values]}."""
    table = loops("torch")
    print(json.dumps({name: list(time_loop(table[name], steps)) for name in names}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("loops", nargs="*", help="the loops to run (default: all)")
    parser.add_argument("--torch-python", default=os.environ.get("TORCH_PYTHON"), help="a Python interpreter with torch installed")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.loops or list(LOOPS)
    if unknown := [n for n in names if n not in LOOPS]:
        print(f"error: unknown loop(s) {', '.join(unknown)}; choose from {', '.join(LOOPS)}", file=sys.stderr)
        raise SystemExit(1)
    if args.worker:
        worker(names, args.steps)
        return
    theirs = peer_results(args.torch_python, __file__, ["--steps", str(args.steps)], names)
    table = loops("ours")
    print(f"{'loop':9} {'ours ms':>10} {'PyTorch ms':>11} {'ratio':>8} {'max |diff|':>11}")
    lines = []
    for name in names:
        seconds, values = time_loop(table[name], args.steps)
        peer = theirs.get(name)
        ratio = seconds / peer[0] if peer else None
        # (the dropout loop's masks are other random numbers than PyTorch's: its values are not compared)
        diff = max(abs(a - b) for a, b in zip(values, peer[1])) if peer and name != "dropout" else None
        print(f"{name:9} {seconds * 1e3:10.3f} {peer[0] * 1e3 if peer else float('nan'):11.3f} "
              f"{ratio if ratio is not None else float('nan'):8.2f} {diff if diff is not None else float('nan'):11.3g}", flush=True)
        lines.append({"bench": "eager_loops_vs_torch", "case": name, "metric": "warm_median_per_step", "value": round(seconds * 1e3, 4),
                      "unit": "ms", "peer": "PyTorch 2.13 (CPU)" if peer else "PyTorch (missing)",
                      "peer_value": round(peer[0] * 1e3, 4) if peer else None, "ratio": round(ratio, 3) if ratio is not None else None,
                      "max_abs_diff": diff})
    for line in lines:
        print(json.dumps(line))


if __name__ == "__main__":
    main()
