"""Reading GGUF files (versions 2 and 3, single or split into parts): metadata, and tensors as views of the mapped file."""

from __future__ import annotations

import array
import contextlib
import mmap
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .dequant import dequantize
from .errors import GGUFError
from .ggml_types import (
    BLOCK_LAYOUTS,
    GGUF_DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    SCALAR_FORMATS,
    GGMLType,
    GGUFValueType,
    type_name,
)
from .string_array import StringArray

SUPPORTED_VERSIONS = (2, 3)
# ggml tensors have at most 4 dimensions (GGML_MAX_DIMS)
MAX_DIMS = 4
SPLIT_NAME = re.compile(r"^(?P<prefix>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$")

# numpy dtypes of the element types whose bytes are directly usable as an array
_PLAIN_DTYPES: dict[GGMLType, str] = {
    GGMLType.F32: "<f4",
    GGMLType.F16: "<f2",
    GGMLType.F64: "<f8",
    GGMLType.I8: "i1",
    GGMLType.I16: "<i2",
    GGMLType.I32: "<i4",
    GGMLType.I64: "<i8",
}


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a GGUF file.

    `shape` is in numpy order (outermost dimension first, the reverse of ggml's `ne`), so a linear layer's weight is
    `(out_features, in_features)`. `data` is a uint8 view of the tensor's bytes inside the memory-mapped file.
    """

    name: str
    shape: tuple[int, ...]
    ggml_type: GGMLType
    data: np.ndarray = field(repr=False, compare=False)
    #: (st_dev, st_ino) of the file `data` maps, when it maps one: `rows` reads that file only while it is still the
    #: same file (not replaced since it was mapped)
    file_id: tuple[int, int] | None = field(default=None, repr=False, compare=False)

    @property
    def n_elements(self) -> int:
        """The number of logical elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """The number of bytes the tensor occupies in the file."""
        return int(self.data.size)

    def array(self) -> np.ndarray:
        """The stored values without copying: a typed view for plain types, else the raw blocks as uint8 rows."""
        if (dtype := _PLAIN_DTYPES.get(self.ggml_type)) is not None:
            return self.data.view(dtype).reshape(self.shape)
        layout = BLOCK_LAYOUTS[self.ggml_type]
        row_bytes = self.shape[-1] // layout.block_elems * layout.block_bytes
        return self.data.reshape(*self.shape[:-1], row_bytes)

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """Copies of the rows `ids` of `array()` (e.g. embedding rows: a decode step's one token). Read from the file
        with `os.pread` when the tensor is mapped from one, so nothing of it becomes resident in this process (reading
        through the map faulted in whole page-cache folios, up to 2 MiB, which were then let go again each time: 170 us
        of a 3.5 ms SmolLM2 decode step; a pread of one row takes a few microseconds); else indexed from `data`, and the
        file pages those rows lie in are let go again (`release_pages_of`)."""
        table = self.array()
        path = getattr(self.data, "filename", None)
        m = getattr(self.data, "_mmap", None)
        fd = -1
        if path is not None and m is not None and self.file_id is not None and table.ndim == 2 and table.flags.c_contiguous:
            with contextlib.suppress(OSError):
                fd = os.open(path, os.O_RDONLY)
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) != self.file_id:  # replaced since it was mapped: read the map
                    os.close(fd)
                    fd = -1
        if fd < 0:
            rows = np.array(table[ids])
            if len(ids):
                release_pages_of(table[ids.min() : ids.max() + 1], touched=True)  # one call for the span the rows lie in
            return rows
        row_bytes = table.shape[1] * table.itemsize
        out = np.empty((len(ids), table.shape[1]), dtype=table.dtype)
        flat = out.reshape(-1).view(np.uint8)
        start = table.ctypes.data - np.frombuffer(m, dtype=np.uint8).ctypes.data
        try:
            for i, row in enumerate(ids.tolist()):
                if not 0 <= row < table.shape[0]:
                    raise GGUFError(f"{self.name}: row {row} is outside 0..{table.shape[0] - 1}")
                got = os.preadv(fd, [flat[i * row_bytes : (i + 1) * row_bytes]], start + row * row_bytes)
                if got != row_bytes:
                    raise GGUFError(f"{path}: truncated: row {row} of {self.name} needs {row_bytes} bytes, read {got}")
        finally:
            os.close(fd)
        return out

    def dequantize(self) -> np.ndarray:
        """The values as a new float32 array of `shape`."""
        return dequantize(self.data, self.ggml_type, self.shape)


