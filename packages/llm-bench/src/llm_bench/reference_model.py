"""The numpy reference forward pass of llama, qwen3 and olmoe: the oracle the Tensor models are tested against."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import ModelError
from .gguf_reader import GGUFFile, GGUFTensor
from .model_api import Backend, LanguageModel
from .model_config import ModelConfig
from .qdot import check_activations, int_dot_weight, q8_roundtrip_np
from .reference_ops import apply_rope_neox, attention, moe, rms_norm, rope_frequencies, silu, unpermute_qk_rows


@dataclass
class LayerWeights:
    """One transformer block's weights as float32 arrays (linear weights are (out_features, in_features))."""

    attn_norm: np.ndarray
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    ffn_norm: np.ndarray
    q_norm: np.ndarray | None = None
    k_norm: np.ndarray | None = None
    # dense feed-forward
    gate: np.ndarray | None = None
    up: np.ndarray | None = None
    down: np.ndarray | None = None
    # mixture of experts
    router: np.ndarray | None = None
    gate_exps: np.ndarray | None = None
    up_exps: np.ndarray | None = None
    down_exps: np.ndarray | None = None
    #: the fields multiplied with 8-bit quantized activations (`qdot.int_dot_weight`), as the Tensor backend does
    int_dot: frozenset[str] = frozenset()


def checked_tensor(gguf: GGUFFile, name: str, shape: tuple[int, ...]) -> GGUFTensor:
    """The tensor `name`, after checking it has the `shape` the metadata implies."""
    tensor = gguf.tensor(name)
    if tensor.shape != shape:
        raise ModelError(f"{gguf.paths[0]}: tensor {name!r} has shape {tensor.shape}, the metadata implies {shape}")
    return tensor


def _weight(gguf: GGUFFile, name: str, shape: tuple[int, ...]) -> np.ndarray:
    return checked_tensor(gguf, name, shape).dequantize()


