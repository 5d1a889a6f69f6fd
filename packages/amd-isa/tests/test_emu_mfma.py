"""CDNA matrix instructions in every shape against numpy: multi-block and 4x4 MFMA, f64, gfx940 fp8/bf8, gfx950
f8f6f4 (scaled and not), SMFMAC, and the CBSZ/ABID/BLGP modifiers.

The register layouts the tests pack and unpack with are first checked against entries AMD's matrix instruction
calculator prints for CDNA3 (`LAYOUT_FACTS`), so a layout mistake in the emulator cannot hide behind the same mistake
in the test. Inputs are exactly representable small values, so the expected D is an exact numpy matmul.
"""

import numpy as np
import pytest
from amd_isa import assemble_insts
from amd_isa.emu import WaveState, run_program

# (matrix, block, row, col, first register, low bit, lane) for A[i][k] / B[k][j] / D[i][j], printed by AMD's matrix
# instruction calculator (cdna3). Sparse A (smfmac) entries name the register only (bit None).
LAYOUT_FACTS = {
    "v_mfma_f32_32x32x1_2b_f32": [("a", 0, 8, 0, 0, 0, 8), ("b", 1, 0, 14, 0, 0, 46), ("d", 1, 24, 27, 28, 0, 27), ("d", 1, 8, 23, 20, 0, 23),
                                  ("d", 0, 8, 31, 4, 0, 31)],
    "v_mfma_f32_16x16x1_4b_f32": [("a", 2, 13, 0, 0, 0, 45), ("b", 3, 0, 11, 0, 0, 59), ("d", 3, 4, 0, 12, 0, 16), ("d", 3, 13, 3, 13, 0, 51),
                                  ("d", 0, 12, 10, 0, 0, 58)],
    "v_mfma_f32_4x4x1_16b_f32": [("a", 13, 2, 0, 0, 0, 54), ("b", 12, 0, 2, 0, 0, 50), ("d", 7, 2, 3, 2, 0, 31), ("d", 10, 0, 3, 0, 0, 43)],
    "v_mfma_f32_4x4x4_16b_f16": [("a", 1, 2, 2, 1, 0, 6), ("a", 11, 2, 0, 0, 0, 46), ("b", 14, 1, 2, 0, 16, 58), ("d", 8, 1, 2, 1, 0, 34),
                                 ("d", 13, 0, 0, 0, 0, 52)],
    "v_mfma_f32_16x16x4_4b_bf16": [("a", 2, 7, 1, 0, 16, 39), ("a", 0, 10, 3, 1, 16, 10), ("b", 1, 2, 5, 1, 0, 21), ("d", 2, 13, 9, 9, 0, 57),
                                   ("d", 3, 1, 13, 13, 0, 13)],
    "v_mfma_i32_32x32x4_2b_i8": [("a", 1, 14, 2, 0, 16, 46), ("b", 1, 2, 10, 0, 16, 42), ("d", 0, 21, 8, 9, 0, 40), ("d", 1, 3, 22, 19, 0, 22),
                                 ("d", 0, 7, 7, 3, 0, 39)],
    "v_mfma_f64_16x16x4_f64": [("a", 0, 12, 2, 0, 0, 44), ("b", 0, 0, 3, 0, 0, 3), ("d", 0, 10, 5, 4, 0, 37), ("d", 0, 11, 12, 4, 0, 60)],
    "v_mfma_f64_4x4x4_4b_f64": [("a", 2, 3, 1, 0, 0, 27), ("a", 0, 2, 3, 0, 0, 50), ("b", 3, 3, 3, 0, 0, 63), ("d", 2, 0, 3, 0, 0, 11),
                                ("d", 3, 1, 0, 0, 0, 28), ("d", 2, 2, 0, 0, 0, 40)],
    "v_mfma_f32_16x16x32_fp8_fp8": [("a", 0, 12, 20, 1, 0, 44), ("a", 0, 0, 9, 0, 8, 16), ("b", 0, 7, 0, 1, 24, 0), ("d", 0, 7, 3, 3, 0, 19),
                                    ("d", 0, 10, 5, 2, 0, 37)],
    "v_mfma_f32_32x32x16_bf8_fp8": [("a", 0, 26, 13, 1, 8, 58), ("b", 0, 15, 31, 1, 24, 63), ("b", 0, 8, 8, 0, 0, 40), ("d", 0, 26, 17, 14, 0, 17)],
    "v_smfmac_f32_16x16x32_f16": [("a", 0, 6, 23, 1, None, 38), ("a", 0, 15, 29, 1, None, 63), ("b", 0, 25, 2, 0, 16, 50), ("b", 0, 15, 7, 3, 16, 23),
                                  ("d", 0, 8, 4, 0, 0, 36), ("d", 0, 5, 13, 1, 0, 29)],
    "v_smfmac_i32_16x16x64_i8": [("a", 0, 3, 33, 0, None, 35), ("a", 0, 1, 57, 1, None, 49), ("b", 0, 62, 12, 3, 16, 60), ("d", 0, 13, 3, 1, 0, 51)],
}
BITS = {"f32": 32, "xf32": 32, "f16": 16, "bf16": 16, "i8": 8, "fp8": 8, "bf8": 8, "fp6": 6, "bf6": 6, "fp4": 4, "f64": 64}
# (exponent bits, mantissa bits, top exponent holds specials) of the small float formats (OCP 8-bit and MX formats).
MINIFLOATS = {"fp8": (4, 3), "bf8": (5, 2), "fp6": (2, 3), "bf6": (3, 2), "fp4": (2, 1)}


