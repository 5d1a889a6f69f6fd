"""Tensor workloads on the CPU: ours vs tinygrad 0.14 vs PyTorch, warm and cold, with per-kernel compile times.

uv run --frozen --with tinygrad==0.14.0 python benchmarks/vs_torch.py --torch-python V/bin/python
(V: `python3 -m venv V && V/bin/pip install torch==2.13.0 numpy`; torch never enters this workspace's lock. Without
--torch-python, or $TORCH_PYTHON, PyTorch is reported as missing; without tinygrad installed, tinygrad too.)

Workloads (same shapes, the same data and initial weights made by numpy from one seed in every library):
matmul 1024x1024x1024 fp32; add of two 16M fp32 arrays; one eager training step (forward, backward, Adam) of an MLP
784-256-10 at batch 64, of a deep MLP (24 hidden layers 128-128 with ReLU, then 128-10) at batch 32, where the per-layer
overhead of eager code shows, and of a small CNN (2 conv, 2 maxpool, linear) at batch 16; attention softmax(q k^T / 8) v with
q, k, v (8, 256, 64); a convolution forward (8, 32, 32, 32) by 64 3x3 filters. Every library runs in its own process,
alternating per workload and round. Warm: median and minimum of timed calls after warm-up calls. Ours and PyTorch run
their warm calls side by side: both processes start and warm up, then take turns running blocks of calls
(PAIRED_BLOCKS per round, a few ms each), so a warm ratio to PyTorch is the median over blocks of each block's ratio
to the other library's block next to it, which shares the machine's load and clock of the moment (on a shared
machine both moved 1.5-2x within seconds). Other peers run alone; a ratio to them is the median over rounds of each
round's ratio (the libraries of one round run back to back). Cold: a fresh process
with the compile cache off (ours DISABLE_COMPILER_CACHE=1, tinygrad likewise) times its first and second call; ours also
records every kernel's compile time. The largest difference from PyTorch's result is reported per workload: for a
training step, over the losses of its first TRAJECTORY_STEPS steps (the first loss alone does not depend on the update).

The report ends with the goals of the issue this benchmark serves (#36: eager steps within 2x of PyTorch, matmul at
or above it and at 70% of the FMA peak, attention and convolution within 1.5x, cold-start and compile-time bounds), each
met or not in this run; a ratio goal that is not met says where our call's time went: the kernels' share (the runtime's
own count of the seconds it ran kernels and copies) against the Python around them, each against PyTorch's whole call.

`ours-jit` is ours with the call wrapped in TinyJit (its first call runs eagerly, the second captures, later calls replay
the captured kernels without running the Python again): what a loop that repeats one step costs without the per-step
graph building and scheduling of eager code. Its values are checked like every library's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

WORKLOADS = ("matmul", "add", "mlp_step", "deep_step", "cnn_step", "attention", "conv")
# timed calls per warm process: a training step's median over 20 calls (40-100 ms of timing) moved 1.5-2x between runs
# on a shared machine, so the steps take more; each costs a few ms
WARM_CALLS = {"matmul": 20, "add": 20, "mlp_step": 80, "deep_step": 30, "cnn_step": 80, "attention": 20, "conv": 20}
TRAINING = ("mlp_step", "deep_step", "cnn_step")
#: warm calls of ours and PyTorch run in this many blocks, alternating between the two processes (see `paired_blocks`)
PAIRED_BLOCKS = 8
PROTOCOL = "@@vs_torch"  # the prefix of a paired worker's lines to the parent (anything else on its stdout is ignored)
DEEP_LAYERS = 24
TRAJECTORY_STEPS = 4  # a training step's checked value: the losses of this many steps from the same initial weights


# ---- the workloads, built from numpy data for each library ----
def inputs(name: str) -> dict[str, np.ndarray]:
    """The numpy data (and initial weights) of a workload: the same in every process."""
    rng = np.random.default_rng(0)

    def normal(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    if name == "matmul":
        return {"a": normal(1024, 1024), "b": normal(1024, 1024)}
    if name == "add":
        return {"a": normal(1 << 24), "b": normal(1 << 24)}
    if name == "mlp_step":
        return {"x": normal(64, 784), "y": rng.integers(0, 10, 64).astype(np.int32), "w1": normal(256, 784, scale=0.05),
                "b1": np.zeros(256, np.float32), "w2": normal(10, 256, scale=0.05), "b2": np.zeros(10, np.float32)}
    if name == "deep_step":
        layers = {}
        for i in range(DEEP_LAYERS):
            layers[f"w{i}"], layers[f"b{i}"] = normal(128, 128, scale=0.12), np.zeros(128, np.float32)
        return {"x": normal(32, 128), "y": rng.integers(0, 10, 32).astype(np.int32), **layers, "wo": normal(10, 128, scale=0.1),
                "bo": np.zeros(10, np.float32)}
    if name == "cnn_step":
        return {"x": normal(16, 1, 28, 28), "y": rng.integers(0, 10, 16).astype(np.int32), "c1": normal(8, 1, 3, 3, scale=0.3),
                "c1b": np.zeros(8, np.float32), "c2": normal(16, 8, 3, 3, scale=0.1), "c2b": np.zeros(16, np.float32),
                "w": normal(10, 400, scale=0.05), "b": np.zeros(10, np.float32)}
    if name == "attention":
        return {"q": normal(8, 256, 64), "k": normal(8, 256, 64), "v": normal(8, 256, 64)}
    if name == "conv":
        return {"x": normal(8, 32, 32, 32), "w": normal(64, 32, 3, 3, scale=0.05)}
    raise SystemExit(f"error: unknown workload {name}")


def build_tinygrad_api(name: str, lib: str):
    """A zero-argument call running the workload once and returning a numpy result, over ours or tinygrad (one API);
    `ours-jit`: ours with the call in a TinyJit."""
    if lib == "ours-jit":
        from uop_scheduler import TinyJit

        run, fetch = build_tinygrad_api(name, "ours")
        return TinyJit(run), fetch
    if lib == "ours":
        from uop_scheduler import Tensor, nn
    else:
        from tinygrad import Tensor, nn
    data = inputs(name)
    # the batch is an input, as in PyTorch (whose tensors do not require gradients unless asked): under tinygrad's rule
    # backward fills `.grad` of every live float tensor of the graph, and a batch kept across steps would accumulate a
    # gradient PyTorch never computes (four more kernels per step, one a 64x784x256 matmul)
    # (set as an attribute: tinygrad 0.14's constructor takes no requires_grad)
    t = {k: Tensor(v) for k, v in data.items()}
    for k, v in t.items():
        if k in ("x", "y"):
            v.requires_grad = False
        v.realize()
    if name == "matmul":
        return lambda: (t["a"] @ t["b"]).realize(), lambda out: out.numpy()
    if name == "add":
        return lambda: (t["a"] + t["b"]).realize(), lambda out: out.numpy()
    if name == "attention":
        return lambda: ((t["q"] @ t["k"].transpose(-1, -2)) / 8).softmax(-1).matmul(t["v"]).realize(), lambda out: out.numpy()
    if name == "conv":
        return lambda: t["x"].conv2d(t["w"], padding=1).realize(), lambda out: out.numpy()
    params = [t[k] for k in data if k not in ("x", "y")]
    for p in params:
        p.requires_grad = True
    opt = nn.optim.Adam(params, lr=1e-3)
    y = t["y"]

    if name == "mlp_step":
        def forward():
            return t["x"].linear(t["w1"].T, t["b1"]).relu().linear(t["w2"].T, t["b2"])
    elif name == "deep_step":
        def forward():
            h = t["x"]
            for i in range(DEEP_LAYERS):
                h = h.linear(t[f"w{i}"].T, t[f"b{i}"]).relu()
            return h.linear(t["wo"].T, t["bo"])
    else:
        def forward():
            h = t["x"].conv2d(t["c1"], t["c1b"]).relu().max_pool2d(2)
            h = h.conv2d(t["c2"], t["c2b"]).relu().max_pool2d(2)
            return h.flatten(1).linear(t["w"].T, t["b"])

    def step():
        Tensor.training = True
        opt.zero_grad()
        loss = forward().sparse_categorical_crossentropy(y)
        loss.backward()
        # the loss realized with the update, in one schedule (tinygrad's idiom): a lazy loss read after `opt.step()`
        # is computed by tinygrad from the updated weights (0.70 off PyTorch's value on the MLP step)
        loss.realize(*opt.schedule_step())
        return loss

    return step, lambda out: np.array(out.item(), np.float32)


def build_torch(name: str):
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    data = inputs(name)
    t = {k: torch.from_numpy(v.astype(np.int64) if k == "y" else v) for k, v in data.items()}
    if name == "matmul":
        return lambda: t["a"] @ t["b"], lambda out: out.numpy()
    if name == "add":
        return lambda: t["a"] + t["b"], lambda out: out.numpy()
    if name == "attention":
        return lambda: torch.softmax(t["q"] @ t["k"].transpose(-1, -2) / 8, -1) @ t["v"], lambda out: out.numpy()
    if name == "conv":
        return lambda: torch.nn.functional.conv2d(t["x"], t["w"], padding=1), lambda out: out.numpy()
    params = [t[k].requires_grad_() for k in data if k not in ("x", "y")]
    opt = torch.optim.Adam(params, lr=1e-3)
    F = torch.nn.functional

    if name == "mlp_step":
        def forward():
            return F.linear(F.relu(F.linear(t["x"], t["w1"], t["b1"])), t["w2"], t["b2"])
    elif name == "deep_step":
        def forward():
            h = t["x"]
            for i in range(DEEP_LAYERS):
                h = F.relu(F.linear(h, t[f"w{i}"], t[f"b{i}"]))
            return F.linear(h, t["wo"], t["bo"])
    else:
        def forward():
            h = F.max_pool2d(F.relu(F.conv2d(t["x"], t["c1"], t["c1b"])), 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, t["c2"], t["c2b"])), 2)
            return F.linear(h.flatten(1), t["w"], t["b"])

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(forward(), t["y"])
        loss.backward()
        opt.step()
        return loss

    return step, lambda out: np.array(out.item(), np.float32)


# ---- the machine's float32 peak: independent vector FMA chains on every core, no memory traffic ----
PEAK_CHAINS = 12  # enough independent chains to cover the FMA latency of two units (4 cycles x 2 on Zen 3 and Skylake)
PEAK_SOURCE = """
typedef float vf __attribute__((vector_size(LANES * 4)));
static inline vf fmav(vf a, vf b, vf c) { vf r; for (int l = 0; l < LANES; l++) r[l] = __builtin_fmaf(a[l], b[l], c[l]); return r; }
void peak(void **bufs, const long long *vals, int core_id, int n_cores) {
  float *out = (float *)bufs[0]; float seed = out[core_id];
  vf m = {0}, c = {0}, a[CHAINS];
  m += 0.999999f; c += 1e-7f;
  for (int j = 0; j < CHAINS; j++) { a[j] = (vf){0} + seed + (float)j; }
  for (long long i = 0; i < vals[0]; i++) {
    #pragma GCC unroll 64
    for (int j = 0; j < CHAINS; j++) a[j] = fmav(a[j], m, c);
  }
  vf s = {0};
  for (int j = 0; j < CHAINS; j++) s += a[j];
  float t = 0; for (int l = 0; l < LANES; l++) t += s[l];
  out[core_id] = t;
}
"""


def peak_gflops(iterations: int = 20_000_000, reps: int = 5) -> float:
    """float32 GFLOP/s of FMA chains on all cores, compiled by our CPU device's compiler with its flags (best of `reps`)."""
    from hcq_runtime import Device
    from hcq_runtime.cpu import host_vector_width

    dev = Device["CPU"]
    lanes, cores = host_vector_width(), os.cpu_count() or 1
    program = dev.program("peak", dev.compiler.compile(f"#define LANES {lanes}\n#define CHAINS {PEAK_CHAINS}\n" + PEAK_SOURCE))
    out = np.ones(cores, np.float32)
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        program([out.ctypes.data], [iterations], n_cores=cores)
        best = min(best, time.perf_counter() - start)
    return cores * iterations * PEAK_CHAINS * lanes * 2 / best / 1e9


