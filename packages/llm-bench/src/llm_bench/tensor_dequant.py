"""Dequantization of GGML blocks inside a `uop_scheduler.Tensor` graph, so quantized weights stay quantized in memory.

A quantized weight lives on the device as its raw bytes, a uint8 Tensor of shape (..., n_blocks, block_bytes); the
functions here turn it into float32 values of shape (..., n_blocks * block_elems) with elementwise Tensor ops only
(slices, shifts, masks, casts, bitcasts), so the decoding fuses into the kernel that consumes the weight (a matmul)
and no float copy of the weight is ever stored. Each decoder follows the float32 operation order of the numpy
reference in `dequant.py`, so both give the same bits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from uop_scheduler import Tensor, dtypes

from .errors import ModelError
from .ggml_types import BLOCK_LAYOUTS, GGMLType


def _half(blocks: Tensor, start: int) -> Tensor:
    """The little-endian float16 at byte `start` of every block, as a float32 (..., 1) column."""
    low = blocks[..., start : start + 1].cast(dtypes.uint16)
    high = blocks[..., start + 1 : start + 2].cast(dtypes.uint16)
    return (low | (high << 8)).bitcast(dtypes.float16).cast(dtypes.float32)


def _fields(packed: Tensor, shifts: Sequence[int], widths: Sequence[int], axis: int) -> Tensor:
    """Bit fields (packed >> shifts[i]) & (2**widths[i] - 1) of uint8 `packed`, one per i along `axis`, where `packed`
    has size 1 or len(shifts).

    The per-position shift is a multiply by 2**(8 - shift) then a fixed shift by 8, with the multipliers and masks in
    small tables: the position only changes a table entry, never which bytes are read or which code runs (a `cat` of
    the variants gates every load by position and a `where` chain evaluates all of them), so the matmul kernel this
    fuses into stays a straight loop the C compiler vectorizes.
    """
    shape = [1] * packed.ndim
    shape[axis] = len(shifts)
    multipliers = Tensor(np.array([1 << (8 - s) for s in shifts], dtype=np.uint16), device=packed.device).reshape(shape)
    masks = Tensor(np.array([(1 << w) - 1 for w in widths], dtype=np.uint16), device=packed.device).reshape(shape)
    return (((packed.cast(dtypes.uint16) * multipliers) >> 8) & masks).cast(dtypes.uint8)


def _nibbles(qs: Tensor) -> Tensor:
    """Packed bytes (..., 16) -> (..., 32): low nibbles are elements 0-15, high nibbles 16-31."""
    return _fields(qs.unsqueeze(-2), (0, 4), (4, 4), -2).reshape(*qs.shape[:-1], 32)


def _bits(packed: Tensor) -> Tensor:
    """Bytes (..., n) -> (..., 8n) values 0/1; element 8b+k is bit k of byte b (bit j of a little-endian word)."""
    return _fields(packed.unsqueeze(-1), range(8), (1,) * 8, -1).reshape(*packed.shape[:-1], packed.shape[-1] * 8)


def _q8_0(blocks: Tensor) -> Tensor:
    return _half(blocks, 0) * blocks[..., 2:34].bitcast(dtypes.int8).cast(dtypes.float32)


def _q4_0(blocks: Tensor) -> Tensor:
    return _half(blocks, 0) * (_nibbles(blocks[..., 2:18]).cast(dtypes.float32) - 8.0)


def _q4_1(blocks: Tensor) -> Tensor:
    return _half(blocks, 0) * _nibbles(blocks[..., 4:20]).cast(dtypes.float32) + _half(blocks, 2)


def _q5_0(blocks: Tensor) -> Tensor:
    q = _nibbles(blocks[..., 6:22]) | (_bits(blocks[..., 2:6]) << 4)
    return _half(blocks, 0) * (q.cast(dtypes.float32) - 16.0)


def _q5_1(blocks: Tensor) -> Tensor:
    q = _nibbles(blocks[..., 8:24]) | (_bits(blocks[..., 4:8]) << 4)
    return _half(blocks, 0) * q.cast(dtypes.float32) + _half(blocks, 2)


def _k_scales(scales: Tensor) -> tuple[Tensor, Tensor]:
    """The 12-byte 6-bit scale/min table of Q4_K/Q5_K -> (..., 8, 1) float32 scales and mins."""
    lead = scales.shape[:-1]
    rows = scales.reshape(*lead, 3, 4)  # low, mid, high: 4 bytes each
    low, mid = rows[..., 0:1, :], rows[..., 1:2, :]
    # scale j < 4: low[j] & 63; j >= 4: (high & 15) | (low >> 6) << 4.  min j < 4: mid & 63; j >= 4: (high >> 4) | (mid >> 6) << 4
    sc = _fields(rows[..., 0::2, :], (0, 0), (6, 4), -2) | (_fields(low, (6, 6), (0, 2), -2) << 4)
    mn = _fields(rows[..., 1:3, :], (0, 4), (6, 4), -2) | (_fields(mid, (6, 6), (0, 2), -2) << 4)
    return sc.cast(dtypes.float32).reshape(*lead, 8, 1), mn.cast(dtypes.float32).reshape(*lead, 8, 1)


def _k_low_nibbles(qs: Tensor) -> Tensor:
    """Q4_K/Q5_K quants (..., 128): each 32-byte run holds two 32-element sub-blocks, low nibbles first -> (..., 8, 32)."""
    runs = qs.reshape(*qs.shape[:-1], 4, 1, 32)
    return _fields(runs, (0, 4), (4, 4), -2).reshape(*qs.shape[:-1], 8, 32)


def _k_combine(blocks: Tensor, q: Tensor) -> Tensor:
    """d * scale * q - dmin * min over the 8 sub-blocks of Q4_K/Q5_K, flattened to (..., 256)."""
    sc, mn = _k_scales(blocks[..., 4:16])
    d, dmin = _half(blocks, 0).unsqueeze(-1), _half(blocks, 2).unsqueeze(-1)
    out = d * sc * q.cast(dtypes.float32) - dmin * mn
    return out.reshape(*blocks.shape[:-1], 256)


def _q4_k(blocks: Tensor) -> Tensor:
    return _k_combine(blocks, _k_low_nibbles(blocks[..., 16:144]))


def _q5_k(blocks: Tensor) -> Tensor:
    qh = blocks[..., 16:48].unsqueeze(-2)
    # sub-block i takes its fifth bit from bit i of the shared 32-byte qh array
    fifth = _fields(qh, range(8), (1,) * 8, -2) << 4
    return _k_combine(blocks, _k_low_nibbles(blocks[..., 48:176]) | fifth)


def _q6_k(blocks: Tensor) -> Tensor:
    lead = blocks.shape[:-1]
    # per 128-element half: four 32-element quarters; quarter 2s+p takes bits 4s.. of ql's 32-byte part p (4 bits)
    # and bits 2(2s+p).. of qh (2 bits)
    ql = blocks[..., 0:128].reshape(*lead, 2, 1, 2, 32)
    qh = blocks[..., 128:192].reshape(*lead, 2, 1, 32)
    low = _fields(ql, (0, 4), (4, 4), -3).reshape(*lead, 2, 4, 32)
    high = _fields(qh, (0, 2, 4, 6), (2, 2, 2, 2), -2)
    q = (low | (high << 4)).cast(dtypes.float32).reshape(*lead, 16, 16) - 32.0
    scales = blocks[..., 192:208].bitcast(dtypes.int8).cast(dtypes.float32).unsqueeze(-1)
    return (_half(blocks, 208).unsqueeze(-1) * scales * q).reshape(*lead, 256)


_GRAPH_DECODERS: dict[GGMLType, Callable[[Tensor], Tensor]] = {
    GGMLType.Q8_0: _q8_0,
    GGMLType.Q4_0: _q4_0,
    GGMLType.Q4_1: _q4_1,
    GGMLType.Q5_0: _q5_0,
    GGMLType.Q5_1: _q5_1,
    GGMLType.Q4_K: _q4_k,
    GGMLType.Q5_K: _q5_k,
    GGMLType.Q6_K: _q6_k,
}

GRAPH_QUANT_TYPES = frozenset(_GRAPH_DECODERS)


def dequantize_blocks(blocks: Tensor, ggml_type: GGMLType) -> Tensor:
    """float32 values of the raw `ggml_type` blocks `blocks` (uint8, shape (..., n_blocks, block_bytes)), shape
    (..., n_blocks * block_elems); lazy, so it fuses into whatever consumes it."""
    decode = _GRAPH_DECODERS.get(ggml_type)
    if decode is None:
        raise ModelError(f"no in-graph dequantization for {ggml_type.name}: supported are {', '.join(t.name for t in _GRAPH_DECODERS)}")
    layout = BLOCK_LAYOUTS[ggml_type]
    if blocks.dtype is not dtypes.uint8 or blocks.ndim < 2 or blocks.shape[-1] != layout.block_bytes:
        raise ModelError(f"{ggml_type.name} blocks must be a uint8 tensor of shape (..., n_blocks, {layout.block_bytes}), "
                         f"got {blocks.dtype} {blocks.shape}")
    return decode(blocks).reshape(*blocks.shape[:-2], blocks.shape[-2] * layout.block_elems)
