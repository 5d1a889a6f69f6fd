"""Tensor programs end to end vs tinygrad 0.14 on CPU: an MLP forward (64x784 -> 256 -> 10) and softmax(x @ w) at 512.

uv run --frozen python benchmarks/tensor_ops.py                               # ours only (tinygrad reported missing)
uv run --frozen --with tinygrad==0.14.0 python benchmarks/tensor_ops.py       # side by side

Each (implementation, case) runs in a fresh subprocess with the compiler's disk cache disabled, so "cold" is the first
realize: graph building, scheduling, code generation, compilation and the run. "warm" is the best of several more
realizes of a freshly built graph of the same structure over new input buffers (schedule and kernels cached; no JIT
on either side). The
timed region ends with `.numpy()` on the result so both sides have finished computing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

CASES = ("mlp_forward", "softmax_matmul_512")
WARM_REPS = 10


def make_inputs(case: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    if case == "mlp_forward":
        return {"x": rng.standard_normal((64, 784), dtype=np.float32), "w1": rng.standard_normal((784, 256), dtype=np.float32) * 0.05,
                "b1": rng.standard_normal(256, dtype=np.float32), "w2": rng.standard_normal((256, 10), dtype=np.float32) * 0.05,
                "b2": rng.standard_normal(10, dtype=np.float32)}
    return {"x": rng.standard_normal((512, 512), dtype=np.float32) * 0.05, "w": rng.standard_normal((512, 512), dtype=np.float32) * 0.05}


def reference(case: str, a: dict[str, np.ndarray]) -> np.ndarray:
    if case == "mlp_forward":
        return np.maximum(a["x"] @ a["w1"] + a["b1"], 0) @ a["w2"] + a["b2"]
    z = a["x"] @ a["w"]
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def program(case: str, t: dict):
    if case == "mlp_forward":
        return (t["x"] @ t["w1"] + t["b1"]).relu() @ t["w2"] + t["b2"]
    return (t["x"] @ t["w"]).softmax(-1)


def child(impl: str, case: str) -> None:
    """Measure one implementation on one case; print {"cold": s, "warm": s} as JSON."""
    if impl == "ours":
        from uop_scheduler import Tensor
    else:
        from tinygrad import Tensor
    arrays = make_inputs(case)
    tensors = {k: Tensor(v).realize() for k, v in arrays.items()}
    start = time.perf_counter()
    out = program(case, tensors).numpy()
    cold = time.perf_counter() - start
    np.testing.assert_allclose(out, reference(case, arrays), rtol=1e-3, atol=1e-4)
    warm = []
    for _ in range(WARM_REPS):
        # fresh input buffers each time: the same expression over the same buffers could be answered from memory
        tensors = {k: Tensor(v).realize() for k, v in arrays.items()}
        start = time.perf_counter()
        out = program(case, tensors).numpy()
        warm.append(time.perf_counter() - start)
    np.testing.assert_allclose(out, reference(case, arrays), rtol=1e-3, atol=1e-4)
    print(json.dumps({"cold": cold, "warm": min(warm)}))


def run_child(impl: str, case: str) -> dict[str, float]:
    env = {**os.environ, "DISABLE_COMPILER_CACHE": "1", "DEV": "CPU"}
    if impl == "tinygrad" and shutil.which("clang") is None and shutil.which("clang-15"):
        env["CC"] = "clang-15"  # tinygrad's CPU backend calls `clang` unless CC names another
    proc = subprocess.run([sys.executable, __file__, "--child", impl, case], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{impl} {case} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    have_peer = importlib.util.find_spec("tinygrad") is not None
    rows = []
    for case in CASES:
        ours = run_child("ours", case)
        peer = run_child("tinygrad", case) if have_peer else None
        for phase in ("cold", "warm"):
            rows.append((case, phase, ours[phase] * 1e3, None if peer is None else peer[phase] * 1e3))
    print(f"{'case':20} {'phase':5} {'ours ms':>10} {'tinygrad ms':>12} {'ours/tinygrad':>14}")
    for case, phase, ours_ms, peer_ms in rows:
        peer_txt = f"{peer_ms:12.2f}" if peer_ms is not None else f"{'missing':>12}"
        ratio_txt = f"{ours_ms / peer_ms:14.2f}" if peer_ms is not None else f"{'-':>14}"
        print(f"{case:20} {phase:5} {ours_ms:10.2f} {peer_txt} {ratio_txt}")
    for case, phase, ours_ms, peer_ms in rows:
        print(json.dumps({"bench": "tensor_ops", "metric": f"{case}_{phase}", "value": round(ours_ms, 3), "unit": "ms",
                          "peer": "tinygrad==0.14.0" if have_peer else "tinygrad (missing)",
                          "peer_value": None if peer_ms is None else round(peer_ms, 3),
                          "ratio": None if peer_ms is None else round(ours_ms / peer_ms, 3)}))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main()
