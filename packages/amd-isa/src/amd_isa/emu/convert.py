"""8-bit float conversions (RDNA4, gfx940+): v_cvt_f32_fp8/bf8, v_cvt_pk_f32_fp8/bf8, v_cvt_pk_fp8/bf8_f32 and
v_cvt_sr_fp8/bf8_f32.

The formats are OCP E4M3 ("fp8") and E5M2 ("bf8"). Converting to them rounds to nearest even; out of range values give
NaN (fp8, which has no infinity) or infinity (bf8), or the largest finite value with CLAMP. Byte and word selection:
the VOP1 forms read byte / word 0; RDNA4's VOP3 forms take the byte from OPSEL[1:0] (its bits reversed) and the word
from OPSEL[0], and write the packed result to the destination word OPSEL[3] names, keeping the other word (facts of
AMD's instruction pseudocode). gfx9 SDWA forms select through SDWA. The stochastic-rounding forms (v_cvt_sr_*) add
S1[31:12] to the f32 mantissa before rounding and write the byte OPSEL[3:2] names.
"""

import re
from collections.abc import Callable

import numpy as np

from ..inst import Inst
from . import fp
from .errors import unsupported
from .operand_access import VGPR_BASE, vector_reader, vector_writer
from .wave_state import WaveState

Op = Callable[[WaveState], None]
U32 = np.uint32
TABLES = {"fp8": fp.FP8_VALUES, "bf8": fp.BF8_VALUES, "fp6": fp.FP6_VALUES, "bf6": fp.BF6_VALUES, "fp4": fp.FP4_VALUES}
SCALED = re.compile(r"v_cvt_scalef32_(pk32_|pk_)?(f32|f16|bf16)_(fp8|bf8|fp4|fp6|bf6)")
# Scaled conversions to the narrow formats: v_cvt_scalef32_<shape><narrow>_<wide>.
SCALED_NARROW = re.compile(r"v_cvt_scalef32_(pk_|pk32_|2xpk16_)(fp8|bf8|fp4|fp6|bf6)_(f32|f16|bf16)")


