"""Cross-check against gguf-py, llama.cpp's own Python GGUF library, when it is installed (`uv run --with gguf pytest ...`)."""

from __future__ import annotations

import numpy as np
import pytest
from llm_bench import GGMLType, dequantize, make_tiny, read_gguf

gguf = pytest.importorskip("gguf")

BLOCK_BYTES = {"Q8_0": 34, "Q4_0": 18, "Q4_1": 20, "Q5_0": 22, "Q5_1": 24, "Q4_K": 144, "Q5_K": 176, "Q6_K": 210}
HALVES = {"Q8_0": (0,), "Q4_0": (0,), "Q5_0": (0,), "Q6_K": (208,)}


@pytest.mark.parametrize("name", list(BLOCK_BYTES))
def test_dequantize_matches_gguf_py(name):
    rng = np.random.default_rng(5)
    n, size = 32, BLOCK_BYTES[name]
    raw = rng.integers(0, 256, (n, size), dtype=np.uint8)
    for off in HALVES.get(name, (0, 2)):
        raw[:, off : off + 2] = rng.uniform(-2, 2, n).astype(np.float16).view(np.uint8).reshape(n, 2)
    elems = 256 if name.endswith("_K") else 32
    want = gguf.quants.dequantize(raw.reshape(1, -1), gguf.GGMLQuantizationType[name]).reshape(-1)
    np.testing.assert_array_equal(dequantize(raw.reshape(-1), GGMLType[name], (n * elems,)), want)


def test_gguf_py_reads_our_files(tmp_path):
    path = make_tiny("olmoe", tmp_path / "m.gguf")
    theirs, ours = gguf.GGUFReader(path), read_gguf(path)
    assert {t.name for t in theirs.tensors} == set(ours.tensors)
    for t in theirs.tensors:
        assert tuple(int(v) for v in reversed(t.shape.tolist())) == ours.tensor(t.name).shape
        assert np.asarray(t.data).reshape(-1).view(np.uint8).tobytes() == ours.tensor(t.name).data.tobytes()


def test_we_read_gguf_py_files(tmp_path):
    path = tmp_path / "theirs.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(3)
    writer.add_array("x.arr", ["a", "bb"])
    weight = np.arange(128, dtype=np.float32).reshape(2, 64)
    writer.add_tensor("w", weight)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    ours = read_gguf(path)
    assert ours.metadata["llama.block_count"] == 3 and ours.metadata["x.arr"] == ["a", "bb"]
    np.testing.assert_array_equal(ours.tensor("w").array(), weight)
