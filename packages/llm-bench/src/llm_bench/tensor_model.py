"""llama, qwen3 and olmoe on `uop_scheduler.Tensor`: one fixed-shape decode step with a fixed-size KV cache, under TinyJit.

Every token, prompt or generated, runs through the same `step(x, pos, *caches)` graph: each layer's K and V cache has
the shape (max_context, kv_heads, head_dim) whatever the position, the new row is blended in where
`arange(max_context) == pos`, and attention masks the positions after `pos`. (One tensor per layer rather than one
(layers, ...) tensor: stacking the layers back together would copy the whole cache once more per token.) So the graph never changes shape and
TinyJit captures it once and replays it for every later token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from uop_scheduler import Tensor, TinyJit, dtypes

from .errors import ModelError
from .gguf_reader import GGUFFile
from .model_api import Backend, LanguageModel
from .model_config import ModelConfig
from .reference_model import LayerWeights, load_layer
from .reference_ops import rope_frequencies

# linear weights that keep float16 on the device when the file stores them as F16 (halving the bytes a step reads)
_HALF_SOURCE_TYPES = ("F16",)


@dataclass
class TensorLayer:
    """One block's weights as device Tensors: norms float32; linear weights transposed to (in, out), float32 or float16;
    expert weights (experts, out, in) as stored."""

    attn_norm: Tensor
    wqkv: Tensor  # Q, K and V projections side by side: one kernel per layer instead of three
    wo: Tensor
    ffn_norm: Tensor
    q_norm: Tensor | None
    k_norm: Tensor | None
    gate_up: Tensor | None  # gate and up projections side by side
    down: Tensor | None
    router: Tensor | None
    gate_exps: Tensor | None
    up_exps: Tensor | None
    down_exps: Tensor | None


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""
    return x * (x.square().mean(-1, keepdim=True) + eps).rsqrt() * weight


def rope_neox(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate (x[i], x[i + d/2]) pairs; x: (heads, d), cos/sin: (1, d/2) for the current position."""
    half = x.shape[-1] // 2
    x1, x2 = x[:, :half], x[:, half:]
    return (x1 * cos - x2 * sin).cat(x2 * cos + x1 * sin, dim=-1)


def linear(x: Tensor, weight_t: Tensor) -> Tensor:
    """x @ weight_t with the weight stored transposed, (in_features, out_features); float16 weights accumulate in float32.

    The transposed layout lets the matrix-vector kernel stream whole output rows: on CPU a 2304x768 float16 product took
    400 us against 640 us for the (out, in) layout. The input is materialized first so the producer (a norm, the SwiGLU
    product) is computed once rather than fused into every output's reduction.
    """
    x = x.contiguous()
    return x.matmul(weight_t, dtype=dtypes.float32) if weight_t.dtype is not dtypes.float32 else x @ weight_t


