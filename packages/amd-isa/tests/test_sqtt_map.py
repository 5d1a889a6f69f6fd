"""SQTT packet -> instruction mapping: synthetic traces over code assembled by llvm-mc-15, and the real traces' counts."""

import json
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from amd_isa import CodeObjectError, sqtt
from amd_isa.codeobject import CodeObject
from amd_isa.sqtt import packets as P
from amd_isa.sqtt.mapping import map_insts

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "sqtt"
LLVM_MC = shutil.which("llvm-mc-15")


def llvm_assemble(source: str, mcpu: str) -> list[tuple[str, bytes]]:
    """(llvm's text, encoding) per instruction, from llvm-mc-15 -show-encoding."""
    if LLVM_MC is None:
        pytest.skip("llvm-mc-15 is not installed")
    out = subprocess.run([LLVM_MC, "-arch=amdgcn", f"-mcpu={mcpu}", "-show-encoding"], input=source, capture_output=True, text=True, check=True)
    found = []
    for line in out.stdout.splitlines():
        if m := re.match(r"\s*(\S.*?)\s*; encoding: \[(.*)\]", line):
            found.append((m.group(1), bytes(int(x, 16) for x in m.group(2).split(","))))
    return found


def code_of(insts: list[tuple[str, bytes]], base: int) -> tuple[SimpleNamespace, list[int]]:
    """A code object stand-in and the address of each instruction (by llvm's sizes)."""
    addrs, addr = [], base
    for _, encoding in insts:
        addrs.append(addr)
        addr += len(encoding)
    return SimpleNamespace(text=b"".join(e for _, e in insts), text_addr=base), addrs


RDNA3_PROGRAM = """
s_mov_b32 s0, 1
s_delay_alu instid0(VALU_DEP_1)
v_mov_b32 v0, 0x12345678
s_cbranch_scc0 1
s_nop 0
s_waitcnt lgkmcnt(0)
s_endpgm
"""


def test_sqtt_map_follows_a_wave_through_rdna3_code():
    insts = llvm_assemble(RDNA3_PROGRAM, "gfx1100")
    code, addr = code_of(insts, 0x1600)
    trace = [
        P.LAYOUT_HEADER.make(layout=3),
        P.WAVESTART.make(wave=5, delta=1),
        P.WAVESTART.make(wave=6, wgp=1),  # CU 1: not followed
        P.INST.make(wave=5, op=sqtt.InstOp.SALU, delta=1),  # s_mov_b32
        P.INST.make(wave=5, op=0x5A),  # OTHER_VMEM_1: ran on another SIMD, not this wave's next instruction
        P.VALUINST.make(wave=5, delta=2),  # v_mov_b32 (the s_delay_alu before it is silent)
        P.ALUEXEC.make(src=sqtt.AluSrc.VALU),
        P.INST.make(wave=5, op=sqtt.InstOp.JUMP, delta=3),  # s_cbranch_scc0 taken: skips s_nop
        P.IMMEDIATE.make(wave=5, delta=1),  # s_waitcnt
        P.WAVEEND.make(wave=5, delta=1),
    ]
    blob = sqtt.encode(trace, "rdna3")
    mapped = list(map_insts(blob, code, "gfx1100"))
    assert [p for p, _ in mapped] == list(sqtt.decode(blob))
    got = [(p.name, info.pc, info.wave, info.inst.mnemonic) for p, info in mapped if info is not None]
    assert got == [
        ("INST", addr[0], 5, "s_mov_b32"),
        ("VALUINST", addr[2], 5, "v_mov_b32_e32"),
        ("INST", addr[3], 5, "s_cbranch_scc0"),
        ("IMMEDIATE", addr[5], 5, "s_waitcnt"),
        ("WAVEEND", addr[6], 5, "s_endpgm"),
    ]
    rows = sqtt.inst_rows(mapped)
    assert [(r.pc, r.type, r.duration) for r in rows] == [(addr[0], "SALU", 2), (addr[2], "VALU", 3), (addr[3], "JUMP", 1), (addr[5], "IMMEDIATE", 1),
                                                          (addr[6], "WAVEEND", None)]  # fmt: skip
    table = sqtt.format_inst_table(rows)
    assert table.splitlines()[0].split() == ["Timestamp", "PC", "Instruction", "Type", "Duration", "Stall"]
    assert f"0x{addr[2]:x}" in table and "v_mov_b32" in table