def layer_tensors(config: ModelConfig, i: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Block `i`'s weights by `LayerWeights` field: (GGUF tensor name, expected shape), for the tensors the architecture has."""
    c, p = config, f"blk.{i}."
    q_out, kv_out = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    specs = {"attn_norm": ("attn_norm", (c.dim,)), "wq": ("attn_q", (q_out, c.dim)), "wk": ("attn_k", (kv_out, c.dim)),
             "wv": ("attn_v", (kv_out, c.dim)), "wo": ("attn_output", (c.dim, q_out)), "ffn_norm": ("ffn_norm", (c.dim,))}
    if c.qk_norm != "none":
        q_width, k_width = (c.head_dim, c.head_dim) if c.qk_norm == "head" else (q_out, kv_out)
        specs |= {"q_norm": ("attn_q_norm", (q_width,)), "k_norm": ("attn_k_norm", (k_width,))}
    if c.n_experts:
        specs |= {"router": ("ffn_gate_inp", (c.n_experts, c.dim)), "gate_exps": ("ffn_gate_exps", (c.n_experts, c.hidden_dim, c.dim)),
                  "up_exps": ("ffn_up_exps", (c.n_experts, c.hidden_dim, c.dim)),
                  "down_exps": ("ffn_down_exps", (c.n_experts, c.dim, c.hidden_dim))}
    else:
        specs |= {"gate": ("ffn_gate", (c.hidden_dim, c.dim)), "up": ("ffn_up", (c.hidden_dim, c.dim)), "down": ("ffn_down", (c.dim, c.hidden_dim))}
    return {field: (p + name + ".weight", shape) for field, (name, shape) in specs.items()}


def load_layer(gguf: GGUFFile, config: ModelConfig, i: int, activations: str = "q8") -> LayerWeights:
    """Read and dequantize block `i`, restoring the half-split Q/K row order for llama."""
    specs = layer_tensors(config, i)
    layer = LayerWeights(**{field: _weight(gguf, name, shape) for field, (name, shape) in specs.items()})
    # the router stays float (the Tensor backend keeps it float32 so its logits pick the same experts)
    layer.int_dot = frozenset(f for f, (name, shape) in specs.items()
                              if f != "router" and int_dot_weight(gguf.tensor(name).ggml_type, shape, activations))
    if config.permuted_qk:
        layer.wq, layer.wk = unpermute_qk_rows(layer.wq, config.n_heads), unpermute_qk_rows(layer.wk, config.n_kv_heads)
    return layer


class NumpyModel(LanguageModel):
    """Reference forward pass in float32 numpy, weights dequantized at load."""

    device = "numpy"

    def __init__(self, gguf: GGUFFile, max_context: int | None = None, activations: str = "q8"):
        c = self.config = ModelConfig.from_gguf(gguf)
        self.activations = check_activations(activations)
        self.max_context = min(max_context or c.context_length, c.context_length)
        if self.max_context < 1:
            raise ModelError(f"max context must be at least 1, got {max_context}")
        self.token_embd = _weight(gguf, "token_embd.weight", (c.vocab_size, c.dim))
        self.layers = [load_layer(gguf, c, i, activations) for i in range(c.n_layers)]
        self.output_norm = _weight(gguf, "output_norm.weight", (c.dim,))
        # Llama 3.2 ties the output projection to the embedding table
        output_name = "output.weight" if "output.weight" in gguf else "token_embd.weight"
        self.output = _weight(gguf, output_name, (c.vocab_size, c.dim)) if output_name == "output.weight" else self.token_embd
        self.output_int_dot = int_dot_weight(gguf.tensor(output_name).ggml_type, (c.vocab_size, c.dim), activations)
        factors = gguf.tensor("rope_freqs.weight").dequantize() if "rope_freqs.weight" in gguf else None
        self.inv_freq = rope_frequencies(c.head_dim, c.rope_theta, factors)
        cache_shape = (c.n_layers, c.n_kv_heads, self.max_context, c.head_dim)
        self.cache_k, self.cache_v = np.zeros(cache_shape, np.float32), np.zeros(cache_shape, np.float32)

    def reset(self) -> None:
        self.cache_k[:] = 0
        self.cache_v[:] = 0

    def _arrays(self) -> list[np.ndarray]:
        arrays = [self.token_embd, self.output_norm] + ([self.output] if self.output is not self.token_embd else [])
        for layer in self.layers:
            arrays += [a for a in vars(layer).values() if isinstance(a, np.ndarray)]
        return arrays

    @property
    def param_count(self) -> int:
        return sum(a.size for a in self._arrays())

    @property
    def weight_bytes(self) -> int:
        return sum(a.nbytes for a in self._arrays())

    @property
    def cache_bytes(self) -> int:
        return self.cache_k.nbytes + self.cache_v.nbytes

    def step_bytes(self, start_pos: int) -> int:
        c = self.config
        moved = self.output.nbytes + self.output_norm.nbytes + self.token_embd[0].nbytes
        for layer in self.layers:
            for name, array in vars(layer).items():
                if not isinstance(array, np.ndarray):
                    continue
                # a token reads only the experts the router picks for it
                moved += array.nbytes * c.n_experts_used // c.n_experts if name.endswith("_exps") else array.nbytes
        return moved + 2 * c.n_layers * c.n_kv_heads * (start_pos + 1) * c.head_dim * 4

    def forward(self, tokens: Sequence[int], start_pos: int, last_only: bool = False) -> np.ndarray:
        c = self.config
        n_new = len(tokens)
        if n_new == 0 or start_pos < 0 or start_pos + n_new > self.max_context:
            raise ModelError(f"cannot run {n_new} tokens at position {start_pos} with a context of {self.max_context}")
        ids = np.asarray(tokens, dtype=np.int64)
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ModelError(f"token ids must be in 0..{c.vocab_size - 1}")
        positions = np.arange(start_pos, start_pos + n_new)
        x = self.token_embd[ids]
        for i, layer in enumerate(self.layers):
            x = x + self._attention(i, layer, rms_norm(x, layer.attn_norm, c.norm_eps), positions)
            h = rms_norm(x, layer.ffn_norm, c.norm_eps)
            if layer.router is not None:
                x = x + moe(h, layer.router, layer.gate_exps, layer.up_exps, layer.down_exps, c.n_experts_used, c.norm_topk_prob)
            else:
                hidden = silu(_product(h, layer, "gate")) * _product(h, layer, "up")
                x = x + _product(hidden, layer, "down")
        out = rms_norm(x[-1:] if last_only else x, self.output_norm, c.norm_eps)
        return ((q8_roundtrip_np(out) if self.output_int_dot else out) @ self.output.T).astype(np.float32)

    def _attention(self, i: int, layer: LayerWeights, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        c = self.config
        n_new = x.shape[0]
        q, k, v = _product(x, layer, "wq"), _product(x, layer, "wk"), _product(x, layer, "wv")
        if c.qk_norm == "full":
            q, k = rms_norm(q, layer.q_norm, c.norm_eps), rms_norm(k, layer.k_norm, c.norm_eps)
        q = q.reshape(n_new, c.n_heads, c.head_dim).transpose(1, 0, 2)
        k = k.reshape(n_new, c.n_kv_heads, c.head_dim).transpose(1, 0, 2)
        v = v.reshape(n_new, c.n_kv_heads, c.head_dim).transpose(1, 0, 2)
        if c.qk_norm == "head":
            q, k = rms_norm(q, layer.q_norm, c.norm_eps), rms_norm(k, layer.k_norm, c.norm_eps)
        q, k = apply_rope_neox(q, positions, self.inv_freq), apply_rope_neox(k, positions, self.inv_freq)
        start, end = int(positions[0]), int(positions[-1]) + 1
        self.cache_k[i, :, start:end], self.cache_v[i, :, start:end] = k, v
        out = attention(q, self.cache_k[i, :, :end], self.cache_v[i, :, :end], start)
        return _product(out.transpose(1, 0, 2).reshape(n_new, c.n_heads * c.head_dim), layer, "wo")


def _product(x: np.ndarray, layer: LayerWeights, field: str) -> np.ndarray:
    """x @ W.T for the layer's weight `field`, with x quantized to 8 bits per 32-element block first when W is an
    int-dot weight (documented in `qdot`): the values the Tensor backend's integer kernels compute."""
    return (q8_roundtrip_np(x) if field in layer.int_dot else x) @ getattr(layer, field).T


class NumpyBackend(Backend):
    """The numpy reference backend (`--device numpy`)."""

    name = "numpy"

    def load(self, gguf: GGUFFile, max_context: int | None = None, activations: str = "q8") -> LanguageModel:
        return NumpyModel(gguf, max_context, activations)