@dataclass
class GGUFFile:
    """A parsed GGUF model: metadata, the value type of each metadata key, and tensors by name.

    For a split model, `paths` lists every part and the metadata is the first part's.
    """

    paths: list[Path]
    version: int
    alignment: int
    metadata: dict[str, Any]
    value_types: dict[str, tuple[GGUFValueType, GGUFValueType | None]]
    tensors: dict[str, GGUFTensor]

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def tensor(self, name: str) -> GGUFTensor:
        """The tensor called `name`, or a `GGUFError` naming the file."""
        try:
            return self.tensors[name]
        except KeyError:
            raise GGUFError(f"{self.paths[0]}: no tensor named {name!r}; the model file is incomplete or of another architecture") from None

    def release_pages(self) -> None:
        """Let the OS drop this process's resident pages of the mapped file (after the weights were copied to a
        device): they stay valid and are read back from the page cache when touched again, but no longer count in the
        process's memory twice, once mapped and once copied."""
        maps = {id(m): m for t in self.tensors.values() if (m := getattr(t.data, "_mmap", None)) is not None}
        for m in maps.values():
            with contextlib.suppress(AttributeError, OSError, ValueError):  # no madvise here, or a closed map
                m.madvise(mmap.MADV_DONTNEED)

    @property
    def data_bytes(self) -> int:
        """Total bytes of all tensor data."""
        return sum(t.nbytes for t in self.tensors.values())


_FAULT_AROUND = max(1 << 16, mmap.PAGESIZE)  # Linux's default fault_around_bytes
_FOLIO_MAX = 1 << 21  # the largest page-cache folio Linux maps at once on x86-64 (a PMD)