def test_sqtt_map_immediate_mask_and_not_taken_branch():
    insts = llvm_assemble("s_cbranch_scc1 5\ns_nop 0\ns_endpgm\n", "gfx1100")
    code, addr = code_of(insts, 0)
    trace = [P.LAYOUT_HEADER.make(layout=3), P.WAVESTART.make(wave=0), P.WAVESTART.make(wave=3)]
    trace += [P.INST.make(wave=0, op=sqtt.InstOp.JUMP_NO), P.INST.make(wave=3, op=sqtt.InstOp.JUMP_NO), P.IMMEDIATE_MASK.make(mask=0b1001)]
    mapped = [(p.name, info.wave, info.pc) for p, info in map_insts(sqtt.encode(trace, "rdna3"), code, "rdna3") if info is not None]
    assert mapped == [("INST", 0, addr[0]), ("INST", 3, addr[0]), ("IMMEDIATE_MASK", 0, addr[1]), ("IMMEDIATE_MASK", 3, addr[1])]


def test_sqtt_map_cdna_issue_maps_waves_whose_bits_are_three():
    insts = llvm_assemble("s_nop 0\ns_mov_b32 s0, 1\ns_endpgm\n", "gfx940")
    code, addr = code_of(insts, 0x100)
    trace = [P.LAYOUT_HEADER.make(layout=2), P.CDNA_WAVESTART.make(wave=1), P.CDNA_WAVESTART.make(wave=4)]
    trace += [P.CDNA_ISSUE.make(inst=(3 << 2) | (3 << 8) | (2 << 0)), P.CDNA_ISSUE.make(inst=3 << 2), P.CDNA_WAVEEND.make(wave=1)]
    trace += [P.CDNA_ISSUE.make(simd=1, inst=3 << 8)]  # SIMD 1 is not followed
    mapped = [(p.name, info.wave, info.pc, info.inst.mnemonic) for p, info in map_insts(sqtt.encode(trace, "cdna"), code, "gfx950") if info]
    # a CDNA_WAVEEND ends the wave without mapping (the seed's rule)
    assert mapped == [("CDNA_ISSUE", 1, addr[0], "s_nop"), ("CDNA_ISSUE", 4, addr[0], "s_nop"), ("CDNA_ISSUE", 1, addr[1], "s_mov_b32")]
    events = sqtt.trace_events(map_insts(sqtt.encode(trace, "cdna"), code, "gfx950"), "gfx950", pid=3)
    slices = [e for e in events if e["ph"] == "X"]
    assert {e["dur"] for e in slices} == {4} and {e["pid"] for e in events} == {3}
    assert slices[0]["args"] == {"inst": "s_nop 0", "pc": f"0x{addr[0]:x}", "packet": "CDNA_ISSUE"}
    rows = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert rows == {"SIMD:0 WAVE:1", "SIMD:0 WAVE:4"}


def test_sqtt_map_reports_traces_that_disagree_with_the_code():
    insts = llvm_assemble("s_branch 0\ns_endpgm\n", "gfx1100")
    code, _ = code_of(insts, 0)
    header, start = P.LAYOUT_HEADER.make(layout=3), P.WAVESTART.make(wave=0)
    not_a_jump = sqtt.encode([header, start, P.INST.make(wave=0, op=sqtt.InstOp.SALU)], "rdna3")
    with pytest.raises(sqtt.SqttMapError, match="not a JUMP"):
        list(map_insts(not_a_jump, code, "gfx1100"))
    too_long = sqtt.encode([header, start, P.INST.make(wave=0, op=sqtt.InstOp.JUMP), P.IMMEDIATE.make(wave=0), P.IMMEDIATE.make(wave=0)], "rdna3")
    with pytest.raises(sqtt.SqttMapError, match="outside the decoded .text"):
        list(map_insts(too_long, code, "gfx1100"))
    with pytest.raises(sqtt.SqttMapError, match="no instructions"):
        list(map_insts(not_a_jump, SimpleNamespace(text=b"\xff" * 4, text_addr=0), "gfx1100"))
    # a wave whose start the trace missed is not guessed at
    mid_wave = sqtt.encode([header, P.INST.make(wave=2, op=sqtt.InstOp.SALU)], "rdna3")
    assert [info for _, info in map_insts(mid_wave, code, "gfx1100")] == [None, None]