def _finite_codes(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, codes) of the non-negative finite codes of a table, by increasing value."""
    half = table[:table.size // 2]
    codes = np.arange(half.size)
    finite = np.isfinite(half)
    order = np.argsort(half[finite], kind="stable")
    return half[finite][order], codes[finite][order]


def to_small_float(x, kind: str, saturate: bool) -> np.ndarray:
    """float values -> fp8/bf8/fp6/bf6/fp4 codes (uint32), rounding to nearest even. Overflow gives NaN (fp8) or
    infinity (bf8) unless `saturate`; the 6- and 4-bit formats have neither and always saturate (NaN included)."""
    table = TABLES[kind]
    values, codes = _finite_codes(table)
    sign_bit = table.size // 2
    x = np.asarray(x, np.float64)
    magnitude = np.abs(x)
    upper = np.clip(np.searchsorted(values, magnitude), 1, len(values) - 1)
    below, above = values[upper - 1], values[upper]
    pick_above = (magnitude - below > above - magnitude) | ((magnitude - below == above - magnitude) & (codes[upper] % 2 == 0))
    code = np.where(pick_above, codes[upper], codes[upper - 1])
    top = values[-1]
    if saturate or kind not in ("fp8", "bf8"):
        code = np.where((magnitude > top) | np.isnan(x), codes[-1], code)
    else:
        code = np.where(magnitude >= top + (top - values[-2]) / 2, 0x7F if kind == "fp8" else 0x7C, code)
        code = np.where(np.isnan(x), 0x7F, code)
    return (code | np.where(np.signbit(x) & ~np.isnan(x), sign_bit, 0)).astype(U32)


def compile_fp8_convert(inst: Inst, pc: int, name: str) -> Op:
    """A closure for one 8-bit float conversion."""
    f = inst.fields
    kind = "bf8" if "bf8" in name else "fp8"
    opsel = f.get("opsel", 0) if inst.fmt == "VOP3" else 0
    read = vector_reader(f["src0"], "U32", inst.literal)
    dst = f["vdst"]
    if name in ("v_cvt_f32_fp8", "v_cvt_f32_bf8"):
        write = vector_writer(dst, "F32")
        # RDNA4 VOP3: OPSEL[1:0] picks the byte with its two bits reversed (0, 2, 1, 3 -> bytes 0, 1, 2, 3).
        shift = U32(8 * ((opsel & 1) << 1 | (opsel >> 1 & 1))) if inst.arch.name == "rdna4" else U32(0)

        def run_one(st: WaveState) -> None:
            write(st, TABLES[kind][(np.asarray(read(st), U32) >> shift) & U32(0xFF)].astype(np.float32))
        return run_one
    if name in ("v_cvt_pk_f32_fp8", "v_cvt_pk_f32_bf8"):
        write_lo, write_hi = vector_writer(dst, "F32"), vector_writer(dst + 1, "F32")
        shift = U32(16 * (opsel & 1))

        def run_pair(st: WaveState) -> None:
            word = np.asarray(read(st), U32) >> shift
            write_lo(st, TABLES[kind][word & U32(0xFF)].astype(np.float32))
            write_hi(st, TABLES[kind][(word >> U32(8)) & U32(0xFF)].astype(np.float32))
        return run_pair
    if name in ("v_cvt_pk_fp8_f32", "v_cvt_pk_bf8_f32"):
        read0, read1 = vector_reader(f["src0"], "F32", inst.literal), vector_reader(f["src1"], "F32", inst.literal)
        old, write = vector_reader(dst + VGPR_BASE, "U32", None), vector_writer(dst, "U32")
        saturate = bool(f.get("clmp", 0))
        shift = U32(16 * (opsel >> 3 & 1))

        def run_pack(st: WaveState) -> None:
            packed = to_small_float(read0(st), kind, saturate) | (to_small_float(read1(st), kind, saturate) << U32(8))
            write(st, (np.asarray(old(st), U32) & ~(U32(0xFFFF) << shift)) | (packed << shift))
        return run_pack
    if name in ("v_cvt_sr_fp8_f32", "v_cvt_sr_bf8_f32"):
        return _compile_stochastic(inst, kind, opsel)
    raise unsupported(inst, pc)


def compile_scaled_convert(inst: Inst, pc: int, name: str) -> Op:
    """gfx950 v_cvt_scalef32_*: 8/6/4-bit floats to f32/f16/bf16, multiplied by 2^(e - 127) for the biased exponent e
    of the f32 S1 (the MX E8M0 scale). OPSEL[1:0] picks the source byte (single values, fp4 pairs), OPSEL[0] the source
    word (fp8/bf8 pairs); pk32 converts the 32 6-bit values of six VGPRs; a single f16 goes to the half OPSEL[3] names.
    The conversions to the narrow formats divide by the scale (`_compile_scaled_narrow`)."""
    if SCALED_NARROW.fullmatch(name):
        return _compile_scaled_narrow(inst, name)
    match = SCALED.fullmatch(name)
    if match is None:
        raise unsupported(inst, pc, "stochastic-rounding scaled conversions are not emulated")
    shape, out, kind = match.groups()
    f = inst.fields
    opsel = f.get("opsel", 0)
    src, dst = f["src0"] - VGPR_BASE, f["vdst"]
    read_scale = vector_reader(f["src1"], "U32", inst.literal)
    bits = int(kind[2])
    if shape == "pk32_":
        count, offsets = 32, np.arange(32) * 6
    elif shape == "pk_":
        count, offsets = 2, (16 * (opsel & 1) if bits == 8 else 8 * (opsel & 3)) + np.arange(2) * bits
    else:
        count, offsets = 1, np.array([8 * (opsel & 3)])

    def run(st: WaveState) -> None:
        words = np.zeros((8, st.n_lanes), np.uint64)
        n_words = -(-int(offsets[-1] + bits) // 32)
        words[:n_words] = st.v[src:src + n_words]
        codes = ((words[offsets // 32] | words[offsets // 32 + 1] << np.uint64(32)) >> (offsets % 32).astype(np.uint64)[:, None]) & np.uint64(
            (1 << bits) - 1)
        exponent = (np.broadcast_to(np.asarray(read_scale(st), U32), (st.n_lanes,)) >> U32(23)) & U32(0xFF)
        values = TABLES[kind][codes.astype(np.int64)] * np.ldexp(1.0, exponent.astype(np.int64) - 127)
        if out == "f32":
            result = values.astype(np.float32).view(U32)
        else:
            halves = values.astype(np.float16).view(np.uint16) if out == "f16" else fp.f32_to_bf16(values.astype(np.float32))
            if count == 1:
                shift = U32(16 * (opsel >> 3 & 1))
                result = (st.v[dst:dst + 1] & ~(U32(0xFFFF) << shift)) | (halves.astype(U32) << shift)
            else:
                result = halves[0::2].astype(U32) | (halves[1::2].astype(U32) << U32(16))
        st.v[dst:dst + len(result)] = np.where(st.exec_mask, result, st.v[dst:dst + len(result)])
    return run


def _compile_scaled_narrow(inst: Inst, name: str) -> Op:
    """gfx950 v_cvt_scalef32_{pk,pk32,2xpk16}_<narrow>_<wide>: divide by the MX scale 2^(e - 127) (e: the biased exponent
    of the last source), round to nearest even and pack: pairs into the destination word (8-bit) or byte (fp4) OPSEL[3]
    (OPSEL[3:2]) names, keeping the rest; 32 6-bit values into six VGPRs (2xpk16 interleaves S0 and S1)."""
    shape, kind, wide = SCALED_NARROW.fullmatch(name).groups()
    f = inst.fields
    opsel = f.get("opsel", 0)
    dst = f["vdst"]
    two_sources = wide == "f32" and shape != "pk32_"
    read_scale = vector_reader(f["src2" if two_sources else "src1"], "U32", inst.literal)
    src0, src1 = f["src0"] - VGPR_BASE, f.get("src1", 0) - VGPR_BASE
    bits = int(kind[2])
    pair_readers = [vector_reader(f[field], "F32", inst.literal) for field in ("src0", "src1")] if two_sources else []

    def values_of(st: WaveState) -> np.ndarray:
        """(elements, lanes) float64 inputs in packing order."""
        if shape == "2xpk16_":
            pairs = np.stack([st.vf[src0:src0 + 16], st.vf[src1:src1 + 16]], axis=1)
            return pairs.reshape(32, st.n_lanes).astype(np.float64)
        if two_sources:
            return np.stack([np.broadcast_to(np.asarray(read(st), np.float32), (st.n_lanes,)) for read in pair_readers]).astype(np.float64)
        count = 32 if shape == "pk32_" else 2
        halves = st.v[src0:src0 + count // 2].T.copy().view(np.uint16).reshape(st.n_lanes, count).T
        return (halves.view(np.float16) if wide == "f16" else fp.bf16_to_f32(halves)).astype(np.float64)

    def run(st: WaveState) -> None:
        exponent = (np.broadcast_to(np.asarray(read_scale(st), U32), (st.n_lanes,)) >> U32(23)) & U32(0xFF)
        codes = to_small_float(values_of(st) / np.ldexp(1.0, exponent.astype(np.int64) - 127), kind, False).astype(np.uint64)
        if shape != "pk_":
            stream = np.zeros((7, st.n_lanes), np.uint64)
            for i, code in enumerate(codes):
                word, shift = divmod(6 * i, 32)
                stream[word] |= (code << np.uint64(shift)) & np.uint64(0xFFFFFFFF)
                stream[word + 1] |= code >> np.uint64(32 - shift)
            result = stream[:6].astype(U32)
        else:
            packed = (codes[0] | codes[1] << np.uint64(bits)).astype(U32)
            shift = U32(16 * (opsel >> 3 & 1)) if bits == 8 else U32(8 * (opsel >> 2 & 3))
            field = U32((1 << (2 * bits)) - 1) << shift
            result = ((st.v[dst] & ~field) | (packed << shift))[None, :]
        st.v[dst:dst + len(result)] = np.where(st.exec_mask, result, st.v[dst:dst + len(result)])
    return run


def _compile_stochastic(inst: Inst, kind: str, opsel: int) -> Op:
    """v_cvt_sr_{fp8,bf8}_f32: add S1[31:12] to the f32 mantissa (wrapping within the 23 bits), convert to nearest even,
    and write the byte OPSEL[3:2] names, keeping the others."""
    f = inst.fields
    read0, read1 = vector_reader(f["src0"], "U32", inst.literal), vector_reader(f["src1"], "U32", inst.literal)
    dst = f["vdst"]
    old, write = vector_reader(dst + VGPR_BASE, "U32", None), vector_writer(dst, "U32")
    shift = U32(8 * (opsel >> 2 & 3))
    saturate = bool(f.get("clmp", 0))

    def run(st: WaveState) -> None:
        bits = np.asarray(read0(st), U32)
        mantissa = (bits + (np.asarray(read1(st), U32) >> U32(12))) & U32(0x7FFFFF)
        value = ((bits & ~U32(0x7FFFFF)) | mantissa).view(np.float32)
        code = to_small_float(value, kind, saturate)
        write(st, (np.asarray(old(st), U32) & ~(U32(0xFF) << shift)) | (code << shift))
    return run