def release_pages_of(array: np.ndarray, touched: bool = False) -> None:
    """Let the OS drop this process's resident pages of the mapped file under `array` (a view of tensor data, once
    copied to a device), as `GGUFFile.release_pages` does for the whole file: copying a large tensor then holds its
    file pages only a piece at a time. Pages shared with neighbouring data at either end are kept, unless `touched`:
    then every page the array touches goes, with what Linux maps in along with a faulting page (the map is read-only,
    so a dropped page is only read back from the page cache when used again). Anything not a view of a mapped file is
    left alone."""
    m = getattr(array, "_mmap", None)
    if m is None or not array.nbytes:
        return
    with contextlib.suppress(AttributeError, OSError, ValueError, TypeError):  # no madvise here, or a closed map
        base = np.frombuffer(m, dtype=np.uint8).ctypes.data
        lo = array.ctypes.data - base
        hi = lo + array.nbytes if array.flags.c_contiguous else lo + sum((n - 1) * st for n, st in zip(array.shape, array.strides)) + array.itemsize
        if touched:
            # a fault maps more than the page it needs: the page cache's whole folio (naturally aligned in the file, up
            # to 2 MiB) and up to 64 KiB around the address: the aligned file blocks and 64 KiB either side cover both
            lo = max(lo // _FOLIO_MAX * _FOLIO_MAX - _FAULT_AROUND, 0)
            hi = min(-(-hi // _FOLIO_MAX) * _FOLIO_MAX + _FAULT_AROUND, len(m))
        else:
            lo, hi = -(-lo // mmap.PAGESIZE) * mmap.PAGESIZE, hi // mmap.PAGESIZE * mmap.PAGESIZE
        if 0 <= lo < hi <= len(m):
            m.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


MAX_ARRAY_DEPTH = 32
_U64 = struct.Struct("<Q")
MAX_DIM = 1 << 40  # elements along one tensor axis


class _Cursor:
    """Sequential little-endian reads from a buffer, raising `GGUFError` on truncation."""

    def __init__(self, buf: memoryview, path: Path):
        self.buf, self.path, self.pos = buf, path, 0

    def take(self, n: int, what: str) -> int:
        start = self.pos
        if n < 0 or start + n > len(self.buf):
            raise GGUFError(f"{self.path}: truncated: {what} needs {n} bytes at offset {start} but the file has {len(self.buf)} bytes")
        self.pos += n
        return start

    def scalar(self, fmt: str, what: str) -> Any:
        size = struct.calcsize("<" + fmt)
        return struct.unpack_from("<" + fmt, self.buf, self.take(size, what))[0]

    def string(self, what: str) -> str:
        length = self.scalar("Q", f"length of {what}")
        start = self.take(length, what)
        try:
            return bytes(self.buf[start : start + length]).decode("utf-8")
        except UnicodeDecodeError:
            raise GGUFError(f"{self.path}: corrupt: {what} at offset {start} is not valid UTF-8") from None

    def strings(self, count: int, what: str) -> StringArray:
        """`count` strings, packed into one `StringArray` (a vocabulary as Python strings would take megabytes)."""
        buf, size, read_length = self.buf, len(self.buf), _U64.unpack_from
        starts, lengths = array.array("q"), array.array("q")  # not lists: 100k int objects would fragment the heap
        pos = self.pos
        for i in range(count):
            if pos + 8 > size:
                raise GGUFError(f"{self.path}: truncated: length of {what}[{i}] needs 8 bytes at offset {pos} but the file has {size} bytes")
            (length,) = read_length(buf, pos)
            pos += 8
            if pos + length > size:
                raise GGUFError(f"{self.path}: truncated: {what}[{i}] needs {length} bytes at offset {pos} but the file has {size} bytes")
            starts.append(pos)
            lengths.append(length)
            pos += length
        self.pos = pos
        packed = StringArray.from_spans(buf, np.frombuffer(starts, np.int64), np.frombuffer(lengths, np.int64))
        if (bad := packed.invalid_utf8()) is not None:
            raise GGUFError(f"{self.path}: corrupt: {what}[{bad}] at offset {starts[bad]} is not valid UTF-8")
        return packed

    def value_type(self, what: str) -> GGUFValueType:
        raw = self.scalar("I", f"type of {what}")
        try:
            return GGUFValueType(raw)
        except ValueError:
            raise GGUFError(f"{self.path}: corrupt: {what} has unknown value type {raw} at offset {self.pos - 4}") from None

    def value(self, vtype: GGUFValueType, what: str, depth: int = 0) -> tuple[Any, GGUFValueType | None]:
        """Read one metadata value; returns it and, for arrays, the element type. Arrays nest at most
        MAX_ARRAY_DEPTH deep (no real file nests more than twice)."""
        if vtype is GGUFValueType.STRING:
            return self.string(what), None
        if vtype is GGUFValueType.ARRAY:
            if depth >= MAX_ARRAY_DEPTH:
                raise GGUFError(f"{self.path}: corrupt: {what} at offset {self.pos} nests arrays more than {MAX_ARRAY_DEPTH} deep")
            elem_type = self.value_type(f"elements of {what}")
            count = self.scalar("Q", f"length of {what}")
            if elem_type is GGUFValueType.ARRAY:
                # each inner array is at least its 4-byte type and 8-byte length
                if count * 12 > len(self.buf) - self.pos:
                    raise GGUFError(f"{self.path}: truncated: {what} claims {count} arrays but only {len(self.buf) - self.pos} bytes remain")
                return [self.value(GGUFValueType.ARRAY, f"{what}[{i}]", depth + 1)[0] for i in range(count)], elem_type
            if elem_type is GGUFValueType.STRING:
                # each string is at least its 8-byte length: check before looping over a corrupt count
                if count * 8 > len(self.buf) - self.pos:
                    raise GGUFError(f"{self.path}: truncated: {what} claims {count} strings but only {len(self.buf) - self.pos} bytes remain")
                return self.strings(count, what), elem_type
            dtype = np.dtype("<" + SCALAR_FORMATS[elem_type])
            start = self.take(count * dtype.itemsize, what)
            values = np.frombuffer(self.buf, dtype=dtype, count=count, offset=start)
            return (values.astype(bool) if elem_type is GGUFValueType.BOOL else values).tolist(), elem_type
        value = self.scalar(SCALAR_FORMATS[vtype], what)
        return value, None


def split_part_paths(path: Path) -> list[Path]:
    """All parts of a model given any one of them (`name-00001-of-00003.gguf`), or just `path` for a single file."""
    match = SPLIT_NAME.match(path.name)
    if match is None:
        return [path]
    count = int(match["count"])
    if count < 1 or not 1 <= int(match["index"]) <= count:
        raise GGUFError(f"{path}: split file name says part {int(match['index'])} of {count}; rename it or pass the first part")
    parts = [path.with_name(f"{match['prefix']}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise GGUFError(f"split model is missing part(s) {', '.join(missing)}; download every part into the same folder")
    return parts


def _read_part(path: Path) -> GGUFFile:
    try:
        st = path.stat()
        size = st.st_size
    except OSError as e:
        raise GGUFError(f"{path}: cannot open: {e.strerror}") from None
    if size < 4:
        raise GGUFError(f"{path}: truncated: {size} bytes is too short for a GGUF header")
    mapped = np.memmap(path, dtype=np.uint8, mode="r")
    file_id = (st.st_dev, st.st_ino)  # (the file stat'ed above: rows() reads it only while it is still this one)
    cur = _Cursor(memoryview(mapped), path)
    magic = bytes(mapped[:4])
    if magic != GGUF_MAGIC:
        raise GGUFError(f"{path}: not a GGUF file (starts with {magic!r}, expected {GGUF_MAGIC!r})")
    cur.pos = 4
    version = cur.scalar("I", "version")
    if version not in SUPPORTED_VERSIONS:
        if int.from_bytes(version.to_bytes(4, "little"), "big") in SUPPORTED_VERSIONS:
            raise GGUFError(f"{path}: big-endian GGUF is not supported; convert the model on a little-endian machine")
        raise GGUFError(f"{path}: GGUF version {version} is not supported (only {SUPPORTED_VERSIONS}); re-convert it with a current llama.cpp")
    n_tensors = cur.scalar("Q", "tensor count")
    n_kv = cur.scalar("Q", "metadata count")
    metadata: dict[str, Any] = {}
    value_types: dict[str, tuple[GGUFValueType, GGUFValueType | None]] = {}
    for i in range(n_kv):
        key = cur.string(f"metadata key #{i}")
        if key in metadata:
            raise GGUFError(f"{path}: corrupt: metadata key {key!r} appears twice")
        vtype = cur.value_type(f"metadata {key!r}")
        metadata[key], elem_type = cur.value(vtype, f"metadata {key!r}")
        value_types[key] = (vtype, elem_type)
    alignment = metadata.get("general.alignment", GGUF_DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (alignment - 1):
        raise GGUFError(f"{path}: corrupt: general.alignment is {alignment!r}, must be a power of two")
    infos = []
    for i in range(n_tensors):
        name = cur.string(f"name of tensor #{i}")
        n_dims = cur.scalar("I", f"dimension count of tensor {name!r}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise GGUFError(f"{path}: corrupt: tensor {name!r} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)")
        ne = [cur.scalar("Q", f"dimensions of tensor {name!r}") for _ in range(n_dims)]
        if any(d > MAX_DIM for d in ne):  # an empty tensor may still claim a dimension no array can have
            raise GGUFError(f"{path}: corrupt: tensor {name!r} has dimensions {ne} (each at most {MAX_DIM})")
        raw_type = cur.scalar("I", f"type of tensor {name!r}")
        offset = cur.scalar("Q", f"offset of tensor {name!r}")
        infos.append((name, ne, raw_type, offset))
    data_start = -(-cur.pos // alignment) * alignment
    # the header is parsed (its strings packed into arrays of their own): its pages, megabytes for a vocabulary, go
    release_pages_of(mapped[: cur.pos], touched=True)
    tensors: dict[str, GGUFTensor] = {}
    for name, ne, raw_type, offset in infos:
        if name in tensors:
            raise GGUFError(f"{path}: corrupt: tensor {name!r} appears twice")
        try:
            ggml_type = GGMLType(raw_type)
        except ValueError:
            raise GGUFError(f"{path}: tensor {name!r} has {type_name(raw_type)}, which no ggml version defines; the file is corrupt") from None
        if ggml_type not in BLOCK_LAYOUTS:
            raise GGUFError(f"{path}: tensor {name!r} uses {ggml_type.name}, which llm-bench does not support; "
                            f"use a model quantized as F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K")
        layout = BLOCK_LAYOUTS[ggml_type]
        if ne[0] % layout.block_elems:
            raise GGUFError(f"{path}: corrupt: tensor {name!r} rows of {ne[0]} elements do not fill whole {ggml_type.name} blocks")
        if offset % alignment:
            raise GGUFError(f"{path}: corrupt: tensor {name!r} data offset {offset} is not a multiple of the alignment {alignment}")
        n_elements = int(np.prod(ne, dtype=object))
        nbytes = n_elements // layout.block_elems * layout.block_bytes
        start = data_start + offset
        if start + nbytes > size:
            raise GGUFError(f"{path}: truncated: tensor {name!r} needs bytes {start} to {start + nbytes} but the file has {size} bytes")
        tensors[name] = GGUFTensor(name, tuple(reversed(ne)), ggml_type, mapped[start : start + nbytes], file_id)
    return GGUFFile([path], version, alignment, metadata, value_types, tensors)


def read_gguf(path: str | Path) -> GGUFFile:
    """Parse a GGUF file (or every part of a split model, given any part) without reading tensor data into memory."""
    parts = split_part_paths(Path(path))
    files = [_read_part(p) for p in parts]
    first = files[0]
    if len(files) > 1:
        declared = first.metadata.get("split.count")
        if declared is not None and declared != len(files):
            raise GGUFError(f"{parts[0]}: metadata split.count is {declared} but the file names give {len(files)} parts")
        for part in files[1:]:
            for name, tensor in part.tensors.items():
                if name in first.tensors:
                    raise GGUFError(f"{part.paths[0]}: corrupt split model: tensor {name!r} also appears in an earlier part")
                first.tensors[name] = tensor
        first.paths = parts
    return first
