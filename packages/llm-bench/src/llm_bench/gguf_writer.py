"""Writing GGUF files (version 2 or 3): metadata of every value type and tensors, plain or already quantized."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .errors import GGUFError
from .files import written_atomically
from .ggml_types import (
    BLOCK_LAYOUTS,
    GGUF_DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    SCALAR_FORMATS,
    GGMLType,
    GGUFValueType,
)

# the ggml type a plain numpy array is written as
_TYPE_OF_DTYPE: dict[np.dtype, GGMLType] = {
    np.dtype(np.float32): GGMLType.F32,
    np.dtype(np.float16): GGMLType.F16,
    np.dtype(np.float64): GGMLType.F64,
    np.dtype(np.int8): GGMLType.I8,
    np.dtype(np.int16): GGMLType.I16,
    np.dtype(np.int32): GGMLType.I32,
    np.dtype(np.int64): GGMLType.I64,
}


@dataclass(frozen=True)
class _PendingTensor:
    name: str
    shape: tuple[int, ...]
    ggml_type: GGMLType
    data: np.ndarray  # uint8 bytes, in file order


def _infer_scalar_type(value: Any) -> GGUFValueType:
    if isinstance(value, bool):
        return GGUFValueType.BOOL
    if isinstance(value, int):
        # ggml's converters store counts as UINT32; anything else that fits 64 bits keeps its sign
        if 0 <= value < 2**32:
            return GGUFValueType.UINT32
        return GGUFValueType.INT32 if -(2**31) <= value < 0 else GGUFValueType.INT64
    if isinstance(value, float):
        return GGUFValueType.FLOAT32
    if isinstance(value, str):
        return GGUFValueType.STRING
    if isinstance(value, list | tuple):
        return GGUFValueType.ARRAY
    raise GGUFError(f"cannot store a {type(value).__name__} as GGUF metadata; use bool, int, float, str or a list of those")


def _infer_element_type(values: list[Any]) -> GGUFValueType:
    if not values:
        return GGUFValueType.UINT32
    kinds = {_infer_scalar_type(v) for v in values}
    if kinds <= {GGUFValueType.UINT32, GGUFValueType.INT32, GGUFValueType.INT64}:
        # token types and similar small integer lists are INT32 in llama.cpp files
        return GGUFValueType.INT64 if GGUFValueType.INT64 in kinds or max(values) >= 2**31 else GGUFValueType.INT32
    if len(kinds) != 1:
        raise GGUFError(f"GGUF arrays hold one type, got a mix of {sorted(k.name for k in kinds)}; pass element_type explicitly")
    return kinds.pop()


class GGUFWriter:
    """Collects metadata and tensors, then writes one GGUF file atomically with `write(path)`."""

    def __init__(self, version: int = 3, alignment: int = GGUF_DEFAULT_ALIGNMENT):
        if version not in (2, 3):
            raise GGUFError(f"cannot write GGUF version {version}; choose 2 or 3")
        if alignment <= 0 or alignment & (alignment - 1):
            raise GGUFError(f"alignment {alignment} is not a power of two")
        self.version, self.alignment = version, alignment
        self._metadata: dict[str, tuple[GGUFValueType, GGUFValueType | None, Any]] = {}
        self._tensors: dict[str, _PendingTensor] = {}
        if alignment != GGUF_DEFAULT_ALIGNMENT:
            self.add_metadata("general.alignment", alignment, GGUFValueType.UINT32)

    def add_metadata(self, key: str, value: Any, value_type: GGUFValueType | None = None, element_type: GGUFValueType | None = None) -> None:
        """Add one key. Types are inferred (int -> UINT32/INT32/INT64, float -> FLOAT32, list -> ARRAY) unless given."""
        if key in self._metadata:
            raise GGUFError(f"metadata key {key!r} was already added")
        value_type = value_type if value_type is not None else _infer_scalar_type(value)
        if value_type is GGUFValueType.ARRAY:
            value = list(value)
            element_type = element_type if element_type is not None else _infer_element_type(value)
        self._metadata[key] = (value_type, element_type, value)

    def add_tensor(self, name: str, array: np.ndarray, ggml_type: GGMLType | None = None, shape: tuple[int, ...] | None = None) -> None:
        """Add a tensor.

        A plain array (float32, float16, float64, int8..int64) is written as its own type. For BF16 and quantized
        types pass the already-encoded bytes as a uint8 array together with `ggml_type` and the logical `shape`
        (numpy order: outermost first).
        """
        if name in self._tensors:
            raise GGUFError(f"tensor {name!r} was already added")
        array = np.asarray(array)
        if ggml_type is None:
            if array.dtype not in _TYPE_OF_DTYPE:
                raise GGUFError(f"tensor {name!r}: no GGUF type for dtype {array.dtype}; pass encoded bytes and ggml_type")
            ggml_type, shape = _TYPE_OF_DTYPE[array.dtype], array.shape
        elif shape is None:
            if ggml_type not in _TYPE_OF_DTYPE.values():
                raise GGUFError(f"tensor {name!r}: {GGMLType(ggml_type).name} bytes need the logical shape")
            shape = array.shape
        ggml_type = GGMLType(ggml_type)
        layout = BLOCK_LAYOUTS[ggml_type]
        shape = tuple(int(d) for d in shape)
        if not shape or len(shape) > 4:
            raise GGUFError(f"tensor {name!r}: GGUF tensors have 1 to 4 dimensions, got shape {shape}")
        if shape[-1] % layout.block_elems:
            raise GGUFError(f"tensor {name!r}: rows of {shape[-1]} elements do not fill whole {ggml_type.name} blocks of {layout.block_elems}")
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        expected = int(np.prod(shape, dtype=np.int64)) // layout.block_elems * layout.block_bytes
        if data.size != expected:
            raise GGUFError(f"tensor {name!r}: {ggml_type.name} of shape {shape} is {expected} bytes, got {data.size}")
        self._tensors[name] = _PendingTensor(name, shape, ggml_type, data)

    def write(self, path: str | Path) -> Path:
        """Write the file; it appears at `path` only once complete (written to a temporary file, then renamed)."""
        path = Path(path)
        try:
            with written_atomically(path) as out:
                self._write_to(out)
        except OSError as e:
            raise GGUFError(f"cannot write {path}: {e.strerror}") from None
        return path

    def _write_to(self, out: BinaryIO) -> None:
        head = bytearray(GGUF_MAGIC)
        head += struct.pack("<IQQ", self.version, len(self._tensors), len(self._metadata))
        for key, (vtype, elem_type, value) in self._metadata.items():
            head += _pack_string(key) + struct.pack("<I", vtype)
            head += _pack_value(key, vtype, elem_type, value)
        offset = 0
        placements = []
        for tensor in self._tensors.values():
            head += _pack_string(tensor.name) + struct.pack("<I", len(tensor.shape))
            head += struct.pack(f"<{len(tensor.shape)}Q", *reversed(tensor.shape))
            head += struct.pack("<IQ", tensor.ggml_type, offset)
            placements.append(offset)
            offset = _align(offset + tensor.data.size, self.alignment)
        head += bytes(_align(len(head), self.alignment) - len(head))
        out.write(head)
        written = 0
        for tensor, place in zip(self._tensors.values(), placements):
            out.write(bytes(place - written))
            out.write(tensor.data.tobytes())
            written = place + tensor.data.size


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def _pack_string(text: str) -> bytes:
    encoded = text.encode("utf-8")
    return struct.pack("<Q", len(encoded)) + encoded


def _pack_value(key: str, vtype: GGUFValueType, elem_type: GGUFValueType | None, value: Any) -> bytes:
    try:
        if vtype is GGUFValueType.STRING:
            return _pack_string(value)
        if vtype is GGUFValueType.ARRAY:
            assert elem_type is not None
            body = struct.pack("<IQ", elem_type, len(value))
            if elem_type in SCALAR_FORMATS:
                return body + struct.pack(f"<{len(value)}{SCALAR_FORMATS[elem_type]}", *value)
            if elem_type is GGUFValueType.ARRAY:
                # an array of arrays: each element carries its own element type and length, like a top-level array
                return body + b"".join(_pack_value(key, elem_type, _infer_element_type(list(v)), list(v)) for v in value)
            return body + b"".join(_pack_value(key, elem_type, None, v) for v in value)
        return struct.pack("<" + SCALAR_FORMATS[vtype], value)
    except (struct.error, TypeError, AttributeError) as e:
        raise GGUFError(f"metadata {key!r}: value does not fit GGUF type {vtype.name}: {e}") from None
