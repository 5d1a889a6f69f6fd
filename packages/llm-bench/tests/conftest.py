"""Shared fixtures for llm-bench tests: scalar reference decoders/encoders of the ggml block formats."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import numpy as np
import pytest


def f16(raw: bytes) -> float:
    return struct.unpack("<e", raw)[0]


def ref_scale_min_k4(j: int, q: bytes) -> tuple[int, int]:
    # ggml get_scale_min_k4, element by element
    if j < 4:
        return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)


def ref_decode_block(type_name: str, block: bytes) -> list[float]:
    """Slow per-element decoding of one block, following the loops of ggml's dequantize_row_* functions."""
    y: list[float] = []
    if type_name == "Q8_0":
        d = f16(block[0:2])
        return [d * struct.unpack("b", block[2 + i : 3 + i])[0] for i in range(32)]
    if type_name in ("Q4_0", "Q4_1"):
        d = f16(block[0:2])
        m = f16(block[2:4]) if type_name == "Q4_1" else None
        qs = block[4:20] if m is not None else block[2:18]
        y = [0.0] * 32
        for j in range(16):
            x0, x1 = qs[j] & 0x0F, qs[j] >> 4
            y[j] = x0 * d + m if m is not None else (x0 - 8) * d
            y[j + 16] = x1 * d + m if m is not None else (x1 - 8) * d
        return y
    if type_name in ("Q5_0", "Q5_1"):
        d = f16(block[0:2])
        m = f16(block[2:4]) if type_name == "Q5_1" else None
        base = 4 if m is not None else 2
        qh = struct.unpack("<I", block[base : base + 4])[0]
        qs = block[base + 4 : base + 20]
        y = [0.0] * 32
        for j in range(16):
            xh0 = ((qh >> j) << 4) & 0x10
            xh1 = (qh >> (j + 12)) & 0x10
            x0, x1 = (qs[j] & 0x0F) | xh0, (qs[j] >> 4) | xh1
            y[j] = x0 * d + m if m is not None else (x0 - 16) * d
            y[j + 16] = x1 * d + m if m is not None else (x1 - 16) * d
        return y
    if type_name in ("Q4_K", "Q5_K"):
        d, dmin = f16(block[0:2]), f16(block[2:4])
        scales = block[4:16]
        qh = block[16:48] if type_name == "Q5_K" else None
        ql = block[48:176] if qh is not None else block[16:144]
        is_ = 0
        u1, u2 = 1, 2
        q_off = 0
        for _ in range(4):
            sc, m = ref_scale_min_k4(is_, scales)
            d1, m1 = d * sc, dmin * m
            sc, m = ref_scale_min_k4(is_ + 1, scales)
            d2, m2 = d * sc, dmin * m
            for l in range(32):
                hi = (16 if qh[l] & u1 else 0) if qh is not None else 0
                y.append(d1 * ((ql[q_off + l] & 0xF) + hi) - m1)
            for l in range(32):
                hi = (16 if qh[l] & u2 else 0) if qh is not None else 0
                y.append(d2 * ((ql[q_off + l] >> 4) + hi) - m2)
            q_off += 32
            is_ += 2
            u1 <<= 2
            u2 <<= 2
        return y
    if type_name == "Q6_K":
        ql, qh = block[0:128], block[128:192]
        sc = struct.unpack("16b", block[192:208])
        d = f16(block[208:210])
        y = [0.0] * 256
        for n in range(2):
            lo, ho, so, yo = 64 * n, 32 * n, 8 * n, 128 * n
            for l in range(32):
                is_ = l // 16
                q1 = ((ql[lo + l] & 0xF) | (((qh[ho + l] >> 0) & 3) << 4)) - 32
                q2 = ((ql[lo + l + 32] & 0xF) | (((qh[ho + l] >> 2) & 3) << 4)) - 32
                q3 = ((ql[lo + l] >> 4) | (((qh[ho + l] >> 4) & 3) << 4)) - 32
                q4 = ((ql[lo + l + 32] >> 4) | (((qh[ho + l] >> 6) & 3) << 4)) - 32
                y[yo + l] = d * sc[so + is_ + 0] * q1
                y[yo + l + 32] = d * sc[so + is_ + 2] * q2
                y[yo + l + 64] = d * sc[so + is_ + 4] * q3
                y[yo + l + 96] = d * sc[so + is_ + 6] * q4
        return y
    raise ValueError(type_name)


BLOCK_SIZES = {"Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24),
               "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210)}
# byte offsets of the float16 fields of each block (kept finite in random blocks)
HALF_FIELDS = {"Q8_0": (0,), "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}


def random_blocks(type_name: str, n_blocks: int, seed: int) -> bytes:
    """Random block bytes whose float16 fields are ordinary finite numbers."""
    rng = np.random.default_rng(seed)
    raw = bytearray(rng.integers(0, 256, size=n_blocks * BLOCK_SIZES[type_name][1], dtype=np.uint8).tobytes())
    size = BLOCK_SIZES[type_name][1]
    for b in range(n_blocks):
        for off in HALF_FIELDS[type_name]:
            raw[b * size + off : b * size + off + 2] = struct.pack("<e", float(rng.uniform(-2, 2)))
    return bytes(raw)


def ref_decode(type_name: str, raw: bytes) -> np.ndarray:
    """Decode every block of `raw` with the scalar reference."""
    size = BLOCK_SIZES[type_name][1]
    return np.array([v for i in range(0, len(raw), size) for v in ref_decode_block(type_name, raw[i : i + size])], dtype=np.float64)


@pytest.fixture(scope="session")
def ggml_ref() -> SimpleNamespace:
    """The scalar reference codec: `decode(type_name, raw)`, `random_blocks(type_name, n, seed)`, `BLOCK_SIZES`, `HALF_FIELDS`."""
    return SimpleNamespace(decode=ref_decode, random_blocks=random_blocks, BLOCK_SIZES=BLOCK_SIZES, HALF_FIELDS=HALF_FIELDS)
