"""One warm training step (forward, backward, Adam) of a 2-layer MLP and of a small CNN, ours vs tinygrad 0.14 on CPU.

uv run --frozen --with tinygrad==0.14.0 python benchmarks/train_step.py
Each model runs eagerly and as a TinyJit step (the whole step, optimizer update included, replayed), same shapes,
same batch, both libraries in the same process.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

import numpy as np

STEPS = 10


def expose_clang() -> None:
    """tinygrad's CPU device runs `clang`; Debian names it clang-15, so point a temporary `clang` at it."""
    if shutil.which("clang") is None and (versioned := shutil.which("clang-15")) is not None:
        bindir = tempfile.mkdtemp(prefix="clang-shim-")
        os.symlink(versioned, os.path.join(bindir, "clang"))
        os.environ["PATH"] = bindir + os.pathsep + os.environ["PATH"]


def data(kind: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 784) if kind == "mlp" else (16, 1, 28, 28)).astype(np.float32)
    return x, np.eye(10, dtype=np.float32)[rng.integers(0, 10, len(x))]


def timed_steps(step) -> float:
    for _ in range(3):
        step()
    start = time.perf_counter()
    for _ in range(STEPS):
        step()
    return (time.perf_counter() - start) / STEPS


def build(lib, kind: str, jit: bool):
    """A train step over the library's Tensor / nn / optim (the two share tinygrad's API), under TinyJit if `jit`."""
    Tensor, nn, optim, get_parameters, TinyJit = lib
    Tensor.manual_seed(0)
    if kind == "mlp":
        layers = [nn.Linear(784, 256), nn.Linear(256, 10)]

        def forward(x):
            return layers[1](layers[0](x).relu())
    else:
        layers = [nn.Conv2d(1, 8, 3), nn.Conv2d(8, 16, 3), nn.Linear(16 * 5 * 5, 10)]

        def forward(x):
            x = layers[0](x).relu().max_pool2d(2)
            x = layers[1](x).relu().max_pool2d(2)
            return layers[2](x.flatten(1))
    opt = optim.Adam(get_parameters(layers), lr=1e-3)
    x_np, y_np = data(kind)

    def train(x, y):
        opt.zero_grad()
        loss = -(forward(x).log_softmax(-1) * y).sum(-1).mean()
        loss.backward()
        opt.step()
        return loss.realize()

    run = TinyJit(train) if jit else train

    def step():
        return run(Tensor(x_np), Tensor(y_np)).numpy()

    return step


def ours():
    from uop_scheduler import Tensor, TinyJit, nn
    from uop_scheduler.nn import optim
    from uop_scheduler.nn.state import get_parameters

    Tensor.training = True
    return (Tensor, nn, optim, get_parameters, TinyJit)


def peer():
    expose_clang()
    os.environ.setdefault("DEV", "CPU")
    os.environ["TRAINING"] = "1"  # tinygrad 0.14's optimizers refuse to step otherwise
    try:
        from tinygrad import Tensor, TinyJit, nn
        from tinygrad.nn import optim
        from tinygrad.nn.state import get_parameters
    except ImportError:
        return None
    Tensor.training = True
    return (Tensor, nn, optim, get_parameters, TinyJit)


def main() -> None:
    rows = []
    peer_lib = peer()
    for kind in ("mlp", "cnn"):
        for jit in (False, True):
            mine = timed_steps(build(ours(), kind, jit))
            theirs = timed_steps(build(peer_lib, kind, jit)) if peer_lib else None
            rows.append((kind + ("_jit" if jit else ""), mine, theirs))
    print(f"{'model':8} {'ours ms/step':>13} {'tinygrad ms/step':>17} {'ratio':>7}")
    for kind, mine, theirs in rows:
        print(f"{kind:8} {mine * 1e3:13.2f} {theirs * 1e3 if theirs else float('nan'):17.2f} {mine / theirs if theirs else float('nan'):7.3f}")
    for kind, mine, theirs in rows:
        print(json.dumps({"bench": "train_step", "metric": f"{kind}_adam_step_warm", "value": round(mine * 1e3, 3), "unit": "ms",
                          "peer": "tinygrad==0.14.0" if theirs else "tinygrad (missing)", "peer_value": round(theirs * 1e3, 3) if theirs else None,
                          "ratio": round(mine / theirs, 3) if theirs else None}))


if __name__ == "__main__":
    main()
