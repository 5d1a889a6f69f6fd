"""GGUF reading and writing: round trips of every value type, versions, alignment, zero-copy views, split files, bad files."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_bench import GGMLType, GGUFError, GGUFValueType, GGUFWriter, read_gguf
from llm_bench.gguf_reader import release_pages_of

EVERY_VALUE_TYPE = {
    "t.u8": (200, GGUFValueType.UINT8),
    "t.i8": (-100, GGUFValueType.INT8),
    "t.u16": (60000, GGUFValueType.UINT16),
    "t.i16": (-30000, GGUFValueType.INT16),
    "t.u32": (4_000_000_000, GGUFValueType.UINT32),
    "t.i32": (-2_000_000_000, GGUFValueType.INT32),
    "t.f32": (1.5, GGUFValueType.FLOAT32),
    "t.bool": (True, GGUFValueType.BOOL),
    "t.str": ("héllo ✓", GGUFValueType.STRING),
    "t.u64": (2**63 + 5, GGUFValueType.UINT64),
    "t.i64": (-(2**62), GGUFValueType.INT64),
    "t.f64": (1e300, GGUFValueType.FLOAT64),
}


def build(path, version=3, alignment=32):
    writer = GGUFWriter(version=version, alignment=alignment)
    for key, (value, vtype) in EVERY_VALUE_TYPE.items():
        writer.add_metadata(key, value, vtype)
    writer.add_metadata("t.strings", ["a", "", "ü"])
    writer.add_metadata("t.ints", [1, -2, 3])
    writer.add_metadata("t.floats", [0.5, 2.0], element_type=GGUFValueType.FLOAT32)
    writer.add_metadata("t.nested", [[1, 2], [3]], element_type=GGUFValueType.ARRAY)
    writer.add_metadata("t.bools", [True, False], element_type=GGUFValueType.BOOL)
    rng = np.random.default_rng(0)
    w32 = rng.normal(size=(3, 5)).astype(np.float32)
    w16 = rng.normal(size=(4, 8)).astype(np.float16)
    ids = np.arange(7, dtype=np.int32)
    q8 = struct.pack("<e", 0.5) + struct.pack("32b", *range(32))
    writer.add_tensor("w32", w32)
    writer.add_tensor("w16", w16)
    writer.add_tensor("ids", ids)
    writer.add_tensor("q8", np.frombuffer(q8 * 2, np.uint8), GGMLType.Q8_0, (2, 32))
    writer.write(path)
    return {"w32": w32, "w16": w16, "ids": ids}


@pytest.mark.parametrize(("version", "alignment"), [(3, 32), (2, 32), (3, 64), (3, 1)])
def test_round_trip(tmp_path, version, alignment):
    path = tmp_path / "m.gguf"
    arrays = build(path, version, alignment)
    f = read_gguf(path)
    assert f.version == version and f.alignment == alignment
    for key, (value, vtype) in EVERY_VALUE_TYPE.items():
        assert f.metadata[key] == value and f.value_types[key] == (vtype, None)
    assert f.metadata["t.strings"] == ["a", "", "ü"]
    assert f.value_types["t.strings"] == (GGUFValueType.ARRAY, GGUFValueType.STRING)
    assert f.metadata["t.ints"] == [1, -2, 3] and f.value_types["t.ints"][1] is GGUFValueType.INT32
    assert f.metadata["t.floats"] == [0.5, 2.0]
    assert f.metadata["t.nested"] == [[1, 2], [3]]
    assert f.metadata["t.bools"] == [True, False]
    for name, array in arrays.items():
        t = f.tensor(name)
        assert t.shape == array.shape
        np.testing.assert_array_equal(t.array(), array)
        np.testing.assert_array_equal(t.dequantize() if name != "ids" else t.array(), array.astype(np.float32) if name != "ids" else array)
    q8 = f.tensor("q8")
    assert q8.ggml_type is GGMLType.Q8_0 and q8.shape == (2, 32) and q8.array().shape == (2, 34)
    np.testing.assert_array_equal(q8.dequantize(), np.tile(np.arange(32) * 0.5, (2, 1)))
    # data offsets honour the alignment
    data_start = min(t.data.ctypes.data for t in f.tensors.values())
    assert all((t.data.ctypes.data - data_start) % alignment == 0 for t in f.tensors.values())


def test_tensors_are_views_of_the_mapped_file(tmp_path):
    path = tmp_path / "m.gguf"
    build(path)
    f = read_gguf(path)
    view = f.tensor("w32").array()
    assert not view.flags.owndata and isinstance(view.base, np.ndarray)
    base = view
    while isinstance(base.base, np.ndarray):
        base = base.base
    assert isinstance(base, np.memmap)


def _resident_kb(path) -> int:
    """This process's resident KB of the mapping of `path`."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            if "-" in line.split(" ", 1)[0] and ":" not in line.split(" ", 1)[0]:
                inside = line.rstrip().endswith(str(path))
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def test_released_pages_read_back_the_same_values(tmp_path):
    """release_pages_of drops the resident pages under a tensor's data (a piece at a time while uploading), and the
    data reads the same afterwards; arrays that are not file views are left alone."""
    path = tmp_path / "big.gguf"
    writer = GGUFWriter()
    values = np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)
    writer.add_tensor("w", values)
    writer.write(path)
    f = read_gguf(path)
    data = f.tensor("w").array()
    assert float(data.sum()) == float(values.sum())  # touches every page
    before = _resident_kb(path)
    for piece in np.array_split(data, 8, axis=0):
        release_pages_of(piece)
    release_pages_of(data.T[::2])  # strided views release the range they span
    release_pages_of(np.ones(4))  # not a file view: nothing happens
    if before:  # (smaps may not name the file in a sandbox)
        assert _resident_kb(path) < before - 3000
    np.testing.assert_array_equal(data, values)


