"""Encoding float32 weights into GGML blocks (Q8_0), used to store the tiny models' matrices quantized."""

from __future__ import annotations

import numpy as np


def quantize_q8_0(x: np.ndarray) -> np.ndarray:
    """Q8_0 blocks of `x` (last axis a multiple of 32) as uint8 bytes: per 32 values a float16 scale
    d = max|x| / 127 and the int8 values round(x / d)."""
    if x.shape[-1] % 32:
        raise ValueError(f"Q8_0 needs rows that are a multiple of 32 elements, got {x.shape[-1]}")
    blocks = x.astype(np.float32).reshape(-1, 32)
    scale = (np.abs(blocks).max(axis=1) / 127.0).astype(np.float16)
    # divide by the scale as stored (float16), so decoding reproduces the nearest representable values
    wide = scale.astype(np.float32)[:, None]
    q = np.where(wide > 0, np.round(blocks / np.where(wide > 0, wide, 1.0)), 0.0).clip(-127, 127).astype(np.int8)
    out = np.empty((blocks.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = scale.view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(-1)
