"""Compiling VALU instructions (VOP1, VOP2, VOP3, VOP3SD, VOPC, VOPD) into closures over the wave state.

The decoded fields pick the readers, the writer and the semantic function once; the closure then runs one numpy
expression over all lanes per execution.
"""

from collections.abc import Callable

import numpy as np

from ..inst import Inst
from . import fp
from .convert import compile_fp8_convert, compile_scaled_convert
from .dpp import compile_dpp
from .errors import unsupported
from .mfma import compile_accvgpr
from .names import canonical
from .operand_access import VGPR_BASE, dtype_of, vector_reader, vector_writer, with_modifiers
from .sdwa import compile_sdwa
from .valu_ops import FLOAT_OPS, FLOAT_SUFFIXES, INT_OPS
from .wave_state import VCC_LO, WaveState

Op = Callable[[WaveState], int | None]
U32 = np.uint32
CMP_FLOAT = {
    "f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
    "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "lg": lambda a, b: (a < b) | (a > b), "ne": np.not_equal,
    "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)), "u": lambda a, b: np.isnan(a) | np.isnan(b),
    "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)), "ngt": lambda a, b: ~(a > b),
    "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
    "class": fp.classify, "tru": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
}
# gfx9 16-bit ops zero the high half of their destination, except these, which keep it (LLVM's
# GCNSubtarget::zeroesHigh16BitsOfDest, measured on the hardware).
GFX9_KEEP_HIGH = frozenset({"v_mac_f16", "v_fmac_f16", "v_madak_f16", "v_madmk_f16", "v_fmamk_f16", "v_fmaak_f16",
                            "v_fma_mixlo_f16", "v_fma_mixhi_f16"})
INT_RANGES = {np.uint32: (0, 0xFFFFFFFF), np.int32: (-(1 << 31), (1 << 31) - 1), np.uint16: (0, 0xFFFF), np.int16: (-32768, 32767)}


def is_short16(inst: Inst) -> bool:
    """Whether a VGPR number of 128 or more in a 16-bit operand names a high half: RDNA VOP1/VOP2/VOPC encodings only
    (`Arch.short16_halves`; gfx9 has no such rule)."""
    return inst.fmt in ("VOP1", "VOP2", "VOPC") and inst.arch.short16_halves


def base_name(mnemonic: str) -> str:
    """The semantic name of a VALU mnemonic: the encoding suffix (_e32, _e64, _dpp, _sdwa) removed."""
    for suffix in ("_e32", "_e64", "_dpp", "_sdwa"):
        if mnemonic.endswith(suffix):
            return mnemonic[: -len(suffix)]
    return mnemonic


def semantic(name: str) -> Callable | None:
    """The numpy function of a VALU op name, or None if the emulator has none."""
    if name in INT_OPS:
        return INT_OPS[name]
    for suffix in FLOAT_SUFFIXES:
        if name.endswith(suffix) and name[2:-4] in FLOAT_OPS:
            return FLOAT_OPS[name[2:-4]]
    return None


def _sources(inst: Inst) -> list[tuple[str, int]]:
    """(field, operand code) of each source in order; VOP2/VOPC vsrc1 becomes a VGPR code."""
    info = inst.operand_info
    out = []
    for field in ("src0", "vsrc1", "src1", "src2"):
        if field in info:
            code = inst.fields[field]
            out.append((field, code + VGPR_BASE if field == "vsrc1" else code))
    return out


def _mask_reader(code: int) -> Callable[[WaveState], np.ndarray]:
    return lambda st: st.mask_of(st.read_mask(code))


