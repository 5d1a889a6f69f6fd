"""Soak run of the differential write fuzzer: thousands of seeded random programs of views, writes and realizes, each run on
`Tensor` and on numpy (tests/write_fuzz.py holds the generator and the oracle). Prints the counts, the first mismatching
programs (ready to paste into a regression test), and one JSON line; exits 1 when any program mismatched or crashed.

    uv run python benchmarks/write_fuzz_soak.py                 # 10,000 programs from seed 0
    uv run python benchmarks/write_fuzz_soak.py -n 500 --start 20000 --ops 20 --show 5

Programs run in worker processes, `--chunk` seeds each (a fresh process per chunk: every distinct kernel a process
compiles stays loaded in it, and ten thousand programs' worth exhausts the process's memory mappings).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from write_fuzz import generate, run  # noqa: E402


def run_chunk(job: tuple[int, int, int, bool]) -> tuple[list[tuple[int, str]], list[tuple[int, str, str]]]:
    """Run seeds [start, start + count) in this process: (mismatches as (seed, report), crashes as (seed, kind, report))."""
    start, count, ops, calls = job
    mismatches: list[tuple[int, str]] = []
    crashes: list[tuple[int, str, str]] = []
    for seed in range(start, start + count):
        program = generate(seed, ops, calls)
        try:
            found = run(program)
        except Exception as e:  # a crash is a finding too: numpy ran the same statement without one
            kind = f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
            crashes.append((seed, kind, f"seed {seed}: crashed\n{program.source()}\n{traceback.format_exc(limit=3)}"))
            continue
        if found is not None:
            mismatches.append((seed, str(found)))
    return mismatches, crashes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--programs", type=int, default=10_000, help="how many programs to run (default 10000)")
    ap.add_argument("--start", type=int, default=0, help="the first seed (default 0)")
    ap.add_argument("--ops", type=int, default=14, help="statements per program after the first tensor (default 14)")
    ap.add_argument("--calls", action="store_true", help="programs also compute values by @function calls (with arguments, "
                    "with captured tensors, precompiled)")
    ap.add_argument("--show", type=int, default=3, help="print this many failing programs in full (default 3)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: one per core)")
    ap.add_argument("--chunk", type=int, default=500, help="programs per worker process (default 500): each chunk runs in a "
                    "fresh process, so kernels compiled by one chunk do not pile up in the next")
    args = ap.parse_args()
    if args.programs < 1 or args.jobs < 1 or args.chunk < 1:
        ap.error("--programs, --jobs and --chunk must be at least 1")

    t0 = time.perf_counter()
    jobs = [(s, min(args.chunk, args.start + args.programs - s), args.ops, args.calls)
            for s in range(args.start, args.start + args.programs, args.chunk)]
    mismatches: list[tuple[int, str]] = []
    crashes: list[tuple[int, str, str]] = []
    shown = done = 0
    with multiprocessing.get_context("spawn").Pool(args.jobs, maxtasksperchild=1) as pool:
        for found, crashed in pool.imap(run_chunk, jobs):
            for report in [r for _, r in found] + [r for _, _, r in crashed]:
                if shown < args.show:
                    print(report + "\n", flush=True)
                    shown += 1
            mismatches += found
            crashes += crashed
            done += 1
            print(f"  {min(done * args.chunk, args.programs)} programs, {len(mismatches)} mismatches, {len(crashes)} crashes, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    elapsed = time.perf_counter() - t0

    print(f"{'programs':>9} {'mismatches':>11} {'crashes':>8} {'seconds':>8}")
    print(f"{args.programs:9d} {len(mismatches):11d} {len(crashes):8d} {elapsed:8.1f}")
    if mismatches:
        print("mismatching seeds:", " ".join(str(s) for s, _ in mismatches[:50]))
    for what, count in Counter(kind for _, kind, _ in crashes).most_common(10):
        print(f"crash x{count}: {what}")
    if crashes:
        print("crashing seeds:", " ".join(str(s) for s, _, _ in crashes[:50]))
    print(json.dumps({"bench": "write_fuzz_soak", "metric": "mismatching_programs", "value": len(mismatches) + len(crashes), "unit": "programs",
                      "programs": args.programs, "first_seed": args.start, "ops": args.ops, "calls": args.calls, "mismatches": len(mismatches),
                      "crashes": len(crashes), "seconds": round(elapsed, 1), "peer": "numpy", "peer_value": 0, "ratio": None}))
    return 1 if mismatches or crashes else 0


if __name__ == "__main__":
    sys.exit(main())
