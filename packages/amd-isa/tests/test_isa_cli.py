"""The amd-isa command line: asm writes code objects or raw bytes, disasm reads both, user mistakes exit 1 with `error:`."""

from amd_isa import CodeObject, decode
from amd_isa.cli import main

SOURCE = "s_mov_b32 s0, 1\nloop:\n  s_sub_u32 s0, s0, 1\n  s_cbranch_scc1 loop\n  s_endpgm\n"


def test_asm_then_disasm_code_object(tmp_path, capsys):
    (tmp_path / "k.s").write_text(SOURCE)
    assert main(["asm", str(tmp_path / "k.s"), "--arch", "gfx1100", "-o", str(tmp_path / "k.co"), "--kernel", "loop_kernel"]) == 0
    co = CodeObject.from_bytes((tmp_path / "k.co").read_bytes())
    assert [str(i) for i in decode(co.text, "gfx1100")] == ["s_mov_b32 s0, 1", "s_sub_u32 s0, s0, 1", "s_cbranch_scc1 -2", "s_endpgm"]
    capsys.readouterr()
    assert main(["disasm", str(tmp_path / "k.co")]) == 0
    out = capsys.readouterr().out
    assert "loop_kernel:" in out and "s_cbranch_scc1 -2" in out and "BFA2FFFE" in out


def test_raw_round_trip(tmp_path, capsys):
    (tmp_path / "k.s").write_text(SOURCE)
    assert main(["asm", str(tmp_path / "k.s"), "--arch", "gfx1100", "-o", str(tmp_path / "k.bin"), "--raw"]) == 0
    assert len((tmp_path / "k.bin").read_bytes()) == 16
    capsys.readouterr()
    assert main(["disasm", "--raw", "--arch", "gfx1100", str(tmp_path / "k.bin")]) == 0
    assert capsys.readouterr().out.count("\n") == 4


def test_user_mistakes_print_error_and_exit_1(tmp_path, capsys):
    (tmp_path / "bad.s").write_text("s_mov_b32 s0, 1\nv_bogus v0\n")
    assert main(["asm", str(tmp_path / "bad.s"), "--arch", "gfx1100", "-o", str(tmp_path / "out.co")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: line 2:")
    assert not (tmp_path / "out.co").exists()
    assert main(["disasm", str(tmp_path / "bad.s")]) == 1
    assert "--raw" in capsys.readouterr().err
    assert main(["disasm", str(tmp_path / "missing.co")]) == 1
    assert main(["asm", str(tmp_path / "bad.s"), "--arch", "gfx7", "-o", str(tmp_path / "x")]) == 1
    assert "unknown architecture" in capsys.readouterr().err


def test_undecodable_bytes_are_listed_not_fatal(tmp_path, capsys):
    (tmp_path / "junk.bin").write_bytes(b"\xff\xff\xff\xff" + bytes.fromhex("0000b0bf"))
    assert main(["disasm", "--raw", str(tmp_path / "junk.bin")]) == 0
    out = capsys.readouterr().out
    assert ".long 0xffffffff" in out and "s_endpgm" in out
