"""safetensors files: what the format allows loads (0-d entries keep shape ()), everything else raises SafetensorsError
naming the tensor and the field; saved files get the umask's mode."""

import io
import json
import os
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor
from uop_scheduler.nn.state import SafetensorsError, safe_load, safe_load_metadata, safe_save

DATA = np.arange(4, dtype=np.float32).tobytes()  # 16 data bytes after the header


def blob(header, body: bytes = DATA) -> bytes:
    """A safetensors file built by hand from the format's definition (8-byte length, JSON, data)."""
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + body


def load(data: bytes) -> dict:
    return safe_load(Tensor(np.frombuffer(data, np.uint8)))


def entry(shape, offsets, dtype="F32"):
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}


# Every bad header the fuzzing pass of issue 24 found, with the words the message must contain.
BAD_HEADERS = {
    "header is a list": ([], "must be a JSON object"),
    "header is a number": (3, "must be a JSON object"),
    "entry is null": ({"a": None}, "'a'"),
    "entry is a list": ({"a": [1, 2]}, "'a'"),
    "no shape": ({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, "no 'shape'"),
    "no data_offsets": ({"a": {"dtype": "F32", "shape": [1]}}, "no 'data_offsets'"),
    "no dtype": ({"a": {"shape": [1], "data_offsets": [0, 4]}}, "no 'dtype'"),
    "one offset": ({"a": entry([1], [1])}, "data_offsets"),
    "three offsets": ({"a": entry([1], [0, 4, 8])}, "data_offsets"),
    "offsets not a list": ({"a": entry([1], 4)}, "data_offsets"),
    "float offsets": ({"a": entry([1], [0.0, 4.0])}, "data_offsets"),
    "bool offsets": ({"a": entry([1], [False, 4])}, "data_offsets"),
    "huge dim": ({"a": entry([2**70], [0, 4])}, "shape"),
    "float dim": ({"a": entry([1.0], [0, 4])}, "shape"),
    "null dim": ({"a": entry([None], [0, 4])}, "shape"),
    "bool dim": ({"a": entry([True], [0, 4])}, "shape"),
    "shape not a list": ({"a": entry(4, [0, 16])}, "shape"),
    "too many dims": ({"a": entry([1] * 40, [0, 4])}, "shape"),
    "negative offsets": ({"a": entry([2], [-16, -8])}, "outside"),
    "negative dim, reversed offsets": ({"a": entry([-1], [4, 0])}, "shape"),
    "reversed offsets": ({"a": entry([0], [4, 0])}, "outside"),
    "offsets past the end": ({"a": entry([2], [12, 20])}, "outside"),
    "size does not match shape": ({"a": entry([3], [0, 8])}, "needs 12 bytes"),
    "overlapping tensors": ({"a": entry([2], [0, 8]), "b": entry([2], [4, 12])}, "overlap"),
    "same bytes twice": ({"a": entry([1], [0, 4]), "b": entry([1], [0, 4])}, "overlap"),
    "unknown dtype": ({"a": entry([1], [0, 4], "F128")}, "unknown dtype"),
    "dtype not a string": ({"a": entry([1], [0, 4], 7)}, "unknown dtype"),
    "metadata not an object": ({"__metadata__": [1]}, "__metadata__"),
    "metadata value not a string": ({"__metadata__": {"format": 1}}, "__metadata__"),
}


@pytest.mark.parametrize("name", list(BAD_HEADERS))
def test_bad_headers_raise_safetensors_error_naming_the_field(name):
    header, words = BAD_HEADERS[name]
    with pytest.raises(SafetensorsError, match=words.replace("(", r"\(").replace("[", r"\[")):
        load(blob(header))
    with pytest.raises(SafetensorsError):
        safe_load_metadata(Tensor(np.frombuffer(blob(header), np.uint8)))


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"", "too short"),
        (struct.pack("<Q", 2**63), "limit"),
        (struct.pack("<Q", 100), "claims 100 bytes"),
        (blob(b"{not json"), "not valid JSON"),
        (blob(b'{"a": \xff}'), "not valid JSON"),
        (blob(b"[" * 50_000), "not valid JSON"),  # deep nesting: a RecursionError inside json
        (blob(b'{"a": ' + b"9" * 5000 + b"}"), "not valid JSON"),  # past Python's int-digits limit
        (blob(b'{"a": {}, "a": {}}'), "twice"),
    ],
    ids=["empty", "huge length", "short header", "not json", "not utf-8", "deep nesting", "long int", "duplicate name"],
)
def test_bad_framing_raises_safetensors_error(raw, words):
    with pytest.raises(SafetensorsError, match=words):
        load(raw)


