"""The CPU device's kernels built by each C compiler on PATH (clang, every clang-N, gcc), side by side in one run:
the workloads of `vs_torch.py` under TinyJit (so the time is the kernels' and their launches', not eager Python), each
compiler in its own process (`UOP_CC`), the processes alternated over rounds. Reports warm medians and each compiler's
ratio to the device's default choice (`hcq_runtime.find_c_compiler`), ending with JSON lines. A machine without
clang builds with GCC (see hcq-runtime's `UOP_CC`): this is what its users get.

    uv run --frozen python benchmarks/c_compilers.py [--rounds 2] [--workloads cnn_step mlp_step]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = ("matmul", "mlp_step", "cnn_step", "attention", "conv")
CALLS = 40


def worker(name: str) -> None:
    """Time `name` under TinyJit in this process (its compiler is `UOP_CC`); print the warm median in seconds."""
    sys.path.insert(0, str(HERE))
    import vs_torch

    run, fetch = vs_torch.build_tinygrad_api(name, "ours-jit")
    for _ in range(5):
        fetch(run())
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        fetch(run())
        times.append(time.perf_counter() - start)
    print(json.dumps({"median": statistics.median(times), "minimum": min(times)}))


def compilers() -> dict[str, str]:
    """The C compilers on PATH by name, newest clang first, each executable once (`clang` may be a versioned one)."""
    from hcq_runtime import installed_clangs

    clangs = installed_clangs()
    found: dict[str, str] = {}
    seen: set[str] = set()
    for path in [*sorted(clangs, key=lambda p: (-clangs[p], p)), shutil.which("gcc")]:
        if path is not None and (real := os.path.realpath(path)) not in seen:
            name = os.path.basename(path)
            seen.add(real)
            found[name] = path
    return found


def default_compiler() -> str:
    """The compiler the CPU device uses when `UOP_CC` is not set."""
    env = {k: v for k, v in os.environ.items() if k != "UOP_CC"}
    code = "from hcq_runtime import find_c_compiler; print(find_c_compiler())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="alternated rounds per compiler and workload (default 2)")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    if args.rounds < 1:
        raise SystemExit("error: --rounds must be at least 1")
    ccs = compilers()
    if not ccs:
        raise SystemExit("error: no C compiler on PATH (clang or gcc)")
    default_path = os.path.realpath(default_compiler())
    default = next((label for label, cc in ccs.items() if os.path.realpath(cc) == default_path), None)
    results: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for name in args.workloads:
            for label, cc in ccs.items():
                env = dict(os.environ, UOP_CC=cc)
                proc = subprocess.run([sys.executable, __file__, "--worker", name], env=env, capture_output=True, text=True)
                if proc.returncode != 0:
                    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                    raise SystemExit(f"error: {name} with {cc} failed: {tail}")
                results.setdefault((name, label), []).append(json.loads(proc.stdout.strip().splitlines()[-1])["median"])
    print(f"medians of {args.rounds} rounds (each the median of {CALLS} calls), ms; ratios to the default compiler, {default}")
    print(f"{'workload':<12}" + "".join(f"{label:>12}" for label in ccs) + "".join(f"{label + ' / ' + str(default):>22}"
                                                                                for label in ccs if label != default and default))
    lines = []
    for name in args.workloads:
        medians = {label: statistics.median(results[(name, label)]) for label in ccs}
        ratios = {label: medians[label] / medians[default] for label in ccs if default and label != default}
        print(f"{name:<12}" + "".join(f"{medians[label] * 1e3:12.3f}" for label in ccs) + "".join(f"{r:22.3f}" for r in ratios.values()))
        for label in ccs:
            lines.append({"bench": "c_compilers", "case": name, "metric": "jit_warm_median", "compiler": label,
                          "value": round(medians[label] * 1e3, 4), "unit": "ms", "peer": default if label in ratios else None,
                          "peer_value": round(medians[default] * 1e3, 4) if label in ratios else None,
                          "ratio": round(ratios[label], 3) if label in ratios else None})
    for line in lines:
        print(json.dumps(line))


if __name__ == "__main__":
    main()