def compile_valu(inst: Inst, pc: int) -> Op:
    """A closure executing one VOP1/VOP2/VOP3/VOP3SD/VOPC instruction (DPP16/DPP8 forms through `dpp`)."""
    if inst.variant.startswith("DPP"):
        return compile_dpp(inst, pc, lambda plain: compile_valu(plain, pc))
    if inst.variant.startswith("SDWA"):
        return compile_sdwa(inst, pc, lambda plain: compile_valu(plain, pc))
    if inst.variant:
        raise unsupported(inst, pc, f"{inst.variant} encoding")
    name = base_name(canonical(inst))
    fields, info = inst.fields, inst.operand_info
    short = is_short16(inst)
    if "cmp" in name:
        return _compile_cmp(inst, pc, name)
    if name in SPECIAL:
        return SPECIAL[name](inst, pc, name)
    if name.startswith("v_s_"):
        return _compile_scalar_trans(inst, pc, name)
    if name.startswith("v_cvt_scalef32_"):
        return compile_scaled_convert(inst, pc, name)
    if "fp8" in name or "bf8" in name:
        return compile_fp8_convert(inst, pc, name)
    if name.startswith("v_accvgpr_mov"):
        return compile_accvgpr(inst, pc)
    fn = semantic(name)
    if fn is None:
        raise unsupported(inst, pc)
    opsel = fields.get("opsel", 0)
    neg, abs_ = fields.get("neg", 0), fields.get("abs", 0)
    readers = []
    for i, (field, code) in enumerate(_sources(inst)):
        dfmt = "I16" if name == "v_ldexp_f16" and i == 1 else info[field][2]
        read = vector_reader(code, dfmt, inst.literal, hi=bool(opsel >> i & 1) and not short, short16=short)
        if dfmt.startswith("F") and (neg >> i & 1 or abs_ >> i & 1):
            read = with_modifiers(read, bool(neg >> i & 1), bool(abs_ >> i & 1))
        readers.append(read)
    if name[2:7] in ("fmaak", "fmamk", "madak", "madmk"):
        dfmt = info["vdst"][2]
        readers.insert(2 if name[5:7] == "ak" else 1, vector_reader(255, dfmt, inst.literal))
    elif (name.startswith(("v_fmac", "v_mac")) or name == "v_cvt_pk_u8_f32") and len(readers) == 2:
        # The accumulator of a MAC op (and of gfx9's v_cvt_pkaccum_u8_f32) is its destination register.
        readers.append(vector_reader(fields["vdst"] + VGPR_BASE, info["vdst"][2], None, hi=bool(opsel >> 3 & 1) and not short, short16=short))
    vdst_dfmt = info["vdst"][2]
    dst_hi = bool(opsel >> 3 & 1) and not short
    zero_high = inst.arch.name == "cdna" and not dst_hi and name not in GFX9_KEEP_HIGH
    write = vector_writer(fields["vdst"], vdst_dfmt, hi=dst_hi, short16=short, zero_high=zero_high)
    dtype = dtype_of(vdst_dfmt)[0]
    post = _post_process(fields.get("clmp", 0), fields.get("omod", 0), dtype)
    if post is not None and dtype in INT_RANGES:
        # Integer clamp saturates: compute in int64 so the true result is available to clip.
        lo, hi = INT_RANGES[dtype]
        wide = [(lambda read: lambda st: np.asarray(read(st), np.int64))(r) for r in readers]

        def run_clamped(st: WaveState) -> None:
            write(st, np.clip(fn(*(r(st) for r in wide)), lo, hi))
        return run_clamped
    return _bind(fn, readers, write, post)


def _post_process(clmp: int, omod: int, dtype) -> Callable | None:
    if not clmp and not omod:
        return None
    if dtype in INT_RANGES:
        return (lambda x: x) if clmp else None
    scale = {0: None, 1: 2.0, 2: 4.0, 3: 0.5}[omod]

    def post(x):
        if scale is not None:
            x = x * np.asarray(scale, np.asarray(x).dtype)
        if clmp:
            x = np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(np.asarray(x).dtype)
        return x
    return post


def _bind(fn: Callable, readers: list, write: Callable, post: Callable | None) -> Op:
    """Specialise the closure on the source count so the hot path is a direct call chain."""
    if post is not None:
        def run_post(st: WaveState) -> None:
            write(st, post(fn(*(r(st) for r in readers))))
        return run_post
    if len(readers) == 1:
        (r0,) = readers

        def run1(st: WaveState) -> None:
            write(st, fn(r0(st)))
        return run1
    if len(readers) == 2:
        r0, r1 = readers

        def run2(st: WaveState) -> None:
            write(st, fn(r0(st), r1(st)))
        return run2
    r0, r1, r2 = readers

    def run3(st: WaveState) -> None:
        write(st, fn(r0(st), r1(st), r2(st)))
    return run3