# ---- one process: time one workload of one library ----
def worker(lib: str, name: str, mode: str, out_path: str) -> None:
    compiles: list[float] = []
    if lib.startswith("ours"):
        from hcq_runtime import CCompiler

        original = CCompiler.compile_uncached

        def timed(self, src):
            start = time.perf_counter()
            try:
                return original(self, src)
            finally:
                compiles.append(time.perf_counter() - start)

        CCompiler.compile_uncached = timed
    run, fetch = build_torch(name) if lib == "torch" else build_tinygrad_api(name, lib)
    record: dict = {}

    def timed_calls(n: int) -> list[float]:
        times = []
        for _ in range(n):
            start = time.perf_counter()
            out = run()
            if name in TRAINING:
                fetch(out)
            times.append(time.perf_counter() - start)
        return times

    if mode == "cold":
        times = []
        for _ in range(2):
            start = time.perf_counter()
            out = run()
            fetch(out)  # a training step's loss, or the values: the work is done when they are on the host
            times.append(time.perf_counter() - start)
        record.update(first=times[0], second=times[1])
    else:
        for _ in range(3):
            fetch(run())
        kernel_start = _kernel_seconds(lib)
        if mode == "paired":
            # blocks of calls when the parent says (see `paired_blocks`), each block's times sent back as one line
            print(PROTOCOL, "ready", flush=True)
            times, blocks = [], []
            for line in sys.stdin:
                if line.split() != ["block"]:
                    break
                block = timed_calls(-(-WARM_CALLS[name] // PAIRED_BLOCKS))
                times += block
                blocks.append(statistics.median(block))
                print(PROTOCOL, json.dumps(block), flush=True)
            record["blocks"] = blocks
        else:
            times = timed_calls(WARM_CALLS[name])
        record.update(median=statistics.median(times), minimum=min(times), mean=statistics.fmean(times))
        if lib == "ours":  # the time the kernels (and copies) ran, per call: the rest of a call is Python
            record["kernel_seconds"] = (_kernel_seconds(lib) - kernel_start) / len(times)
            if name == "matmul":  # the peak beside the matmul it rates: the machine's speed drifts over a run (~10%)
                record["peak"] = peak_gflops()
        first, fetch_first = build_torch(name) if lib == "torch" else build_tinygrad_api(name, lib)
        steps = TRAJECTORY_STEPS if name in TRAINING else 1
        np.save(out_path + ".npy", np.stack([fetch_first(first()) for _ in range(steps)]))
    record.update(compiles=len(compiles), compile_total=sum(compiles), compile_max=max(compiles, default=0.0))
    with open(out_path, "w") as f:
        json.dump(record, f)


def _kernel_seconds(lib: str) -> float:
    """Seconds our runtime has spent running kernels and copies so far in this process (0 for other libraries)."""
    if not lib.startswith("ours"):
        return 0.0
    from hcq_runtime import counters

    return counters.seconds


# ---- the goals of the issue this benchmark serves (#36), checked against each run ----
#: workload -> the largest ratio of our warm median to PyTorch's that meets the goal (eager steps: 2x, with parity as
#: the goal beyond; kernels: matmul at or above PyTorch, attention and convolution within 1.5x)
RATIO_GOALS = {"mlp_step": 2.0, "cnn_step": 2.0, "matmul": 1.0, "attention": 1.5, "conv": 1.5}
#: workload -> (the most seconds its first cold call may take, its second) in a fresh process with the cache off
COLD_GOALS = {"attention": (1.5, None), "mlp_step": (2.0, 0.1)}
MAX_COMPILE_GOAL = 0.5  # seconds: the longest one kernel may take to compile
PEAK_FRACTION_GOAL = 0.70  # matmul 1024: of the machine's float32 FMA peak


def goal_report(results: dict[tuple[str, str], dict], workloads: list[str], peak_fraction: float | None) -> list[dict]:
    """One line per goal: the measured value, whether it is met and, for a ratio goal that is not, why, from what this
    run measured (the kernels' time against the Python around them, each against PyTorch's whole call)."""
    report = []
    for name in workloads:
        ours, torch_rec = results.get(("ours", name)), results.get(("torch", name))
        if name in RATIO_GOALS and ours and torch_rec and ours.get("warm_median") and torch_rec.get("warm_median"):
            ratio, goal = paired_ratio(ours, torch_rec), RATIO_GOALS[name]
            line = {"goal": f"{name}: warm median at most {goal:g}x PyTorch's", "value": round(ratio, 3), "met": ratio <= goal}
            if len(rounds := round_ratios(ours, torch_rec)) > 1:
                line["rounds"] = [round(r, 3) for r in rounds]
            if ratio > goal and "kernel_seconds" in ours:
                kernels, total, peer = ours["kernel_seconds"], ours.get("warm_mean", ours["warm_median"]), torch_rec["warm_median"]
                line["why"] = (f"kernels {kernels * 1e3:.2f} ms of {total * 1e3:.2f} ms per call on average "
                               f"({kernels / peer:.2f}x PyTorch's whole call "
                               f"of {peer * 1e3:.2f} ms); the other {(total - kernels) * 1e3:.2f} ms is Python: building the graph"
                               f"{' and gradients' if name in TRAINING else ''}, scheduling and launching")
            report.append(line)
        if name in COLD_GOALS and ours:
            for key, limit in zip(("first", "second"), COLD_GOALS[name]):
                if limit is not None and key in ours:
                    report.append({"goal": f"{name}: cold {key} call at most {limit:g} s", "value": round(ours[key], 3), "met": ours[key] <= limit})
        if ours and "compile_max" in ours:
            report.append({"goal": f"{name}: every kernel compiles in at most {MAX_COMPILE_GOAL:g} s", "value": round(ours["compile_max"], 3),
                           "met": ours["compile_max"] <= MAX_COMPILE_GOAL})
    if peak_fraction is not None:
        line = {"goal": f"matmul: at least {PEAK_FRACTION_GOAL:.0%} of the float32 FMA peak", "value": round(peak_fraction, 3),
                "met": peak_fraction >= PEAK_FRACTION_GOAL}
        ours = results.get(("ours", "matmul"))
        if not line["met"] and ours and ours.get("kernel_seconds"):
            # the rate counts the whole call; the kernels' own share says what the code generator reached
            kernels, total = ours["kernel_seconds"], ours.get("warm_mean", ours["warm_median"])
            line["why"] = (f"the kernels (the operand's pack and the matmul) took {kernels * 1e3:.2f} ms of {total * 1e3:.2f} ms "
                           f"per call on average, "
                           f"{peak_fraction * ours['warm_median'] / kernels:.1%} of the peak by themselves; the other "
                           f"{(total - kernels) * 1e3:.2f} ms is Python: building the graph, scheduling and launching")
        report.append(line)
    return report


def round_ratios(ours: dict, peer: dict) -> list[float]:
    """Our warm median over the peer's, per block of calls when both ran in the same paired blocks (`paired_blocks`:
    the two processes alternate blocks of a few ms, so each pair shares the machine's state of the moment: another
    tenant's load, the clock), else per round both ran in (each round runs every library back to back)."""
    if (mine := ours.get("blocks")) and (theirs := peer.get("blocks")):
        return [mine[b] / theirs[b] for b in sorted(mine) if b in theirs]
    return [ours["by_round"][r] / peer["by_round"][r] for r in sorted(ours.get("by_round", {})) if r in peer.get("by_round", {})]


def paired_ratio(ours: dict, peer: dict) -> float:
    """The median of the per-round ratios (`round_ratios`); the ratio of the overall medians when no round has both.
    The machine's speed drifts between rounds by more than the margins the goals are read at: a ratio of medians taken
    in different rounds mixes that drift in."""
    rounds = round_ratios(ours, peer)
    return statistics.median(rounds) if rounds else ours["warm_median"] / peer["warm_median"]


# ---- the run ----
def expose_clang(env: dict[str, str], tmp: str) -> None:
    """tinygrad's CPU device runs `clang`; Debian names it clang-15, so point a `clang` in the run's directory `tmp` at it."""
    if shutil.which("clang", path=env.get("PATH")) is None and (versioned := shutil.which("clang-15")) is not None:
        bindir = os.path.join(tmp, "clang-shim")
        os.makedirs(bindir, exist_ok=True)
        os.symlink(versioned, os.path.join(bindir, "clang"))
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")


def worker_env(lib: str, mode: str, env: dict[str, str]) -> dict[str, str]:
    """The environment of a worker process of library `lib` in `mode`."""
    e = dict(env)
    if mode == "cold":
        e["DISABLE_COMPILER_CACHE"] = "1"
    if lib == "tinygrad":
        e["DEV"], e["TRAINING"] = "CPU", "1"  # its optimizers step only under TRAINING
    return e


def spawn(python: str, lib: str, name: str, mode: str, tmp: str, env: dict[str, str]) -> dict | None:
    out = os.path.join(tmp, f"{lib}-{name}-{mode}.json")
    e = worker_env(lib, mode, env)
    result = subprocess.run([python, __file__, "--worker", lib, name, mode, out], env=e, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        print(f"  {lib} {name} {mode} failed: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.returncode}",
              file=sys.stderr)
        return None
    with open(out) as f:
        record = json.load(f)
    if os.path.exists(out + ".npy"):
        record["value"] = np.load(out + ".npy")
    return record


def paired_blocks(pythons: dict[str, str], name: str, tmp: str, env: dict[str, str]) -> dict[str, dict]:
    """Warm records of two libraries (`pythons`: library -> interpreter) timed in alternating blocks: both processes
    start and warm up, then take turns running PAIRED_BLOCKS blocks of calls (the first library first in even blocks,
    the other in odd ones), the idle one waiting on its input. Each record has its blocks' medians (`blocks`). A
    library whose process fails is left out (the other's record stands alone)."""
    procs: dict[str, tuple[subprocess.Popen, str]] = {}
    for lib, python in pythons.items():
        out = os.path.join(tmp, f"{lib}-{name}-paired.json")
        with open(out + ".err", "w") as err:  # (a file, not a pipe: a worker writing much there would stall on a full pipe)
            command = [python, __file__, "--worker", lib, name, "paired", out]
            procs[lib] = (subprocess.Popen(command, env=worker_env(lib, "paired", env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=err, text=True), out)

    def reply(proc: subprocess.Popen) -> str | None:
        for line in proc.stdout:
            if line.startswith(PROTOCOL):
                return line[len(PROTOCOL):].strip()
        return None

    alive = [lib for lib, (proc, _) in procs.items() if reply(proc) == "ready"]
    for block in range(PAIRED_BLOCKS):
        for lib in (list(alive) if block % 2 == 0 else alive[::-1]):  # (a copy: a failed worker leaves `alive`)
            proc = procs[lib][0]
            time.sleep(0.01)  # the other process's threads, spinning after its block, settle first
            proc.stdin.write("block\n")
            proc.stdin.flush()
            if reply(proc) is None:
                alive.remove(lib)
    records = {}
    for lib, (proc, out) in procs.items():
        try:
            proc.communicate("end\n", timeout=900)
        except (BrokenPipeError, ValueError):
            proc.communicate(timeout=900)
        with open(out + ".err") as f:
            err = f.read()
        if proc.returncode != 0 or not os.path.exists(out):
            print(f"  {lib} {name} paired failed: {err.strip().splitlines()[-1] if err.strip() else proc.returncode}", file=sys.stderr)
            continue
        with open(out) as f:
            records[lib] = json.load(f)
        if os.path.exists(out + ".npy"):
            records[lib]["value"] = np.load(out + ".npy")
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", default=os.environ.get("TORCH_PYTHON"), help="a Python interpreter with torch installed")
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--rounds", type=int, default=1, help="warm runs per library and workload (alternated)")
    parser.add_argument("--worker", nargs=4, metavar=("LIB", "WORKLOAD", "MODE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    env = dict(os.environ)
    libs = {"ours": sys.executable, "ours-jit": sys.executable}
    try:
        import tinygrad  # noqa: F401

        libs["tinygrad"] = sys.executable
    except ImportError:
        pass
    if args.torch_python:
        libs["torch"] = args.torch_python
    results: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="vs-torch-") as tmp:
        expose_clang(env, tmp)  # removed with the directory
        for name in args.workloads:
            for index, mode in enumerate(("cold", *("warm",) * args.rounds)):
                # warm: ours and PyTorch timed in alternating blocks, the others each alone
                paired = {lib: libs[lib] for lib in ("ours", "torch") if lib in libs} if mode == "warm" and "torch" in libs else {}
                records = paired_blocks(paired, name, tmp, env) if paired else {}
                for lib, python in libs.items():
                    record = records.get(lib) if lib in paired else spawn(python, lib, name, mode, tmp, env)
                    if record is None:
                        continue
                    slot = results.setdefault((lib, name), {})
                    if "blocks" in record:
                        slot.setdefault("blocks", {}).update({(index, b): m for b, m in enumerate(record["blocks"])})
                    if mode == "cold":
                        slot.update(record)
                    else:
                        slot.setdefault("medians", []).append(record["median"])
                        slot.setdefault("by_round", {})[index] = record["median"]
                        slot["minimum"] = min(slot.get("minimum", float("inf")), record["minimum"])
                        slot["value"] = record["value"]
                        if "peak" in record:
                            slot.setdefault("peaks", []).append(record["peak"])
                        if "kernel_seconds" in record:
                            # the kernels' seconds are a mean per call: the call's mean is what they split
                            slot.setdefault("kernel_rounds", []).append((record["kernel_seconds"], record["mean"]))
                            slot["kernel_seconds"], slot["warm_mean"] = statistics.median_low(slot["kernel_rounds"])
    print(f"{'workload':10} {'lib':9} {'warm median ms':>15} {'min ms':>9} {'cold 1st s':>11} {'cold 2nd s':>11} {'compiles':>9} "
          f"{'max compile s':>14} {'max |diff| vs torch':>20}")
    lines = []
    for name in args.workloads:
        torch_rec = results.get(("torch", name))
        for lib in libs:
            rec = results.get((lib, name))
            if rec is None:
                print(f"{name:10} {lib:9} {'failed':>15}")
                continue
            median = statistics.median(rec["medians"]) if rec.get("medians") else float("nan")
            diff = float(np.max(np.abs(rec["value"] - torch_rec["value"]))) if torch_rec and "value" in rec and "value" in torch_rec else float("nan")
            compiles = f"{rec['compiles']}" if lib.startswith("ours") else "-"
            max_compile = f"{rec['compile_max']:.3f}" if lib.startswith("ours") else "-"
            print(f"{name:10} {lib:9} {median * 1e3:15.2f} {rec['minimum'] * 1e3:9.2f} {rec.get('first', float('nan')):11.3f} "
                  f"{rec.get('second', float('nan')):11.3f} {compiles:>9} {max_compile:>14} {diff:20.2e}")
            rec["warm_median"] = median
            if torch_rec and "value" in torch_rec and diff > 1e-3 * max(1.0, float(np.max(np.abs(torch_rec["value"])))):
                print(f"{'':10} {lib:9} warning: the result differs from PyTorch's by {diff:.3g}: a wrong value, not a rounding")
        ours, ours_jit = results.get(("ours", name)), results.get(("ours-jit", name))
        for peer in ("torch", "tinygrad"):
            other = results.get((peer, name))
            peer_label = "PyTorch 2.13 (CPU)" if peer == "torch" else "tinygrad 0.14"
            for metric, key, mine in (("warm_median", "warm_median", ours), ("cold_first_call", "first", ours), ("cold_second_call", "second", ours),
                                      ("warm_median_jit", "warm_median", ours_jit)):
                value = mine.get(key) if mine else None
                peer_value = other.get(key) if other else None
                unit = "ms" if key == "warm_median" else "s"
                scale = 1e3 if unit == "ms" else 1.0
                lines.append({"bench": "vs_torch", "case": name, "metric": metric, "value": None if value is None else round(value * scale, 4),
                              "unit": unit, "peer": peer_label if other else f"{peer_label} (missing)",
                              "peer_value": None if peer_value is None else round(peer_value * scale, 4),
                              "ratio": None if not value or not peer_value else
                              round(paired_ratio(mine, other) if key == "warm_median" else value / peer_value, 3)})
        if ours:
            lines.append({"bench": "vs_torch", "case": name, "metric": "max_kernel_compile", "value": round(ours["compile_max"], 3),
                          "unit": "s", "peer": None, "peer_value": None, "ratio": None, "kernels_compiled_cold": ours["compiles"]})
    ours_mm = results.get(("ours", "matmul"))
    peak_fraction = None
    if ours_mm and ours_mm.get("warm_median"):
        # measured in each warm round's process right after its matmul timings (the median of those), else now
        peak = statistics.median(ours_mm["peaks"]) if ours_mm.get("peaks") else peak_gflops()
        achieved = 2 * 1024**3 / ours_mm["warm_median"] / 1e9
        peak_fraction = achieved / peak
        print(f"matmul 1024: {achieved:.1f} GFLOP/s = {achieved / peak:.1%} of this machine's float32 FMA peak, {peak:.1f} GFLOP/s "
              f"({os.cpu_count()} cores)")
        lines.append({"bench": "vs_torch", "case": "matmul", "metric": "gflops", "value": round(achieved, 1), "unit": "GFLOP/s",
                      "peer": "float32 FMA peak", "peer_value": round(peak, 1), "ratio": round(achieved / peak, 3)})
        if (torch_mm := results.get(("torch", "matmul"))) and torch_mm.get("warm_median"):
            # what the best library reaches on the same machine: the ceiling the goal is read against
            theirs = 2 * 1024**3 / torch_mm["warm_median"] / 1e9
            print(f"matmul 1024, PyTorch: {theirs:.1f} GFLOP/s = {theirs / peak:.1%} of the same peak")
            lines.append({"bench": "vs_torch", "case": "matmul", "metric": "gflops_torch", "value": round(theirs, 1), "unit": "GFLOP/s",
                          "peer": "float32 FMA peak", "peer_value": round(peak, 1), "ratio": round(theirs / peak, 3)})
    goals = goal_report(results, args.workloads, peak_fraction)
    if goals:
        print(f"goals (#36): {sum(g['met'] for g in goals)} of {len(goals)} met")
        for g in goals:
            rounds = ""
            if len(pairs := g.get("rounds", [])) > 6:  # paired blocks: their spread
                q1, _, q3 = statistics.quantiles(pairs, n=4)
                rounds = f" (per block of {len(pairs)}: {min(pairs)} to {max(pairs)}, middle half {q1:.3f} to {q3:.3f})"
            elif pairs:
                rounds = f" (per round: {', '.join(map(str, pairs))})"
            print(f"  {'met    ' if g['met'] else 'NOT MET'} {g['goal']}: {g['value']}{rounds}" + (f"  -- {g['why']}" if "why" in g else ""))
            lines.append({"bench": "vs_torch", "metric": "goal", **g})
    for line in lines:
        print(json.dumps(line))


if __name__ == "__main__":
    main()
