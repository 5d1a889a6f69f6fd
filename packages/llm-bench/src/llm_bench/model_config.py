"""Model hyperparameters read from GGUF metadata (`{arch}.block_count`, `{arch}.attention.head_count`, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ModelError
from .gguf_reader import GGUFFile

SUPPORTED_ARCHITECTURES = ("llama", "qwen3", "olmoe")


@dataclass(frozen=True)
class ModelConfig:
    """Everything a forward pass needs besides the weights.

    `qk_norm` is "none", "head" (qwen3: RMSNorm over each head's `head_dim`) or "full" (olmoe: over all heads at once).
    `permuted_qk` is true for llama, whose GGUF Q/K rows are stored interleaved for ggml's pairwise RoPE.
    """

    arch: str
    n_layers: int
    dim: int
    hidden_dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    context_length: int
    norm_eps: float
    rope_theta: float
    qk_norm: str = "none"
    permuted_qk: bool = False
    n_experts: int = 0
    n_experts_used: int = 0
    norm_topk_prob: bool = False

    @classmethod
    def from_gguf(cls, gguf: GGUFFile) -> ModelConfig:
        """Read the hyperparameters of a llama, qwen3 or olmoe GGUF."""
        meta = gguf.metadata
        arch = meta.get("general.architecture")
        if arch not in SUPPORTED_ARCHITECTURES:
            raise ModelError(f"{gguf.paths[0]}: architecture {arch!r} is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}")

        where = gguf.paths[0]

        def need(key: str) -> Any:
            if f"{arch}.{key}" not in meta:
                raise ModelError(f"{where}: metadata {arch}.{key} is missing; the file is not a complete {arch} model")
            return meta[f"{arch}.{key}"]

        def integer(key: str, value: Any, minimum: int = 1) -> int:
            """A whole number of at least `minimum`, else a ModelError naming the key (no int() of NaN, str or lists)."""
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (float("inf"), float("-inf")) \
                    or int(value) != value or int(value) < minimum:
                raise ModelError(f"{where}: metadata {arch}.{key} must be an integer >= {minimum}, got {value!r}"[:200])
            return int(value)

        def real(key: str, value: Any, positive: bool = True) -> float:
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or value != value or abs(value) == float("inf") or (positive and value <= 0):
                raise ModelError(f"{where}: metadata {arch}.{key} must be a finite{' positive' if positive else ''} number, got {value!r}"[:200])
            return float(value)

        dim, n_heads = integer("embedding_length", need("embedding_length")), integer("attention.head_count", need("attention.head_count"))
        head_dim = integer("attention.key_length", meta.get(f"{arch}.attention.key_length", dim // n_heads))
        n_experts = integer("expert_count", meta.get(f"{arch}.expert_count", 0), minimum=0)
        hidden = meta.get(f"{arch}.expert_feed_forward_length") if n_experts else None
        if hidden is None:
            hidden = need("feed_forward_length")
        # the embedding table is authoritative: some models pad it past the tokenizer's vocabulary
        if "token_embd.weight" in gguf.tensors:
            vocab = gguf.tensors["token_embd.weight"].shape[0]
        else:
            tokens = meta.get("tokenizer.ggml.tokens", [])
            vocab = meta.get(f"{arch}.vocab_size", len(tokens) if isinstance(tokens, list) else 0)
        qk_norm = "none"
        if "blk.0.attn_q_norm.weight" in gguf.tensors:
            qk_norm = "head" if gguf.tensors["blk.0.attn_q_norm.weight"].n_elements == head_dim else "full"
        config = cls(
            arch=arch, n_layers=integer("block_count", need("block_count")), dim=dim, hidden_dim=integer("feed_forward_length", hidden),
            n_heads=n_heads, n_kv_heads=integer("attention.head_count_kv", meta.get(f"{arch}.attention.head_count_kv", n_heads)),
            head_dim=head_dim, vocab_size=integer("vocab_size", vocab, minimum=0),
            context_length=integer("context_length", need("context_length")),
            norm_eps=real("attention.layer_norm_rms_epsilon", need("attention.layer_norm_rms_epsilon")),
            rope_theta=real("rope.freq_base", meta.get(f"{arch}.rope.freq_base", 10000.0)), qk_norm=qk_norm, permuted_qk=arch == "llama",
            n_experts=n_experts, n_experts_used=integer("expert_used_count", meta.get(f"{arch}.expert_used_count", 0), minimum=0),
            norm_topk_prob=bool(meta.get(f"{arch}.expert_weights_norm", False)))
        config.validate(str(gguf.paths[0]))
        # features of other members of these families that the forward passes here do not implement
        rope_dim = meta.get(f"{arch}.rope.dimension_count", head_dim)
        value_dim = meta.get(f"{arch}.attention.value_length", head_dim)
        if rope_dim != head_dim or value_dim != head_dim:
            raise ModelError(f"{gguf.paths[0]}: partial RoPE ({rope_dim} of {head_dim}) or a value size of {value_dim} is not supported")
        if "blk.0.attn_q.bias" in gguf.tensors:
            raise ModelError(f"{gguf.paths[0]}: attention biases are not supported (llama, qwen3 and olmoe have none)")
        return config

    def validate(self, where: str) -> None:
        """Check the hyperparameters are consistent with each other."""
        if self.n_heads % self.n_kv_heads:
            raise ModelError(f"{where}: {self.n_heads} attention heads are not a multiple of {self.n_kv_heads} KV heads")
        if self.head_dim % 2:
            raise ModelError(f"{where}: head size {self.head_dim} is odd; RoPE needs pairs")
        if self.n_experts and not 0 < self.n_experts_used <= self.n_experts:
            raise ModelError(f"{where}: uses {self.n_experts_used} of {self.n_experts} experts per token")
        if self.vocab_size <= 0:
            raise ModelError(f"{where}: the vocabulary size is unknown (no tokenizer.ggml.tokens and no token_embd.weight)")

    def metadata(self) -> Mapping[str, Any]:
        """The GGUF metadata keys that describe this config (the inverse of `from_gguf`, for writing models)."""
        arch = self.arch
        meta: dict[str, Any] = {
            "general.architecture": arch,
            f"{arch}.block_count": self.n_layers,
            f"{arch}.context_length": self.context_length,
            f"{arch}.embedding_length": self.dim,
            f"{arch}.feed_forward_length": self.hidden_dim,
            f"{arch}.attention.head_count": self.n_heads,
            f"{arch}.attention.head_count_kv": self.n_kv_heads,
            f"{arch}.attention.key_length": self.head_dim,
            f"{arch}.attention.value_length": self.head_dim,
            f"{arch}.attention.layer_norm_rms_epsilon": self.norm_eps,
            f"{arch}.rope.freq_base": self.rope_theta,
        }
        if self.n_experts:
            meta[f"{arch}.expert_count"] = self.n_experts
            meta[f"{arch}.expert_used_count"] = self.n_experts_used
            meta[f"{arch}.expert_feed_forward_length"] = self.hidden_dim
        return meta
