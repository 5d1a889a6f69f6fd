"""Round trips of amd_isa over random machine words: every word the disassembler decodes must re-encode to its own
bytes, print text our assembler takes back to the same bytes, and print the same text again.

    uv run --frozen python benchmarks/isa_roundtrip_fuzz.py [--targets gfx1100,gfx1200,gfx90a,gfx942,gfx950] [--words 20000]
        [--seed 0] [--show 5]

Random words hit every encoding family in proportion to its share of the opcode space; words the decoder rejects
(reserved opcodes, bad fields) are counted and skipped. Reports, per target, the decoded words and how many fail each
round trip (re-encode, assemble, text fixed point), with examples; exits 1 when any failed.
"""

import argparse
import collections
import json
import random
import sys

from amd_isa import PRINTED_BUT_REFUSED, AmdIsaError, assemble, decode_one


def check(data: bytes, target: str) -> tuple[str, str] | None:
    """None when `data` does not decode or round-trips; else (failure kind, detail)."""
    try:
        inst = decode_one(data, target)
    except AmdIsaError:
        return None
    size = len(inst.to_bytes())
    if inst.to_bytes() != data[:size]:
        return "re-encode", f"{data[:size].hex(' ')} -> {inst.to_bytes().hex(' ')}"
    text = str(inst)
    try:
        again = assemble(text, target)
    except AmdIsaError as e:
        if any(reason in str(e) for reason in PRINTED_BUT_REFUSED):  # text LLVM prints and refuses alike
            return "llvm-too", f"{text!r}: {str(e).splitlines()[0]}"
        return "assemble", f"{text!r}: {str(e).splitlines()[0]}"
    except Exception as e:  # noqa: BLE001 - a crash is a finding
        return "crash", f"{text!r}: {type(e).__name__}: {e}"
    second_inst = decode_one(again, target)
    if again != data[:size]:
        lost = sorted(f for f, v in inst.fields.items() if second_inst.fields.get(f) != v)
        if inst.literal != second_inst.literal:
            lost.append("literal")
        return "bytes", f"[{','.join(lost)}] {text!r}: {data[:size].hex(' ')} -> {again.hex(' ')}"
    second = str(second_inst)
    if second != text:
        return "text", f"{text!r} -> {second!r}"
    return "ok", ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="gfx1100,gfx1200,gfx90a,gfx942,gfx950")
    parser.add_argument("--words", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=5)
    args = parser.parse_args(argv)
    failed = 0
    summary = {}
    for target in args.targets.split(","):
        rng = random.Random(f"{args.seed}:{target}")
        counts: collections.Counter = collections.Counter()
        examples: dict[str, list] = collections.defaultdict(list)
        for _ in range(args.words):
            data = rng.getrandbits(128).to_bytes(16, "little")
            result = check(data, target)
            if result is None:
                counts["not code"] += 1
                continue
            kind, detail = result
            counts[kind] += 1
            if kind != "ok" and len(examples[kind]) < args.show:
                examples[kind].append(detail)
        decoded = args.words - counts["not code"]
        bad = decoded - counts["ok"] - counts["llvm-too"]
        failed += bad
        print(f"{target}: {decoded} of {args.words} words decode; {counts['ok']} round-trip; "
              f"re-encode {counts['re-encode']}, assemble {counts['assemble']}, bytes {counts['bytes']}, text {counts['text']}, "
              f"crash {counts['crash']}; printed text both assemblers refuse (as LLVM prints it) {counts['llvm-too']}")
        for kind, lines in examples.items():
            for line in lines:
                print(f"    {kind:9s} {line}")
        summary[target] = {"decoded": decoded, **{k: counts[k] for k in ("ok", "re-encode", "assemble", "bytes", "text", "crash", "llvm-too")}}
    print(json.dumps({"bench": "isa_roundtrip_fuzz", "words": args.words, "seed": args.seed, "targets": summary}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