def test_rows_are_read_from_the_file_without_mapping_it(tmp_path):
    """GGUFTensor.rows copies rows by pread (none of the mapping becomes resident), in the order asked, for plain and
    block-quantized tensors alike; a file replaced since it was mapped, and tensors that are not file views, are read
    through `data` instead; a row outside the table is a GGUFError."""
    path = tmp_path / "rows.gguf"
    writer = GGUFWriter()
    values = np.arange(512 * 1024, dtype=np.float32).reshape(512, 1024)
    quantized = np.random.default_rng(0).integers(0, 256, (64, 34 * 4), dtype=np.uint8)  # 64 Q8_0 rows of 128 values
    writer.add_tensor("w", values)
    writer.add_tensor("q", quantized, ggml_type=GGMLType.Q8_0, shape=(64, 128))
    writer.write(path)
    f = read_gguf(path)
    ids = np.array([7, 0, 511, 7, 300])
    rows = f.tensor("w").rows(ids)
    assert rows.flags.owndata and rows.dtype == np.float32
    np.testing.assert_array_equal(rows, values[ids])
    np.testing.assert_array_equal(f.tensor("q").rows(np.array([63, 2])), quantized[[63, 2]])
    assert f.tensor("w").rows(np.array([], dtype=np.int64)).shape == (0, 1024)
    if _resident_kb(path):  # (smaps may not name the file in a sandbox)
        pytest.fail("reading rows made pages of the file resident")
    with pytest.raises(GGUFError, match="row 512 is outside 0..511"):
        f.tensor("w").rows(np.array([512]))
    with pytest.raises(GGUFError, match="row -1 is outside"):
        f.tensor("w").rows(np.array([-1]))
    # replaced: the mapping still holds the old bytes, and those are what the rows are
    path.rename(tmp_path / "old.gguf")
    writer = GGUFWriter()
    writer.add_tensor("w", values + 1)
    writer.add_tensor("q", quantized, ggml_type=GGMLType.Q8_0, shape=(64, 128))
    writer.write(path)
    np.testing.assert_array_equal(f.tensor("w").rows(ids), values[ids])


