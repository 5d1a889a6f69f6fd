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


def _amd_isa(*args: str, stdin: bytes = b"", umask: int = 0o022, close_stdout: bool = False):
    """Run `python -m amd_isa ARGS` as a user does (a subprocess, with `umask`)."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "amd_isa", *args]
    if close_stdout:  # the reader goes away at once, as `| head -0` does
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, umask=umask)
        proc.stdout.close()
        _, err = proc.communicate(stdin)
        return proc.returncode, b"", err.decode()
    done = subprocess.run(cmd, input=stdin, capture_output=True, umask=umask, check=False)
    return done.returncode, done.stdout, done.stderr.decode()


def test_outputs_get_the_mode_the_umask_gives_and_dash_is_stdin_and_stdout(tmp_path):
    """(#25 items 4, 5) outputs were 0600 whatever the umask (a temporary file renamed over them); `-` was a file name."""
    (tmp_path / "k.s").write_text(SOURCE)
    for umask, mode in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        out = tmp_path / f"k{umask:o}.co"
        rc, _, err = _amd_isa("asm", str(tmp_path / "k.s"), "--arch", "gfx1100", "-o", str(out), umask=umask)
        assert rc == 0, err
        assert out.stat().st_mode & 0o777 == mode
    rc, raw, err = _amd_isa("asm", "-", "--arch", "gfx1100", "--raw", "-o", "-", stdin=SOURCE.encode())
    assert rc == 0 and len(raw) == 16 and "wrote standard output" in err
    assert not (tmp_path / "-").exists()
    rc, listing, _ = _amd_isa("disasm", "--raw", "--arch", "gfx1100", "-", stdin=raw)
    assert rc == 0 and b"s_cbranch_scc1 -2" in listing


def test_a_closed_pipe_ends_quietly(tmp_path):
    (tmp_path / "big.s").write_text("s_nop 0\n" * 20000)
    assert _amd_isa("asm", str(tmp_path / "big.s"), "--arch", "gfx1100", "--raw", "-o", str(tmp_path / "big.bin"))[0] == 0
    rc, _, err = _amd_isa("disasm", "--raw", str(tmp_path / "big.bin"), close_stdout=True)
    assert rc == 0 and err == ""


def test_an_unexpected_exception_is_an_internal_error_line(monkeypatch, capsys, tmp_path):
    """(#24 item 4) a bug is `internal error: ...` on one line and exit 1; the traceback only with DEBUG=1."""
    import amd_isa.cli as cli

    def broken(args):
        raise KeyError("surprise")

    monkeypatch.setattr(cli, "cmd_disasm", broken)
    assert main(["disasm", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("internal error: KeyError: 'surprise'") and err.count("\n") == 1 and "Traceback" not in err
    monkeypatch.setenv("DEBUG", "1")
    assert main(["disasm", str(tmp_path / "x")]) == 1
    assert "Traceback" in capsys.readouterr().err