def test_error_names_the_file(tmp_path):
    path = tmp_path / "broken.safetensors"
    path.write_bytes(blob({"w": entry([2], [-16, -8])}))
    with pytest.raises(SafetensorsError, match=r"broken\.safetensors: tensor 'w'"):
        safe_load(path)


def test_valid_edge_cases_load_what_the_file_holds():
    header = {
        "__metadata__": {"format": "pt"},
        "scalar": entry([], [12, 16]),
        "empty": entry([0, 5], [4, 4]),  # zero bytes may sit anywhere, even inside another tensor's span
        "pair": entry([2], [0, 8]),
    }
    out = load(blob(header))
    values = np.frombuffer(DATA, np.float32)
    assert out["scalar"].shape == () and out["scalar"].numpy() == values[3]
    assert out["empty"].shape == (0, 5) and out["empty"].numpy().size == 0
    np.testing.assert_array_equal(out["pair"].numpy(), values[:2])


def test_zero_dim_entries_keep_shape_empty_on_save_and_load(tmp_path):
    path = tmp_path / "scalars.safetensors"
    scalar = Tensor(np.array([2.5], np.float32)).reshape(())
    safe_save({"s": scalar, "v": Tensor(np.array([1, 2], np.int32))}, path)
    head_len = int.from_bytes(path.read_bytes()[:8], "little")
    header = json.loads(path.read_bytes()[8:8 + head_len])
    assert header["s"]["shape"] == [] and header["s"]["data_offsets"][1] - header["s"]["data_offsets"][0] == 4
    loaded = safe_load(path)
    assert loaded["s"].shape == () and loaded["s"].numpy() == np.float32(2.5)
    assert (loaded["s"] + Tensor(np.array([1.0], np.float32)).reshape(())).shape == ()


def test_save_rejects_names_and_metadata_the_format_cannot_hold(tmp_path):
    t = Tensor(np.ones(2, np.float32))
    with pytest.raises(SafetensorsError, match="__metadata__"):
        safe_save({"__metadata__": t}, tmp_path / "x")
    with pytest.raises(SafetensorsError, match="strings"):
        safe_save({"a": t}, tmp_path / "x", metadata={"epoch": 3})
    assert not list(tmp_path.iterdir())


def test_saved_file_gets_the_umask_mode_and_keeps_an_existing_files_mode(tmp_path):
    old = os.umask(0o027)
    try:
        safe_save({"a": Tensor(np.ones(2, np.float32))}, tmp_path / "new.safetensors")
    finally:
        os.umask(old)
    assert (tmp_path / "new.safetensors").stat().st_mode & 0o777 == 0o640
    existing = tmp_path / "existing.safetensors"
    existing.write_bytes(b"")
    existing.chmod(0o604)
    safe_save({"a": Tensor(np.ones(2, np.float32))}, existing)
    assert existing.stat().st_mode & 0o777 == 0o604
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.safetensors", "new.safetensors"]  # no temporary left


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.binary(max_size=300), st.lists(st.tuples(st.sampled_from(["read", "seek_set", "seek_end", "seek_cur", "read_all"]),
                                                  st.integers(0, 400)), max_size=8))
def test_tensor_io_reads_as_bytes_io(data, ops):
    # differential: every read and seek of a TensorIO over Tensor(data) returns what io.BytesIO(data) returns
    from uop_scheduler.nn.state import TensorIO

    ours, ref = TensorIO(Tensor(data)), io.BytesIO(data)
    for op, n in ops:
        if op == "read":
            assert ours.read(n) == ref.read(n)
        elif op == "read_all":
            assert ours.read() == ref.read()
        else:
            offset, whence = {"seek_set": (n, io.SEEK_SET), "seek_end": (-min(n, len(data)), io.SEEK_END), "seek_cur": (0, io.SEEK_CUR)}[op]
            assert ours.seek(offset, whence) == ref.seek(offset, whence)
        assert ours.tell() == ref.tell()


def test_tensor_io_over_a_file_feeds_tarfile(tmp_path):
    import pathlib
    import tarfile

    from uop_scheduler.nn.state import TensorIO

    payload = {"a.bin": bytes(range(200)), "dir/b.txt": b"hello"}
    path = tmp_path / "x.tar"
    with tarfile.open(path, "w") as tar:
        for name, blob in payload.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    with tarfile.open(fileobj=TensorIO(Tensor(pathlib.Path(path))), mode="r") as tar:
        assert {m.name: tar.extractfile(m).read() for m in tar if m.isreg()} == payload
    with pytest.raises(TypeError, match="1-D uint8"):
        TensorIO(Tensor([1.0, 2.0]))
