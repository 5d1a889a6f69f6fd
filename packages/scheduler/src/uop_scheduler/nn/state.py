"""Model state: parameters and state dicts found by walking an object's attributes, the safetensors format, and the
files of tar and zip archives as uint8 tensors.

safetensors (the format Hugging Face uses): an 8-byte little-endian header length N, N bytes of JSON mapping each
tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data that follows; an optional
"__metadata__" of strings), then the raw little-endian data.
"""

from __future__ import annotations

import io
import json
import math
import os
import stat
import struct
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from uopir import dtypes

from ..errors import SchedulerError, ShapeError, TensorTypeError
from ..tensor import Tensor

__all__ = [
    "SafetensorsError", "get_parameters", "get_state_dict", "load_state_dict", "safe_load", "safe_load_metadata", "safe_save",
    "TensorIO", "tar_extract", "zip_extract",
]

SAFETENSORS_DTYPES = {
    "F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16, "BF16": dtypes.bfloat16, "I64": dtypes.int64,
    "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8, "U64": dtypes.uint64, "U32": dtypes.uint32,
    "U16": dtypes.uint16, "U8": dtypes.uint8, "BOOL": dtypes.bool, "F8_E4M3": dtypes.fp8e4m3, "F8_E5M2": dtypes.fp8e5m2,
}
_NAMES = {dt: name for name, dt in SAFETENSORS_DTYPES.items()}
_RAW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class SafetensorsError(SchedulerError, ValueError):
    """A safetensors file is truncated, corrupt or holds a dtype we do not know."""


def get_state_dict(obj: Any, prefix: str = "") -> dict[str, Tensor]:
    """Every Tensor reachable through attributes, lists, tuples and dicts, by dotted name (`layers.0.weight`)."""
    if isinstance(obj, Tensor):
        return {prefix.rstrip("."): obj}
    if isinstance(obj, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(obj))
    elif isinstance(obj, dict):
        items = ((str(k), v) for k, v in obj.items())
    elif hasattr(obj, "__dict__"):
        items = vars(obj).items()
    else:
        return {}
    state: dict[str, Tensor] = {}
    for name, value in items:
        state.update(get_state_dict(value, f"{prefix}{name}."))
    return state


def get_parameters(obj: Any) -> list[Tensor]:
    """The tensors of `get_state_dict(obj)`, each once."""
    seen: dict[int, Tensor] = {}
    for t in get_state_dict(obj).values():
        seen.setdefault(id(t), t)
    return list(seen.values())


def load_state_dict(obj: Any, state_dict: dict[str, Tensor], strict: bool = True) -> None:
    """Assign each tensor of `state_dict` to the same-named tensor of `obj`. Shapes must match (a ShapeError, a
    ValueError, names the tensor), except that a scalar and a 1-element vector stand for each other."""
    own = get_state_dict(obj)
    missing = sorted(set(own) - set(state_dict))
    if strict and missing:
        raise SchedulerError(f"state dict is missing {', '.join(missing)}; pass strict=False to load the rest")
    for name, target in own.items():
        if name not in state_dict:
            continue
        value = state_dict[name]
        if value.shape != target.shape:
            if {value.shape, target.shape} != {(), (1,)}:  # a scalar and a 1-element vector (num_batches_tracked) are one value
                raise ShapeError(f"Shape mismatch in layer `{name}`: Expected shape {target.shape}, but found {value.shape} in state dict.")
            value = value.reshape(target.shape)
        target.assign(value.to(target.device).cast(target.dtype)).realize()


