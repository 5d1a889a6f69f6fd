"""GGML tensor types and GGUF metadata value types: ids and block layouts (facts from the ggml headers)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class GGMLType(enum.IntEnum):
    """Tensor element types, numbered as in ggml's `enum ggml_type`."""

    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    IQ1_M = 29
    BF16 = 30


@dataclass(frozen=True)
class BlockLayout:
    """How a type packs elements: `block_elems` elements are stored in `block_bytes` bytes."""

    block_elems: int
    block_bytes: int


# Only the types this package can read; other ids are recognised by name but rejected with a clear error.
BLOCK_LAYOUTS: dict[GGMLType, BlockLayout] = {
    GGMLType.F32: BlockLayout(1, 4),
    GGMLType.F16: BlockLayout(1, 2),
    GGMLType.BF16: BlockLayout(1, 2),
    GGMLType.F64: BlockLayout(1, 8),
    GGMLType.I8: BlockLayout(1, 1),
    GGMLType.I16: BlockLayout(1, 2),
    GGMLType.I32: BlockLayout(1, 4),
    GGMLType.I64: BlockLayout(1, 8),
    GGMLType.Q4_0: BlockLayout(32, 2 + 16),
    GGMLType.Q4_1: BlockLayout(32, 2 + 2 + 16),
    GGMLType.Q5_0: BlockLayout(32, 2 + 4 + 16),
    GGMLType.Q5_1: BlockLayout(32, 2 + 2 + 4 + 16),
    GGMLType.Q8_0: BlockLayout(32, 2 + 32),
    GGMLType.Q4_K: BlockLayout(256, 2 + 2 + 12 + 128),
    GGMLType.Q5_K: BlockLayout(256, 2 + 2 + 12 + 32 + 128),
    GGMLType.Q6_K: BlockLayout(256, 128 + 64 + 16 + 2),
}

QUANTIZED_TYPES = frozenset(t for t, layout in BLOCK_LAYOUTS.items() if layout.block_elems > 1)


def type_name(type_id: int) -> str:
    """A readable name for a ggml type id, known or not (for error messages)."""
    try:
        return GGMLType(type_id).name
    except ValueError:
        return f"unknown type id {type_id}"


def tensor_nbytes(ggml_type: GGMLType, n_elements: int) -> int:
    """Bytes a tensor of `n_elements` of `ggml_type` occupies; the element count must fill whole blocks."""
    layout = BLOCK_LAYOUTS[ggml_type]
    if n_elements % layout.block_elems:
        raise ValueError(f"{ggml_type.name} stores blocks of {layout.block_elems} elements; {n_elements} elements do not fill whole blocks")
    return n_elements // layout.block_elems * layout.block_bytes


class GGUFValueType(enum.IntEnum):
    """Metadata value types, numbered as in the GGUF specification."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# struct format characters (little-endian) of the fixed-size scalar value types
SCALAR_FORMATS: dict[GGUFValueType, str] = {
    GGUFValueType.UINT8: "B",
    GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H",
    GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I",
    GGUFValueType.INT32: "i",
    GGUFValueType.FLOAT32: "f",
    GGUFValueType.BOOL: "?",
    GGUFValueType.UINT64: "Q",
    GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT64: "d",
}

GGUF_MAGIC = b"GGUF"
GGUF_DEFAULT_ALIGNMENT = 32
