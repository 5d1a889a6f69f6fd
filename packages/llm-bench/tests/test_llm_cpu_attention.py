"""The CPU attention kernel (`llm_bench.cpu_attention`) against float64 numpy, and the models built with it against
the graph form of attention."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_bench import TensorModel, make_tiny, read_gguf, resolve_model
from llm_bench.cpu_attention import attention_source, cpu_attention
from llm_bench.errors import ModelError
from uop_scheduler import Device, Tensor


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, start: int) -> np.ndarray:
    """float64 causal grouped-query attention: query i sees cache rows 0..start + i."""
    n, heads, hd = q.shape
    group = heads // k.shape[1]
    out = np.zeros((n, heads * hd))
    for i in range(n):
        rows = min(start + i + 1, k.shape[0])
        for head in range(heads):
            s = k[:rows, head // group].astype(np.float64) @ q[i, head].astype(np.float64) / np.sqrt(hd)
            p = np.exp(s - s.max())
            out[i, head * hd : (head + 1) * hd] = (p / p.sum()) @ v[:rows, head // group].astype(np.float64)
    return out


@settings(max_examples=12, deadline=None, derandomize=True)
@given(n=st.integers(1, 9), kv=st.integers(1, 3), group=st.integers(1, 4), hd=st.sampled_from([8, 16, 32, 64]), extra=st.integers(0, 20),
       start=st.integers(0, 25), seed=st.integers(0, 2**16))
def test_kernel_matches_float64_attention(n, kv, group, hd, extra, start, seed):
    rng = np.random.default_rng(seed)
    context = start + n + extra  # rows past the block are never read: they hold NaN here
    q = rng.standard_normal((n, kv * group, hd)).astype(np.float32) * 2
    k, v = (rng.standard_normal((context, kv, hd)).astype(np.float32) for _ in range(2))
    k[start + n :], v[start + n :] = np.nan, np.nan
    got = cpu_attention(Tensor(q), Tensor(k), Tensor(v), Tensor(np.array([start], np.int32)), Device["CPU"].n_cores).numpy()
    want = reference(q, k, v, start)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_extreme_scores_give_one_hot_and_uniform_probabilities():
    # scores 100 apart: e^-100 is below the exponential's range and must add nothing; equal keys: uniform weights
    n, hd, context = 2, 8, 6
    q = np.zeros((n, 1, hd), np.float32)
    q[:, 0, 0] = 100 * np.sqrt(hd)
    k = np.zeros((context, 1, hd), np.float32)
    k[:, 0, 0] = [0, 1, 0, 0, 0, 0]
    v = np.arange(context * hd, dtype=np.float32).reshape(context, 1, hd)
    got = cpu_attention(Tensor(q), Tensor(k), Tensor(v), Tensor(np.array([3], np.int32)), 1).numpy()
    np.testing.assert_array_equal(got, np.stack([v[1, 0], v[1, 0]]))
    q[:] = 0
    got = cpu_attention(Tensor(q), Tensor(k), Tensor(v), Tensor(np.array([0], np.int32)), 1).numpy()
    np.testing.assert_allclose(got, np.stack([v[0, 0], v[:2, 0].mean(0)]), rtol=1e-6)


def test_shapes_it_cannot_take_are_refused():
    with pytest.raises(ModelError, match="multiple of 8"):
        attention_source("a", 1, 4, 2, 12, 8)
    with pytest.raises(ModelError, match="multiple of the KV"):
        attention_source("a", 1, 5, 2, 16, 8)


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3", "tiny-olmoe"])
def test_models_with_the_kernel_match_the_graph_form(name, tmp_path):
    # float activations: no 8-bit rounding to turn summation-order differences into whole quanta
    gguf = read_gguf(make_tiny(name, tmp_path / f"{name}.gguf") if name == "tiny-olmoe" else resolve_model(name))
    kernel = TensorModel(gguf, 48, attention_kernel=True, activations="float")
    graph = TensorModel(gguf, 48, attention_kernel=False, activations="float")
    assert kernel.attention_kernel and not graph.attention_kernel
    pos = 0
    for tokens in ([1, 17, 42, 5, 99], [7, 8, 9, 11], [11], [3] * 20, [4], [5]):
        np.testing.assert_allclose(kernel.forward(tokens, pos), graph.forward(tokens, pos), rtol=1e-4, atol=1e-4)
        pos += len(tokens)
    # the default on a CPU device is the kernel
    assert TensorModel(gguf, 8).attention_kernel
