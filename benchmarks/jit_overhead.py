"""Per-call time of a jitted function of 1, 10 and 100 tiny kernels: uop_scheduler's TinyJit vs tinygrad 0.14's.

uv run --frozen --with tinygrad==0.14.0 python benchmarks/jit_overhead.py
(tinygrad runs on its CPU device; without tinygrad installed the peer is reported as missing)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

import numpy as np

CALLS = 200


def per_call(jitted, make_input, calls: int = CALLS) -> float:
    for _ in range(3):  # eager, capture, first replay
        jitted(make_input())
    inputs = [make_input() for _ in range(calls)]
    start = time.perf_counter()
    for x in inputs:
        jitted(x)
    return (time.perf_counter() - start) / calls


def ours(n_kernels: int) -> float:
    from uop_scheduler import Tensor, TinyJit

    @TinyJit
    def step(x):
        for _ in range(n_kernels):
            x = (x + 1).contiguous()
        return x

    def make():
        return Tensor(np.zeros(4, dtype=np.float32)).realize()

    return per_call(step, make)


def expose_clang() -> None:
    """tinygrad's CPU device runs `clang`; Debian names it clang-15, so point a temporary `clang` at it."""
    if shutil.which("clang") is None and (versioned := shutil.which("clang-15")) is not None:
        bindir = tempfile.mkdtemp(prefix="clang-shim-")
        os.symlink(versioned, os.path.join(bindir, "clang"))
        os.environ["PATH"] = bindir + os.pathsep + os.environ["PATH"]


def tinygrad_peer(n_kernels: int) -> float | None:
    expose_clang()
    try:
        os.environ.setdefault("DEV", "CPU")
        from tinygrad import Tensor as TgTensor
        from tinygrad import TinyJit as TgJit
    except ImportError:
        return None

    @TgJit
    def step(x):
        for _ in range(n_kernels):
            x = (x + 1).contiguous()
        return x.realize()

    def make():
        return TgTensor(np.zeros(4, dtype=np.float32)).realize()

    return per_call(step, make)


def main() -> None:
    rows = []
    for n in (1, 10, 100):
        mine = ours(n)
        peer = tinygrad_peer(n)
        rows.append((n, mine, peer))
    print(f"{'kernels':>8} {'ours us/call':>14} {'tinygrad us/call':>17} {'ratio':>7}")
    for n, mine, peer in rows:
        print(f"{n:8d} {mine * 1e6:14.1f} {('%17.1f' % (peer * 1e6)) if peer else 'missing':>17} {(mine / peer if peer else float('nan')):7.3f}")
    for n, mine, peer in rows:
        print(json.dumps({"bench": "jit_overhead", "metric": f"per_call_{n}_kernels", "value": round(mine * 1e6, 2), "unit": "us",
                          "peer": "tinygrad==0.14.0" if peer else "tinygrad (missing)", "peer_value": round(peer * 1e6, 2) if peer else None,
                          "ratio": round(mine / peer, 4) if peer else None}))


if __name__ == "__main__":
    main()
