"""AMD ISA codec speed: instructions/s assembled and disassembled by amd_isa, against llvm-mc-15 on the same corpus.

    uv run --frozen python benchmarks/isa_codec.py [--target gfx1100] [--rounds 3]

The corpus is `sample_corpus(target, 5)` (every opcode, five operand variants), kept to the lines llvm-mc-15 accepts,
so both tools process identical instructions. llvm-mc runs as one process per round over the whole corpus (its start-up
is included, as it is for anyone invoking it); ours runs in-process. Each figure is the best of the rounds.
"""

import argparse
import json
import re
import shutil
import subprocess
import time

from amd_isa import assemble, decode, sample_corpus


def best_of(rounds: int, fn) -> float:
    """Fastest wall time of `rounds` calls."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run_mc(mc: str, target: str, args: list[str], text: str) -> subprocess.CompletedProcess:
    return subprocess.run([mc, "-arch=amdgcn", f"-mcpu={target}", *args], input=text, capture_output=True, text=True, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="gfx1100")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    target = args.target
    lines = [str(inst) for inst in sample_corpus(target, 5)]
    mc = shutil.which("llvm-mc-15")
    if mc is not None:
        errors = run_mc(mc, target, ["-show-encoding"], "\n".join(lines)).stderr
        rejected = {int(m.group(1)) - 1 for m in re.finditer(r"<stdin>:(\d+):\d+: error", errors)}
        lines = [line for i, line in enumerate(lines) if i not in rejected]
    source = "\n".join(lines) + "\n"
    code = assemble(source, target)
    hex_text = "\n".join(" ".join(f"{b:#04x}" for b in inst.to_bytes()) for inst in decode(code, target)) + "\n"
    count = len(lines)

    ours_asm = best_of(args.rounds, lambda: assemble(source, target))
    ours_dis = best_of(args.rounds, lambda: [str(inst) for inst in decode(code, target)])
    ours_dec = best_of(args.rounds, lambda: decode(code, target))
    figures = [("assemble", count / ours_asm), ("disassemble", count / ours_dis), ("decode_only", count / ours_dec)]
    peer = {}
    if mc is not None:
        peer["assemble"] = count / best_of(args.rounds, lambda: run_mc(mc, target, ["-filetype=obj", "-o", "/dev/null"], source))
        peer["disassemble"] = count / best_of(args.rounds, lambda: run_mc(mc, target, ["-disassemble"], hex_text))

    print(f"AMD ISA codec, {target}: {count} instructions (every opcode, 5 operand variants), best of {args.rounds}")
    print(f"{'figure':<14}{'amd_isa inst/s':>16}{'llvm-mc-15 inst/s':>20}{'ratio':>10}")
    for name, value in figures:
        other = peer.get(name)
        ratio = f"{value / other:.2f}x" if other else "-"
        peer_text = f"{other:,.0f}" if other else ("missing" if mc is None and name != "decode_only" else "-")
        print(f"{name:<14}{value:>16,.0f}{peer_text:>20}{ratio:>10}")
    for name, value in figures:
        other = peer.get(name)
        peer_name = "llvm-mc-15" if name in ("assemble", "disassemble") else None
        if peer_name and mc is None:
            peer_name = "llvm-mc-15 (missing)"
        print(json.dumps({"bench": "isa_codec", "metric": f"{target}_{name}_inst_per_s", "value": round(value, 1), "unit": "inst/s",
                          "peer": peer_name, "peer_value": round(other, 1) if other else None,
                          "ratio": round(value / other, 3) if other else None}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
