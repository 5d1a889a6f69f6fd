"""Dequantization against a scalar per-block reference, hand-built blocks and round trips through test-side quantizers."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_bench import GGMLType, GGUFError, dequantize

QUANT_TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]


@pytest.mark.parametrize("type_name", QUANT_TYPES)
def test_random_blocks_match_scalar_reference(type_name, ggml_ref):
    n_blocks = 6
    raw = ggml_ref.random_blocks(type_name, n_blocks, seed=sum(map(ord, type_name)))
    block_elems = ggml_ref.BLOCK_SIZES[type_name][0]
    got = dequantize(np.frombuffer(raw, np.uint8), GGMLType[type_name], (2, n_blocks // 2 * block_elems))
    want = ggml_ref.decode(type_name, raw).reshape(2, -1)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@given(seed=st.integers(0, 2**32 - 1), type_name=st.sampled_from(QUANT_TYPES))
@settings(max_examples=24, derandomize=True, deadline=None)
def test_random_blocks_property(seed, type_name, ggml_ref):
    raw = ggml_ref.random_blocks(type_name, 2, seed)
    got = dequantize(np.frombuffer(raw, np.uint8), GGMLType[type_name], (2 * ggml_ref.BLOCK_SIZES[type_name][0],))
    np.testing.assert_allclose(got, ggml_ref.decode(type_name, raw), rtol=1e-6, atol=1e-6)


def test_plain_float_types():
    values = np.array([[1.5, -2.25, 0.0], [65504.0, -1e-3, 3.0]], dtype=np.float32)
    np.testing.assert_array_equal(dequantize(values.view(np.uint8), GGMLType.F32, (2, 3)), values)
    halves = values.astype(np.float16)
    np.testing.assert_array_equal(dequantize(halves.view(np.uint8), GGMLType.F16, (2, 3)), halves.astype(np.float32))
    # bfloat16 is the top half of a float32: 1.5 = 0x3FC0, -2.25 = 0xC010, 1.0 = 0x3F80
    bf16 = np.array([0x3FC0, 0xC010, 0x3F80], dtype="<u2")
    np.testing.assert_array_equal(dequantize(bf16.view(np.uint8), GGMLType.BF16, (3,)), [1.5, -2.25, 1.0])


def test_hand_built_q8_0():
    qs = list(range(-16, 16))
    block = struct.pack("<e", 0.5) + struct.pack("32b", *qs)
    np.testing.assert_array_equal(dequantize(np.frombuffer(block, np.uint8), GGMLType.Q8_0, (32,)), [q * 0.5 for q in qs])


def test_hand_built_q4_0_and_q4_1():
    # byte j holds element j in its low nibble and element j+16 in its high nibble
    qs = bytes((j & 0xF) | ((15 - j) << 4) for j in range(16))
    want_q = list(range(16)) + [15 - j for j in range(16)]
    q4_0 = dequantize(np.frombuffer(struct.pack("<e", 2.0) + qs, np.uint8), GGMLType.Q4_0, (32,))
    np.testing.assert_array_equal(q4_0, [(q - 8) * 2.0 for q in want_q])
    q4_1 = dequantize(np.frombuffer(struct.pack("<ee", 0.25, -1.0) + qs, np.uint8), GGMLType.Q4_1, (32,))
    np.testing.assert_array_equal(q4_1, [q * 0.25 - 1.0 for q in want_q])


def test_hand_built_q5_0():
    # all low nibbles 0; the fifth bit set for elements 0 and 31 only -> those are 16, the rest 0
    qh = (1 << 0) | (1 << 31)
    block = struct.pack("<eI", 1.0, qh) + bytes(16)
    want = [-16.0] * 32
    want[0] = want[31] = 0.0
    np.testing.assert_array_equal(dequantize(np.frombuffer(block, np.uint8), GGMLType.Q5_0, (32,)), want)


def test_hand_built_q4_k():
    # every sub-block scale 2, min 1 (6-bit fields in the low bits of bytes 0-7, upper ones 0x21 = (min 2 << 4) | scale 1)
    scales = bytes([2, 2, 2, 2, 1, 1, 1, 1, 0x21, 0x21, 0x21, 0x21])
    qs = bytes([0x53] * 128)  # low nibble 3, high nibble 5
    block = struct.pack("<ee", 0.5, 0.25) + scales + qs
    got = dequantize(np.frombuffer(block, np.uint8), GGMLType.Q4_K, (256,)).reshape(8, 32)
    # sub-blocks 0-3: scale 2 / min 1; sub-blocks 4-7: scale 1 / min 2 (upper bits of bytes 0-7 are zero)
    want_sc, want_min = [2, 2, 2, 2, 1, 1, 1, 1], [1, 1, 1, 1, 2, 2, 2, 2]
    for i in range(8):
        q = 3 if i % 2 == 0 else 5
        np.testing.assert_array_equal(got[i], 0.5 * want_sc[i] * q - 0.25 * want_min[i])


def test_hand_built_q6_k():
    ql = bytes([0x21] * 128)  # low 4 bits 1 (first quarters), 2 (third quarters)
    qh = bytes([0b11100100] * 64)  # bit pairs 0, 1, 2, 3 for the four quarters
    scales = struct.pack("16b", *range(-8, 8))
    block = ql + qh + scales + struct.pack("<e", 0.5)
    got = dequantize(np.frombuffer(block, np.uint8), GGMLType.Q6_K, (256,))
    for idx in range(256):
        quarter = (idx % 128) // 32
        low = 1 if quarter in (0, 1) else 2
        q = (low | (quarter << 4)) - 32
        assert got[idx] == 0.5 * (idx // 16 - 8) * q


def quantize_q8_0(x: np.ndarray) -> bytes:
    out = bytearray()
    for block in x.reshape(-1, 32):
        d = float(np.abs(block).max()) / 127.0
        d16 = float(np.float16(d))
        qs = [int(round(v / d16)) if d16 else 0 for v in block]
        out += struct.pack("<e", d16) + struct.pack("32b", *qs)
    return bytes(out)


def quantize_q4_1(x: np.ndarray) -> bytes:
    out = bytearray()
    for block in x.reshape(-1, 32):
        lo, hi = float(block.min()), float(block.max())
        d16, m16 = float(np.float16((hi - lo) / 15.0)), float(np.float16(lo))
        q = [min(15, max(0, int(round((v - m16) / d16)))) if d16 else 0 for v in block]
        out += struct.pack("<ee", d16, m16) + bytes(q[j] | (q[j + 16] << 4) for j in range(16))
    return bytes(out)


@pytest.mark.parametrize(("quantize", "ggml_type", "levels"), [(quantize_q8_0, GGMLType.Q8_0, 127), (quantize_q4_1, GGMLType.Q4_1, 15)])
def test_quantize_round_trip_within_step(quantize, ggml_type, levels):
    x = np.random.default_rng(7).normal(size=(4, 64)).astype(np.float32)
    got = dequantize(np.frombuffer(quantize(x), np.uint8), ggml_type, x.shape)
    blocks = x.reshape(-1, 32)
    step = (np.abs(blocks).max(axis=1) * 2 if ggml_type is GGMLType.Q8_0 else blocks.max(axis=1) - blocks.min(axis=1)) / levels
    # rounding to the nearest level, plus float16 error in the scale and offset
    assert np.all(np.abs(got.reshape(-1, 32) - blocks) <= step[:, None] * 0.52 + 2e-3)


def test_wrong_size_and_unsupported_type_are_clear():
    with pytest.raises(GGUFError, match="Q8_0 tensor of shape"):
        dequantize(np.zeros(33, np.uint8), GGMLType.Q8_0, (32,))
    with pytest.raises(GGUFError, match="cannot dequantize Q2_K"):
        dequantize(np.zeros(84, np.uint8), GGMLType.Q2_K, (256,))
    with pytest.raises(GGUFError, match="unknown type id 99"):
        dequantize(np.zeros(4, np.uint8), 99, (1,))


def test_package_q8_0_quantizer(ggml_ref):
    from llm_bench import quantize_q8_0

    x = np.random.default_rng(11).normal(size=(3, 64)).astype(np.float32)
    x[0, :32] = 0.0  # an all-zero block must not divide by zero
    raw = quantize_q8_0(x)
    assert raw.dtype == np.uint8 and raw.size == 6 * 34
    decoded = ggml_ref.decode("Q8_0", raw.tobytes()).reshape(3, 64)
    step = np.abs(x.reshape(-1, 32)).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(decoded.reshape(-1, 32) - x.reshape(-1, 32)) <= step * 0.5 + 1e-3 * step + 1e-7)
    assert np.all(decoded[0, :32] == 0.0)
