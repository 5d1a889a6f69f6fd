"""The numpy reference models: small hand-computed cases and an independent per-token, per-head re-implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from llm_bench import GGUFWriter, ModelError, NumpyModel, make_tiny, read_gguf, sample
from llm_bench.reference_ops import apply_rope_neox, rms_norm, rope_frequencies, top_k_experts, unpermute_qk_rows


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    return {arch: make_tiny(arch, folder / f"{arch}.gguf") for arch in ("llama", "qwen3", "olmoe")}


def test_rms_norm_formula():
    x = np.array([[3.0, 4.0], [1.0, -1.0]], np.float32)
    got = rms_norm(x, np.array([2.0, 0.5], np.float32), 0.0)
    np.testing.assert_allclose(got, [[2 * 3 / math.sqrt(12.5), 0.5 * 4 / math.sqrt(12.5)], [2.0, -0.5]], rtol=1e-6)


def test_top_k_softmax_gating():
    chosen, weights = top_k_experts(np.array([[1.0, 3.0, 2.0, 0.0]]), 2, normalize=False)
    total = sum(math.exp(v) for v in (1.0, 3.0, 2.0, 0.0))
    assert chosen.tolist() == [[1, 2]]
    np.testing.assert_allclose(weights, [[math.exp(3) / total, math.exp(2) / total]])
    _, normalized = top_k_experts(np.array([[1.0, 3.0, 2.0, 0.0]]), 2, normalize=True)
    np.testing.assert_allclose(normalized, [[math.exp(3) / (math.exp(3) + math.exp(2)), math.exp(2) / (math.exp(3) + math.exp(2))]])


def interleaved_rope(x: np.ndarray, pos: int, theta: float) -> np.ndarray:
    """ggml's normal RoPE: rotate adjacent pairs (x[2i], x[2i+1]) by pos * theta^(-2i/d)."""
    out = x.astype(np.float64).copy()
    d = x.shape[-1]
    for i in range(d // 2):
        angle = pos * theta ** (-2 * i / d)
        a, b = x[2 * i], x[2 * i + 1]
        out[2 * i], out[2 * i + 1] = a * math.cos(angle) - b * math.sin(angle), a * math.sin(angle) + b * math.cos(angle)
    return out


def test_unpermute_then_neox_equals_interleaved_on_stored_rows():
    rng = np.random.default_rng(1)
    n_heads, head_dim, dim = 2, 8, 6
    stored = rng.normal(size=(n_heads * head_dim, dim)).astype(np.float32)  # rows as a GGUF stores them
    x = rng.normal(size=dim).astype(np.float32)
    pos, theta = 5, 10000.0
    restored = unpermute_qk_rows(stored, n_heads)
    neox = apply_rope_neox((x @ restored.T).reshape(n_heads, 1, head_dim), np.array([pos]), rope_frequencies(head_dim, theta))
    for h in range(n_heads):
        inter = interleaved_rope((x @ stored.T)[h * head_dim : (h + 1) * head_dim], pos, theta)
        half = head_dim // 2
        # interleaved pair (2i, 2i+1) holds what the half-split layout keeps at (i, i + d/2)
        np.testing.assert_allclose(inter[0::2], neox[h, 0, :half], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(inter[1::2], neox[h, 0, half:], rtol=1e-5, atol=1e-5)


def slow_reference_logits(path, tokens: list[int], activations: str = "q8") -> np.ndarray:
    """Whole-sequence recompute, one token and one head at a time, RoPE applied pairwise to the stored llama rows."""
    g = read_gguf(path)
    meta, arch = g.metadata, g.metadata["general.architecture"]
    W = {name: t.dequantize().astype(np.float64) for name, t in g.tensors.items()}
    # the documented activation quantization (llm_bench.qdot): 2-D Q4_0/Q4_1/Q8_0 matrices multiply activations
    # rounded to 8 bits per 32-element block, d = max|v| / 127; written here in float64, one block at a time
    int_dot = {name for name, t in g.tensors.items() if t.ggml_type.name in ("Q4_0", "Q4_1", "Q8_0") and len(t.shape) == 2}
    if activations == "float":
        int_dot = set()

    def mv(name, v):
        if name in int_dot and name != "ffn_gate_inp.weight":
            out = np.empty_like(v)
            for b in range(0, len(v), 32):
                block = v[b : b + 32]
                d = np.abs(block).max() / 127
                out[b : b + 32] = np.rint(block / d) * d if d > 0 else 0.0
            v = out
        return W[name] @ v
    n_layers, n_heads = meta[f"{arch}.block_count"], meta[f"{arch}.attention.head_count"]
    n_kv, head_dim = meta[f"{arch}.attention.head_count_kv"], meta[f"{arch}.attention.key_length"]
    eps, theta = meta[f"{arch}.attention.layer_norm_rms_epsilon"], meta[f"{arch}.rope.freq_base"]
    n_exp, k_used = meta.get(f"{arch}.expert_count", 0), meta.get(f"{arch}.expert_used_count", 0)

    def norm(v, w):
        return v / math.sqrt(float(np.mean(v * v)) + eps) * w

    def rope(v, pos):
        if arch == "llama":
            return interleaved_rope(v, pos, theta)
        half = len(v) // 2
        out = v.copy()
        for i in range(half):
            angle = pos * theta ** (-2 * i / len(v))
            out[i] = v[i] * math.cos(angle) - v[i + half] * math.sin(angle)
            out[i + half] = v[i + half] * math.cos(angle) + v[i] * math.sin(angle)
        return out

    def ffn(v, gate, up, down):
        g_ = mv(gate, v) if isinstance(gate, str) else gate @ v
        hidden = g_ / (1 + np.exp(-g_)) * (mv(up, v) if isinstance(up, str) else up @ v)
        return mv(down, hidden) if isinstance(down, str) else down @ hidden

    xs = [W["token_embd.weight"][t].copy() for t in tokens]
    for layer in range(n_layers):
        p = f"blk.{layer}."
        keys, values, queries = [], [], []
        for pos, x in enumerate(xs):
            h = norm(x, W[p + "attn_norm.weight"])
            q, k, v = mv(p + "attn_q.weight", h), mv(p + "attn_k.weight", h), mv(p + "attn_v.weight", h)
            if arch == "olmoe":
                q, k = norm(q, W[p + "attn_q_norm.weight"]), norm(k, W[p + "attn_k_norm.weight"])
            qh = [q[i * head_dim : (i + 1) * head_dim] for i in range(n_heads)]
            kh = [k[i * head_dim : (i + 1) * head_dim] for i in range(n_kv)]
            if arch == "qwen3":
                qh = [norm(a, W[p + "attn_q_norm.weight"]) for a in qh]
                kh = [norm(a, W[p + "attn_k_norm.weight"]) for a in kh]
            queries.append([rope(a, pos) for a in qh])
            keys.append([rope(a, pos) for a in kh])
            values.append([v[i * head_dim : (i + 1) * head_dim] for i in range(n_kv)])
        new_xs = []
        for pos, x in enumerate(xs):
            heads = []
            for hq in range(n_heads):
                kv = hq // (n_heads // n_kv)
                scores = np.array([queries[pos][hq] @ keys[j][kv] / math.sqrt(head_dim) for j in range(pos + 1)])
                w = np.exp(scores - scores.max())
                w /= w.sum()
                heads.append(sum(w[j] * values[j][kv] for j in range(pos + 1)))
            x = x + mv(p + "attn_output.weight", np.concatenate(heads))
            h = norm(x, W[p + "ffn_norm.weight"])
            if n_exp:
                logits = W[p + "ffn_gate_inp.weight"] @ h
                probs = np.exp(logits - logits.max())
                probs /= probs.sum()
                for e in sorted(range(n_exp), key=lambda e: -probs[e])[:k_used]:
                    x = x + probs[e] * ffn(h, W[p + "ffn_gate_exps.weight"][e], W[p + "ffn_up_exps.weight"][e], W[p + "ffn_down_exps.weight"][e])
            else:
                x = x + ffn(h, p + "ffn_gate.weight", p + "ffn_up.weight", p + "ffn_down.weight")
            new_xs.append(x)
        xs = new_xs
    out_name = "output.weight" if "output.weight" in W else "token_embd.weight"
    return np.array([mv(out_name, norm(x, W["output_norm.weight"])) for x in xs])


@pytest.mark.parametrize("activations", ["q8", "float"])
@pytest.mark.parametrize("arch", ["llama", "qwen3", "olmoe"])
def test_incremental_logits_match_slow_reference(tiny_files, arch, activations):
    tokens = [5, 300, 17, 42, 99, 256]
    want = slow_reference_logits(tiny_files[arch], tokens, activations)
    model = NumpyModel(read_gguf(tiny_files[arch]), max_context=16, activations=activations)
    prefill = model.forward(tokens[:4], 0)
    step1 = model.forward(tokens[4:5], 4)
    step2 = model.forward(tokens[5:6], 5)
    got = np.concatenate([prefill, step1, step2])
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    assert np.abs(want).max() > 0.1  # the logits are not trivially flat


def test_single_token_attention_is_the_value_projection(tiny_files):
    model = NumpyModel(read_gguf(tiny_files["llama"]), max_context=8)
    layer, c = model.layers[0], model.config
    x = np.random.default_rng(3).normal(size=(1, c.dim)).astype(np.float32)
    v = (x @ layer.wv.T).reshape(c.n_kv_heads, c.head_dim)
    per_head = np.repeat(v, c.n_heads // c.n_kv_heads, axis=0).reshape(1, -1)
    out = model._attention(0, layer, x, np.array([0]))
    assert out.dtype == np.float32  # activations stay float32, or every matmul would upcast the weights
    np.testing.assert_allclose(out, per_head @ layer.wo.T, rtol=1e-5, atol=1e-5)


def test_generation_greedy_and_temperature(tiny_files):
    model = NumpyModel(read_gguf(tiny_files["qwen3"]), max_context=12)
    prompt = [1, 2, 3]
    greedy = [t for _, t in zip(range(5), model.generate(prompt))]
    # greedy decoding is the argmax of a fresh full forward at every step
    seq = list(prompt)
    for token in greedy:
        model.reset()
        assert token == int(np.argmax(model.forward(seq, 0)[-1]))
        seq.append(token)
    sampled_a = [t for _, t in zip(range(5), model.generate(prompt, temperature=1.0, seed=9))]
    sampled_b = [t for _, t in zip(range(5), model.generate(prompt, temperature=1.0, seed=9))]
    assert sampled_a == sampled_b
    assert len(list(model.generate(prompt))) == 12 - 3 + 1  # stops when the context is full
    with pytest.raises(ModelError, match="raise --max-context"):
        next(model.generate(list(range(12))))


def test_temperature_sampling_follows_softmax():
    logits = np.array([2.0, 1.0, 0.0, -1.0])
    rng = np.random.default_rng(0)
    draws = np.bincount([sample(logits, 0.5, rng) for _ in range(4000)], minlength=4) / 4000
    want = np.exp(logits / 0.5) / np.exp(logits / 0.5).sum()
    np.testing.assert_allclose(draws, want, atol=0.03)
    assert sample(logits, 0.0) == 0


def test_bad_models_are_clear(tmp_path, tiny_files):
    path = tmp_path / "bad.gguf"
    w = GGUFWriter()
    w.add_metadata("general.architecture", "gpt2")
    w.write(path)
    with pytest.raises(ModelError, match="architecture 'gpt2' is not supported"):
        NumpyModel(read_gguf(path))
    g = read_gguf(tiny_files["llama"])
    del g.tensors["blk.1.ffn_up.weight"]
    with pytest.raises(Exception, match="no tensor named 'blk.1.ffn_up.weight'"):
        NumpyModel(g)
    g = read_gguf(tiny_files["llama"])
    g.metadata["llama.embedding_length"] = 32
    with pytest.raises(ModelError, match="has shape"):
        NumpyModel(g)
    g = read_gguf(tiny_files["qwen3"])
    g.metadata["qwen3.rope.dimension_count"] = 16
    with pytest.raises(ModelError, match="partial RoPE"):
        NumpyModel(g)


def test_rope_frequency_factors_divide_the_frequencies():
    factors = np.array([1.0, 2.0, 4.0, 8.0], np.float32)
    got = rope_frequencies(8, 10000.0, factors)
    want = [10000.0 ** (-2 * i / 8) / f for i, f in enumerate(factors)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
