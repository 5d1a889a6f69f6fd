"""Soak run of the untrusted-input readers: mutated files through each reader, counting exceptions that are not the
package's own error class ("foreign") and cases slower than the time bound ("hangs"). The suite runs a few hundred
cases per reader (tests/*fuzz*); this runs thousands. Exits 1 when anything foreign or slow turned up.

    uv run python benchmarks/reader_fuzz_soak.py                   # 10,000 cases per reader from seed 0
    uv run python benchmarks/reader_fuzz_soak.py -n 2000 --readers gguf codeobject --seed 7

Readers: gguf (parse, metadata, tokenizer, every tensor's array and dequantization), codeobject (read, write back,
read again: kernels kept), sqtt (the captured traces of ../shared/data/sqtt, mutated, decoded and mapped to their
code objects; skipped when the data is absent), safetensors (`safe_load` and every tensor's values).
Mutations: byte flips, truncations, and huge u32/u64 counts.
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SQTT_DATA = ROOT.parent / "shared" / "data" / "sqtt"
HUGE = (0, 2**31, 2**32 - 1, 2**63, 2**64 - 1, 10**12)


def mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytes(data)
    for _ in range(rng.randint(1, 4)):
        if not out:
            break
        pos, kind = rng.randrange(len(out)), rng.choice(("flip", "flip", "truncate", "u64", "u32"))
        if kind == "flip":
            out = out[:pos] + bytes([rng.randrange(256)]) + out[pos + 1:]
        elif kind == "truncate":
            out = out[:pos]
        elif kind == "u64":
            out = out[:pos] + struct.pack("<Q", rng.choice(HUGE)) + out[pos + 8:]
        else:
            out = out[:pos] + struct.pack("<I", rng.choice(HUGE) & 0xFFFFFFFF) + out[pos + 4:]
    return out


def gguf_reader(workdir: Path) -> tuple[list[bytes], Callable[[bytes], None], type]:
    sys.path.insert(0, str(ROOT / "packages" / "llm-bench" / "tests"))
    from llm_bench import LLMBenchError
    from test_llm_gguf_fuzz import _seed_file, _use

    seed = _seed_file(workdir / "seed.gguf")
    path = workdir / "case.gguf"

    def run(data: bytes) -> None:  # what the suite's fuzz test does with each case
        path.write_bytes(data)
        _use(path)

    return [seed], run, LLMBenchError


def codeobject_reader(workdir: Path) -> tuple[list[bytes], Callable[[bytes], None], type]:
    from amd_isa.codeobject import CodeObject
    from amd_isa.errors import AmdIsaError

    code = bytes([0x81, 0x00, 0x80, 0xBE, 0x80, 0x02, 0x00, 0x7E, 0x00, 0x00, 0xB0, 0xBF])
    seeds = [CodeObject.from_code(code, "gfx1100").to_bytes()] + [p.read_bytes() for p in sorted(SQTT_DATA.glob("*/*/prog_*.elf"))]

    def run(data: bytes) -> None:
        co = CodeObject.from_bytes(data)
        again = CodeObject.from_bytes(co.to_bytes())
        if set(again.descriptors) != set(co.descriptors):
            raise AssertionError("a written code object lost kernels")

    return seeds, run, AmdIsaError


def sqtt_reader(workdir: Path) -> tuple[list[bytes], Callable[[bytes], None], type]:
    from amd_isa.codeobject import CodeObject
    from amd_isa.errors import AmdIsaError
    from amd_isa.sqtt import map_insts

    pairs = []
    for folder in sorted(SQTT_DATA.glob("*/*")):
        elfs, traces = sorted(folder.glob("prog_*.elf")), sorted(folder.glob("se*.sqtt"))
        if elfs and traces:
            pairs.append((CodeObject.from_bytes(elfs[0].read_bytes()), traces[0].read_bytes()))
    codes = {trace: code for code, trace in pairs}

    def run(data: bytes) -> None:
        # each mutated trace is mapped against the code object its seed came with
        code = codes.get(run.seed)  # type: ignore[attr-defined]
        for _ in map_insts(data, code, code.target):
            pass

    run.seed = None  # type: ignore[attr-defined]
    return [t for _, t in pairs], run, AmdIsaError


def safetensors_reader(workdir: Path) -> tuple[list[bytes], Callable[[bytes], None], type]:
    import numpy as np
    from uop_scheduler import Tensor
    from uop_scheduler.nn.state import SafetensorsError, safe_load, safe_save

    seed_path, path = workdir / "seed.safetensors", workdir / "case.safetensors"
    safe_save({"w": Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)), "b": Tensor(np.arange(5, dtype=np.int16)),
               "s": Tensor(np.array(2.5, np.float32))}, str(seed_path), metadata={"format": "pt"})

    def run(data: bytes) -> None:
        path.write_bytes(data)
        for t in safe_load(str(path)).values():
            t.numpy()

    return [seed_path.read_bytes()], run, SafetensorsError


READERS = {"gguf": gguf_reader, "codeobject": codeobject_reader, "sqtt": sqtt_reader, "safetensors": safetensors_reader}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--cases", type=int, default=10_000, help="mutated cases per reader (default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--readers", nargs="+", choices=sorted(READERS), default=sorted(READERS))
    ap.add_argument("--bound", type=float, default=5.0, help="seconds one case may take (default 5)")
    args = ap.parse_args()
    rows, bad = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.readers:
            if name == "sqtt" and not SQTT_DATA.is_dir():
                print(f"{name}: skipped (no {SQTT_DATA})")
                continue
            seeds, run, allowed = READERS[name](Path(tmp))
            rng = random.Random(args.seed)
            foreign: dict[str, str] = {}
            n_foreign = hangs = refused = 0
            start = time.perf_counter()
            for _ in range(args.cases):
                seed = rng.choice(seeds)
                run.seed = seed  # type: ignore[attr-defined]
                t0 = time.perf_counter()
                try:
                    run(mutate(seed, rng))
                except allowed:
                    refused += 1
                except Exception as e:  # a finding: the reader must raise its package's error class
                    n_foreign += 1
                    foreign.setdefault(f"{type(e).__name__}: {str(e)[:100]}", traceback.format_exc(limit=4))
                hangs += time.perf_counter() - t0 > args.bound
            seconds = time.perf_counter() - start
            bad += n_foreign + hangs
            rows.append({"reader": name, "cases": args.cases, "refused": refused, "foreign": n_foreign, "hangs": hangs, "seconds": round(seconds, 1)})
            print(f"{name}: {args.cases} cases, {refused} refused with the package's error, {n_foreign} foreign, {hangs} over {args.bound} s, "
                  f"{seconds:.1f} s", flush=True)
            for kind, tb in list(foreign.items())[:3]:
                print(f"  {kind}\n{tb}")
    print(json.dumps({"bench": "reader_fuzz_soak", "metric": "foreign_exceptions_and_hangs", "value": bad, "unit": "cases",
                      "readers": rows, "peer": None, "peer_value": None, "ratio": None}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
