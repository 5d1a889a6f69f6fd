"""SALU semantics (results and SCC) against Python references, branches, and the PC-writing instructions."""

import math
import struct

import pytest
from amd_isa import assemble_insts
from amd_isa.emu import EmulatorError, WaveState, run_program
from amd_isa.emu.errors import UnsupportedInstructionError
from amd_isa.rdna3 import s, s_add_u32, s_addc_u32, s_endpgm, s_getpc_b64, s_mov_b32, s_setpc_b64, s_swappc_b64

M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
VALUES = [0, 1, 5, 31, 32, 63, 64, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x12345678, 0xFFFF0000, 0x00010000]


def s32(x: int) -> int:
    return x - (1 << 32) if x >> 31 else x


def run_scalar(asm: str, sgprs: dict[int, int], scc: int = 0) -> WaveState:
    state = WaveState(32)
    for reg, value in sgprs.items():
        state.s[reg] = value
    state.scc = scc
    return run_program(assemble_insts(asm, "rdna3"), state=state)


# name -> reference (a, b, scc_in) -> (result, scc_out or None when SCC is unchanged)
SOP2_REFS = {
    "s_add_u32": lambda a, b, c: ((a + b) & M32, (a + b) >> 32),
    "s_sub_u32": lambda a, b, c: ((a - b) & M32, int(b > a)),
    "s_addc_u32": lambda a, b, c: ((a + b + c) & M32, (a + b + c) >> 32),
    "s_subb_u32": lambda a, b, c: ((a - b - c) & M32, int(b + c > a)),
    "s_add_i32": lambda a, b, c: ((a + b) & M32, int(not -(2**31) <= s32(a) + s32(b) < 2**31)),
    "s_sub_i32": lambda a, b, c: ((a - b) & M32, int(not -(2**31) <= s32(a) - s32(b) < 2**31)),
    "s_lshl_b32": lambda a, b, c: ((a << (b & 31)) & M32, int((a << (b & 31)) & M32 != 0)),
    "s_lshr_b32": lambda a, b, c: (a >> (b & 31), int(a >> (b & 31) != 0)),
    "s_ashr_i32": lambda a, b, c: ((s32(a) >> (b & 31)) & M32, int(s32(a) >> (b & 31) != 0)),
    "s_min_i32": lambda a, b, c: (a if s32(a) < s32(b) else b, int(s32(a) < s32(b))),
    "s_max_u32": lambda a, b, c: (max(a, b), int(a > b)),
    "s_and_b32": lambda a, b, c: (a & b, int(a & b != 0)), "s_or_b32": lambda a, b, c: (a | b, int(a | b != 0)),
    "s_xor_b32": lambda a, b, c: (a ^ b, int(a ^ b != 0)), "s_nand_b32": lambda a, b, c: (~(a & b) & M32, int(~(a & b) & M32 != 0)),
    "s_and_not1_b32": lambda a, b, c: (a & ~b & M32, int(a & ~b & M32 != 0)),
    "s_mul_i32": lambda a, b, c: ((s32(a) * s32(b)) & M32, None),
    "s_mul_hi_u32": lambda a, b, c: ((a * b) >> 32, None),
    "s_mul_hi_i32": lambda a, b, c: (((s32(a) * s32(b)) >> 32) & M32, None),
    "s_cselect_b32": lambda a, b, c: (a if c else b, None),
    "s_bfe_u32": lambda a, b, c: ((a >> (b & 31)) & ((1 << min((b >> 16) & 0x7F, 32)) - 1),) * 1 + (None,),
    "s_lshl2_add_u32": lambda a, b, c: (((a << 2) + b) & M32, int(((a << 2) + b) >> 32 != 0)),
    "s_pack_ll_b32_b16": lambda a, b, c: ((a & 0xFFFF) | ((b & 0xFFFF) << 16), None),
    "s_absdiff_i32": lambda a, b, c: (abs(s32(a) - s32(b)) & M32, int(a != b)),
}


@pytest.mark.parametrize("name", sorted(SOP2_REFS))
@pytest.mark.parametrize("scc_in", [0, 1])
def test_sop2(name: str, scc_in: int) -> None:
    for a in VALUES:
        for b in VALUES[::3]:
            st = run_scalar(f"{name} s2, s0, s1", {0: a, 1: b}, scc_in)
            result, scc = SOP2_REFS[name](a, b, scc_in)
            assert st.s[2] == result, f"{name}({a:#x}, {b:#x})"
            if name == "s_bfe_u32":
                assert st.scc == int(result != 0)
            else:
                assert st.scc == (scc_in if scc is None else scc), f"{name}({a:#x}, {b:#x}) scc"


