"""`amd-isa sqtt`: printing, JSON, instruction table, timeline file and error reporting."""

import argparse
import json
from pathlib import Path

import pytest
from amd_isa import sqtt
from amd_isa.codeobject import CodeObject
from amd_isa.sqtt import packets as P
from amd_isa.sqtt.cli import main

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "sqtt"

# s_mov_b32 s0, 1 ; v_mov_b32_e32 v0, 0 ; s_endpgm  (encodings from llvm-mc-15 -mcpu=gfx1100)
CODE = bytes([0x81, 0x00, 0x80, 0xBE, 0x80, 0x02, 0x00, 0x7E, 0x00, 0x00, 0xB0, 0xBF])


@pytest.fixture
def files(tmp_path):
    trace = [P.LAYOUT_HEADER.make(layout=3), P.WAVESTART.make(wave=2, delta=1), P.REG.make(val32=7)]
    trace += [P.INST.make(wave=2, op=sqtt.InstOp.SALU, delta=2), P.NOP(0), P.VALUINST.make(wave=2, delta=3), P.WAVEEND.make(wave=2, delta=1)]
    (tmp_path / "se0.sqtt").write_bytes(sqtt.encode(trace, "rdna3"))
    (tmp_path / "k.elf").write_bytes(CodeObject.from_code(CODE, "gfx1100").to_bytes())
    return tmp_path


def test_sqtt_cli_prints_packets_hiding_noise(files, capsys):
    assert main([str(files / "se0.sqtt")]) == 0
    out = capsys.readouterr().out
    assert "WAVESTART" in out and "INST" in out and "wave=2 op=SALU" in out
    assert "REG" not in out and "NOP" not in out
    assert main([str(files / "se0.sqtt"), "--all"]) == 0
    out = capsys.readouterr().out
    assert "REG" in out and "val32=0x7" in out and "NOP" in out


def test_sqtt_cli_maps_with_elf_and_prints_json(files, capsys):
    assert main([str(files / "se0.sqtt"), "--elf", str(files / "k.elf"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    mapped = [(p["type"], p["time"], p["inst"]) for p in doc[0]["packets"] if "inst" in p]
    assert mapped == [("INST", 3, "s_mov_b32 s0, 1"), ("VALUINST", 6, "v_mov_b32_e32 v0, 0"), ("WAVEEND", 7, "s_endpgm")]
    assert main([str(files / "se0.sqtt"), "--elf", str(files / "k.elf"), "--json", "--insts"]) == 0
    rows = json.loads(capsys.readouterr().out)[0]["insts"]
    assert [(r["Timestamp"], r["Type"], r["Duration"]) for r in rows] == [(3, "SALU", 3), (6, "VALU", 1), (7, "WAVEEND", None)]


def test_sqtt_cli_instruction_table(files, capsys):
    assert main([str(files / "se0.sqtt"), "--elf", str(files / "k.elf"), "--insts"]) == 0
    out = capsys.readouterr().out
    for column in ("Timestamp", "PC", "Instruction", "Type", "Duration", "Stall"):
        assert column in out
    assert "v_mov_b32_e32 v0, 0" in out and "s_endpgm" in out


def test_sqtt_cli_writes_a_chrome_timeline(files, capsys):
    out_path = files / "timeline.json"
    assert main([str(files / "se0.sqtt"), "--elf", str(files / "k.elf"), "--timeline", str(out_path)]) == 0
    events = json.loads(out_path.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert [(e["ts"], e["dur"], e["args"]["inst"]) for e in slices] == [(3, 1, "s_mov_b32 s0, 1"), (6, 1, "v_mov_b32_e32 v0, 0"), (7, 1, "s_endpgm")]
    assert {e["args"]["name"] for e in events if e["name"] == "thread_name"} == {"SIMD:0 WAVE:2"}
    assert "wrote 3 instruction slices" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--insts"], "need the kernel's code object"),
        (["--elf", "/nonexistent/k.elf"], "cannot read code object"),
        (["--arch", "gfx803"], "unknown architecture"),
        (["--elf", "SELF"], "not a usable code object: not an ELF file"),  # a trace is not an ELF (no --raw hint: sqtt has none)
    ],
)
def test_sqtt_cli_reports_user_mistakes(files, capsys, extra, message):
    extra = [str(files / "se0.sqtt") if x == "SELF" else x for x in extra]
    assert main([str(files / "se0.sqtt"), *extra]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err and "--raw" not in err


def test_sqtt_cli_missing_trace_and_unwritable_timeline(files, capsys):
    assert main([str(files / "missing.sqtt")]) == 1
    assert "cannot read trace" in capsys.readouterr().err
    bad = files / "no-such-dir" / "t.json"
    assert main([str(files / "se0.sqtt"), "--elf", str(files / "k.elf"), "--timeline", str(bad)]) == 1
    assert "cannot write timeline" in capsys.readouterr().err and not bad.exists()


def test_sqtt_add_command_registers_on_any_parser():
    parser = argparse.ArgumentParser(prog="amd-isa")
    sqtt.add_sqtt_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sqtt", "a.sqtt", "b.sqtt", "--elf", "k.elf", "--arch", "gfx950", "--all", "--insts", "--json", "--timeline", "t.json"])
    assert args.func is sqtt.run_sqtt and args.traces == ["a.sqtt", "b.sqtt"] and args.arch == "gfx950" and args.all and args.insts


@pytest.mark.skipif(not DATA.is_dir(), reason=f"SQTT test data not found at {DATA}")
def test_sqtt_cli_on_a_real_cdna_trace(tmp_path, capsys):
    run = DATA / "gfx950" / "profile_gemm_run_0"
    out_path = tmp_path / "t.json"
    assert main([str(run / "se0_75.sqtt"), str(run / "se1_77.sqtt"), "--elf", str(run / "prog_71.elf"), "--timeline", str(out_path)]) == 0
    events = json.loads(out_path.read_text())["traceEvents"]
    assert {e["pid"] for e in events} == {0, 1}
    assert {e["dur"] for e in events if e["ph"] == "X"} == {4}  # gfx9 issue interval


def test_sqtt_cli_refuses_a_file_that_is_not_a_trace_unless_forced(files, tmp_path, capsys):
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes(range(7, 256)) * 8)
    assert main([str(noise)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not an SQTT trace" in err and "--force" in err and err.count("\n") == 1
    assert main([str(files / "k.elf")]) == 1  # a code object given where the trace goes
    assert "it is an ELF file" in capsys.readouterr().err
    assert main([str(noise), "--force"]) == 0  # decoded as asked
    assert capsys.readouterr().out
    assert main([str(files / "se0.sqtt")]) == 0  # a real stream passes the check


@pytest.mark.skipif(not DATA.is_dir(), reason="shared SQTT traces not present")
def test_every_captured_trace_passes_the_check():
    traces = sorted(DATA.glob("*/*/se*.sqtt"))
    assert traces
    for path in traces:
        sqtt.check_stream(path.read_bytes())
