"""Model state: parameters and state dicts found by walking an object's attributes, the safetensors format, and the
files of tar and zip archives as uint8 tensors.

safetensors (the format Hugging Face uses): an 8-byte little-endian header length N, N bytes of JSON mapping each
tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data that follows; an optional
"__metadata__" of strings), then the raw little-endian data.
"""

from __future__ import annotations

import io
import json
import os
import struct
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from uopir import dtypes

from ..errors import SchedulerError
from ..tensor import Tensor

__all__ = [
    "SafetensorsError", "get_parameters", "get_state_dict", "load_state_dict", "safe_load", "safe_load_metadata", "safe_save",
    "tar_extract", "zip_extract",
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
    """Assign each tensor of `state_dict` to the same-named tensor of `obj` (shapes must match)."""
    own = get_state_dict(obj)
    missing = sorted(set(own) - set(state_dict))
    if strict and missing:
        raise SchedulerError(f"state dict is missing {', '.join(missing)}; pass strict=False to load the rest")
    for name, target in own.items():
        if name not in state_dict:
            continue
        value = state_dict[name]
        if value.shape != target.shape:
            raise SchedulerError(f"shape mismatch for {name}: the model has {target.shape}, the state dict {value.shape}")
        target.assign(value.to(target.device).cast(target.dtype)).realize()


def safe_save(tensors: dict[str, Tensor], path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write `tensors` as a safetensors file (atomically: a failed save leaves no partial file)."""
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    blobs, offset = [], 0
    for name, t in tensors.items():
        if t.dtype not in _NAMES:
            raise SafetensorsError(f"{name}: dtype {t.dtype} has no safetensors name")
        raw = _raw_bytes(t)
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # data starts 8-byte aligned
    path = Path(path)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        tmp.write(struct.pack("<Q", len(head)) + head)
        for raw in blobs:
            tmp.write(raw)
    os.replace(tmp.name, path)


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


def _parse_header(data: bytes, name: object) -> tuple[int, dict[str, Any]]:
    """(offset of the tensor data, the JSON header) of safetensors bytes."""
    if len(data) < 8:
        raise SafetensorsError(f"{name}: {len(data)} bytes is too short for a safetensors header")
    (n,) = struct.unpack_from("<Q", data)
    if 8 + n > len(data):
        raise SafetensorsError(f"{name}: the header claims {n} bytes but the file has {len(data) - 8} after the length")
    try:
        return 8 + n, json.loads(data[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{name}: the header is not valid JSON ({e})") from None


def safe_load_metadata(fn: Tensor | str | os.PathLike) -> tuple[Tensor, int, dict[str, Any]]:
    """(the whole file as a uint8 tensor, the byte offset where tensor data starts, the JSON header) of a safetensors file,
    as tinygrad returns them; the header maps names to dtype/shape/data_offsets and may hold "__metadata__"."""
    data = _file_bytes(fn)
    start, header = _parse_header(data, fn if not isinstance(fn, Tensor) else "tensor")
    return (fn if isinstance(fn, Tensor) else Tensor(np.frombuffer(data, np.uint8))), start, header


def safe_load(fn: Tensor | str | os.PathLike) -> dict[str, Tensor]:
    """The tensors of a safetensors file (a path, or a uint8 tensor of its bytes), by name."""
    data = _file_bytes(fn)
    path = fn if not isinstance(fn, Tensor) else "tensor"
    start, header = _parse_header(data, path)
    body = memoryview(data)[start:]
    out: dict[str, Tensor] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info.get("dtype") not in SAFETENSORS_DTYPES:
            raise SafetensorsError(f"{path}: tensor {name} has unknown dtype {info.get('dtype')!r}")
        dt, shape = SAFETENSORS_DTYPES[info["dtype"]], tuple(info["shape"])
        begin, end = info["data_offsets"]
        count = int(np.prod(shape, dtype=np.int64))
        if end > len(body) or end - begin != count * dt.itemsize:
            raise SafetensorsError(f"{path}: tensor {name} needs bytes [{begin}, {end}) of {len(body)}; the file is truncated or corrupt")
        raw = np.frombuffer(body[begin:end], dtype=_RAW[dt.itemsize]).reshape(shape)
        out[name] = Tensor(raw).bitcast(dt) if dt.fmt is None else Tensor(raw.view(dt.fmt))
    return out


def _uint8(data: bytes) -> Tensor:
    return Tensor(np.frombuffer(data, np.uint8))


def tar_extract(fn: Tensor | str | os.PathLike) -> dict[str, Tensor]:
    """The regular files of a tar archive (any compression tarfile reads), by member name, as uint8 tensors."""
    with tarfile.open(fileobj=io.BytesIO(_file_bytes(fn)), mode="r") as tar:
        return {m.name: _uint8(tar.extractfile(m).read()) for m in tar if m.isreg()}


def zip_extract(fn: Tensor | str | os.PathLike) -> dict[str, Tensor]:
    """The files of a zip archive, decompressed, by name, as uint8 tensors."""
    with zipfile.ZipFile(io.BytesIO(_file_bytes(fn))) as zf:
        return {info.filename: _uint8(zf.read(info)) for info in zf.infolist() if not info.is_dir()}