class Form:
    """An instruction's shape from its name, and the test's own packing of matrices into registers."""

    def __init__(self, name: str, a_type: str | None = None, b_type: str | None = None):
        self.name = name
        parts = name.split("_")
        self.sparse = parts[1] == "smfmac"
        self.out = parts[2] if not name.startswith("v_mfma_scale") else parts[3]
        dims = parts[3] if not name.startswith("v_mfma_scale") else parts[4]
        self.m, self.n, self.k = (int(x) for x in dims.split("x"))
        self.blocks = int(parts[4][:-1]) if parts[4].endswith("b") and parts[4][:-1].isdigit() else 1
        types = parts[-2:] if parts[-2] in BITS else [parts[-1], parts[-1]]
        self.a_type, self.b_type = a_type or types[0], b_type or types[1]

    def per_lane(self, matrix: str) -> int:
        k = self.k // 2 if matrix == "a" and self.sparse else self.k
        return k * (self.m if matrix == "a" else self.n) * self.blocks // 64

    def input_position(self, matrix: str, b: int, row: int, k: int) -> tuple[int, int, int]:
        """(register, low bit, lane) of A[b][row][k] / B[b][k][row]: lane block*M + (k // L)*M*blocks + row, element k % L
        packed from bit 0 of the first register on."""
        size = self.m if matrix == "a" else self.n
        per_lane = self.per_lane(matrix)
        offset = (k % per_lane) * BITS[self.a_type if matrix == "a" else self.b_type]
        return offset // 32, offset % 32, b * size + (k // per_lane) * size * self.blocks + row

    def output_position(self, b: int, i: int, j: int) -> tuple[int, int]:
        """(register, lane) of D[b][i][j] (the first register of a pair for f64)."""
        wide = self.out == "f64"
        height, strips = (1, 64 // self.n) if wide else (4, 64 // self.n)
        per_reg = max(1, 64 * height // (self.m * self.n))
        reg = b * (self.m * self.n // 64) + (i // (height * strips)) * height + i % height
        lane = (b % per_reg) * self.n + ((i // height) % strips) * per_reg * self.n + j
        return (2 * reg if wide else reg), lane

    def pack(self, matrix: str, codes: np.ndarray) -> np.ndarray:
        """(registers, 64) uint32 holding raw element codes given as (blocks, rows, k)."""
        bits = BITS[self.a_type if matrix == "a" else self.b_type]
        n_regs = max(1, -(-self.per_lane(matrix) * bits // 32))
        stream = np.zeros((n_regs + 1, 64), np.uint64)
        blocks, rows, ks = codes.shape
        for b in range(blocks):
            for r in range(rows):
                for k in range(ks):
                    reg, bit, lane = self.input_position(matrix, b, r, k)
                    value = int(codes[b, r, k]) << bit
                    stream[reg, lane] |= np.uint64(value & 0xFFFFFFFF)
                    stream[reg + 1, lane] |= np.uint64(value >> 32)
        return stream[:n_regs].astype(np.uint32)

    def n_d_regs(self) -> int:
        return self.m * self.n * self.blocks // 64 * (2 if self.out == "f64" else 1)


def _minifloat(code: int, exp_bits: int, man_bits: int, kind: str) -> float:
    sign = -1.0 if code >> (exp_bits + man_bits) else 1.0
    exponent, mantissa = (code >> man_bits) & ((1 << exp_bits) - 1), code & ((1 << man_bits) - 1)
    bias = 2 ** (exp_bits - 1) - 1
    if exponent == 0:
        return sign * mantissa / 2**man_bits * 2.0 ** (1 - bias)
    return sign * (1 + mantissa / 2**man_bits) * 2.0 ** (exponent - bias)


def _random_codes(kind: str, shape: tuple, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(raw codes, exact values) of random operands of an element format."""
    if kind == "i8":
        values = rng.integers(-128, 128, shape)
        return values & 0xFF, values.astype(np.float64)
    if kind == "f64":
        values = rng.integers(-16, 16, shape) / 4.0
        return values.view(np.uint64), values
    if kind in MINIFLOATS:
        exp_bits, man_bits = MINIFLOATS[kind]
        width = 1 + exp_bits + man_bits
        codes = rng.integers(0, 1 << width, shape)
        # Keep clear of the top exponent of the 8-bit formats (NaN / inf codes).
        top = ((codes >> man_bits) & ((1 << exp_bits) - 1)) == (1 << exp_bits) - 1
        if width == 8:
            codes = np.where(top, codes & ~(1 << man_bits), codes)
        values = np.vectorize(lambda c: _minifloat(int(c), exp_bits, man_bits, kind))(codes)
        return codes, values.astype(np.float64)
    values = (rng.integers(-8, 8, shape) / 2.0).astype(np.float32)
    if kind == "f16":
        return values.astype(np.float16).view(np.uint16).astype(np.int64), values.astype(np.float64)
    if kind == "bf16":
        return (values.view(np.uint32) >> 16).astype(np.int64), values.astype(np.float64)
    return values.view(np.uint32).astype(np.int64), values.astype(np.float64)


@pytest.mark.parametrize("name", sorted(LAYOUT_FACTS))
def test_test_layouts_agree_with_the_matrix_calculator(name: str) -> None:
    form = Form(name)
    for matrix, block, row, col, reg, bit, lane in LAYOUT_FACTS[name]:
        if matrix == "d":
            assert form.output_position(block, row, col) == (reg, lane)
            continue
        if matrix == "a":
            k = col // 2 if form.sparse else col
            got = form.input_position("a", block, row, k)
        else:
            got = form.input_position("b", block, col, row)
        regs_per_element = 2 if form.a_type == "f64" else 1
        assert (got[0] * regs_per_element, got[2]) == (reg, lane) and (bit is None or got[1] == bit)


def _run(form: Form, asm: str, a_codes: np.ndarray, b_codes: np.ndarray, c: np.ndarray | None, extra=None,
         target: str = "cdna") -> tuple[np.ndarray, WaveState]:
    """Place A at v0.., B at v32.., C at v128.. (at the destination v64.. for SMFMAC), run `asm`, return D (blocks, m, n)
    from v64.. as float64/int64."""
    state = WaveState(64, "cdna")
    a_regs, b_regs = form.pack("a", a_codes), form.pack("b", b_codes)
    state.v[0:len(a_regs)] = a_regs
    state.v[32:32 + len(b_regs)] = b_regs
    out_dtype = {"f32": np.float32, "i32": np.int32, "f64": np.float64}[form.out]
    positions = [(b, i, j, *form.output_position(b, i, j)) for b in range(form.blocks) for i in range(form.m) for j in range(form.n)]
    if c is not None:
        raw = c.astype(out_dtype).view(np.uint64 if form.out == "f64" else np.uint32)
        file = state.v
        base = 64 if form.sparse else 128
        for b, i, j, reg, lane in positions:
            value = int(raw[b, i, j])
            file[base + reg, lane] = value & 0xFFFFFFFF
            if form.out == "f64":
                file[base + reg + 1, lane] = value >> 32
    if extra is not None:
        extra(state)
    st = run_program(assemble_insts(asm, target), 64, "cdna", state=state)
    d = np.zeros((form.blocks, form.m, form.n), np.uint64)
    for b, i, j, reg, lane in positions:
        d[b, i, j] = int(st.v[64 + reg, lane]) | ((int(st.v[65 + reg, lane]) << 32) if form.out == "f64" else 0)
    if form.out == "f64":
        return d.view(np.float64), st
    return d.astype(np.uint32).view(out_dtype).astype(np.float64), st


def _regs(base: int, count: int, file: str = "v") -> str:
    return f"{file}{base}" if count == 1 else f"{file}[{base}:{base + count - 1}]"


DENSE_FORMS = ["v_mfma_f32_32x32x1_2b_f32", "v_mfma_f32_16x16x1_4b_f32", "v_mfma_f32_4x4x1_16b_f32", "v_mfma_f32_32x32x4_2b_f16",
               "v_mfma_f32_16x16x4_4b_f16", "v_mfma_f32_4x4x4_16b_f16", "v_mfma_f32_32x32x4_2b_bf16", "v_mfma_f32_16x16x4_4b_bf16",
               "v_mfma_f32_4x4x4_16b_bf16", "v_mfma_i32_32x32x4_2b_i8", "v_mfma_i32_16x16x4_4b_i8", "v_mfma_i32_4x4x4_16b_i8",
               "v_mfma_f64_16x16x4_f64", "v_mfma_f64_4x4x4_4b_f64", "v_mfma_f32_16x16x32_fp8_fp8", "v_mfma_f32_16x16x32_bf8_fp8",
               "v_mfma_f32_32x32x16_fp8_bf8", "v_mfma_f32_32x32x16_bf8_bf8", "v_mfma_f32_16x16x32_f16", "v_mfma_f32_32x32x16_bf16",
               "v_mfma_i32_16x16x64_i8", "v_mfma_f32_16x16x4_f32", "v_mfma_f32_32x32x2_f32"]


# gfx90a's own matrix ops (its names and opcodes; the 2-element bf16 and the 8-bit-k i8 forms gfx940 dropped) -> the
# gfx940-style name of the same shape, which the test's packing reads
GFX90A_FORMS = {"v_mfma_f32_32x32x1f32": "v_mfma_f32_32x32x1_2b_f32", "v_mfma_f32_16x16x16bf16_1k": "v_mfma_f32_16x16x16_bf16",
                "v_mfma_f32_32x32x2bf16": "v_mfma_f32_32x32x2_2b_bf16", "v_mfma_f32_4x4x2bf16": "v_mfma_f32_4x4x2_16b_bf16",
                "v_mfma_f32_16x16x8bf16": "v_mfma_f32_16x16x8_bf16", "v_mfma_i32_32x32x8i8": "v_mfma_i32_32x32x8_i8",
                "v_mfma_i32_16x16x16i8": "v_mfma_i32_16x16x16_i8", "v_mfma_f64_4x4x4f64": "v_mfma_f64_4x4x4_4b_f64"}


@pytest.mark.parametrize("name", DENSE_FORMS + [f"gfx90a:{n}" for n in GFX90A_FORMS])
def test_mfma_against_numpy(name: str) -> None:
    target, _, name = name.rpartition(":")
    form = Form(GFX90A_FORMS.get(name, name))
    rng = np.random.default_rng(len(name))
    a_codes, a = _random_codes(form.a_type, (form.blocks, form.m, form.k), rng)
    b_codes, b = _random_codes(form.b_type, (form.blocks, form.n, form.k), rng)
    c = rng.integers(-100, 100, (form.blocks, form.m, form.n)).astype(np.float64)
    n_a, n_b = len(form.pack("a", a_codes)), len(form.pack("b", b_codes))
    d, _ = _run(form, f"{name} {_regs(64, form.n_d_regs())}, {_regs(0, n_a)}, {_regs(32, n_b)}, {_regs(128, form.n_d_regs())}",
                a_codes, b_codes, c, target=target or "cdna")
    # The sums are exact in f64; the hardware rounds each result once to f32.
    expected = a @ np.swapaxes(b, 1, 2) + c
    np.testing.assert_array_equal(d, expected if form.out != "f32" else expected.astype(np.float32))


def test_mfma_inline_constant_c_and_cbsz_abid_blgp() -> None:
    form = Form("v_mfma_f32_16x16x1_4b_f32")
    rng = np.random.default_rng(5)
    a_codes, a = _random_codes("f32", (4, 16, 1), rng)
    b_codes, b = _random_codes("f32", (4, 16, 1), rng)
    d, _ = _run(form, "v_mfma_f32_16x16x1_4b_f32 v[64:79], v0, v32, 1.0 cbsz:1 abid:1 blgp:3", a_codes, b_codes, None)
    # CBSZ 1 / ABID 1: blocks 0-1 use A of block 1, blocks 2-3 A of block 3. BLGP 3: lane l reads B from lane l+16.
    a_used = a[[1, 1, 3, 3]]
    b_used = b[[1, 2, 3, 0]]
    np.testing.assert_array_equal(d, a_used @ np.swapaxes(b_used, 1, 2) + 1.0)


def test_mfma_f64_blgp_negates_operands() -> None:
    form = Form("v_mfma_f64_16x16x4_f64")
    rng = np.random.default_rng(8)
    a_codes, a = _random_codes("f64", (1, 16, 4), rng)
    b_codes, b = _random_codes("f64", (1, 16, 4), rng)
    c = rng.integers(-100, 100, (1, 16, 16)).astype(np.float64)
    # the blgp bits (5: A and C) as gfx940+ spells them (LLVM refuses blgp on f64 MFMAs there)
    d, _ = _run(form, "v_mfma_f64_16x16x4_f64 v[64:71], v[0:1], v[32:33], v[128:135] neg:[1,0,1]", a_codes, b_codes, c)
    np.testing.assert_array_equal(d, -(a @ np.swapaxes(b, 1, 2)) - c)


@pytest.mark.parametrize("cbsz,blgp", [(0, 0), (1, 2), (2, 3), (3, 4), (4, 0), (4, 4)])
@pytest.mark.parametrize("shape", ["16x16x128", "32x32x64"])
def test_f8f6f4_mfma_scaled_and_unscaled(shape: str, cbsz: int, blgp: int) -> None:
    formats = ("fp8", "bf8", "fp6", "bf6", "fp4")
    form = Form(f"v_mfma_scale_f32_{shape}_f8f6f4", formats[cbsz], formats[blgp])
    rng = np.random.default_rng(cbsz * 5 + blgp)
    a_codes, a = _random_codes(form.a_type, (1, form.m, form.k), rng)
    b_codes, b = _random_codes(form.b_type, (1, form.n, form.k), rng)
    c = rng.integers(-100, 100, (1, form.m, form.n)).astype(np.float64)
    d_regs = form.n_d_regs()
    widths = (8, 8, 6, 6, 4)  # VGPRs of a matrix of fp8, bf8, fp6, bf6, fp4 elements
    a_regs, b_regs = _regs(0, widths[cbsz]), _regs(32, widths[blgp])
    plain = f"v_mfma_f32_{shape}_f8f6f4 {_regs(64, d_regs)}, {a_regs}, {b_regs}, {_regs(128, d_regs)} cbsz:{cbsz} blgp:{blgp}"
    d, _ = _run(form, plain, a_codes, b_codes, c)
    np.testing.assert_array_equal(d, (a @ np.swapaxes(b, 1, 2) + c).astype(np.float32))
    # Scaled: E8M0 exponents per lane (one per 32 k values of a row / column); op_sel:[1,0] op_sel_hi:[0,1] read byte 1
    # of v100 for A and byte 2 of v101 for B.
    exp_a, exp_b = rng.integers(124, 131, 64), rng.integers(124, 131, 64)

    def scales(state: WaveState) -> None:
        state.v[100] = (exp_a << 8).astype(np.uint32) | 0xFF
        state.v[101] = (exp_b << 16).astype(np.uint32) | 0xFF0000FF

    d, _ = _run(form, f"v_mfma_scale_f32_{shape}_f8f6f4 {_regs(64, d_regs)}, {a_regs}, {b_regs}, {_regs(128, d_regs)}, v100, v101 "
                      f"op_sel:[1,0] op_sel_hi:[0,1] cbsz:{cbsz} blgp:{blgp}", a_codes, b_codes, c, scales)
    lane_a = [[form.input_position("a", 0, i, k)[2] for k in range(form.k)] for i in range(form.m)]
    lane_b = [[form.input_position("b", 0, j, k)[2] for k in range(form.k)] for j in range(form.n)]
    a_scaled = a[0] * 2.0 ** (exp_a[lane_a] - 127)
    b_scaled = b[0] * 2.0 ** (exp_b[lane_b] - 127)
    np.testing.assert_allclose(d[0], a_scaled @ b_scaled.T + c[0], rtol=1e-6)


@pytest.mark.parametrize("name", ["v_smfmac_f32_16x16x32_f16", "v_smfmac_f32_32x32x16_bf16", "v_smfmac_i32_16x16x64_i8",
                                  "v_smfmac_f32_32x32x32_fp8_bf8"])
def test_smfmac_expands_the_compressed_a(name: str) -> None:
    form = Form(name)
    rng = np.random.default_rng(len(name) + 1)
    stored_codes, stored = _random_codes(form.a_type, (1, form.m, form.k // 2), rng)
    b_codes, b = _random_codes(form.b_type, (1, form.n, form.k), rng)
    c = rng.integers(-100, 100, (1, form.m, form.n)).astype(np.float64)
    # Pick 2 of every 4 dense positions per row; the index register holds their 2-bit positions, 4 bits per group, in
    # the lane that holds the stored values.
    dense = np.zeros((form.m, form.k))
    index = np.zeros(64, np.uint32)
    for i in range(form.m):
        for group in range(form.k // 4):
            first, second = sorted(rng.choice(4, 2, replace=False))
            dense[i, 4 * group + first], dense[i, 4 * group + second] = stored[0, i, 2 * group], stored[0, i, 2 * group + 1]
            _, _, lane = form.input_position("a", 0, i, 2 * group)
            local = (2 * group % form.per_lane("a")) // 2
            index[lane] |= np.uint32((first | second << 2) << (4 * local))
    n_a, n_b = len(form.pack("a", stored_codes)), len(form.pack("b", b_codes))

    def set_index(state: WaveState) -> None:
        state.v[120] = index

    d, _ = _run(form, f"{name} {_regs(64, form.n_d_regs())}, {_regs(0, n_a)}, {_regs(32, n_b)}, v120", stored_codes, b_codes, c, set_index)
    expected = dense @ b[0].T + c[0]
    np.testing.assert_array_equal(d[0], expected if form.out != "f32" else expected.astype(np.float32))


def test_small_float_tables_match_the_ocp_mx_values() -> None:
    from amd_isa.emu import fp

    # OCP MX spec: E2M1 magnitudes, and the largest / smallest subnormal of E2M3 and E3M2.
    assert list(fp.FP4_VALUES[:8]) == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert fp.FP6_VALUES.max() == 7.5 and fp.FP6_VALUES[1] == 0.125
    assert fp.BF6_VALUES.max() == 28.0 and fp.BF6_VALUES[1] == 0.0625
    assert fp.FP6_VALUES[0x20] == 0.0 and np.signbit(fp.FP6_VALUES[0x20])