def test_independent_header_parse(tmp_path):
    """Check the writer's bytes against the GGUF layout directly, not through our reader."""
    path = tmp_path / "m.gguf"
    writer = GGUFWriter()
    writer.add_metadata("general.architecture", "llama")
    writer.add_tensor("x", np.array([1.0, 2.0], np.float32))
    writer.write(path)
    raw = path.read_bytes()
    assert raw[:4] == b"GGUF"
    assert struct.unpack_from("<IQQ", raw, 4) == (3, 1, 1)
    key_len = struct.unpack_from("<Q", raw, 24)[0]
    assert raw[32 : 32 + key_len] == b"general.architecture"
    pos = 32 + key_len
    assert struct.unpack_from("<IQ", raw, pos) == (GGUFValueType.STRING, 5)
    pos += 12
    assert raw[pos : pos + 5] == b"llama"
    pos += 5
    assert struct.unpack_from("<Q", raw, pos)[0] == 1 and raw[pos + 8 : pos + 9] == b"x"
    pos += 9
    assert struct.unpack_from("<IQIQ", raw, pos) == (1, 2, GGMLType.F32, 0)
    data_start = -(-(pos + 24) // 32) * 32
    assert struct.unpack_from("<2f", raw, data_start) == (1.0, 2.0)


def test_split_files_are_merged(tmp_path):
    first, second = GGUFWriter(), GGUFWriter()
    first.add_metadata("general.architecture", "llama")
    first.add_metadata("split.count", 2, GGUFValueType.UINT16)
    first.add_tensor("a", np.ones(4, np.float32))
    second.add_metadata("split.no", 1, GGUFValueType.UINT16)
    second.add_tensor("b", np.full(3, 2.0, np.float16))
    first.write(tmp_path / "model-00001-of-00002.gguf")
    second.write(tmp_path / "model-00002-of-00002.gguf")
    for part in ("model-00001-of-00002.gguf", "model-00002-of-00002.gguf"):
        f = read_gguf(tmp_path / part)
        assert set(f.tensors) == {"a", "b"} and len(f.paths) == 2
        assert f.metadata["general.architecture"] == "llama"
        np.testing.assert_array_equal(f.tensor("b").dequantize(), [2.0, 2.0, 2.0])
    (tmp_path / "model-00002-of-00002.gguf").unlink()
    with pytest.raises(GGUFError, match="missing part"):
        read_gguf(tmp_path / "model-00001-of-00002.gguf")


def test_truncated_files_name_what_is_missing(tmp_path):
    path = tmp_path / "m.gguf"
    build(path)
    raw = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    for length, pattern in [(2, "too short"), (10, "truncated: tensor count"), (40, "truncated"), (len(raw) - 10, "truncated: tensor 'q8'")]:
        cut.write_bytes(raw[:length])
        with pytest.raises(GGUFError, match=pattern):
            read_gguf(cut)


def test_corrupt_and_unsupported_files(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGML" + bytes(100))
    with pytest.raises(GGUFError, match="not a GGUF file"):
        read_gguf(path)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 1, 0, 0))
    with pytest.raises(GGUFError, match="version 1 is not supported"):
        read_gguf(path)
    path.write_bytes(b"GGUF" + struct.pack(">IQQ", 3, 0, 0))
    with pytest.raises(GGUFError, match="big-endian"):
        read_gguf(path)
    # a metadata value with an undefined type id
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<I", 77))
    with pytest.raises(GGUFError, match="unknown value type 77"):
        read_gguf(path)
    # a tensor of a type llm-bench cannot read (Q2_K) names the tensor and the type
    header = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + struct.pack("<Q", 1) + b"t" + struct.pack("<IQIQ", 1, 256, GGMLType.Q2_K, 0)
    path.write_bytes(header + bytes(-len(header) % 32 + 84))
    with pytest.raises(GGUFError, match="tensor 't' uses Q2_K"):
        read_gguf(path)
    with pytest.raises(GGUFError, match="cannot open"):
        read_gguf(tmp_path / "absent.gguf")


def test_writer_rejects_bad_input(tmp_path):
    writer = GGUFWriter()
    with pytest.raises(GGUFError, match="already added"):
        writer.add_metadata("k", 1)
        writer.add_metadata("k", 2)
    with pytest.raises(GGUFError, match="do not fill whole Q8_0 blocks"):
        writer.add_tensor("q", np.zeros(34, np.uint8), GGMLType.Q8_0, (16,))
    with pytest.raises(GGUFError, match="does not fit GGUF type UINT8"):
        bad = GGUFWriter()
        bad.add_metadata("k", 300, GGUFValueType.UINT8)
        bad.write(tmp_path / "bad.gguf")
    assert not (tmp_path / "bad.gguf").exists() and list(tmp_path.iterdir()) == []


scalar_values = st.one_of(
    st.booleans(), st.integers(0, 2**32 - 1), st.integers(-(2**31), -1), st.integers(2**32, 2**63 - 1),
    st.floats(width=32, allow_nan=False), st.text(max_size=20))


@given(st.dictionaries(st.text(min_size=1, max_size=12), st.one_of(scalar_values, st.lists(st.text(max_size=5), max_size=4),
                                                                    st.lists(st.integers(-100, 100), max_size=4)), max_size=6))
@settings(max_examples=40, derandomize=True, deadline=None)
def test_metadata_round_trip_property(tmp_path_factory, metadata):
    path = tmp_path_factory.mktemp("prop") / "m.gguf"
    writer = GGUFWriter()
    for key, value in metadata.items():
        writer.add_metadata(key, value)
    writer.write(path)
    assert read_gguf(path).metadata == metadata
