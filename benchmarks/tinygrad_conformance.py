"""tinygrad's own public-API tests run against uop_scheduler, with tinygrad itself as the baseline, in the same run.

    uv run python benchmarks/tinygrad_conformance.py TINYGRAD_SRC [--files test/unit/test_assign.py ...] [--no-baseline]

TINYGRAD_SRC is a local checkout of the public tinygrad repository (never committed here). test/backend/test_ops.py
checks each op against torch, and test/unit/test_disk_tensor.py reads files safetensors writes: run this script with an
interpreter that has torch, numpy and safetensors (the venv vs_torch.py describes, plus `pip install safetensors`);
without them those files count for neither side. examples/gpt2.py and extra/gradcheck.py are read from the checkout
(test_symbolic_ops.py and test_ops.py import them). For our side, a shim
package named `tinygrad` is put first on the path: its modules only re-export names from `uop_scheduler` and its
neighbours (a name with no counterpart is a placeholder that raises when used, so the tests that need it fail while
the rest of the file still runs). tinygrad's `test/helpers.py` is replaced by a small stub of our own. Each test has a
time limit. The baseline runs the same files against the checkout's own tinygrad on its CPU device (PYTHON when no
clang is installed). Prints per-file counts, the tests tinygrad passes that we fail, and one JSON line
per file. Tests named in tinygrad_conformance_exclusions.txt (each with its reason: it reads tinygrad internals, or it
asserts a value tinygrad's own TODO calls wrong, or tinygrad raises where this package computes numpy's value) are left
out of the count; `--scan` lists the tests that look at internals, to review when the checkout moves.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FILES = [
    "test/test_tiny.py", "test/unit/test_assign.py", "test/backend/test_setitem.py", "test/unit/test_jit.py",
    "test/unit/test_jit_footguns.py", "test/unit/test_gradient.py", "test/unit/test_indexing.py", "test/unit/test_getitem_ops.py",
    "test/backend/test_tensor.py", "test/backend/test_nn.py", "test/backend/test_optim.py", "test/unit/test_function.py",
    "test/unit/test_rearrange_einops.py", "test/unit/test_linalg.py", "test/backend/test_ops.py", "test/backend/test_dtype_alu.py",
    "test/backend/test_transcendental.py", "test/backend/test_edgecases.py", "test/backend/test_to_numpy.py",
    "test/backend/test_tensor_variable.py", "test/backend/test_symbolic_jit.py", "test/backend/test_symbolic_ops.py",
    "test/backend/test_dtype.py", "test/unit/test_dtype_spec.py", "test/backend/test_jit.py", "test/unit/test_randomness.py",
    "test/backend/test_randomness.py", "test/unit/test_disk_tensor.py", "test/unit/test_tar.py", "test/unit/test_tensor_io.py",
    "test/unit/test_tensor_data.py", "test/unit/test_conv.py", "test/unit/test_masked_tensor.py", "test/unit/test_jit_cases.py",
    "test/unit/test_symbolic_tensor.py",
]

# tinygrad's numpy and torch dtypes of a dtype: bfloat16 and fp8 values are float32 arrays in numpy (ours holds their
# bits in uint16/uint8 storage), fp8 is uint8 in torch
_TO_NP = ("lambda dt: __import__('numpy').float32 if dt == dtypes.bfloat16 or dt in dtypes.fp8s "
          "else __import__('numpy').dtype(__import__('hcq_runtime').numpy_dtype(dt)).type")
_TO_TORCH = ("lambda dt: (lambda torch, name: torch.uint8 if name.startswith('fp8') else getattr(torch, name))(__import__('torch'), "
             "next(k for k, v in __import__('uopir.dtypes', fromlist=['DTYPES_DICT']).DTYPES_DICT.items() "
             "if v == __import__('uopir').strong_dtype(dt)))")

# module of the shim -> {tinygrad name: "uop_scheduler expression"}; anything else a test imports is a placeholder
SHIM: dict[str, dict[str, str]] = {
    "tinygrad": {"Tensor": "Tensor", "TinyJit": "TinyJit", "Variable": "Variable", "dtypes": "dtypes",
                 "Device": "Device",
                 "Context": "Context", "nn": "nn", "function": "function", "GlobalCounters": "_us.helpers.GlobalCounters",
                 "UOp": "__import__('uopir').UOp"},
    "tinygrad.tensor": {"Tensor": "Tensor", "_to_np_dtype": _TO_NP},
    "tinygrad.dtype": {"dtypes": "dtypes", "DTYPES_DICT": "__import__('uopir.dtypes', fromlist=['DTYPES_DICT']).DTYPES_DICT"}
                      | {name: f"__import__('uopir.dtypes', fromlist=['{name}']).{name}"
                         for name in ("DType", "least_upper_dtype", "fp8_to_float", "float_to_fp8", "strong_dtype")}
                      | {"_to_np_dtype": _TO_NP, "_to_torch_dtype": _TO_TORCH,
                         # tinygrad's `truncate` is a table of one function per dtype
                         "truncate": "type('Truncate', (), {'__getitem__': lambda self, dt: lambda v: "
                                     "__import__('uopir.dtypes', fromlist=['truncate']).truncate(dt, v)})()"},
    "tinygrad.device": {"Device": "Device"},
    "tinygrad.helpers": {"Context": "Context", "JIT": "int(__import__('os').getenv('JIT', '1'))",
                         # switches test files read as numbers, and DEV's interface and renderer names (none here)
                         **{name: f"int(__import__('os').getenv('{name}', '0') or 0)" for name in ("DEBUG", "IMAGE", "CI", "CHECK_OOB")},
                         "DEV": "__import__('types').SimpleNamespace(interface='', renderer='', device='', value='')",
                         # the dtypes the default device's kernels compute through float32
                         "EMULATED_DTYPES": "type('Emulated', (), {'tolist': lambda self, dtypes: "
                                            "sorted(Device[Device.DEFAULT].renderer.emulated_dtypes, key=str)})()"} | {name: f"_us.helpers.{name}"
                                                  for name in ("getenv", "OSX", "temp", "all_same", "dedup", "prod", "GlobalCounters", "mv_address")},
    "tinygrad.engine": {},
    "tinygrad.renderer": {},
    # renderer classes tests skip on (isinstance checks need classes, not placeholders); modules of internals
    **{f"tinygrad.renderer.{mod}": {name: f"type('{name}', (), {{}})"} for mod, name in
       (("ptx", "PTXRenderer"), ("llvmir", "CPULLVMRenderer"), ("isa.x86", "X86Renderer"))},
    **{module: {} for module in ("tinygrad.renderer.isa", "tinygrad.runtime", "tinygrad.codegen", "tinygrad.codegen.decomp",
                                 "tinygrad.codegen.decomp.op")},
    # a value from its storage bits (bfloat16's 16 bits, an fp8 code), as test_dtype_alu draws them
    "tinygrad.runtime.ops_python": {"from_storage_scalar": "lambda x, dtype: __import__('struct').unpack('<f', __import__('struct').pack("
                                                           "'<I', (x & 0xFFFF) << 16))[0] if dtype == dtypes.bfloat16 else (__import__("
                                                           "'uopir.dtypes', fromlist=['fp8_to_float']).fp8_to_float(int(x), dtype) "
                                                           "if dtype in dtypes.fp8s else x)"},
    # a renderer class tests skip on (isinstance checks need a class, not a placeholder)
    "tinygrad.renderer.nir": {"NIRRenderer": "type('NIRRenderer', (), {})"},
    "tinygrad.engine.jit": {"TinyJit": "TinyJit", "JitError": "JitError"},
    "tinygrad.engine.realize": {},
    "tinygrad.nn": {name: f"nn.{name}" for name in ("Linear", "Conv2d", "BatchNorm", "BatchNorm2d", "LayerNorm", "Embedding",
                                                      "GroupNorm", "InstanceNorm", "RMSNorm", "Conv1d", "ConvTranspose2d",
                                                      "LayerNorm2d", "LSTMCell", "ConvTranspose1d", "BatchNorm1d", "BatchNorm3d")}
                   | {"optim": "nn.optim", "state": "nn.state"},
    "tinygrad.nn.optim": {name: f"nn.optim.{name}" for name in ("SGD", "Adam", "AdamW", "LAMB", "LARS", "Muon", "Optimizer", "OptimizerGroup")},
    "tinygrad.nn.state": {name: f"nn.state.{name}" for name in ("get_parameters", "get_state_dict", "load_state_dict", "safe_save",
                                                                "safe_load", "safe_load_metadata", "torch_load", "tar_extract", "zip_extract",
                                                                "TensorIO")},
    "tinygrad.function": {"function": "function"},
    "tinygrad.uop": {"Ops": "__import__('uopir').Ops"},
    "tinygrad.uop.ops": {"UOp": "__import__('uopir').UOp", "Ops": "__import__('uopir').Ops", "KernelInfo": "__import__('uopir').KernelInfo",
                         "GroupOp": "__import__('uopir').GroupOp", "sym_infer": "__import__('uopir').sym_infer"},
    # what examples/gpt2.py (copied from the checkout: test_symbolic_ops.py takes its Attention) imports besides the API
    **{module: {} for module in ("tinygrad.llm", "tinygrad.llm.gguf", "extra.bench_log")},
}

HELPERS_STUB = '''"""A stub of tinygrad's test/helpers.py for the conformance run: the names the public-API tests use."""
import os, unittest
from contextlib import contextmanager
slow = unittest.skipUnless(os.getenv("RUN_SLOW"), "slow test, set RUN_SLOW=1 to run")
def assert_jit_cache_len(fxn, expected_len):  # the kernel cache is an implementation detail: not checked
  pass