def safe_save(tensors: dict[str, Tensor], path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write `tensors` as a safetensors file (atomically: a failed save leaves no partial file; the file gets the mode
    the umask gives a new file, or keeps the mode of the file it replaces)."""
    if metadata is not None and (not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise SafetensorsError("safetensors metadata must map strings to strings; convert the values with str() first")
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    blobs, offset = [], 0
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise SafetensorsError(f"{name!r} cannot name a safetensors tensor; use a string other than '__metadata__'")
        if t.dtype not in _NAMES:
            raise SafetensorsError(f"{name}: dtype {t.dtype} has no safetensors name")
        raw = _raw_bytes(t)
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # data starts 8-byte aligned
    _write_atomic(Path(path), [struct.pack("<Q", len(head)) + head, *blobs])


def _new_file_mode(path: Path) -> int:
    """The permission bits `path` should get: its current ones, else what the umask leaves of 0o666."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _write_atomic(path: Path, chunks: list[bytes]) -> None:
    """Write `chunks` to a temporary file beside `path`, then rename it over `path` (removed again on any failure)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
        os.chmod(tmp, _new_file_mode(path))  # mkstemp makes the file 0600
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _raw_bytes(t: Tensor) -> bytes:
    """The little-endian bytes of the values (bfloat16 and fp8, which numpy lacks, through their bit patterns)."""
    if t.dtype.fmt is None:
        t = t.bitcast({1: dtypes.uint8, 2: dtypes.uint16}[t.dtype.itemsize])
    return t.numpy().tobytes()


def _file_bytes(fn: Tensor | str | os.PathLike) -> bytes:
    """The bytes of a file, or of a uint8 tensor holding one (tinygrad's loaders accept either)."""
    if isinstance(fn, Tensor):
        if fn.dtype != dtypes.uint8:
            raise SchedulerError(f"a file tensor must be uint8, not {fn.dtype}")
        return fn.numpy().tobytes()
    return Path(fn).read_bytes()


# Limits that no real checkpoint reaches, so a corrupt header fails fast instead of exhausting memory.
MAX_HEADER_BYTES = 100_000_000  # the reference implementation's limit
MAX_DIMS = 32
MAX_DIM = 2**40


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise SafetensorsError(f"the header names {key!r} twice")
        out[key] = value
    return out


def _parse_header(data: bytes, name: object) -> tuple[int, dict[str, Any]]:
    """(offset of the tensor data, the JSON header) of safetensors bytes; the header is a JSON object."""
    if len(data) < 8:
        raise SafetensorsError(f"{name}: {len(data)} bytes is too short for a safetensors header")
    (n,) = struct.unpack_from("<Q", data)
    if n > MAX_HEADER_BYTES:
        raise SafetensorsError(f"{name}: the header length at byte 0 is {n}, over the {MAX_HEADER_BYTES}-byte limit; the file is corrupt")
    if 8 + n > len(data):
        raise SafetensorsError(f"{name}: the header claims {n} bytes but the file has {len(data) - 8} after the length")
    try:
        header = json.loads(bytes(data[8:8 + n]).decode("utf-8"), object_pairs_hook=_unique_keys)
    except SafetensorsError as e:
        raise SafetensorsError(f"{name}: {e}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError; deep nesting recurses
        raise SafetensorsError(f"{name}: the header (bytes 8..{8 + n}) is not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{name}: the header must be a JSON object mapping tensor names to their entries, not {type(header).__name__}")
    return 8 + n, header


def _check_entry(path: object, name: str, info: Any, body_size: int) -> tuple[Any, tuple[int, ...], int, int]:
    """(dtype, shape, begin, end) of one header entry, every field checked against the format and the file."""
    where = f"{path}: tensor {name!r}"
    if not isinstance(info, dict):
        raise SafetensorsError(f"{where}: its entry must be a JSON object with dtype, shape and data_offsets, not {type(info).__name__}")
    for key in ("dtype", "shape", "data_offsets"):
        if key not in info:
            raise SafetensorsError(f"{where}: its entry has no {key!r}")
    dtype_name = info["dtype"]
    if not isinstance(dtype_name, str) or dtype_name not in SAFETENSORS_DTYPES:
        raise SafetensorsError(f"{where} has unknown dtype {dtype_name!r}; known: {', '.join(SAFETENSORS_DTYPES)}")
    shape = info["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(type(d) is int and 0 <= d <= MAX_DIM for d in shape):
        raise SafetensorsError(f"{where}: shape {_short(shape)} must be a list of at most {MAX_DIMS} integers in 0..{MAX_DIM}")
    offsets = info["data_offsets"]
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets):
        raise SafetensorsError(f"{where}: data_offsets {_short(offsets)} must be a list of two integers [begin, end]")
    begin, end = offsets
    if not 0 <= begin <= end <= body_size:
        raise SafetensorsError(f"{where}: data_offsets [{begin}, {end}] lie outside the {body_size} data bytes; the file is truncated or corrupt")
    dt = SAFETENSORS_DTYPES[dtype_name]
    count = math.prod(shape)
    if end - begin != count * dt.itemsize:
        raise SafetensorsError(f"{where}: shape {shape} of {dtype_name} needs {count * dt.itemsize} bytes but data_offsets [{begin}, {end}] "
                               f"hold {end - begin}; the file is truncated or corrupt")
    return dt, tuple(shape), begin, end


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_header(path: object, header: dict[str, Any], body_size: int) -> dict[str, tuple[Any, tuple[int, ...], int, int]]:
    """Every tensor entry checked, and no two tensors sharing a byte."""
    metadata = header.get("__metadata__")
    if metadata is not None and (not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())):
        raise SafetensorsError(f"{path}: __metadata__ must be a JSON object of strings, not {_short(metadata)}")
    entries = {name: _check_entry(path, name, info, body_size) for name, info in header.items() if name != "__metadata__"}
    spans = sorted((begin, end, name) for name, (_, _, begin, end) in entries.items() if end > begin)
    for (_, prev_end, prev), (begin, _, name) in zip(spans, spans[1:]):
        if begin < prev_end:
            raise SafetensorsError(f"{path}: tensors {prev!r} and {name!r} overlap (bytes {begin}..{prev_end} of the data); the file is corrupt")
    return entries


def safe_load_metadata(fn: Tensor | str | os.PathLike) -> tuple[Tensor, int, dict[str, Any]]:
    """(the whole file as a uint8 tensor, the byte offset where tensor data starts, the JSON header) of a safetensors file,
    as tinygrad returns them; the header maps names to dtype/shape/data_offsets and may hold "__metadata__". The header is
    checked as `safe_load` checks it."""
    data = _file_bytes(fn)
    path = fn if not isinstance(fn, Tensor) else "tensor"
    start, header = _parse_header(data, path)
    _check_header(path, header, len(data) - start)
    return (fn if isinstance(fn, Tensor) else Tensor(np.frombuffer(data, np.uint8))), start, header


def safe_load(fn: Tensor | str | os.PathLike) -> dict[str, Tensor]:
    """The tensors of a safetensors file (a path, or a uint8 tensor of its bytes), by name.

    Every entry is checked before any data is read: a known dtype, a shape of non-negative integers, data_offsets
    inside the file whose length matches the shape, and no two tensors sharing bytes. Anything else raises
    SafetensorsError naming the tensor and the field."""
    data = _file_bytes(fn)
    path = fn if not isinstance(fn, Tensor) else "tensor"
    start, header = _parse_header(data, path)
    entries = _check_header(path, header, len(data) - start)
    body = memoryview(data)[start:]
    out: dict[str, Tensor] = {}
    for name, (dt, shape, begin, end) in entries.items():
        raw = np.frombuffer(body[begin:end], dtype=_RAW[dt.itemsize])
        if dt == dtypes.bool:
            t = Tensor(raw != 0)  # a byte other than 0 or 1 is still a bool: numpy's view would keep the odd byte
        else:
            t = Tensor(raw).bitcast(dt) if dt.fmt is None else Tensor(raw.view(dt.fmt))
        out[name] = t.reshape(shape)  # from the flat data, so a 0-d entry keeps shape ()
    return out


def _uint8(data: bytes) -> Tensor:
    return Tensor(np.frombuffer(data, np.uint8))


def tar_extract(fn: Tensor | str | os.PathLike) -> dict[str, Tensor]:
    """The regular files of a tar archive (any compression tarfile reads), by member name, as uint8 tensors."""
    import tarfile  # the archive modules are imported by the readers that need them, not by every Tensor program

    with tarfile.open(fileobj=io.BytesIO(_file_bytes(fn)), mode="r") as tar:
        return {m.name: _uint8(tar.extractfile(m).read()) for m in tar if m.isreg()}


def zip_extract(fn: Tensor | str | os.PathLike) -> dict[str, Tensor]:
    """The files of a zip archive, decompressed, by name, as uint8 tensors."""
    import zipfile

    with zipfile.ZipFile(io.BytesIO(_file_bytes(fn))) as zf:
        return {info.filename: _uint8(zf.read(info)) for info in zf.infolist() if not info.is_dir()}


class TensorIO(io.RawIOBase):
    """A read-only, seekable binary file over the bytes of a 1-D uint8 tensor (`Tensor(path)`, `Tensor(data)`), for
    readers that take file objects (tarfile, zipfile, pickle): each read computes only the slice it returns, so a
    file's tensor is read piece by piece."""

    def __init__(self, t: Tensor):
        if not isinstance(t, Tensor) or t.dtype is not dtypes.uint8 or t.ndim != 1:
            raise TensorTypeError(f"TensorIO reads a 1-D uint8 tensor, got {t!r}")
        super().__init__()
        self._tensor, self._pos = t, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._tensor.shape[0]}.get(whence)
        if base is None:
            raise ValueError(f"invalid whence {whence}: use io.SEEK_SET, SEEK_CUR or SEEK_END")
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = max(0, min(len(view), self._tensor.shape[0] - self._pos))
        if n:
            view[:n] = self._tensor[self._pos:self._pos + n].numpy().tobytes()
            self._pos += n
        return n
