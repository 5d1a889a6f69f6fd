"""Dequantization of GGML block formats to float32 in vectorized numpy (the reference the Tensor graph is checked against)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .errors import GGUFError
from .ggml_types import BLOCK_LAYOUTS, GGMLType, type_name


def _half(blocks: np.ndarray, start: int) -> np.ndarray:
    """The float16 at byte `start` of every block, as an (n_blocks, 1) float32 column."""
    return np.ascontiguousarray(blocks[:, start : start + 2]).view(np.float16).astype(np.float32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """Split (n, 16) packed bytes into (n, 32) values: low nibbles are elements 0-15, high nibbles 16-31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def _high_bits(qh: np.ndarray) -> np.ndarray:
    """The 32 fifth bits of Q5_0/Q5_1 blocks (a little-endian uint32 per block), as (n, 32) values of 0 or 16."""
    word = np.ascontiguousarray(qh).view("<u4")
    return (((word >> np.arange(32, dtype=np.uint32)) & 1) << 4).astype(np.uint8)


def _q8_0(blocks: np.ndarray) -> np.ndarray:
    return _half(blocks, 0) * blocks[:, 2:34].view(np.int8).astype(np.float32)


def _q4_0(blocks: np.ndarray) -> np.ndarray:
    return _half(blocks, 0) * (_nibbles(blocks[:, 2:18]).astype(np.float32) - 8.0)


def _q4_1(blocks: np.ndarray) -> np.ndarray:
    return _half(blocks, 0) * _nibbles(blocks[:, 4:20]).astype(np.float32) + _half(blocks, 2)


def _q5_0(blocks: np.ndarray) -> np.ndarray:
    q = _nibbles(blocks[:, 6:22]) | _high_bits(blocks[:, 2:6])
    return _half(blocks, 0) * (q.astype(np.float32) - 16.0)


def _q5_1(blocks: np.ndarray) -> np.ndarray:
    q = _nibbles(blocks[:, 8:24]) | _high_bits(blocks[:, 4:8])
    return _half(blocks, 0) * q.astype(np.float32) + _half(blocks, 2)