class TensorModel(LanguageModel):
    """A llama / qwen3 / olmoe model on a uop_scheduler device; `jit=False` runs every step eagerly (for tests)."""

    def __init__(self, gguf: GGUFFile, max_context: int | None = None, device: str = "CPU", jit: bool = True):
        c = self.config = ModelConfig.from_gguf(gguf)
        self.device = device
        self.max_context = min(max_context or c.context_length, c.context_length)
        if self.max_context < 1:
            raise ModelError(f"max context must be at least 1, got {max_context}")
        self._bytes: dict[str, int] = {}
        self._params = 0
        # the embedding lookup stays on the host: a device gather over the vocabulary would read the whole table per token
        self.token_embd = gguf.tensor("token_embd.weight").dequantize()
        self._params += self.token_embd.size
        self.layers = [self._upload_layer(gguf, load_layer(gguf, c, i), i) for i in range(c.n_layers)]
        self.output_norm = self._upload(gguf, "output_norm.weight", gguf.tensor("output_norm.weight").dequantize(), "norm")
        out_name = "output.weight" if "output.weight" in gguf else "token_embd.weight"
        self.output = self._upload(gguf, out_name, gguf.tensor(out_name).dequantize(), "linear", count=out_name == "output.weight")
        factors = gguf.tensor("rope_freqs.weight").dequantize() if "rope_freqs.weight" in gguf else None
        angles = np.arange(self.max_context, dtype=np.float64)[:, None] * rope_frequencies(c.head_dim, c.rope_theta, factors)[None, :]
        self.cos = Tensor(np.cos(angles).astype(np.float32), device=device)
        self.sin = Tensor(np.sin(angles).astype(np.float32), device=device)
        self.positions = Tensor.arange(self.max_context, dtype=dtypes.int32, device=device).contiguous().realize()
        self._cache_shape = (self.max_context, c.n_kv_heads, c.head_dim)
        self.jit = jit
        self._step_fn = TinyJit(self._step) if jit else self._step
        self.reset()

    def _upload(self, gguf: GGUFFile, name: str, array: np.ndarray, kind: str, count: bool = True, parts: Sequence[str] = ()) -> Tensor:
        """Put one weight on the device. `kind`: "norm" (float32), "router" (float32, transposed), "linear" (transposed) or
        "experts"; linear and expert weights stay float16 when the file stores them (or all `parts` they were joined from) so,
        else float32."""
        sources = parts or (name,)
        half = kind in ("linear", "experts") and all(gguf.tensor(n).ggml_type.name in _HALF_SOURCE_TYPES for n in sources)
        host = array.T if kind in ("linear", "router") else array
        tensor = Tensor(np.ascontiguousarray(host, dtype=np.float16 if half else np.float32), device=self.device)
        self._bytes[name] = tensor.nbytes()
        if count:
            self._params += array.size
        return tensor

    def _upload_layer(self, gguf: GGUFFile, w: LayerWeights, i: int) -> TensorLayer:
        p = f"blk.{i}."
        names = {"attn_norm": "attn_norm", "wo": "attn_output", "ffn_norm": "ffn_norm", "q_norm": "attn_q_norm", "k_norm": "attn_k_norm",
                 "down": "ffn_down", "router": "ffn_gate_inp", "gate_exps": "ffn_gate_exps", "up_exps": "ffn_up_exps", "down_exps": "ffn_down_exps"}

        # the router stays float32: its logits pick experts, and rounding could flip a near-tie against the reference
        def kind(field: str) -> str:
            return "norm" if field.endswith("norm") else "router" if field == "router" else "experts" if field.endswith("_exps") else "linear"

        fields = {f: None if getattr(w, f) is None else self._upload(gguf, p + n + ".weight", getattr(w, f), kind(f)) for f, n in names.items()}
        qkv = tuple(p + n + ".weight" for n in ("attn_q", "attn_k", "attn_v"))
        fields["wqkv"] = self._upload(gguf, p + "attn_qkv", np.concatenate([w.wq, w.wk, w.wv]), "linear", parts=qkv)
        fields["gate_up"] = None if w.gate is None or w.up is None else self._upload(
            gguf, p + "ffn_gate_up", np.concatenate([w.gate, w.up]), "linear", parts=(p + "ffn_gate.weight", p + "ffn_up.weight"))
        return TensorLayer(**fields)

    def reset(self) -> None:
        # k0, v0, k1, v1, ...: the step's cache inputs and outputs in the same order
        self.caches = [Tensor.zeros(*self._cache_shape, dtype=dtypes.float32, device=self.device).contiguous().realize()
                       for _ in range(2 * self.config.n_layers)]

    @property
    def param_count(self) -> int:
        return self._params

    @property
    def weight_bytes(self) -> int:
        return sum(self._bytes.values()) + self.token_embd.nbytes

    @property
    def cache_bytes(self) -> int:
        return 2 * self.config.n_layers * math.prod(self._cache_shape) * 4

    def step_bytes(self, start_pos: int) -> int:
        c = self.config
        moved = self.token_embd[0].nbytes
        for name, size in self._bytes.items():
            # a token reads only the experts the router picks for it
            moved += size * c.n_experts_used // c.n_experts if name.endswith("_exps.weight") else size
        return moved + 2 * c.n_layers * c.n_kv_heads * (start_pos + 1) * c.head_dim * 4

    def forward(self, tokens: Sequence[int], start_pos: int) -> np.ndarray:
        c = self.config
        n_new = len(tokens)
        if n_new == 0 or start_pos < 0 or start_pos + n_new > self.max_context:
            raise ModelError(f"cannot run {n_new} tokens at position {start_pos} with a context of {self.max_context}")
        ids = np.asarray(tokens, dtype=np.int64)
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ModelError(f"token ids must be in 0..{c.vocab_size - 1}")
        # the prompt runs token by token through the same step, so prefill and decode share one captured graph
        out = []
        for offset, token in enumerate(ids):
            x = Tensor(self.token_embd[token : token + 1], device=self.device)
            pos = Tensor(np.array([start_pos + offset], dtype=np.int32), device=self.device)
            logits, *self.caches = self._step_fn(x, pos, *self.caches)
            out.append(logits.numpy().reshape(-1))
        return np.stack(out).astype(np.float32)

    def _step(self, x: Tensor, pos: Tensor, *caches: Tensor) -> tuple[Tensor, ...]:
        """One token: x (1, dim) embedding, pos (1,) int32, caches k0, v0, k1, ... -> logits (1, vocab) and the updated caches."""
        c = self.config
        here = (self.positions == pos).reshape(self.max_context, 1, 1)
        visible = (self.positions <= pos).reshape(1, 1, self.max_context)
        cos, sin = self.cos[pos], self.sin[pos]
        new_caches: list[Tensor] = []
        for i, layer in enumerate(self.layers):
            h = rms_norm(x, layer.attn_norm, c.norm_eps)
            attn, k_i, v_i = self._attention(layer, h, here, visible, cos, sin, caches[2 * i], caches[2 * i + 1])
            new_caches += [k_i, v_i]
            x = x + attn
            h = rms_norm(x, layer.ffn_norm, c.norm_eps)
            x = x + (self._moe(layer, h) if layer.router is not None else self._swiglu(h, layer.gate_up, layer.down))
        logits = linear(rms_norm(x, self.output_norm, c.norm_eps), self.output)
        return (logits, *new_caches)

    def _attention(self, layer: TensorLayer, x: Tensor, here: Tensor, visible: Tensor, cos: Tensor, sin: Tensor,
                   k_cache: Tensor, v_cache: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        c = self.config
        q_out, kv_out = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        qkv = linear(x, layer.wqkv)
        q, k, v = qkv[:, :q_out], qkv[:, q_out : q_out + kv_out], qkv[:, q_out + kv_out :]
        if c.qk_norm == "full":
            assert layer.q_norm is not None and layer.k_norm is not None
            q, k = rms_norm(q, layer.q_norm, c.norm_eps), rms_norm(k, layer.k_norm, c.norm_eps)
        q, k, v = q.reshape(c.n_heads, c.head_dim), k.reshape(c.n_kv_heads, c.head_dim), v.reshape(c.n_kv_heads, c.head_dim)
        if c.qk_norm == "head":
            assert layer.q_norm is not None and layer.k_norm is not None
            q, k = rms_norm(q, layer.q_norm, c.norm_eps), rms_norm(k, layer.k_norm, c.norm_eps)
        q, k = rope_neox(q, cos, sin), rope_neox(k, cos, sin)
        # write this position's row functionally: same graph for every position. The new rows are materialized first,
        # else the blend would recompute the projection for every cache element it visits.
        k_cache = here.where(k.reshape(1, c.n_kv_heads, c.head_dim).contiguous(), k_cache).contiguous()
        v_cache = here.where(v.reshape(1, c.n_kv_heads, c.head_dim).contiguous(), v_cache).contiguous()
        group = c.n_heads // c.n_kv_heads
        # grouped-query attention: each KV head serves `group` query heads
        scores = q.reshape(c.n_kv_heads, group, c.head_dim) @ k_cache.permute(1, 2, 0) * (1.0 / math.sqrt(c.head_dim))
        scores = visible.where(scores, float("-inf"))
        out = scores.softmax(-1) @ v_cache.permute(1, 0, 2)
        return linear(out.reshape(1, c.n_heads * c.head_dim), layer.wo), k_cache, v_cache

    def _swiglu(self, x: Tensor, gate_up: Tensor | None, down: Tensor | None) -> Tensor:
        assert gate_up is not None and down is not None
        gu = linear(x, gate_up)
        hidden = self.config.hidden_dim
        return linear(gu[:, :hidden].silu() * gu[:, hidden:], down)

    def _moe(self, layer: TensorLayer, x: Tensor) -> Tensor:
        """Softmax-gated top-k mixture; every expert is computed and the unchosen ones get weight 0 (fixed graph)."""
        c = self.config
        assert layer.router is not None and layer.gate_exps is not None and layer.up_exps is not None and layer.down_exps is not None
        probs = linear(x, layer.router).softmax(-1).reshape(c.n_experts)
        _, chosen = probs.topk(c.n_experts_used)
        picked = chosen.reshape(c.n_experts_used, 1) == Tensor.arange(c.n_experts, dtype=dtypes.int32, device=self.device).reshape(1, -1)
        weights = picked.float().sum(0) * probs
        if c.norm_topk_prob:
            weights = weights / weights.sum()
        xe = x.reshape(1, 1, c.dim)
        gate = (xe * layer.gate_exps).sum(-1, dtype=dtypes.float32)
        up = (xe * layer.up_exps).sum(-1, dtype=dtypes.float32)
        hidden = (gate.silu() * up).reshape(c.n_experts, 1, c.hidden_dim)
        per_expert = (hidden * layer.down_exps).sum(-1, dtype=dtypes.float32)
        return (weights.reshape(c.n_experts, 1) * per_expert).sum(0).reshape(1, c.dim)


class TensorBackend(Backend):
    """The uop_scheduler backend for one device (`--device CPU`, `CPU:1`, ...), decoding under TinyJit."""

    name = "CPU"

    def __init__(self, device: str = "CPU", jit: bool = True):
        self.name, self.jit = device.upper(), jit

    def load(self, gguf: GGUFFile, max_context: int | None = None) -> LanguageModel:
        return TensorModel(gguf, max_context, device=self.name, jit=self.jit)