def test_sop2_64bit_and_shifts_past_width() -> None:
    st = run_scalar("s_lshl_b64 s[4:5], s[0:1], s2\ns_lshr_b64 s[6:7], s[0:1], 65\ns_and_b64 s[8:9], s[0:1], -1\ns_bfe_i64 s[10:11], s[0:1], s3",
                    {0: 0x89ABCDEF, 1: 0x80000001, 2: 36, 3: (20 << 16) | 28})
    x = 0x80000001_89ABCDEF
    assert st.s[4] | (st.s[5] << 32) == (x << 36) & M64
    assert st.s[6] | (st.s[7] << 32) == x >> 1, "64-bit shift amounts use 6 bits"
    assert st.s[8] | (st.s[9] << 32) == x
    field = (x >> 28) & ((1 << 20) - 1)
    assert st.s[10] | (st.s[11] << 32) == (field - (1 << 20) if field >> 19 else field) & M64


SOP1_REFS = {
    "s_not_b32": lambda a: ~a & M32, "s_brev_b32": lambda a: int(f"{a:032b}"[::-1], 2),
    "s_bcnt1_i32_b32": lambda a: bin(a).count("1"), "s_bcnt0_i32_b32": lambda a: 32 - bin(a).count("1"),
    "s_ctz_i32_b32": lambda a: ((a & -a).bit_length() - 1) & M32 if a else M32,
    "s_clz_i32_u32": lambda a: 32 - a.bit_length() if a else M32,
    "s_sext_i32_i8": lambda a: ((a & 0xFF) - (0x100 if a & 0x80 else 0)) & M32,
    "s_sext_i32_i16": lambda a: ((a & 0xFFFF) - (0x10000 if a & 0x8000 else 0)) & M32,
    "s_abs_i32": lambda a: abs(s32(a)) & M32,
}


@pytest.mark.parametrize("name", sorted(SOP1_REFS))
def test_sop1(name: str) -> None:
    for a in VALUES:
        st = run_scalar(f"{name} s2, s0", {0: a})
        assert st.s[2] == SOP1_REFS[name](a), f"{name}({a:#x})"


def test_saveexec_and_wrexec() -> None:
    st = run_scalar("s_mov_b32 exec_lo, 0xff00ff00\ns_and_saveexec_b32 s2, s0", {0: 0x0FF00FF0})
    assert st.s[2] == 0xFF00FF00 and st.exec == 0x0F000F00 and st.scc == 1
    st = run_scalar("s_mov_b32 exec_lo, 0xff00ff00\ns_and_not1_wrexec_b32 s2, s0", {0: 0x0FF00FF0})
    assert st.exec == 0x0FF00FF0 & ~0xFF00FF00 & M32 and st.s[2] == st.exec
    st = run_scalar("s_mov_b32 exec_lo, 0xf\ns_xor_saveexec_b32 s2, s0", {0: 0xF})
    assert st.exec == 0 and st.scc == 0


def test_sopc_and_sopk() -> None:
    for a in VALUES:
        for b in VALUES[::2]:
            st = run_scalar("s_cmp_lt_i32 s0, s1", {0: a, 1: b})
            assert st.scc == int(s32(a) < s32(b))
            st = run_scalar("s_cmp_ge_u32 s0, s1", {0: a, 1: b})
            assert st.scc == int(a >= b)
            st = run_scalar("s_bitcmp1_b32 s0, s1", {0: a, 1: b})
            assert st.scc == (a >> (b & 31)) & 1
    st = run_scalar("s_movk_i32 s0, 0x8000\ns_addk_i32 s1, 0x7fff\ns_cmpk_eq_u32 s2, 0xffff", {1: 0x7FFFFFFF, 2: 0xFFFF})
    assert st.s[0] == 0xFFFF8000 and st.s[1] == 0x80007FFE and st.scc == 1