def _k_scales(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unpack the 12-byte 6-bit scale/min table of Q4_K/Q5_K into (n, 8) scales and (n, 8) mins."""
    low, mid, high = scales[:, 0:4], scales[:, 4:8], scales[:, 8:12]
    sc = np.concatenate([low & 63, (high & 0x0F) | ((low >> 6) << 4)], axis=1)
    mn = np.concatenate([mid & 63, (high >> 4) | ((mid >> 6) << 4)], axis=1)
    return sc.astype(np.float32), mn.astype(np.float32)


def _k_low_nibbles(qs: np.ndarray) -> np.ndarray:
    """Q4_K/Q5_K quants: each 32-byte run holds two 32-element sub-blocks, low nibbles first. Returns (n, 8, 32)."""
    runs = qs.reshape(-1, 4, 32)
    return np.stack([runs & 0x0F, runs >> 4], axis=2).reshape(-1, 8, 32)


def _q4_k(blocks: np.ndarray) -> np.ndarray:
    sc, mn = _k_scales(blocks[:, 4:16])
    q = _k_low_nibbles(blocks[:, 16:144]).astype(np.float32)
    out = _half(blocks, 0)[:, :, None] * sc[:, :, None] * q - _half(blocks, 2)[:, :, None] * mn[:, :, None]
    return out.reshape(-1, 256)


def _q5_k(blocks: np.ndarray) -> np.ndarray:
    sc, mn = _k_scales(blocks[:, 4:16])
    qh = blocks[:, 16:48]
    # sub-block i takes its fifth bit from bit i of the shared 32-byte qh array
    fifth = ((qh[:, None, :] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1) << 4
    q = (_k_low_nibbles(blocks[:, 48:176]) | fifth).astype(np.float32)
    out = _half(blocks, 0)[:, :, None] * sc[:, :, None] * q - _half(blocks, 2)[:, :, None] * mn[:, :, None]
    return out.reshape(-1, 256)


def _q6_k(blocks: np.ndarray) -> np.ndarray:
    ql = blocks[:, 0:128].reshape(-1, 2, 64)
    qh = blocks[:, 128:192].reshape(-1, 2, 32)
    first, second = ql[:, :, :32], ql[:, :, 32:]
    # per 128-element half: four 32-element quarters, low 4 bits from ql, high 2 bits from successive qh bit pairs
    low = np.stack([first & 0x0F, second & 0x0F, first >> 4, second >> 4], axis=2)
    high = np.stack([qh & 3, (qh >> 2) & 3, (qh >> 4) & 3, (qh >> 6) & 3], axis=2)
    q = (low | (high << 4)).astype(np.float32).reshape(-1, 256) - 32.0
    scales = np.repeat(blocks[:, 192:208].view(np.int8).astype(np.float32), 16, axis=1)
    return _half(blocks, 208) * scales * q


_BLOCK_DECODERS: dict[GGMLType, Callable[[np.ndarray], np.ndarray]] = {
    GGMLType.Q8_0: _q8_0,
    GGMLType.Q4_0: _q4_0,
    GGMLType.Q4_1: _q4_1,
    GGMLType.Q5_0: _q5_0,
    GGMLType.Q5_1: _q5_1,
    GGMLType.Q4_K: _q4_k,
    GGMLType.Q5_K: _q5_k,
    GGMLType.Q6_K: _q6_k,
}

DEQUANTIZABLE_TYPES = frozenset(_BLOCK_DECODERS) | {GGMLType.F32, GGMLType.F16, GGMLType.BF16}

# decode this many blocks at a time so temporaries stay in cache-sized pieces instead of tensor-sized ones
_CHUNK_BLOCKS = 16384


def dequantize(raw: np.ndarray, ggml_type: GGMLType | int, shape: tuple[int, ...]) -> np.ndarray:
    """Decode the raw bytes of a tensor of `ggml_type` to a float32 array of `shape`.

    `raw` is the tensor's bytes (any uint8 array, e.g. a view into a memory-mapped GGUF); the result is a new array.
    """
    try:
        ggml_type = GGMLType(ggml_type)
    except ValueError:
        raise GGUFError(f"cannot dequantize {type_name(int(ggml_type))}: supported are {_supported()}") from None
    if ggml_type not in DEQUANTIZABLE_TYPES:
        raise GGUFError(f"cannot dequantize {ggml_type.name}: supported are {_supported()}")
    n_elements = int(np.prod(shape, dtype=np.int64))
    layout = BLOCK_LAYOUTS[ggml_type]
    raw = np.asarray(raw).reshape(-1).view(np.uint8)
    if n_elements % layout.block_elems or raw.size != n_elements // layout.block_elems * layout.block_bytes:
        raise GGUFError(f"{ggml_type.name} tensor of shape {tuple(shape)} needs {n_elements // layout.block_elems * layout.block_bytes} bytes "
                        f"in whole {layout.block_elems}-element blocks, got {raw.size}")
    if ggml_type is GGMLType.F32:
        return raw.view("<f4").astype(np.float32).reshape(shape)
    if ggml_type is GGMLType.F16:
        return raw.view("<f2").astype(np.float32).reshape(shape)
    if ggml_type is GGMLType.BF16:
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    blocks = raw.reshape(-1, layout.block_bytes)
    out = np.empty((blocks.shape[0], layout.block_elems), dtype=np.float32)
    decode = _BLOCK_DECODERS[ggml_type]
    for start in range(0, blocks.shape[0], _CHUNK_BLOCKS):
        out[start : start + _CHUNK_BLOCKS] = decode(blocks[start : start + _CHUNK_BLOCKS])
    return out.reshape(shape)


def _supported() -> str:
    return ", ".join(sorted(t.name for t in DEQUANTIZABLE_TYPES))