@contextmanager
def assert_kernel_count(n):  # kernel counts are an implementation detail: not checked
  yield
class KernelCountException(Exception): pass
def check_schedule(t, allowed, to_prerealize=None, filter_sink=True):  # kernel counts are an implementation detail
  ts = t if isinstance(t, list) else [t]
  for x in ts: x.realize()
  return []
def not_support_multi_device(): return False
def needs_second_gpu(fn): return fn  # CPU:0 and CPU:1 are two devices here
def call_is_graph(call): raise NotImplementedError("graph executors are tinygrad internals")
def min_normal(dt):  # the smallest positive normal number of a float dtype, from its exponent width
  from uop_scheduler import dtypes
  return 2.0 ** (2 - 2 ** (dtypes.finfo(dt)[0] - 1))
def rand_for_dtype(dt, size, allow_subnormal=True):  # test data of a dtype: small ints, bools, floats in [-10, 10)
  import numpy as np
  from uop_scheduler import dtypes
  from hcq_runtime import numpy_dtype
  from uopir.dtypes import truncate
  if dt == dtypes.bool: return np.random.choice([True, False], size=size)
  if dtypes.is_int(dt): return np.random.randint(0 if dtypes.is_unsigned(dt) else -100, 100, size=size, dtype=numpy_dtype(dt))
  out = np.random.uniform(-10, 10, size=size).astype(np.float32 if dt == dtypes.bfloat16 or dt in dtypes.fp8s else numpy_dtype(dt))
  if dt == dtypes.bfloat16 or dt in dtypes.fp8s: out = np.array([truncate(dt, float(v)) for v in out], dtype=out.dtype)
  return out if allow_subnormal else np.where(np.abs(out) < min_normal(dt), 0, out)