def _compile_cmp(inst: Inst, pc: int, name: str) -> Op:
    parts = name.split("_")  # v, cmp|cmpx, cond, type
    is_x, cond = parts[1] == "cmpx", parts[2]
    if cond not in CMP_FLOAT:
        raise unsupported(inst, pc)
    cmp = CMP_FLOAT[cond]
    fields, info = inst.fields, inst.operand_info
    short, short16 = inst.fmt == "VOPC", is_short16(inst)
    neg, abs_ = fields.get("neg", 0), fields.get("abs", 0)
    opsel = fields.get("opsel", 0)
    readers = []
    for i, (field, code) in enumerate(_sources(inst)):
        dfmt = info[field][2]
        read = vector_reader(code, dfmt, inst.literal, hi=bool(opsel >> i & 1) and not short, short16=short16)
        if dfmt.startswith("F") and (neg >> i & 1 or abs_ >> i & 1):
            read = with_modifiers(read, bool(neg >> i & 1), bool(abs_ >> i & 1))
        readers.append(read)
    r0, r1 = readers
    dst = VCC_LO if short else fields["vdst"]
    if is_x and inst.arch.name == "cdna":
        # gfx9 v_cmpx writes the compare result to its SGPR destination as well as to EXEC.
        def run_cmpx_gfx9(st: WaveState) -> None:
            result = st.int_of(cmp(r0(st), r1(st)) & st.exec_mask)
            st.write_mask(dst, result)
            st.set_exec(result)
        return run_cmpx_gfx9
    if is_x:
        def run_cmpx(st: WaveState) -> None:
            st.set_exec(st.int_of(cmp(r0(st), r1(st)) & st.exec_mask))
        return run_cmpx

    def run_cmp(st: WaveState) -> None:
        st.write_mask(dst, st.int_of(cmp(r0(st), r1(st)) & st.exec_mask))
    return run_cmp


# --- ops with carries, masks or lane structure ------------------------------------------------------------------------
def _carry_io(inst: Inst) -> tuple[int | None, int]:
    """(carry-in mask register or None, carry-out register) of an add/sub with carry."""
    if inst.fmt == "VOP2":
        return VCC_LO, VCC_LO
    return inst.fields.get("src2"), inst.fields["sdst"]


def _compile_carry(inst: Inst, pc: int, name: str) -> Op:
    srcs = _sources(inst)
    r0 = vector_reader(srcs[0][1], "U32", inst.literal, short16=False)
    r1 = vector_reader(srcs[1][1], "U32", inst.literal, short16=False)
    carry_in, carry_out = _carry_io(inst)
    uses_in = "_ci_" in name
    sub, rev = "sub" in name, "subrev" in name
    write = vector_writer(inst.fields["vdst"], "U32")

    def run(st: WaveState) -> None:
        a, b = r0(st), r1(st)
        if rev:
            a, b = b, a
        # In uint64 a borrow wraps to a huge value, so both carry and borrow show as bits above bit 31.
        full = np.subtract(a, b, dtype=np.uint64) if sub else np.add(a, b, dtype=np.uint64)
        if uses_in:
            cin = st.mask_of(st.read_mask(carry_in))
            full = np.subtract(full, cin, dtype=np.uint64) if sub else np.add(full, cin, dtype=np.uint64)
        carry = full > 0xFFFFFFFF
        write(st, full)
        st.write_mask(carry_out, st.int_of(carry & st.exec_mask))
    return run


def _compile_mad64(inst: Inst, pc: int, name: str) -> Op:
    signed = "i64" in name
    f = inst.fields
    r0 = vector_reader(f["src0"], "I32" if signed else "U32", inst.literal)
    r1 = vector_reader(f["src1"], "I32" if signed else "U32", inst.literal)
    r2 = vector_reader(f["src2"], "I64" if signed else "U64", inst.literal)
    write = vector_writer(f["vdst"], "U64")
    sdst = f["sdst"]

    def run(st: WaveState) -> None:
        a, b, c = (np.broadcast_to(np.asarray(r(st)), (st.n_lanes,)) for r in (r0, r1, r2))
        # Exact in Python ints: a 64-bit product plus a 64-bit addend needs 66 bits to see the carry.
        full = [int(x) * int(y) + int(z) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist(), strict=True)]
        write(st, np.array([v & 0xFFFFFFFFFFFFFFFF for v in full], np.uint64))
        if signed:
            carry = np.array([not -(1 << 63) <= v < (1 << 63) for v in full])
        else:
            carry = np.array([v >> 64 != 0 for v in full])
        st.write_mask(sdst, st.int_of(carry & st.exec_mask))
    return run


