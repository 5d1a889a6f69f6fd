"""Code objects: read what LLVM's assembler and linker produce, and write objects LLVM's tools read back."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from amd_isa import CodeObject, CodeObjectError, assemble, decode
from hypothesis import given, settings
from hypothesis import strategies as st

KERNEL_SOURCE = """\
.amdgcn_target "amdgcn-amd-amdhsa--gfx1100"
.text
.globl my_kernel
.p2align 8
.type my_kernel,@function
my_kernel:
  s_load_b64 s[0:1], s[0:1], 0x0
  v_mov_b32 v1, 1.0
  s_waitcnt lgkmcnt(0)
  global_store_b32 v0, v1, s[0:1]
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel my_kernel
  .amdhsa_group_segment_fixed_size 1024
  .amdhsa_private_segment_fixed_size 16
  .amdhsa_kernarg_size 24
  .amdhsa_user_sgpr_dispatch_ptr 1
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_next_free_vgpr 8
  .amdhsa_next_free_sgpr 8
  .amdhsa_wavefront_size32 1
.end_amdhsa_kernel
"""
BODY = "\n".join(line.strip() for line in KERNEL_SOURCE.splitlines()[6:11])


def _tool(name: str) -> str:
    path = shutil.which(f"{name}-15")
    if path is None:
        pytest.skip(f"{name}-15 is not installed (apt-get install llvm-15 lld-15)")
    return path


@pytest.fixture(scope="module")
def llvm_code_object(tmp_path_factory) -> bytes:
    """A kernel assembled by llvm-mc-15 and linked by ld.lld-15."""
    tmp = tmp_path_factory.mktemp("co")
    (tmp / "k.s").write_text(KERNEL_SOURCE)
    subprocess.run([_tool("llvm-mc"), "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-filetype=obj", str(tmp / "k.s"), "-o", str(tmp / "k.o")],
                   check=True)
    subprocess.run([_tool("ld.lld"), "-shared", str(tmp / "k.o"), "-o", str(tmp / "k.hsaco")], check=True)
    return (tmp / "k.hsaco").read_bytes()


def test_reads_llvm_code_object(llvm_code_object):
    co = CodeObject.from_bytes(llvm_code_object)
    assert co.target == "gfx1100"
    assert co.text == assemble(BODY, "gfx1100")
    kd = co.kernels["my_kernel"]
    # The values the .amdhsa_* directives above asked for.
    assert kd["group_segment_fixed_size"] == 1024
    assert kd["private_segment_fixed_size"] == 16
    assert kd["kernarg_size"] == 24
    assert kd["entry"] == co.symbols["my_kernel"].value == co.text_addr
    desc = co.descriptors["my_kernel"]
    assert desc.user_sgprs == ["dispatch_ptr", "kernarg_segment_ptr"]
    assert desc.wave32
    assert desc.user_sgpr_count == 4
    assert [str(i) for i in decode(co.text, co.target)][-1] == "s_endpgm"


def test_written_code_object_reads_back_and_llvm_disassembles_it(tmp_path):
    code = assemble(BODY, "gfx1100")
    blob = CodeObject.from_code(code, "gfx1100", "k2").to_bytes()
    back = CodeObject.from_bytes(blob)
    assert back.text == code
    assert back.kernels["k2"]["entry"] == back.text_addr
    (tmp_path / "k2.hsaco").write_bytes(blob)
    listing = subprocess.run([_tool("llvm-objdump"), "-d", "--mcpu=gfx1100", str(tmp_path / "k2.hsaco")], capture_output=True, text=True,
                             check=True).stdout
    llvm_lines = [line.split("//")[0].strip() for line in listing.splitlines() if "//" in line and ":" in line.split("//")[1]]
    assert llvm_lines == [str(inst) for inst in decode(code, "gfx1100")]
    symbols = subprocess.run([_tool("llvm-readelf"), "-s", str(tmp_path / "k2.hsaco")], capture_output=True, text=True, check=True).stdout
    assert "k2.kd" in symbols


@pytest.mark.parametrize("blob", [b"", b"not an elf at all", b"\x7fELF" + bytes(60), b"\x7fELF\x02\x01" + bytes(58)])
def test_bad_files_raise_code_object_errors(blob):
    with pytest.raises(CodeObjectError):
        CodeObject.from_bytes(blob)


def test_truncated_llvm_code_object_is_rejected(llvm_code_object):
    with pytest.raises(CodeObjectError):
        CodeObject.from_bytes(llvm_code_object[: len(llvm_code_object) // 2])


def test_lenient_header_fields_are_read_as_the_minimal_writer_means_them(llvm_code_object):
    # tinygrad's minimal ELF writer leaves EI_DATA, e_machine and e_shentsize zero; the sections are still readable.
    blob = bytearray(llvm_code_object)
    blob[5] = 0
    blob[18:20] = bytes(2)
    blob[58:60] = bytes(2)
    lenient, strict = CodeObject.from_bytes(bytes(blob)), CodeObject.from_bytes(llvm_code_object)
    assert (lenient.text, lenient.text_addr, lenient.symbols, lenient.kernels) == (strict.text, strict.text_addr, strict.symbols, strict.kernels)
    blob[5] = 2  # big-endian is refused, not misread
    with pytest.raises(CodeObjectError, match="little-endian"):
        CodeObject.from_bytes(bytes(blob))


SQTT_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "sqtt"
MINIMAL_ELFS = sorted(SQTT_DATA.glob("gfx*/profile_sync_run_0/prog_123.elf")) + sorted(SQTT_DATA.glob("gfx1200/profile_handwritten_run_0/*.elf"))


@pytest.mark.skipif(not MINIMAL_ELFS, reason=f"SQTT test data not found at {SQTT_DATA}")
@pytest.mark.parametrize("path", MINIMAL_ELFS, ids=[f"{p.parent.parent.name}/{p.parent.name}" for p in MINIMAL_ELFS])
def test_reads_tinygrad_minimal_elf(path):
    blob = path.read_bytes()
    # Independent reading of the section table with numpy: a structured view of the 64-byte headers.
    shoff, shnum, shstrndx = int.from_bytes(blob[40:48], "little"), *np.frombuffer(blob, "<u2", 2, 60)
    shdr = np.dtype([("name", "<u4"), ("type", "<u4"), ("flags", "<u8"), ("addr", "<u8"), ("offset", "<u8"), ("size", "<u8"),
                     ("link", "<u4"), ("info", "<u4"), ("align", "<u8"), ("entsize", "<u8")])
    table = np.frombuffer(blob, shdr, int(shnum), shoff)
    names_at = table[shstrndx]["offset"]
    names = [blob[names_at + n:blob.index(b"\0", names_at + n)].decode() for n in table["name"]]
    text = table[names.index(".text")]
    code = CodeObject.from_bytes(blob)
    assert code.text == blob[text["offset"]:text["offset"] + text["size"]]
    assert code.text_addr == text["addr"]
    arch = path.parent.parent.name
    assert "s_endpgm" in {inst.mnemonic for inst in decode(code.text, arch)}


@settings(max_examples=150, derandomize=True, deadline=None)
@given(edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=8), cut=st.integers(0, 10_000))
def test_corrupted_code_objects_raise_code_object_errors(llvm_code_object, edits, cut):
    blob = bytearray(llvm_code_object)
    for at, value in edits:
        blob[at % len(blob)] = value
    try:
        CodeObject.from_bytes(bytes(blob[:max(cut, 64)]))
    except CodeObjectError:
        pass
