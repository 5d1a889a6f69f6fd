"""Built-in tiny models (`tiny-llama`, `tiny-qwen3`, `tiny-olmoe`): deterministic random weights and a real BPE vocabulary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .bpe_train import learn_bpe
from .errors import ModelError
from .ggml_types import GGMLType
from .gguf_writer import GGUFWriter
from .model_config import ModelConfig
from .quantize import quantize_q8_0
from .tiny_corpus import TINY_CORPUS
from .tokenizer import TokenType


@dataclass(frozen=True)
class TinySpec:
    """How one tiny model is built."""

    config: ModelConfig
    pre: str  # tokenizer.ggml.pre preset
    specials: tuple[str, ...]  # control tokens; the first is BOS, the second EOS
    matrix_type: GGMLType  # storage type of the 2-D weights
    add_bos: bool


N_MERGES = 300
SEED = 0x7E57

TINY_SPECS: dict[str, TinySpec] = {
    "tiny-llama": TinySpec(
        ModelConfig("llama", n_layers=2, dim=64, hidden_dim=160, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=0,
                    context_length=512, norm_eps=1e-5, rope_theta=500000.0, permuted_qk=True),
        "llama-bpe", ("<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"), GGMLType.F16, True),
    "tiny-qwen3": TinySpec(
        ModelConfig("qwen3", n_layers=2, dim=64, hidden_dim=128, n_heads=4, n_kv_heads=2, head_dim=32, vocab_size=0,
                    context_length=512, norm_eps=1e-6, rope_theta=1000000.0, qk_norm="head"),
        "qwen2", ("<|endoftext|>", "<|im_end|>", "<|im_start|>"), GGMLType.Q8_0, False),
    "tiny-olmoe": TinySpec(
        ModelConfig("olmoe", n_layers=2, dim=64, hidden_dim=64, n_heads=4, n_kv_heads=4, head_dim=16, vocab_size=0,
                    context_length=512, norm_eps=1e-5, rope_theta=10000.0, qk_norm="full", n_experts=4, n_experts_used=2),
        "olmo", ("<|endoftext|>", "<|padding|>"), GGMLType.F16, False),
}
TINY_ARCHS = {spec.config.arch: name for name, spec in TINY_SPECS.items()}

# Larger generated models for benchmarks: llama-shaped, random weights, built on first use like the tiny ones.
# ~97M parameters (14 x 6.9M per block + embeddings): big enough that decode is bound by memory bandwidth
_LLAMA_100M = ModelConfig("llama", n_layers=14, dim=768, hidden_dim=2304, n_heads=12, n_kv_heads=4, head_dim=64, vocab_size=0,
                          context_length=2048, norm_eps=1e-5, rope_theta=500000.0, permuted_qk=True)
_LLAMA_SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>")
SYNTHETIC_SPECS: dict[str, TinySpec] = {
    "random-llama-100m": TinySpec(_LLAMA_100M, "llama-bpe", _LLAMA_SPECIALS, GGMLType.F16, True),
    # the same shape with Q8_0 matrices, which stay quantized on the device: about half the bytes per token
    "random-llama-100m-q8": TinySpec(_LLAMA_100M, "llama-bpe", _LLAMA_SPECIALS, GGMLType.Q8_0, True),
}


def _permute_for_gguf(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """The llama.cpp converter's Q/K row interleave (the inverse of `unpermute_qk_rows`)."""
    rows, cols = weight.shape
    return weight.reshape(n_heads, 2, rows // n_heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def tiny_model_name(name_or_arch: str) -> str:
    """`tiny-llama` from "tiny-llama" or "llama"; a `ModelError` for anything else."""
    name = TINY_ARCHS.get(name_or_arch, name_or_arch)
    if name not in TINY_SPECS:
        raise ModelError(f"no tiny model {name_or_arch!r}; choose one of {', '.join(list(TINY_SPECS) + list(TINY_ARCHS))}")
    return name


def make_tiny(name_or_arch: str, out: str | Path) -> Path:
    """Write the tiny model (`tiny-llama`/`llama`, `tiny-qwen3`/`qwen3`, `tiny-olmoe`/`olmoe`) to `out` as a GGUF.

    The file is the same byte for byte on every run and machine: fixed seeds, no timestamps.
    """
    name = tiny_model_name(name_or_arch)
    return write_random_model(name, TINY_SPECS[name], out)


def write_random_model(name: str, spec: TinySpec, out: str | Path) -> Path:
    """Write a model of any size with deterministic random weights (seeded by `name`) and the built-in BPE vocabulary.

    `spec.config.vocab_size` is ignored: the vocabulary is learned from the built-in text. Used for the tiny models
    and for larger synthetic models in benchmarks.
    """
    vocab = learn_bpe(TINY_CORPUS, N_MERGES, spec.pre)
    tokens = vocab.tokens + list(spec.specials)
    token_types = [int(TokenType.NORMAL)] * len(vocab.tokens) + [int(TokenType.CONTROL)] * len(spec.specials)
    c = ModelConfig(**{**spec.config.__dict__, "vocab_size": len(tokens)})
    writer = GGUFWriter()
    for key, value in c.metadata().items():
        writer.add_metadata(key, value)
    writer.add_metadata("general.name", name)
    writer.add_metadata("general.file_type", 7 if spec.matrix_type is GGMLType.Q8_0 else 1)
    writer.add_metadata("tokenizer.ggml.model", "gpt2")
    writer.add_metadata("tokenizer.ggml.pre", spec.pre)
    writer.add_metadata("tokenizer.ggml.tokens", tokens)
    writer.add_metadata("tokenizer.ggml.token_type", token_types)
    writer.add_metadata("tokenizer.ggml.merges", vocab.merges)
    writer.add_metadata("tokenizer.ggml.bos_token_id", len(vocab.tokens))
    writer.add_metadata("tokenizer.ggml.eos_token_id", len(vocab.tokens) + 1)
    writer.add_metadata("tokenizer.ggml.add_bos_token", spec.add_bos)

    rng = np.random.default_rng([SEED, sum(map(ord, name))])

    def matrix(tensor_name: str, *shape: int) -> None:
        # scaled so activations keep unit size through the layers and the logits are not flat
        w = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
        if tensor_name.endswith(("attn_q.weight", "attn_k.weight")) and c.permuted_qk:
            w = _permute_for_gguf(w, c.n_heads if "attn_q" in tensor_name else c.n_kv_heads)
        if spec.matrix_type is GGMLType.Q8_0:
            writer.add_tensor(tensor_name, quantize_q8_0(w), GGMLType.Q8_0, shape)
        else:
            writer.add_tensor(tensor_name, w.astype(np.float16))

    def norm(tensor_name: str, size: int) -> None:
        writer.add_tensor(tensor_name, (1.0 + 0.1 * rng.standard_normal(size)).astype(np.float32))

    q_out, kv_out = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    matrix("token_embd.weight", c.vocab_size, c.dim)
    for i in range(c.n_layers):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", c.dim)
        matrix(p + "attn_q.weight", q_out, c.dim)
        matrix(p + "attn_k.weight", kv_out, c.dim)
        matrix(p + "attn_v.weight", kv_out, c.dim)
        matrix(p + "attn_output.weight", c.dim, q_out)
        if c.qk_norm == "head":
            norm(p + "attn_q_norm.weight", c.head_dim)
            norm(p + "attn_k_norm.weight", c.head_dim)
        elif c.qk_norm == "full":
            norm(p + "attn_q_norm.weight", q_out)
            norm(p + "attn_k_norm.weight", kv_out)
        norm(p + "ffn_norm.weight", c.dim)
        if c.n_experts:
            matrix(p + "ffn_gate_inp.weight", c.n_experts, c.dim)
            matrix(p + "ffn_gate_exps.weight", c.n_experts, c.hidden_dim, c.dim)
            matrix(p + "ffn_up_exps.weight", c.n_experts, c.hidden_dim, c.dim)
            matrix(p + "ffn_down_exps.weight", c.n_experts, c.dim, c.hidden_dim)
        else:
            matrix(p + "ffn_gate.weight", c.hidden_dim, c.dim)
            matrix(p + "ffn_up.weight", c.hidden_dim, c.dim)
            matrix(p + "ffn_down.weight", c.dim, c.hidden_dim)
    norm("output_norm.weight", c.dim)
    # tiny-llama ties the output to the embedding, as Llama 3.2 does
    if c.arch != "llama":
        matrix("output.weight", c.vocab_size, c.dim)
    return writer.write(out)
