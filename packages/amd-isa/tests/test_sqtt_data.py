"""SQTT decoding of the real traces in ../shared/data/sqtt against the figures of an independent decoder (expected.json)."""

import collections
import json
from pathlib import Path

import pytest
from amd_isa import sqtt

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "sqtt"
LAYOUT_OF_ARCH = {"gfx1100": "rdna3", "gfx1200": "rdna4", "gfx950": "cdna"}


def traces() -> list[Path]:
    return sorted(DATA.glob("*/*/*.sqtt")) if DATA.is_dir() else []


def expected_cases() -> list[tuple[str, str, dict]]:
    path = DATA / "expected.json"
    if not path.is_file():
        return []
    return [(run, name, figures) for run, files in json.loads(path.read_text()).items() for name, figures in files.items()]


needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"SQTT test data not found at {DATA}")


@needs_data
def test_sqtt_data_is_present():
    assert len(traces()) > 100 and len(expected_cases()) > 50


@needs_data
@pytest.mark.parametrize("arch", sorted(LAYOUT_OF_ARCH))
def test_sqtt_every_trace_decodes_with_monotonic_time(arch):
    files = [t for t in traces() if t.parts[-3] == arch]
    assert files
    for path in files:
        blob = path.read_bytes()
        packets = list(sqtt.decode(blob))
        assert packets[0].name == "LAYOUT_HEADER", path
        times = [p.time for p in packets]
        assert times == sorted(times), f"{path}: time goes backwards"
        layout = LAYOUT_OF_ARCH[arch]
        assert sqtt.stream_layout(blob) == layout
        assert {type(p) for p in packets} <= set(sqtt.LAYOUT_TYPES[layout]), path
        # naming the architecture gives the same packets as reading it from the header
        assert list(sqtt.decode(blob, arch)) == packets


@needs_data
@pytest.mark.parametrize(("run", "name", "figures"), expected_cases(), ids=[f"{r}/{n}" for r, n, _ in expected_cases()])
def test_sqtt_matches_expected_figures(run, name, figures):
    packets = list(sqtt.decode((DATA / run / name).read_bytes()))
    assert len(packets) == figures["packets"]
    assert dict(collections.Counter(p.name for p in packets)) == figures["by_type"]
    assert packets[-1].time == figures["last_time"]


@needs_data
def test_sqtt_real_traces_round_trip_through_the_encoder():
    for path in traces():
        packets = list(sqtt.decode(path.read_bytes()))
        blob = sqtt.encode(packets, path.parts[-3])
        assert list(sqtt.decode(blob)) == packets, path
        assert len(blob) <= path.stat().st_size  # the encoder drops only the trailing padding


@needs_data
def test_sqtt_truncated_real_trace_stops_cleanly():
    path = DATA / "gfx1100" / "profile_gemm_run_0" / "se0_75.sqtt"
    blob = path.read_bytes()
    full = list(sqtt.decode(blob))
    for cut in (0, 7, 8, 9, 100, 1001, len(blob) // 2, len(blob) - 1):
        part = list(sqtt.decode(blob[:cut]))
        assert part == full[: len(part)]