def _compile_div_scale(inst: Inst, pc: int, name: str) -> Op:
    # Scaling only matters when the operands are within a few binades of overflow/underflow; the emulator passes S0
    # through and clears VCC so the following div_fmas is a plain fma (documented deviation).
    f, dfmt = inst.fields, inst.operand_info["src0"][2]
    neg = f.get("neg", 0)
    r0 = with_modifiers(vector_reader(f["src0"], dfmt, inst.literal), bool(neg & 1), False)
    write = vector_writer(f["vdst"], dfmt)
    sdst = f["sdst"]

    def run(st: WaveState) -> None:
        write(st, r0(st))
        st.write_mask(sdst, 0)
    return run


def _compile_cndmask(inst: Inst, pc: int, name: str) -> Op:
    srcs = _sources(inst)
    dfmt = inst.operand_info["vdst"][2]
    f = inst.fields
    neg, abs_, opsel = f.get("neg", 0), f.get("abs", 0), f.get("opsel", 0)
    short = inst.fmt == "VOP2"
    readers = []
    as_float = np.float32 if dfmt != "B16" else np.float16
    for i in range(2):
        read = vector_reader(srcs[i][1], dfmt, inst.literal, hi=bool(opsel >> i & 1) and not short)
        if neg or abs_:
            # cndmask modifiers act on the float sign bit whatever the operand type; both sources are then read as
            # floats (bit for bit), so the select never mixes raw bits with float values
            read = (lambda r: lambda st: np.asarray(r(st)).view(as_float))(read)
            if neg >> i & 1 or abs_ >> i & 1:
                read = with_modifiers(read, bool(neg >> i & 1), bool(abs_ >> i & 1))
        readers.append(read)
    r0, r1 = readers
    mask_code = VCC_LO if short else f["src2"]
    write = vector_writer(f["vdst"], dfmt if not (neg or abs_) else ("F32" if dfmt != "B16" else "F16"), hi=bool(opsel >> 3 & 1) and not short)

    def run(st: WaveState) -> None:
        write(st, np.where(st.mask_of(st.read_mask(mask_code)), r1(st), r0(st)))
    return run


def _compile_readlane(inst: Inst, pc: int, name: str) -> Op:
    f = inst.fields
    r0 = vector_reader(f["src0"], "U32", inst.literal)
    if name == "v_readfirstlane_b32":
        dst = f["vdst"]

        def run_first(st: WaveState) -> None:
            lanes = np.flatnonzero(st.exec_mask)
            value = np.broadcast_to(r0(st), (st.n_lanes,))[lanes[0] if len(lanes) else 0]
            st.write_s(dst, int(value))
        return run_first
    r1 = vector_reader(f["src1"], "U32", inst.literal)
    if name == "v_readlane_b32":
        dst = f["vdst"]

        def run_read(st: WaveState) -> None:
            lane = int(r1(st)) % st.n_lanes
            st.write_s(dst, int(np.broadcast_to(r0(st), (st.n_lanes,))[lane]))
        return run_read
    reg = f["vdst"]

    def run_write(st: WaveState) -> None:
        st.v[reg, int(r1(st)) % st.n_lanes] = int(r0(st))
    return run_write


