"""SQTT decoding speed: MB/s decoding every real trace, and map_insts packets/s, against tinygrad 0.14's decoder.

    uv run --frozen python benchmarks/sqtt_decode.py
    uv run --frozen --with tinygrad==0.14.0 python benchmarks/sqtt_decode.py   # with the peer

Traces are read from ../shared/data/sqtt (relative to the project root). Each figure is the best of a few rounds;
the peer runs on the same inputs in the same process.
"""

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from amd_isa import CodeObjectError
from amd_isa.codeobject import CodeObject
from amd_isa.sqtt import decode, map_insts

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "sqtt"
ROUNDS = 5


def best_seconds(ours: Callable[[], object], peer: Callable[[], object] | None, rounds: int = ROUNDS) -> tuple[float, float | None]:
    """Fastest wall time of each of two workloads, run in alternation so a change in machine load hits both alike."""
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for slot, run in enumerate((ours, peer)):
            if run is None:
                continue
            start = time.perf_counter()
            run()
            best[slot] = min(best[slot], time.perf_counter() - start)
    return best[0], (best[1] if peer is not None else None)


def load_peer():
    """tinygrad 0.14's decode and map_insts, or None when tinygrad is not installed."""
    try:
        from tinygrad.renderer.amd import sqtt as peer
    except ImportError:
        return None
    return peer


def mapping_inputs() -> list[tuple[bytes, bytes, str]]:
    """(trace, code object ELF, target) for every instruction-traced RDNA SE whose code object amd_isa reads."""
    found = []
    for meta_path in sorted(DATA.glob("gfx1[12]00/*/meta.json")):
        meta = json.loads(meta_path.read_text())
        programs = {str(e["tag"]): e["file"] for e in meta["events"] if e["type"] == "program"}
        for event in meta["events"]:
            if event["type"] == "sqtt" and event["itrace"]:
                elf = (meta_path.parent / programs[event["kern"]]).read_bytes()
                try:
                    CodeObject.from_bytes(elf)
                except CodeObjectError:
                    continue
                found.append(((meta_path.parent / event["file"]).read_bytes(), elf, meta["arch"]))
    return found


def main() -> int:
    if not DATA.is_dir():
        print(f"error: SQTT traces not found at {DATA}", file=sys.stderr)
        return 1
    blobs = [p.read_bytes() for p in sorted(DATA.glob("*/*/*.sqtt"))]
    total_bytes = sum(map(len, blobs))
    peer = load_peer()

    def ours_decode():
        for blob in blobs:
            for _ in decode(blob):
                pass

    def peer_decode():
        for blob in blobs:
            for _ in peer.decode(blob):
                pass

    inputs = mapping_inputs()
    codes = [(blob, CodeObject.from_bytes(elf), arch) for blob, elf, arch in inputs]
    # both mappers are charged per packet of the input traces (they yield different subsets of pairs)
    n_packets = sum(1 for blob, _, _ in inputs for _ in decode(blob))

    def ours_map():
        for blob, code, arch in codes:
            for _ in map_insts(blob, code, arch):
                pass

    def peer_map():
        for blob, elf, arch in inputs:
            for _ in peer.map_insts(blob, elf, arch):
                pass

    figures = []
    ours_s, peer_s = best_seconds(ours_decode, peer_decode if peer else None)
    figures.append(("decode", "throughput", total_bytes / ours_s / 1e6, "MB/s", total_bytes / peer_s / 1e6 if peer_s else None))
    ours_s, peer_s = best_seconds(ours_map, peer_map if peer else None)
    figures.append(("map_insts", "throughput", n_packets / ours_s, "packets/s", n_packets / peer_s if peer_s else None))

    peer_name = "tinygrad 0.14" if peer else "tinygrad 0.14 (missing)"
    print(f"SQTT traces: {len(blobs)} files, {total_bytes / 1e6:.2f} MB")
    print(f"map_insts: {len(inputs)} instruction-traced RDNA SEs, {n_packets} packets")
    print(f"{'figure':<12} {'amd_isa':>14} {peer_name:>24} {'ratio':>8}")
    for bench, _, value, unit, peer_value in figures:
        peer_text = f"{peer_value:,.2f} {unit}" if peer_value else "missing"
        ratio = f"{value / peer_value:.2f}x" if peer_value else "-"
        print(f"{bench:<12} {value:>10,.2f} {unit:<9} {peer_text:>20} {ratio:>8}")
    for bench, metric, value, unit, peer_value in figures:
        record = {
            "bench": f"sqtt_{bench}", "metric": metric, "value": round(value, 3), "unit": unit,
            "peer": "tinygrad==0.14.0" if peer else "tinygrad==0.14.0 (missing)",
            "peer_value": round(peer_value, 3) if peer_value else None, "ratio": round(value / peer_value, 3) if peer_value else None,
        }  # fmt: skip
        print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
