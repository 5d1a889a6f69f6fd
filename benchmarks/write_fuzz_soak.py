"""Soak run of the differential write fuzzer: thousands of seeded random programs of views, writes and realizes, each run on
`Tensor` and on numpy (tests/write_fuzz.py holds the generator and the oracle). Prints the counts, the first mismatching
programs (ready to paste into a regression test), and one JSON line; exits 1 when any program mismatched or crashed.

    uv run python benchmarks/write_fuzz_soak.py                 # 10,000 programs from seed 0
    uv run python benchmarks/write_fuzz_soak.py -n 500 --start 20000 --ops 20 --show 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from write_fuzz import generate, run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--programs", type=int, default=10_000, help="how many programs to run (default 10000)")
    ap.add_argument("--start", type=int, default=0, help="the first seed (default 0)")
    ap.add_argument("--ops", type=int, default=14, help="statements per program after the first tensor (default 14)")
    ap.add_argument("--show", type=int, default=3, help="print this many failing programs in full (default 3)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    mismatches: list[tuple[int, str]] = []
    crashes: Counter[str] = Counter()
    crash_seeds: list[int] = []
    for i, seed in enumerate(range(args.start, args.start + args.programs)):
        program = generate(seed, args.ops)
        try:
            found = run(program)
        except Exception as e:  # a crash is a finding too: numpy ran the same statement without one
            crashes[f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"] += 1
            crash_seeds.append(seed)
            if len(mismatches) + len(crash_seeds) <= args.show:
                print(f"seed {seed}: crashed\n{program.source()}\n{traceback.format_exc(limit=3)}", flush=True)
            continue
        if found is not None:
            mismatches.append((seed, found.name))
            if len(mismatches) + len(crash_seeds) <= args.show:
                print(f"{found}\n", flush=True)
        if (i + 1) % 500 == 0:
            print(f"  {i + 1} programs, {len(mismatches)} mismatches, {len(crash_seeds)} crashes, {time.perf_counter() - t0:.0f} s", flush=True)
    elapsed = time.perf_counter() - t0

    print(f"{'programs':>9} {'mismatches':>11} {'crashes':>8} {'seconds':>8}")
    print(f"{args.programs:9d} {len(mismatches):11d} {len(crash_seeds):8d} {elapsed:8.1f}")
    if mismatches:
        print("mismatching seeds:", " ".join(str(s) for s, _ in mismatches[:50]))
    for what, count in crashes.most_common(10):
        print(f"crash x{count}: {what}")
    if crash_seeds:
        print("crashing seeds:", " ".join(str(s) for s in crash_seeds[:50]))
    print(json.dumps({"bench": "write_fuzz_soak", "metric": "mismatching_programs", "value": len(mismatches) + len(crash_seeds), "unit": "programs",
                      "programs": args.programs, "first_seed": args.start, "ops": args.ops, "mismatches": len(mismatches),
                      "crashes": len(crash_seeds), "seconds": round(elapsed, 1), "peer": "numpy", "peer_value": 0, "ratio": None}))
    return 1 if mismatches or crash_seeds else 0


if __name__ == "__main__":
    sys.exit(main())