def _compile_mbcnt(inst: Inst, pc: int, name: str) -> Op:
    f = inst.fields
    r0, r1 = vector_reader(f["src0"], "U32", inst.literal), vector_reader(f["src1"], "U32", inst.literal)
    write = vector_writer(f["vdst"], "U32")
    hi = name.endswith("hi_u32_b32")

    def run(st: WaveState) -> None:
        below = np.clip(st.lanes - (32 if hi else 0), 0, 32).astype(np.uint64)
        masks = (np.uint64(1) << below) - np.uint64(1)
        bits = np.asarray(r0(st), np.uint64) & masks
        counts = np.unpackbits(bits.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
        write(st, counts + np.asarray(r1(st), np.uint32))
    return run


def _compile_permlane64(inst: Inst, pc: int, name: str) -> Op:
    src, dst = inst.fields["src0"] - VGPR_BASE, inst.fields["vdst"]

    def run(st: WaveState) -> None:
        # Swaps the two 32-lane halves of a wave64; a wave32 has no other half, so it is a no-op there.
        if st.n_lanes == 64:
            value = st.v[src].copy()
            st.v[dst] = np.where(st.exec_mask, np.roll(value, 32), st.v[dst])
    return run


def _compile_permlane16(inst: Inst, pc: int, name: str) -> Op:
    f = inst.fields
    r1, r2 = vector_reader(f["src1"], "U32", inst.literal), vector_reader(f["src2"], "U32", inst.literal)
    src, dst = f["src0"] - VGPR_BASE, f["vdst"]
    cross = "x16" in name

    def run(st: WaveState) -> None:
        sel = (int(r2(st)) << 32) | int(r1(st))
        lane = st.lanes
        picks = np.array([(sel >> (4 * (i % 16))) & 0xF for i in range(st.n_lanes)])
        row = lane // 16
        src_row = row ^ 1 if cross else row
        source = st.v[src][src_row * 16 + picks]
        st.v[dst] = np.where(st.exec_mask, source, st.v[dst])
    return run


def _compile_permlane_var(inst: Inst, pc: int, name: str) -> Op:
    """v_permlane16_var / v_permlanex16_var (RDNA4): lane l reads src0 from the lane its src1 value selects (low 4
    bits) within its own row of 16 lanes, or the other row of its 32 for the x16 form."""
    f = inst.fields
    src, sel, dst = f["src0"] - VGPR_BASE, f["src1"] - VGPR_BASE, f["vdst"]
    cross = "x16" in name

    def run(st: WaveState) -> None:
        row = st.lanes & ~15
        source = (row ^ 16 if cross else row) + (st.v[sel] & 15)
        st.v[dst] = np.where(st.exec_mask, st.v[src][source % st.n_lanes], st.v[dst])
    return run


def _compile_scalar_trans(inst: Inst, pc: int, name: str) -> Op:
    """RDNA4 v_s_{exp,log,rcp,rsq,sqrt}_{f32,f16}: a transcendental of a scalar operand into an SGPR (16-bit results in
    the low half, the high half zero)."""
    fn = semantic("v_" + name[4:])
    if fn is None:
        raise unsupported(inst, pc)
    dfmt = "F16" if name.endswith("f16") else "F32"
    read = vector_reader(inst.fields["src0"], dfmt, inst.literal)
    dst = inst.fields["vdst"]
    dtype, raw = (np.float16, np.uint16) if dfmt == "F16" else (np.float32, np.uint32)

    def run(st: WaveState) -> None:
        st.write_s(dst, int(np.asarray(fn(read(st)), dtype).reshape(-1)[0].view(raw)))
    return run


def _compile_permlane_swap(inst: Inst, pc: int, name: str) -> Op:
    """gfx950 v_permlane16_swap / v_permlane32_swap: exchange the odd 16-lane rows of src0 with the even rows of vdst
    (the 32-lane halves for the 32 form); both registers change and EXEC is not consulted."""
    dst, src = inst.fields["vdst"], inst.fields["src0"] - VGPR_BASE
    span = 16 if "16" in name else 32

    def run(st: WaveState) -> None:
        for base in range(0, st.n_lanes, 2 * span):
            low, high = slice(base, base + span), slice(base + span, base + 2 * span)
            held = st.v[src, low].copy()
            st.v[src, low] = st.v[dst, high]
            st.v[dst, high] = held
    return run


def _compile_bitop3(inst: Inst, pc: int, name: str) -> Op:
    """gfx950 v_bitop3_b16/b32: any function of three bitwise inputs; its truth table (bit 4a+2b+c for inputs a, b, c)
    is the instruction's OMOD[1:0], ABS[2:0], NEG[2:0] bits."""
    f = inst.fields
    table = f.get("omod", 0) << 6 | f.get("abs", 0) << 3 | f.get("neg", 0)
    wide = name.endswith("b32")
    readers = [vector_reader(f[field], "U32", inst.literal) for field in ("src0", "src1", "src2")]
    write = vector_writer(f["vdst"], "U32" if wide else "B16")
    mask = U32(0xFFFFFFFF if wide else 0xFFFF)

    def run(st: WaveState) -> None:
        a, b, c = (np.asarray(r(st), U32) & mask for r in readers)
        out = np.zeros(np.broadcast(a, b, c).shape, U32)
        for term in range(8):
            if table >> term & 1:
                out |= (a if term & 4 else ~a) & (b if term & 2 else ~b) & (c if term & 1 else ~c)
        write(st, out & mask)
    return run


def _compile_ashr_pack(inst: Inst, pc: int, name: str) -> Op:
    """gfx950 v_ashr_pk_{i8,u8}_i32: shift S0 and S1 right (arithmetic, by S2[4:0]), saturate each to 8 bits and pack
    them into the low 16 bits of the destination."""
    f = inst.fields
    r0, r1 = vector_reader(f["src0"], "I32", inst.literal), vector_reader(f["src1"], "I32", inst.literal)
    r2 = vector_reader(f["src2"], "U32", inst.literal)
    lo, hi = (-128, 127) if "i8" in name else (0, 255)
    write = vector_writer(f["vdst"], "B16")

    def run(st: WaveState) -> None:
        shift = np.asarray(r2(st), np.int64) & 31
        first = np.clip(np.asarray(r0(st), np.int64) >> shift, lo, hi) & 0xFF
        second = np.clip(np.asarray(r1(st), np.int64) >> shift, lo, hi) & 0xFF
        write(st, first | second << 8)
    return run


def _compile_swap16(inst: Inst, pc: int, name: str) -> Op:
    """v_swap_b16 (RDNA): swap two 16-bit VGPR halves (a VGPR number of 128 or more names the high half)."""
    def half(code: int) -> tuple[int, int]:
        reg = code - VGPR_BASE if code >= VGPR_BASE else code
        return (reg - 128, 1) if reg >= 128 else (reg, 0)
    (a, a_hi), (b, b_hi) = half(inst.fields["vdst"]), half(inst.fields["src0"])

    def run(st: WaveState) -> None:
        mask = st.exec_mask
        first, second = st.v16[a, a_hi::2], st.v16[b, b_hi::2]
        old = first.copy()
        np.copyto(first, second, where=mask)
        np.copyto(second, old, where=mask)
    return run


def _compile_swap(inst: Inst, pc: int, name: str) -> Op:
    a, b = inst.fields["vdst"], inst.fields["src0"] - VGPR_BASE

    def run(st: WaveState) -> None:
        mask = st.exec_mask
        old_a = st.v[a].copy()
        st.v[a] = np.where(mask, st.v[b], st.v[a])
        st.v[b] = np.where(mask, old_a, st.v[b])
    return run


def _compile_swaprel(inst: Inst, pc: int, name: str) -> Op:
    """v_swaprel_b32 (RDNA): swap VGPR src0 + M0[9:0] with VGPR vdst + M0[25:16]."""
    src, dst = inst.fields["src0"] - VGPR_BASE, inst.fields["vdst"]

    def run(st: WaveState) -> None:
        m0 = st.m0
        s, d = src + (m0 & 0x3FF), dst + ((m0 >> 16) & 0x3FF)
        held = st.v[d].copy()
        st.v[d] = np.where(st.exec_mask, st.v[s], st.v[d])
        st.v[s] = np.where(st.exec_mask, held, st.v[s])
    return run


def _compile_movrel(inst: Inst, pc: int, name: str) -> Op:
    f = inst.fields
    src, dst = f["src0"] - VGPR_BASE, f["vdst"]
    dst_rel, src_rel = name in ("v_movreld_b32", "v_movrelsd_b32", "v_movrelsd_2_b32"), name != "v_movreld_b32"

    def run(st: WaveState) -> None:
        m0 = st.m0
        d, s = dst + (m0 if dst_rel else 0), src + (m0 if src_rel else 0)
        st.v[d] = np.where(st.exec_mask, st.v[s], st.v[d])
    return run


# Dot products accumulating into their destination: name -> element format of the packed sources.
DOT_ACC = {"v_dot2acc_f32_f16": "f16", "v_dot2acc_f32_bf16": "bf16", "v_dot2c_i32_i16": "i16", "v_dot4c_i32_i8": "i8",
           "v_dot8c_i32_i4": "i4"}
DOT_BITS = {"f16": 16, "bf16": 16, "i16": 16, "i8": 8, "i4": 4}


def _packed_elements(raw, kind: str) -> list[np.ndarray]:
    """The packed elements of 32-bit values, low first, as float64 (f16/bf16) or sign-extended int64."""
    raw = np.asarray(raw, np.uint32).astype(np.int64)
    bits = DOT_BITS[kind]
    parts = [(raw >> (bits * i)) & ((1 << bits) - 1) for i in range(32 // bits)]
    if kind == "f16":
        return [p.astype(np.uint16).view(np.float16).astype(np.float64) for p in parts]
    if kind == "bf16":
        return [fp.bf16_to_f32(p).astype(np.float64) for p in parts]
    return [np.where(p >> (bits - 1), p - (1 << bits), p) for p in parts]


def _compile_dot2acc(inst: Inst, pc: int, name: str) -> Op:
    """Accumulating dots (v_dot2acc_f32_f16/bf16, gfx9 v_dot2c/4c/8c): D += sum of the products of the packed elements
    (float forms in f64, rounded once; integer forms wrap); v_pk_fmac_f16: D.h[i] = fma(S0.h[i], S1.h[i], D.h[i])."""
    srcs = _sources(inst)
    r0, r1 = vector_reader(srcs[0][1], "U32", inst.literal), vector_reader(srcs[1][1], "U32", inst.literal)
    dst = inst.fields["vdst"]
    acc, write = vector_reader(dst + VGPR_BASE, "U32", None), vector_writer(dst, "U32")
    if name == "v_pk_fmac_f16":
        def run_pk(st: WaveState) -> None:
            (alo, ahi), (blo, bhi), (clo, chi) = (_packed_elements(r(st), "f16") for r in (r0, r1, acc))
            lo, hi = (alo * blo + clo).astype(np.float16), (ahi * bhi + chi).astype(np.float16)
            write(st, lo.view(np.uint16).astype(np.uint32) | (hi.view(np.uint16).astype(np.uint32) << np.uint32(16)))
        return run_pk
    kind = DOT_ACC[name]
    is_float = kind in ("f16", "bf16")

    def run_dot(st: WaveState) -> None:
        total = sum(a * b for a, b in zip(_packed_elements(r0(st), kind), _packed_elements(r1(st), kind), strict=True))
        old = np.asarray(acc(st), np.uint32)
        if is_float:
            write(st, (total + old.view(np.float32)).astype(np.float32).view(np.uint32))
        else:
            write(st, (total + old.view(np.int32)) & 0xFFFFFFFF)
    return run_dot


def _compile_nop(inst: Inst, pc: int, name: str) -> Op:
    return lambda st: None


SPECIAL: dict[str, Callable[[Inst, int, str], Op]] = {
    **{n: _compile_carry for n in ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32", "v_add_co_ci_u32", "v_sub_co_ci_u32",
                                   "v_subrev_co_ci_u32")},
    "v_mad_u64_u32": _compile_mad64, "v_mad_i64_i32": _compile_mad64,
    "v_div_scale_f32": _compile_div_scale, "v_div_scale_f64": _compile_div_scale,
    "v_cndmask_b32": _compile_cndmask, "v_cndmask_b16": _compile_cndmask,
    "v_readfirstlane_b32": _compile_readlane, "v_readlane_b32": _compile_readlane, "v_writelane_b32": _compile_readlane,
    "v_mbcnt_lo_u32_b32": _compile_mbcnt, "v_mbcnt_hi_u32_b32": _compile_mbcnt,
    "v_permlane64_b32": _compile_permlane64, "v_permlane16_b32": _compile_permlane16, "v_permlanex16_b32": _compile_permlane16,
    "v_swap_b32": _compile_swap, "v_swap_b16": _compile_swap16, "v_swaprel_b32": _compile_swaprel,
    "v_permlane16_var_b32": _compile_permlane_var, "v_permlanex16_var_b32": _compile_permlane_var,
    "v_permlane16_swap_b32": _compile_permlane_swap, "v_permlane32_swap_b32": _compile_permlane_swap,
    "v_bitop3_b16": _compile_bitop3, "v_bitop3_b32": _compile_bitop3, "v_ashr_pk_i8_i32": _compile_ashr_pack, "v_ashr_pk_u8_i32": _compile_ashr_pack,
    **{n: _compile_movrel for n in ("v_movrels_b32", "v_movreld_b32", "v_movrelsd_b32", "v_movrelsd_2_b32")},
    **{n: _compile_dot2acc for n in DOT_ACC}, "v_pk_fmac_f16": _compile_dot2acc,
    "v_nop": _compile_nop, "v_pipeflush": _compile_nop, "v_clrexcp": _compile_nop,
}
