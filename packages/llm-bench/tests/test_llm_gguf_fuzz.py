"""The GGUF reader on mutated files: any damage is a GGUFError (or another LLMBenchError) naming what is wrong, never a
raw Python exception, and reading never hangs or allocates what the file cannot hold."""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_bench import GGMLType, GGUFValueType, GGUFWriter, LLMBenchError, read_gguf
from llm_bench.tokenizer import Tokenizer


def _seed_file(path) -> bytes:
    writer = GGUFWriter()
    writer.add_metadata("general.architecture", "llama")
    writer.add_metadata("t.u32", 7, GGUFValueType.UINT32)
    writer.add_metadata("t.f32", 0.5, GGUFValueType.FLOAT32)
    writer.add_metadata("t.strings", ["a", "", "ü"])
    writer.add_metadata("t.nested", [[1, 2], [3]], element_type=GGUFValueType.ARRAY)
    writer.add_metadata("tokenizer.ggml.model", "gpt2")
    writer.add_metadata("tokenizer.ggml.tokens", ["a", "b", "ab", "<s>"])
    writer.add_metadata("tokenizer.ggml.merges", ["a b"])
    writer.add_metadata("tokenizer.ggml.bos_token_id", 3, GGUFValueType.UINT32)
    rng = np.random.default_rng(0)
    writer.add_tensor("w32", rng.normal(size=(3, 5)).astype(np.float32))
    writer.add_tensor("w16", rng.normal(size=(4, 8)).astype(np.float16))
    q8 = struct.pack("<e", 0.5) + struct.pack("32b", *range(32))
    writer.add_tensor("q8", np.frombuffer(q8 * 2, np.uint8), GGMLType.Q8_0, (2, 32))
    writer.write(path)
    return path.read_bytes()


def _use(path) -> None:
    """Everything a caller does with a file: parse, read metadata, build the tokenizer, read and decode every tensor."""
    g = read_gguf(path)
    for value in g.metadata.values():
        repr(value)
    try:
        Tokenizer.from_metadata(g.metadata)
    except LLMBenchError:
        pass
    for t in g.tensors.values():
        t.array()
        t.dequantize()


_U64_FIELDS = st.sampled_from([0, 2**31, 2**32 - 1, 2**63, 2**64 - 1, 10**12])


@st.composite
def mutations(draw):
    kind = draw(st.sampled_from(["flip", "truncate", "u64", "u32"]))
    return kind, draw(st.integers(0, 10_000)), draw(st.integers(0, 255)), draw(_U64_FIELDS)


def _mutate(data: bytes, mutation) -> bytes:
    kind, where, byte, big = mutation
    pos = where % len(data)
    if kind == "flip":
        return data[:pos] + bytes([byte]) + data[pos + 1:]
    if kind == "truncate":
        return data[:pos]
    if kind == "u64":  # counts and lengths are u64 in GGUF v3: a huge one must not be trusted
        return data[:pos] + struct.pack("<Q", big) + data[pos + 8:]
    return data[:pos] + struct.pack("<I", big & 0xFFFFFFFF) + data[pos + 4:]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(muts=st.lists(mutations(), min_size=1, max_size=3))
def test_mutated_files_fail_with_package_errors_only(tmp_path, muts):
    seed = tmp_path / "seed.gguf"
    data = _seed_file(seed) if not seed.exists() else seed.read_bytes()
    for m in muts:
        data = _mutate(data, m)
        if not data:
            break
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(data)
    start = time.perf_counter()
    try:
        _use(bad)
    except LLMBenchError:
        pass
    assert time.perf_counter() - start < 5, "reading a damaged file took too long"


def test_deeply_nested_arrays_are_refused(tmp_path):
    # ARRAY of ARRAY ... 2000 deep: a clear error, not a RecursionError
    body = b""
    for _ in range(2000):
        body += struct.pack("<IQ", int(GGUFValueType.ARRAY), 1)
    body += struct.pack("<IQ", int(GGUFValueType.UINT8), 0)
    key = b"deep"
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<I", int(GGUFValueType.ARRAY)) + body
    path = tmp_path / "deep.gguf"
    path.write_bytes(data)
    with pytest.raises(LLMBenchError):
        read_gguf(path)


_TOKENIZER = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b", "ab"], "tokenizer.ggml.merges": ["a b"],
              "tokenizer.ggml.token_type": [1, 1, 1]}


@pytest.mark.parametrize(("key", "value"), [
    ("tokenizer.ggml.tokens", 1), ("tokenizer.ggml.tokens", [1, 2, 3]), ("tokenizer.ggml.merges", [1, 2]),
    ("tokenizer.ggml.merges", "a b"), ("tokenizer.ggml.bos_token_id", 1.5), ("tokenizer.ggml.bos_token_id", float("nan")),
    ("tokenizer.ggml.bos_token_id", "x"), ("tokenizer.ggml.bos_token_id", [1]), ("tokenizer.ggml.eos_token_id", 99),
    ("tokenizer.ggml.eot_token_id", -1), ("tokenizer.ggml.token_type", "x"), ("tokenizer.ggml.model", 3),
    ("tokenizer.ggml.pre", 5), ("tokenizer.ggml.add_bos_token", "yes"),
])
def test_tokenizer_metadata_of_the_wrong_kind_is_a_tokenizer_error(key, value):
    from llm_bench import TokenizerError

    with pytest.raises(TokenizerError, match=key.replace(".", r"\.")):
        Tokenizer.from_metadata(_TOKENIZER | {key: value})


@pytest.mark.parametrize("text", ["\ud800", "ab \udfff", "\udcff"])
def test_text_that_is_not_unicode_is_a_tokenizer_error(text):
    from llm_bench import TokenizerError

    with pytest.raises(TokenizerError, match="not valid Unicode"):
        Tokenizer.from_metadata(_TOKENIZER).encode(text)


@pytest.mark.parametrize(("key", "value"), [
    ("attention.head_count_kv", 0), ("attention.head_count", 0), ("embedding_length", float("nan")), ("block_count", "x"),
    ("context_length", [1]), ("attention.layer_norm_rms_epsilon", "e"), ("rope.freq_base", float("inf")),
    ("feed_forward_length", 1.5), ("attention.head_count", True),
])
def test_model_hyperparameters_of_the_wrong_kind_name_their_key(key, value):
    from llm_bench import ModelError, resolve_model
    from llm_bench.model_config import ModelConfig

    g = read_gguf(resolve_model("tiny-llama"))
    g.metadata[f"llama.{key}"] = value
    with pytest.raises(ModelError, match=f"metadata llama.{key.replace('.', '[.]')} must be"):
        ModelConfig.from_gguf(g)


def test_an_empty_tensor_with_an_impossible_dimension_is_refused(tmp_path):
    data = bytearray(_seed_file(tmp_path / "seed.gguf"))
    # the first tensor's info: name "w32", 2 dims (5, 3): make them (0, 2**63)
    at = data.index(b"w32") + 3
    assert struct.unpack_from("<IQQ", data, at) == (2, 5, 3)
    struct.pack_into("<QQ", data, at + 4, 0, 1 << 63)
    path = tmp_path / "bad.gguf"
    path.write_bytes(bytes(data))
    with pytest.raises(LLMBenchError, match="each at most"):
        _use(path)
