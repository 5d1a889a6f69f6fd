"""Fuzzing `safe_load` with files mutated from real ones (written by `safe_save`): it raises only SafetensorsError, never
hangs, and accepts exactly the files the format allows, loading the bytes the header points at.

The oracle (`spec_entries`) is a second reading of the format written from its definition: 8-byte little-endian
header length, a JSON object of {dtype, shape, data_offsets} entries plus an optional "__metadata__" of strings, each
entry's bytes inside the data and as long as its shape says, no two entries sharing a byte. The soak run of the same
mutations (10,000 cases) is `benchmarks/reader_fuzz_soak.py --readers safetensors`.
"""

import json
import math
import signal
import struct
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor
from uop_scheduler.nn.state import SafetensorsError, safe_load, safe_save
from uopir import dtypes

CASE_SECONDS = 5.0
ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1,
            "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class CaseTimeout(Exception):
    """One fuzz case ran past CASE_SECONDS: a hang."""


@contextmanager
def time_limit(seconds: float = CASE_SECONDS):
    def expire(signum, frame):
        raise CaseTimeout(f"one case ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _unique(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def spec_entries(data: bytes) -> dict[str, tuple[str, tuple[int, ...], bytes]] | None:
    """name -> (dtype, shape, bytes) of a file the format allows, None for any other file."""
    if len(data) < 8:
        return None
    n = int.from_bytes(data[:8], "little")
    if n > 100_000_000 or 8 + n > len(data):
        return None
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"), object_pairs_hook=_unique)
    except (ValueError, RecursionError):
        return None
    if not isinstance(header, dict):
        return None
    body = data[8 + n:]
    meta = header.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        return None
    out, spans = {}, []
    for name, info in header.items():
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
            return None
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str) or dtype not in ITEMSIZE:
            return None
        if not isinstance(shape, list) or len(shape) > 32 or any(type(d) is not int or not 0 <= d <= 2**40 for d in shape):
            return None
        if not isinstance(offsets, list) or len(offsets) != 2 or any(type(o) is not int for o in offsets):
            return None
        begin, end = offsets
        if not 0 <= begin <= end <= len(body) or end - begin != math.prod(shape) * ITEMSIZE[dtype]:
            return None
        if end > begin:
            spans.append((begin, end))
        out[name] = (dtype, tuple(shape), body[begin:end])
    spans.sort()
    if any(b < prev_end for (_, prev_end), (b, _) in zip(spans, spans[1:])):
        return None
    return out


def loaded_bytes(t: Tensor, dtype: str) -> bytes:
    """The tensor's values as the file's bytes (bool as 0/1, the numpy-less floats through their bit patterns)."""
    if dtype in ("BF16", "F8_E4M3", "F8_E5M2"):
        t = t.bitcast(dtypes.uint16 if dtype == "BF16" else dtypes.uint8)
    return t.numpy().tobytes()


def check_one(data: bytes) -> str:
    """Load `data`; fail on anything but SafetensorsError, a hang, or a verdict that disagrees with the oracle."""
    expected = spec_entries(data)
    with time_limit():
        try:
            out = safe_load(Tensor(np.frombuffer(data, np.uint8)))
        except SafetensorsError:
            assert expected is None, f"rejected a valid file: {data[:200]!r}"
            return "rejected"
        assert expected is not None, f"accepted an invalid file: {data[:200]!r}"
        assert set(out) == set(expected)
        for name, (dtype, shape, raw) in expected.items():
            assert out[name].shape == shape
            want = (np.frombuffer(raw, np.uint8) != 0).tobytes() if dtype == "BOOL" else raw
            assert loaded_bytes(out[name], dtype) == want, name
    return "loaded"


def _seed_files(tmp_path_factory) -> list[bytes]:
    rng = np.random.default_rng(7)
    tmp = tmp_path_factory.mktemp("safetensors")
    groups = [
        {"w": Tensor(rng.standard_normal((3, 4)).astype(np.float32)), "b": Tensor(np.arange(4, dtype=np.int64))},
        {"h": Tensor(rng.standard_normal(5).astype(np.float16)), "bf": Tensor([1.0, -2.5, 0.5], dtype=dtypes.bfloat16),
         "flag": Tensor(np.array([True, False, True])), "s": Tensor(np.array([7], np.int32)).reshape(())},
        {"u8": Tensor(np.arange(6, dtype=np.uint8).reshape(2, 3)), "empty": Tensor.zeros(0, 2), "d": Tensor(np.array([1.5, 2.5]))},
    ]
    files = []
    for i, tensors in enumerate(groups):
        path = tmp / f"seed{i}.safetensors"
        safe_save(tensors, path, metadata={"format": "pt"} if i == 0 else None)
        files.append(path.read_bytes())
    return files


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> list[bytes]:
    return _seed_files(tmp_path_factory)


def test_seed_files_load(seeds):
    assert [check_one(s) for s in seeds] == ["loaded"] * len(seeds)


def split(data: bytes) -> tuple[dict, bytes]:
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + n]), data[8 + n:]


def join(header, body: bytes) -> bytes:
    head = json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + body


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.integers(-3, 40) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=8,
)
near_valid = st.lists(st.integers(-8, 48), min_size=0, max_size=3)  # shapes and offsets close to the real ones
field_values = st.one_of(json_values, near_valid, st.sampled_from(list(ITEMSIZE) + ["F128", ""]))


@st.composite
def header_mutation(draw, seeds):
    """A seed file whose header has a few fields replaced, removed or added, re-framed with the right length."""
    header, body = split(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        names = list(header)
        kind = draw(st.sampled_from(["set", "delete", "add", "replace_entry", "body"]))
        name = draw(st.sampled_from(names)) if names else "x"
        info = header.get(name)
        if kind == "set" and isinstance(info, dict):
            info[draw(st.sampled_from(["dtype", "shape", "data_offsets", "extra"]))] = draw(field_values)
        elif kind == "delete" and isinstance(info, dict) and info:
            del info[draw(st.sampled_from(sorted(info)))]
        elif kind == "add":
            header[draw(st.text(max_size=4))] = {"dtype": draw(field_values), "shape": draw(near_valid), "data_offsets": draw(near_valid)}
        elif kind == "replace_entry":
            header[name] = draw(json_values)
        else:
            body = body[: draw(st.integers(0, len(body)))] + draw(st.binary(max_size=16))
    return join(header, body)


@st.composite
def byte_mutation(draw, seeds):
    """A seed file with bytes overwritten, inserted or cut (the header length, JSON text and data alike)."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["set", "insert", "cut", "length"]))
        if kind == "set" and data:
            data[min(at, len(data) - 1)] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "cut":
            del data[at:at + draw(st.integers(1, 64))]
        elif len(data) >= 8:
            data[:8] = struct.pack("<Q", draw(st.sampled_from([0, 1, 2**63, 2**64 - 1]) | st.integers(0, len(data))))
    return bytes(data)


FUZZ = settings(max_examples=250, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(data=st.data())
def test_mutated_headers_raise_only_safetensors_error(seeds, data):
    check_one(data.draw(header_mutation(seeds)))


@FUZZ
@given(data=st.data())
def test_mutated_bytes_raise_only_safetensors_error(seeds, data):
    check_one(data.draw(byte_mutation(seeds)))