'''

CONFTEST = '''import faulthandler, os, signal, pytest
LIMIT = int(os.environ.get("CONFORMANCE_TEST_SECONDS", "60"))
@pytest.fixture(autouse=True)
def _time_limit():
  def expire(*_): raise TimeoutError(f"test took longer than {LIMIT} s")
  old = signal.signal(signal.SIGALRM, expire); signal.alarm(LIMIT)
  faulthandler.dump_traceback_later(LIMIT + 30, exit=True)  # a hang Python cannot interrupt ends the process
  yield
  faulthandler.cancel_dump_traceback_later()
  signal.alarm(0); signal.signal(signal.SIGALRM, old)
'''


def write_shim(root: Path) -> None:
    for module, names in SHIM.items():
        folder = root.joinpath(*module.split("."))
        folder.mkdir(parents=True, exist_ok=True)
        lines = ['"""Shim: re-exports from uop_scheduler for tinygrad\'s tests (generated by benchmarks/tinygrad_conformance.py)."""',
                 "import uop_scheduler as _us",
                 "from uop_scheduler import Tensor, TinyJit, Variable, dtypes, Device, Context, nn, JitError, function",
                 "class _Missing:",
                 "    def __init__(self, name): self._name = name",
                 "    def __call__(self, *a, **k): raise NotImplementedError(f'tinygrad name {self._name} has no uop_scheduler counterpart')",
                 "    def __getattr__(self, attr): return _Missing(self._name + '.' + attr)",
                 "    def __mro_entries__(self, bases): return (object,)"]
        for name, expr in names.items():  # a name this version of uop_scheduler lacks is a placeholder too
            lines += ["try:", f"    {name} = {expr}", "except AttributeError:", f"    {name} = _Missing('{module}.{name}')"]
        lines += ["def __getattr__(name):",
                  "    if name.startswith('__'): raise AttributeError(name)",
                  f"    return _Missing('{module}.' + name)"]
        (folder / "__init__.py").write_text("\n".join(lines) + "\n")


def prepare(src: Path, files: list[str], ours: bool) -> Path:
    work = Path(tempfile.mkdtemp(prefix="tg-conformance-"))
    if ours:
        write_shim(work)
    (work / "test").mkdir()
    (work / "test" / "__init__.py").write_text("")
    if ours:
        (work / "test" / "helpers.py").write_text(HELPERS_STUB)
    else:
        shutil.copy(src / "test" / "helpers.py", work / "test" / "helpers.py")
    for f in files:
        dest = work / f
        dest.parent.mkdir(parents=True, exist_ok=True)
        for parent in dest.parents:
            if parent == work:
                break
            (parent / "__init__.py").touch()
        shutil.copy(src / f, dest)
    # test helpers written against the public API, read from the checkout
    for helper in ("extra/gradcheck.py", "examples/gpt2.py"):
        if ours and (src / helper).exists():
            (work / helper).parent.mkdir(exist_ok=True)
            (work / helper).parent.joinpath("__init__.py").touch()
            shutil.copy(src / helper, work / helper)
    (work / "conftest.py").write_text(CONFTEST)
    return work


EXCLUSIONS = Path(__file__).with_name("tinygrad_conformance_exclusions.txt")

# what marks a test as checking tinygrad's internals rather than the public API (see `scan`)
_INTERNAL = [
    (r"\.uop\b|buf_uop|\.realized\b|\bUOp\.(?!variable\b)|\bUOp\(|\bOps\.|jit_cache|\.captured\.|KernelInfo|ProgramInfo",
     "internals: reads tinygrad's UOp graph, buffers or jit cache"),
    (r"GlobalCounters\.(kernel_count|global_ops|global_mem|mem_used)|check_schedule\(", "internals: checks kernel counts or the schedule"),
    (r'"PYTHON"', "tinygrad's PYTHON device"),
]


def read_exclusions(path: Path) -> dict[str, str]:
    """test id -> why it is left out: one `test id | reason` per line, `#` comments."""
    out: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                test, _, why = line.partition("|")
                out[test.strip()] = why.strip()
    return out


def scan(src: Path, files: list[str]) -> list[tuple[str, str]]:
    """The tests whose source matches an `_INTERNAL` pattern: candidates for the exclusion list (read each one)."""
    import ast

    found = []
    for f in files:
        text = (src / f).read_text()
        for cls in [n for n in ast.parse(text).body if isinstance(n, ast.ClassDef)]:
            for fn in [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]:
                body = ast.get_source_segment(text, fn) or ""
                why = next((w for pat, w in _INTERNAL if re.search(pat, body)), None)
                if why:
                    found.append((f"{f}::{cls.name}::{fn.name}", why))
    return found


_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+::\S+)")
_PROGRESS = re.compile(r"^(\S+::\S+)")
_KIND = {"PASSED": "passed", "XPASS": "passed", "SKIPPED": "skipped", "XFAIL": "skipped", "FAILED": "failed", "ERROR": "failed"}


def run_file(work: Path, f: str, env: dict[str, str], timeout: int) -> dict[str, str]:
    """Outcome per test id (passed, failed, skipped). A test that hangs (a kernel that never returns cannot be
    interrupted from Python) ends its process by the faulthandler limit; it counts as failed and the file runs on
    without it."""
    out: dict[str, str] = {}
    deselect: list[str] = []
    for _ in range(50):
        cmd = [sys.executable, "-m", "pytest", "-v", "-rA", "-p", "no:cacheprovider", "--rootdir", str(work), f,
               *(arg for t in deselect for arg in ("--deselect", t))]
        try:
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
            text = proc.stdout
        except subprocess.TimeoutExpired as e:
            text = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        last = None
        for line in text.splitlines():
            if m := _SUMMARY.match(line):  # the -rA summary: one line per test, whatever the test printed
                out[m.group(2).split(" ")[0]] = _KIND[m.group(1)]
            elif m := _PROGRESS.match(line):
                last = m.group(1)
        finished = "short test summary info" in text
        hung = None if finished or last is None or last in out else last
        if hung is None:
            return out
        out[hung] = "failed"
        deselect.append(hung)
    return out


def baseline_device() -> dict[str, str]:
    """tinygrad's CPU device when a clang is installed (its C compiler is `$CC`, default `clang`; Debian names it
    clang-15 or clang-19), else its PYTHON device (an interpreter: the same answers, ten to a hundred times slower)."""
    for name in ("clang", "clang-19", "clang-15"):
        if (path := shutil.which(name)) is not None:
            return {"DEV": "CPU", "CC": path}
    return {"DEV": "PYTHON"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, help="a local checkout of the tinygrad repository")
    ap.add_argument("--files", nargs="+", default=FILES, help="test files, relative to the checkout")
    ap.add_argument("--no-baseline", action="store_true", help="skip the run against tinygrad itself")
    ap.add_argument("--file-timeout", type=int, default=1200, help="seconds per file and side (default 1200)")
    ap.add_argument("--show", type=int, default=15, help="list this many tests tinygrad passes and we fail, per file")
    ap.add_argument("--exclusions", type=Path, default=EXCLUSIONS, help="tests left out, with reasons (default: the checked-in list)")
    ap.add_argument("--ours-path", default="", help="directories put first on sys.path for our side (os.pathsep-separated), "
                    "e.g. the src dirs of a `git worktree` snapshot to measure while the checkout is edited")
    ap.add_argument("--scan", action="store_true", help="print the tests that look at tinygrad internals (exclusion candidates) and stop")
    args = ap.parse_args()
    if not (args.src / "tinygrad" / "__init__.py").exists():
        print(f"error: {args.src} is not a tinygrad checkout (no tinygrad/__init__.py)", file=sys.stderr)
        return 1
    files = [f for f in args.files if (args.src / f).exists()]
    if args.scan:
        for test, why in scan(args.src, files):
            print(f"{test} | {why}")
        return 0
    excluded = read_exclusions(args.exclusions)
    for missing in sorted(set(args.files) - set(files)):
        print(f"note: {missing} is not in this checkout; left out")
    base_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DEBUG")} | {"RUN_SLOW": "1"}
    ours_dir = prepare(args.src, files, ours=True)
    tg_dir = prepare(args.src, files, ours=False)
    rows = []
    try:
        for f in files:
            ours_path = os.pathsep.join(p for p in (str(ours_dir), args.ours_path) if p)
            ours = run_file(ours_dir, f, base_env | {"PYTHONPATH": ours_path}, args.file_timeout)
            theirs = {} if args.no_baseline else run_file(tg_dir, f, base_env | {"PYTHONPATH": f"{tg_dir}{os.pathsep}{args.src}"} | baseline_device(),
                                                          args.file_timeout)
            base = [t for t, r in theirs.items() if r == "passed"] if theirs else [t for t, r in ours.items() if r != "skipped"]
            left_out = [t for t in base if t in excluded]
            base = [t for t in base if t not in excluded]
            passed = [t for t in base if ours.get(t) == "passed"]
            rows.append((f, len(ours), sum(r == "passed" for r in ours.values()), len(base), len(passed)))
            which = "tinygrad passes" if theirs else "tests ours does not skip (no baseline)"
            print(f"{f}: ours {rows[-1][2]}/{len(ours)} passed; of the {len(base)} {which} (less {len(left_out)} excluded), "
                  f"ours passes {len(passed)}", flush=True)
            for t in [t for t in base if ours.get(t) != "passed"][:args.show]:
                print(f"    {ours.get(t, 'missing'):8s} {t}")
    finally:
        shutil.rmtree(ours_dir, ignore_errors=True)
        shutil.rmtree(tg_dir, ignore_errors=True)
    print(f"\n{'file':40s} {'tinygrad passes':>15s} {'ours of those':>14s} {'ratio':>6s}")
    for f, _, _, nb, np_ in rows:
        print(f"{f:40s} {nb:15d} {np_:14d} {np_ / nb if nb else float('nan'):6.2f}")
    tb, tp = sum(r[3] for r in rows), sum(r[4] for r in rows)
    print(f"{'total':40s} {tb:15d} {tp:14d} {tp / tb if tb else float('nan'):6.2f}")
    for f, n, p, nb, np_ in rows:
        print(json.dumps({"bench": "tinygrad_conformance", "case": re.sub(r"^test/", "", f), "metric": "passing_tests", "value": np_,
                          "unit": "tests", "peer": "tinygrad (its own passes)", "peer_value": nb, "ratio": round(np_ / nb, 4) if nb else None,
                          "ours_total": n, "ours_passed": p}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