def test_scalar_float_ops() -> None:
    st = run_scalar("s_add_f32 s2, s0, s1\ns_cvt_i32_f32 s3, s0\ns_cvt_f32_u32 s4, s1\ns_cmp_lt_f32 s0, s5",
                    {0: 0xC0490FDB, 1: 0x3F800000, 5: 0x7FC00000})
    minus_pi = struct.unpack("<f", struct.pack("<I", 0xC0490FDB))[0]
    assert st.s[2] == struct.unpack("<I", struct.pack("<f", minus_pi + 1.0))[0]
    assert st.s[3] == (-3) & M32
    assert st.s[4] == 0x4E7E0000  # 0x3f800000 as an unsigned integer, converted
    assert st.scc == 0, "ordered compare with NaN is false"


def test_branches_loop_and_exec_branches() -> None:
    # Sum 1..10 with a backward s_cbranch_scc1 loop.
    st = run_scalar("""
        s_mov_b32 s0, 0
        s_mov_b32 s1, 1
    loop:
        s_add_u32 s0, s0, s1
        s_add_u32 s1, s1, 1
        s_cmp_le_u32 s1, 10
        s_cbranch_scc1 loop
        s_mov_b32 exec_lo, 0
        s_cbranch_execz skip
        s_mov_b32 s2, 99
    skip:
        s_endpgm
        s_mov_b32 s3, 77
    """, {})
    assert st.s[0] == 55 and st.s[2] == 0 and st.s[3] == 0


def test_setpc_jumps_without_increment() -> None:
    # s_getpc gives the address of the next instruction; s_setpc to it+skip lands exactly on the target instruction.
    tail = [s_mov_b32(s[5], 111), s_mov_b32(s[6], 222), s_endpgm()]
    skip = 4 + 4 + 4 + tail[0].size()  # from the instruction after s_getpc to s_mov s6
    prog = [s_getpc_b64(s[0:1]), s_add_u32(s[0], s[0], skip), s_addc_u32(s[1], s[1], 0), s_setpc_b64(s[0:1]), *tail]
    st = run_program(prog)
    assert (st.s[5], st.s[6]) == (0, 222)


def test_swappc_returns_to_the_next_instruction() -> None:
    # Call a "function" at the end of the program with s_swappc, which returns through s_setpc.
    body = [s_mov_b32(s[10], 7), s_setpc_b64(s[2:3])]
    main_tail = [s_mov_b32(s[11], 9), s_endpgm()]
    call_at = 4 + 4 + 4
    target = call_at + 4 + sum(i.size() for i in main_tail)
    prog = [s_getpc_b64(s[0:1]), s_add_u32(s[0], s[0], target - 4), s_addc_u32(s[1], s[1], 0), s_swappc_b64(s[2:3], s[0:1]),
            *main_tail, *body]
    st = run_program(prog)
    assert st.s[10] == 7 and st.s[11] == 9
    assert st.s[2] == call_at + 4, "s_swappc saves the address of the instruction after it"


def test_jump_into_the_middle_of_an_instruction_is_an_error() -> None:
    prog = [s_getpc_b64(s[0:1]), s_add_u32(s[0], s[0], 14), s_setpc_b64(s[0:1]), s_mov_b32(s[5], 0x12345), s_endpgm()]
    with pytest.raises(EmulatorError, match="not the start of an instruction"):
        run_program(prog)


def test_unsupported_instruction_names_itself_and_its_pc() -> None:
    prog = assemble_insts("s_nop 0\ns_nop 0\nimage_sample v[0:3], v[0:1], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D", "rdna3")
    with pytest.raises(UnsupportedInstructionError, match=r"image_sample.*0x8"):
        run_program(prog)


def test_scalar_f16_rounding() -> None:
    for value in (0.5, 1.5, 2.5, -1.25, -0.75, 100.49):
        bits = struct.unpack("<H", struct.pack("<e", value))[0]
        st = run_scalar("s_ceil_f16 s1, s0\ns_floor_f16 s2, s0\ns_trunc_f16 s3, s0\ns_rndne_f16 s4, s0", {0: bits})
        half = struct.unpack("<e", struct.pack("<H", bits))[0]
        for reg, fn in ((1, math.ceil), (2, math.floor), (3, math.trunc), (4, round)):
            assert struct.unpack("<e", struct.pack("<H", st.s[reg] & 0xFFFF))[0] == fn(half), (value, reg)


def test_endless_loop_stops_at_max_steps() -> None:
    with pytest.raises(EmulatorError, match="without ending"):
        run_program(assemble_insts("loop:\ns_branch loop", "rdna3"), max_steps=1000)
