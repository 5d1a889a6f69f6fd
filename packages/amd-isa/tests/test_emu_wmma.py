"""RDNA4 WMMA in the 4-bit forms and SWMMAC (structured-sparse A) against numpy.

The test packs operands with its own layout functions, first checked against entries AMD's matrix instruction
calculator prints for gfx12 wave32 (`LAYOUT_FACTS`); SWMMAC's compression index is built per group of 4 k, 2 bits per
stored value, in the lane holding the group's values.
"""

import numpy as np
import pytest
from amd_isa import assemble_insts
from amd_isa.emu import WaveState, fp, run_program
from amd_isa.inst import Inst

# (instruction, matrix, row, dense k, first register, low bit (None: register only), lane, index_key) from the calculator;
# "k" rows give the compression index bits of dense k.
LAYOUT_FACTS = [
    ("v_swmmac_f32_16x16x32_f16", "a", 0, 8, 0, None, 16, 0), ("v_swmmac_f32_16x16x32_f16", "a", 3, 20, 3, None, 3, 0),
    ("v_swmmac_f32_16x16x32_f16", "b", 0, 4, 2, 0, 0, 0), ("v_swmmac_f32_16x16x32_f16", "b", 0, 31, 7, 16, 16, 0),
    ("v_swmmac_f32_16x16x32_f16", "b", 5, 9, 0, 16, 21, 0), ("v_swmmac_f32_16x16x32_f16", "k", 0, 16, 0, 8, 0, 0),
    ("v_swmmac_f32_16x16x32_f16", "k", 0, 31, 0, 12, 16, 0), ("v_swmmac_f32_16x16x32_f16", "k", 3, 20, 0, 28, 3, 1),
    ("v_swmmac_i32_16x16x32_iu8", "a", 5, 9, 1, None, 5, 0), ("v_swmmac_i32_16x16x32_iu8", "a", 3, 20, 0, None, 19, 0),
    ("v_swmmac_i32_16x16x32_iu8", "b", 5, 9, 2, 8, 5, 0), ("v_swmmac_i32_16x16x32_iu8", "b", 0, 16, 0, 0, 16, 0),
    ("v_swmmac_i32_16x16x32_iu8", "k", 5, 9, 0, 8, 5, 0), ("v_swmmac_i32_16x16x32_iu8", "k", 0, 31, 0, 28, 16, 1),
    ("v_swmmac_i32_16x16x64_iu4", "a", 3, 20, 1, None, 3, 0), ("v_swmmac_i32_16x16x64_iu4", "a", 0, 63, 1, None, 16, 0),
    ("v_swmmac_i32_16x16x64_iu4", "b", 3, 20, 2, 16, 3, 0), ("v_swmmac_i32_16x16x64_iu4", "b", 0, 32, 0, 0, 16, 0),
    ("v_swmmac_i32_16x16x64_iu4", "k", 3, 20, 0, 20, 3, 0), ("v_swmmac_i32_16x16x64_iu4", "k", 0, 63, 0, 60, 16, 1),
    ("v_wmma_i32_16x16x32_iu4", "a", 5, 9, 1, 4, 5, 0), ("v_wmma_i32_16x16x32_iu4", "b", 3, 20, 0, 16, 19, 0),
    ("v_wmma_i32_16x16x16_iu4", "a", 5, 9, 0, 4, 21, 0), ("v_wmma_i32_16x16x16_iu8", "a", 0, 4, 1, 0, 0, 0),
    ("v_wmma_i32_16x16x16_iu8", "b", 0, 9, 0, 8, 16, 0), ("v_wmma_f32_16x16x16_f16", "a", 0, 5, 0, 16, 16, 0),
]
BITS = {"f16": 16, "bf16": 16, "iu8": 8, "fp8": 8, "bf8": 8, "iu4": 4}