# ── real traces ───────────────────────────────────────────────────────────────────────────────────────────────


def itrace_cases() -> list[tuple[str, str, str, str]]:
    """(run, trace file, code object file, arch) for every instruction-traced SE."""
    cases = []
    for meta_path in sorted(DATA.glob("*/*/meta.json")) if DATA.is_dir() else []:
        meta = json.loads(meta_path.read_text())
        programs = {str(e["tag"]): e["file"] for e in meta["events"] if e["type"] == "program"}
        run = f"{meta_path.parent.parent.name}/{meta_path.parent.name}"
        cases += [(run, e["file"], programs[e["kern"]], meta["arch"]) for e in meta["events"] if e["type"] == "sqtt" and e["itrace"]]
    return cases


def expected_mapped() -> dict[tuple[str, str], int]:
    path = DATA / "expected.json"
    figures = json.loads(path.read_text()) if path.is_file() else {}
    return {(run, name): f["mapped_insts"] for run, files in figures.items() for name, f in files.items() if "mapped_insts" in f}


# The instruction kind the hardware recorded in an INST packet -> the mnemonic prefixes our decoder may give that PC.
# Independent of the mapper: the hardware's classification checks that the PC walk stayed in step with the code.
KIND_PREFIXES = (
    (("VALU", "WMMA"), ("v_",)),
    (("SALU", "SMEM", "JUMP", "CALL", "MESSAGE", "BARRIER"), ("s_",)),
    (("LDS_",), ("ds_",)),
    (("FLAT_", "SGMEM_", "VMEM_", "BUF_"), ("global_", "flat_", "scratch_", "buffer_")),
)


def expected_prefixes(packet) -> tuple[str, ...] | None:
    """Mnemonic prefixes consistent with the packet's recorded kind (None: the packet does not say)."""
    if packet.name.startswith("WAVEEND"):
        return ("s_endpgm",)
    if packet.name == "VALUINST":
        return ("v_",)
    if packet.name.startswith("IMMEDIATE"):
        return ("s_",)
    if packet.name.startswith("INST"):
        enum_cls = sqtt.InstOpRDNA4 if packet.name.endswith("RDNA4") else sqtt.InstOp
        kind = sqtt.op_name(enum_cls, packet.op)
        if kind.startswith("JUMP"):
            return ("s_branch", "s_cbranch")
        return next((prefixes for kinds, prefixes in KIND_PREFIXES if kind.startswith(kinds)), None)
    return None


@pytest.mark.skipif(not DATA.is_dir(), reason=f"SQTT test data not found at {DATA}")
@pytest.mark.parametrize(("run", "trace", "elf", "arch"), itrace_cases(), ids=[f"{c[0]}/{c[1]}" for c in itrace_cases()])
def test_sqtt_map_real_trace(run, trace, elf, arch):
    try:
        code = CodeObject.from_bytes((DATA / run / elf).read_bytes())
    except CodeObjectError as e:
        pytest.skip(f"amd_isa.CodeObject cannot read {elf}: {e}")
    mapped = list(map_insts((DATA / run / trace).read_bytes(), code, arch))
    count = sum(info is not None for _, info in mapped)
    want = expected_mapped().get((run, trace))
    if want is not None:
        assert count == want
    for packet, info in mapped:
        if info is not None:
            assert code.text_addr <= info.pc < code.text_addr + len(code.text)
            prefixes = expected_prefixes(packet)
            assert prefixes is None or info.inst.mnemonic.startswith(prefixes), f"{packet.name} at 0x{info.pc:x} mapped to {info.inst}"
