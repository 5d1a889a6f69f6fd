"""Quantized weights in the Tensor graph: block decoding against the numpy dequantization, quantized matmuls against
numpy, and a model with every block type against the numpy reference model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_bench import (
    GRAPH_QUANT_TYPES,
    GGMLType,
    GGUFWriter,
    ModelConfig,
    ModelError,
    NumpyModel,
    TensorModel,
    TinySpec,
    dequantize,
    dequantize_blocks,
    read_gguf,
    write_random_model,
)
from llm_bench.tensor_weights import Linear, upload_matrices
from uop_scheduler import Device, Tensor

TYPES = sorted(GRAPH_QUANT_TYPES, key=lambda t: t.name)


def small_blocks(ggml_ref, type_name: str, n_blocks: int, seed: int, scale: float = 2.0) -> np.ndarray:
    """Random blocks (uint8, (n_blocks, block_bytes)) whose float16 fields are finite numbers in [-scale, scale]."""
    raw = np.frombuffer(ggml_ref.random_blocks(type_name, n_blocks, seed), dtype=np.uint8).reshape(n_blocks, -1).copy()
    rng = np.random.default_rng(seed + 1)
    for off in ggml_ref.HALF_FIELDS[type_name]:
        raw[:, off : off + 2] = rng.uniform(-scale, scale, n_blocks).astype("<f2").view(np.uint8).reshape(-1, 2)
    return raw


@pytest.mark.parametrize("ggml_type", TYPES, ids=lambda t: t.name)
@settings(max_examples=4, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**16))
def test_graph_dequantization_is_bit_exact(ggml_ref, ggml_type, seed):
    elems, size = ggml_ref.BLOCK_SIZES[ggml_type.name]
    raw = np.frombuffer(ggml_ref.random_blocks(ggml_type.name, 6, seed), dtype=np.uint8).reshape(2, 3, size)
    got = dequantize_blocks(Tensor(raw), ggml_type).numpy()
    want = dequantize(raw, ggml_type, (2, 3 * elems))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_unsupported_blocks_are_refused():
    with pytest.raises(ModelError, match="no in-graph dequantization for F16"):
        dequantize_blocks(Tensor(np.zeros((2, 2), np.uint8)), GGMLType.F16)
    with pytest.raises(ModelError, match=r"Q8_0 blocks must be a uint8 tensor of shape \(\.\.\., n_blocks, 34\)"):
        dequantize_blocks(Tensor(np.zeros((2, 33), np.uint8)), GGMLType.Q8_0)


@pytest.mark.parametrize("rows_per_matmul", [2048, 24])
def test_quantized_matmuls_match_numpy(ggml_ref, tmp_path, monkeypatch, rows_per_matmul):
    monkeypatch.setattr("llm_bench.tensor_weights.QUANT_ROWS_PER_MATMUL", rows_per_matmul)
    # three projections of different types stacked like Q, K, V: Q4_K and Q4_K share a matmul, Q6_K gets its own
    writer, types, rows = GGUFWriter(), [GGMLType.Q4_K, GGMLType.Q4_K, GGMLType.Q6_K], [48, 16, 40]
    for i, (ggml_type, out) in enumerate(zip(types, rows)):
        writer.add_tensor(f"w{i}", small_blocks(ggml_ref, ggml_type.name, out * 2, seed=i, scale=0.01), ggml_type, (out, 512))
    writer.add_tensor("f16", (np.random.default_rng(3).standard_normal((24, 512)) * 0.1).astype(np.float16))
    gguf = read_gguf(writer.write(tmp_path / "m.gguf"))
    tensors = [gguf.tensor(n) for n in ("w0", "w1", "w2", "f16")]
    linear = Linear(upload_matrices(tensors, "CPU"))
    # the 64 Q4_K rows in one matmul, or split in three pieces of at most 24 rows (and the 40 Q6_K rows in two)
    pieces = [GGMLType.Q4_K] * (1 if rows_per_matmul > 64 else 3) + [GGMLType.Q6_K] * (1 if rows_per_matmul > 40 else 2)
    assert [p.ggml_type for p in linear.parts] == pieces + [GGMLType.F16]  # float16: the F16C kernel over its rows
    # the device holds the file's bytes, not a float copy
    assert linear.nbytes == sum(t.nbytes for t in tensors)
    x = np.random.default_rng(4).standard_normal((3, 512)).astype(np.float32)
    want = x @ np.concatenate([t.dequantize() for t in tensors]).T
    np.testing.assert_allclose(linear(Tensor(x)).numpy(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_float_matrices_are_stored_as_one_block_per_core(tmp_path, monkeypatch):
    monkeypatch.setattr(Device["CPU"], "n_cores", 4)
    rng = np.random.default_rng(5)
    writer = GGUFWriter()
    for name, shape in (("q", (256, 384)), ("k", (64, 384)), ("small", (32, 64))):  # float32: float16 has a kernel of its own
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))
    gguf = read_gguf(writer.write(tmp_path / "m.gguf"))
    # 256 outputs share out evenly between 4 cores in 32-lane pieces; q and k together (320) between 2; 32 x 64 is too
    # little work to thread
    groups = (("q",), ("q", "k"), ("small",))
    linears = [Linear(upload_matrices([gguf.tensor(n) for n in names], "CPU")) for names in groups]
    assert [linear.parts[0].core_blocks for linear in linears] == [4, 2, 1]
    assert linears[0].parts[0].data.shape == (4, 384, 64)
    for linear, names in zip(linears, groups):
        w = np.concatenate([gguf.tensor(n).dequantize() for n in names])
        x = rng.standard_normal((3, w.shape[1])).astype(np.float32)
        for rows in (x[:1], x):  # a decode step's matrix-vector product and a prompt's matmul
            np.testing.assert_allclose(linear(Tensor(rows)).numpy(), rows @ w.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("type_name", ["Q5_0", "Q4_K"])  # types without the integer-dot kernel (test_llm_qdot has those)
def test_quantized_matrices_are_stored_as_one_block_per_core(ggml_ref, tmp_path, monkeypatch, type_name):
    monkeypatch.setattr(Device["CPU"], "n_cores", 4)
    out, n_in = 256, 512
    raw = small_blocks(ggml_ref, type_name, out * n_in // ggml_ref.BLOCK_SIZES[type_name][0], seed=6, scale=0.01)
    writer = GGUFWriter()
    writer.add_tensor("w", raw, GGMLType[type_name], (out, n_in))
    gguf = read_gguf(writer.write(tmp_path / "m.gguf"))
    linear = Linear(upload_matrices([gguf.tensor("w")], "CPU"))
    (part,) = linear.parts
    # 4 blocks of 64 outputs, each (n_blocks, block_bytes, 64): the file's bytes, one contiguous run per core
    block_elems, block_bytes = ggml_ref.BLOCK_SIZES[type_name]
    assert part.core_blocks == 4
    assert part.data.shape == (4, n_in // block_elems, block_bytes, out // 4)
    assert linear.nbytes == raw.nbytes
    w = ggml_ref.decode(type_name, raw.tobytes()).reshape(out, n_in)
    x = np.random.default_rng(7).standard_normal((3, n_in)).astype(np.float32)
    for rows in (x[:1], x):  # a decode step's matrix-vector product and a prompt's matmul
        want = rows @ w.T
        np.testing.assert_allclose(linear(Tensor(rows)).numpy(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.fixture(scope="module")
def quantized_model(ggml_ref, tmp_path_factory):
    """A one-block llama with dim 256 (whole K-quant blocks) whose matrices use every block type in turn, as a GGUF."""
    folder = tmp_path_factory.mktemp("quant")
    spec = TinySpec(ModelConfig("llama", n_layers=1, dim=256, hidden_dim=256, n_heads=4, n_kv_heads=2, head_dim=64, vocab_size=0,
                                context_length=64, norm_eps=1e-5, rope_theta=10000.0, permuted_qk=True),
                    "llama-bpe", ("<|begin_of_text|>", "<|end_of_text|>"), GGMLType.F16, True)
    base = read_gguf(write_random_model("quant-llama", spec, folder / "f16.gguf"))
    writer = GGUFWriter()
    for key, value in base.metadata.items():
        writer.add_metadata(key, value, *base.value_types[key])
    matrices = [name for name, t in base.tensors.items() if len(t.shape) == 2]
    for name, tensor in base.tensors.items():
        if name not in matrices:
            writer.add_tensor(name, tensor.array())
            continue
        i = matrices.index(name)
        ggml_type = TYPES[i % len(TYPES)]
        n_blocks = tensor.n_elements // ggml_ref.BLOCK_SIZES[ggml_type.name][0]
        # small scales keep the weights (and so the activations) of ordinary size
        writer.add_tensor(name, small_blocks(ggml_ref, ggml_type.name, n_blocks, seed=i, scale=0.002), ggml_type, tensor.shape)
    return read_gguf(writer.write(folder / "mixed.gguf"))


def test_a_model_with_every_block_type_matches_the_reference(quantized_model):
    gguf = quantized_model
    assert {t.ggml_type for t in gguf.tensors.values()} >= set(TYPES)
    ref, model = NumpyModel(gguf, 16), TensorModel(gguf, 16)
    prompt = [1, 40, 41, 7]
    want = ref.forward(prompt, 0)
    assert np.isfinite(want).all() and want.std() > 1e-3
    np.testing.assert_allclose(model.forward(prompt, 0), want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
    for pos, token in ((4, 9), (5, 100)):
        want = ref.forward([token], pos)
        np.testing.assert_allclose(model.forward([token], pos), want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
    # the quantized matrices occupy their file size on the device (the embedding table, read on the host from the file,
    # is counted once more: the tied output projection puts it on the device too)
    embd = gguf.tensor("token_embd.weight")
    quantized = sum(t.nbytes for t in gguf.tensors.values() if t.ggml_type in GRAPH_QUANT_TYPES)
    floats = sum(t.n_elements * 4 for t in gguf.tensors.values() if t.ggml_type not in GRAPH_QUANT_TYPES)
    assert model.weight_bytes == quantized + floats + embd.nbytes