class Form:
    def __init__(self, name: str):
        parts = name.split("_")
        self.name, self.sparse, self.out = name, parts[1] == "swmmac", parts[2]
        self.k = int(parts[3].split("x")[2])
        self.b_type = parts[-1]
        self.a_type = parts[-2] if self.b_type in ("fp8", "bf8") else self.b_type

    def position(self, kind: str, k_total: int, row: int, k: int) -> tuple[int, int, int]:
        """(register, low bit, lane) of element (row, k) of an operand with k_total k values: lanes 0-15 and 16-31 take
        turns holding chunks of K/4 (16-bit) or K/2 (8/4-bit) elements, packed from bit 0 of the first register."""
        bits = BITS[kind]
        chunk = k_total // 4 if bits == 16 else k_total // 2
        element = k % chunk + chunk * (k // (2 * chunk))
        return element * bits // 32, element * bits % 32, row + 16 * ((k // chunk) % 2)

    def index_position(self, row: int, k: int, key: int) -> tuple[int, int]:
        """(bit within the index register pair, lane) of the 4-bit group index of dense k."""
        stored = self.k // 2
        reg, bit, lane = self.position(self.a_type, stored, row, k // 2)
        local = (reg * 32 + bit) // BITS[self.a_type]
        return key * stored + 4 * (local // 2), lane

    def pack(self, kind: str, codes: np.ndarray) -> np.ndarray:
        bits = BITS[kind]
        rows, k_total = codes.shape
        regs = np.zeros((k_total * bits // 32 // 2 + 1, 32), np.uint32)
        for i in range(rows):
            for k in range(k_total):
                reg, bit, lane = self.position(kind, k_total, i, k)
                regs[reg, lane] |= np.uint32(int(codes[i, k]) << bit)
        return regs[:max(1, k_total * bits // 64)]


@pytest.mark.parametrize("fact", LAYOUT_FACTS, ids=lambda fact: f"{fact[0]}-{fact[1]}-{fact[2]}-{fact[3]}")
def test_test_layouts_agree_with_the_matrix_calculator(fact) -> None:
    name, matrix, row, k, reg, bit, lane, key = fact
    form = Form(name)
    if matrix == "k":
        assert form.index_position(row, k, key) == (32 * reg + bit, lane)
        return
    kind = form.a_type if matrix == "a" else form.b_type
    got = form.position(kind, form.k // 2 if matrix == "a" and form.sparse else form.k, row, k // 2 if matrix == "a" and form.sparse else k)
    assert (got[0], got[2]) == (reg, lane) and (bit is None or got[1] == bit)


def _codes(kind: str, shape: tuple, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if kind in ("iu8", "iu4"):
        bits = BITS[kind]
        values = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), shape)
        return values & ((1 << bits) - 1), values.astype(np.float64)
    if kind in ("fp8", "bf8"):
        codes = rng.integers(0, 256, shape) & 0xBF  # clear the top exponent bit: no NaN / inf codes
        table = fp.FP8_VALUES if kind == "fp8" else fp.BF8_VALUES
        return codes, table[codes]
    values = (rng.integers(-8, 8, shape) / 2).astype(np.float32)
    if kind == "f16":
        return values.astype(np.float16).view(np.uint16).astype(np.int64), values.astype(np.float64)
    return (values.view(np.uint32) >> 16).astype(np.int64), values.astype(np.float64)


def _dc_position(m: int, n: int) -> tuple[int, int]:
    return m & 7, n + 16 * (m >> 3)


def _run(form: Form, a_codes: np.ndarray, b_codes: np.ndarray, c: np.ndarray, index: np.ndarray | None, key: int) -> np.ndarray:
    state = WaveState(32, "rdna4")
    a_regs, b_regs = form.pack(form.a_type, a_codes), form.pack(form.b_type, b_codes)
    state.v[0:len(a_regs)] = a_regs
    state.v[16:16 + len(b_regs)] = b_regs
    half = form.out in ("f16", "bf16")
    for m in range(16):
        for n in range(16):
            reg, lane = _dc_position(m, n)
            dtype = np.float16 if half else np.float32 if form.out == "f32" else np.int32
            value = int(np.array(c[m, n], dtype).view(np.uint16 if half else np.uint32))
            if half:
                state.v[32 + reg // 2, lane] |= np.uint32(value << (16 * (reg % 2)))
            else:
                state.v[32 + reg, lane] = value
    if index is not None:
        state.v[60], state.v[61] = index & 0xFFFFFFFF, index >> 32
    d_regs = 4 if half else 8
    src2 = "v60" if form.sparse else f"v[32:{32 + d_regs - 1}]"
    dst = f"v[32:{32 + d_regs - 1}]" if form.sparse else f"v[40:{40 + d_regs - 1}]"
    regs = lambda base, count: f"v{base}" if count == 1 else f"v[{base}:{base + count - 1}]"  # noqa: E731
    neg = " neg_lo:[1,1,0]" if form.a_type in ("iu8", "iu4") else ""
    inst = assemble_insts(f"{form.name} {dst}, {regs(0, len(a_regs))}, {regs(16, len(b_regs))}, {src2}{neg}", "rdna4")[0]
    # INDEX_KEY is OPSEL[0] (our assembler does not parse the index_key modifier).
    inst = Inst(inst.arch, inst.fmt, inst.op, dict(inst.fields, opsel=key), inst.literal, inst.variant)
    st = run_program([inst], 32, "rdna4", state=state)
    base = 32 if form.sparse else 40
    d = np.zeros((16, 16))
    for m in range(16):
        for n in range(16):
            reg, lane = _dc_position(m, n)
            word = int(st.v[base + (reg // 2 if half else reg), lane])
            if half:
                d[m, n] = np.uint16((word >> (16 * (reg % 2))) & 0xFFFF).view(np.float16)
            else:
                d[m, n] = np.uint32(word).view(np.float32 if form.out == "f32" else np.int32)
    return d


@pytest.mark.parametrize("name", ["v_wmma_i32_16x16x16_iu4", "v_wmma_i32_16x16x32_iu4"])
def test_rdna4_wmma_iu4(name: str) -> None:
    form = Form(name)
    rng = np.random.default_rng(len(name))
    a_codes, a = _codes("iu4", (16, form.k), rng)
    b_codes, b = _codes("iu4", (16, form.k), rng)
    c = rng.integers(-500, 500, (16, 16)).astype(np.float64)
    np.testing.assert_array_equal(_run(form, a_codes, b_codes, c, None, 0), a @ b.T + c)


@pytest.mark.parametrize("key", [0, 1])
@pytest.mark.parametrize("name", ["v_swmmac_f32_16x16x32_f16", "v_swmmac_f16_16x16x32_f16", "v_swmmac_f32_16x16x32_bf16",
                                  "v_swmmac_i32_16x16x32_iu8", "v_swmmac_i32_16x16x32_iu4", "v_swmmac_i32_16x16x64_iu4",
                                  "v_swmmac_f32_16x16x32_fp8_bf8"])
def test_swmmac_against_numpy(name: str, key: int) -> None:
    form = Form(name)
    rng = np.random.default_rng(len(name) + key)
    stored_codes, stored = _codes(form.a_type, (16, form.k // 2), rng)
    b_codes, b = _codes(form.b_type, (16, form.k), rng)
    c = rng.integers(-50, 50, (16, 16)).astype(np.float64)
    dense = np.zeros((16, form.k))
    index = np.zeros(32, np.uint64)
    for i in range(16):
        for group in range(form.k // 4):
            first, second = sorted(rng.choice(4, 2, replace=False))
            dense[i, 4 * group + first], dense[i, 4 * group + second] = stored[i, 2 * group], stored[i, 2 * group + 1]
            bit, lane = form.index_position(i, 4 * group, key)
            index[lane] |= np.uint64((first | second << 2) << bit)
    d = _run(form, stored_codes, b_codes, c, index, key)
    expected = dense @ b.T + c
    if form.out == "f16":
        expected = expected.astype(np.float16).astype(np.float64)
    elif form.out == "f32":
        expected = expected.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(d, expected)
