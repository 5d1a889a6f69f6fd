"""llama, qwen3 and olmoe on `uop_scheduler.Tensor`: a prompt in one batched forward, then one decode step per token
under TinyJit.

Each layer's K and V cache is a (max_context, kv_heads, head_dim) tensor. A forward writes its tokens' rows into the
caches in place (`cache[start:start + n].assign(rows)`) and attends over the rows up to its last token only, with
`start` a bound `Variable`: the decode step is one graph for every position (TinyJit captures it once and binds the
position per call), and its cost follows the live prefix, not the context size.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hcq_runtime import CPUDevice, Device, prepare_cpu
from uop_scheduler import Tensor, TinyJit, Variable, dtypes

from .cpu_attention import cpu_attention
from .dequant import dequantize
from .errors import ModelError
from .gguf_reader import GGUFFile, GGUFTensor
from .model_api import Backend, LanguageModel
from .model_config import ModelConfig
from .qdot import EMBED_TYPES, Fused, check_activations, embed_row
from .reference_model import checked_tensor, layer_tensors
from .reference_ops import rope_frequencies, unpermute_qk_rows
from .router_mfma import BLOCK_ROWS, router_mfma
from .tensor_weights import Linear, rms_norm, upload_matrices


@dataclass
class TensorLayer:
    """One block's weights on the device: norms as float32 Tensors, projections as `Linear`s."""

    attn_norm: Tensor
    qkv: Linear  # Q, K and V projections side by side: one matmul per layer instead of three
    wo: Linear
    ffn_norm: Tensor
    q_norm: Tensor | None
    k_norm: Tensor | None
    gate_up: Linear | None  # gate and up projections side by side
    down: Linear | None
    router: Linear | None
    gate_exps: Linear | None  # (experts, ...) stacks: x -> (experts, n, out)
    up_exps: Linear | None
    down_exps: Linear | None
    router_bf16: Tensor | None = None  # the router's weight in bfloat16, for `router_mfma` (ROUTER_MFMA=1)


@dataclass(frozen=True)
class _Positions:
    """The positions a forward's n tokens run at: from `start`, a bound `Variable` (so one graph serves every
    position); `cos`/`sin` (n, 1, head_dim/2) for each token; `visible` (n, max_context) true where a token may attend
    (None for one token, which sees every row up to its own)."""

    start: Any  # a bound Variable: a uopir UOp, which llm-bench does not import
    cos: Tensor
    sin: Tensor
    visible: Tensor | None
    start_tensor: Tensor | None = None  # `start` in a one-element int32 buffer (the attention kernel's input)


def rope_neox(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate (x[i], x[i + d/2]) pairs; x: (n, heads, d), cos/sin: (n, 1, d/2) for each token's position."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return (x1 * cos - x2 * sin).cat(x2 * cos + x1 * sin, dim=-1)


class TensorModel(LanguageModel):
    """A llama / qwen3 / olmoe model on a uop_scheduler device; `jit=False` runs every step eagerly (for tests).

    Quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) stay quantized on the device and are decoded
    inside each matmul; F16 weights stay float16; the rest is float32.
    """

    def __init__(self, gguf: GGUFFile, max_context: int | None = None, device: str = "CPU", jit: bool = True, activations: str = "q8",
                 attention_kernel: bool | None = None):
        c = self.config = ModelConfig.from_gguf(gguf)
        self.activations = check_activations(activations)
        self.device = device
        if isinstance(Device[device], CPUDevice):
            # what the first step needs besides its kernels, built in the background while the weights load: the
            # precompiled <immintrin.h> the hand-written kernels include, the multi-core launcher, the batch runner
            prepare_cpu(device, header=True)
        self.max_context = min(max_context or c.context_length, c.context_length)
        if self.max_context < 1:
            raise ModelError(f"max context must be at least 1, got {max_context}")
        self._start_var = Variable("start_pos", 0, self.max_context - 1)  # bound to each forward's position
        self._bytes: dict[str, int] = {}
        self._params = 0
        # ROUTER_MFMA=1: the MoE router's logits by the hand-written MFMA kernel (`router_mfma`: AMD gfx942/gfx950, 32
        # experts), from bfloat16 activations and weights, as the seed's olmoe does under that variable
        self.router_mfma = os.environ.get("ROUTER_MFMA", "0") not in ("", "0") and c.n_experts > 0
        self._router_bias: Tensor | None = None
        # the embedding lookup decodes only the rows it needs, read from the file (no device copy of the table: a float32
        # one would hold the whole table), except a tied model's decode step, which reads its row from the output matrix
        # already on the device (see `_embed_part` below)
        embd = self.token_embd = checked_tensor(gguf, "token_embd.weight", (c.vocab_size, c.dim))
        self._params += embd.n_elements
        self.layers = []
        for i in range(c.n_layers):
            self.layers.append(self._load_layer(gguf, i))
            gguf.release_pages()  # each layer's file pages go once copied: the peak holds one layer twice, not the model
        self.output_norm = self._norm(gguf, "output_norm.weight", c.dim)
        # Llama 3.2 ties the output projection to the embedding table
        tied = "output.weight" not in gguf
        output = embd if tied else checked_tensor(gguf, "output.weight", (c.vocab_size, c.dim))
        self.output = self._linear("output.weight", [output], count=not tied)
        # a tied model whose output matrix is one rows-layout matrix on a CPU device looks its decode step's token up
        # there, inside the captured step (`qdot.embed_row`): the host lookup and the input tensor it filled took ~0.2 ms
        # of a 3.5 ms SmolLM2 step, run with caches the weights had just streamed through
        part = self.output.parts[0] if tied and len(self.output.parts) == 1 else None
        self._embed_part = part if part is not None and part.rows_layout and part.ggml_type in EMBED_TYPES else None
        if self._embed_part is not None:
            self._token_ids = Tensor(np.arange(c.vocab_size, dtype=np.int32), device=device)
            self._token_var = Variable("token", 0, c.vocab_size - 1)
        factors = gguf.tensor("rope_freqs.weight").dequantize() if "rope_freqs.weight" in gguf else None
        angles = np.arange(self.max_context, dtype=np.float64)[:, None] * rope_frequencies(c.head_dim, c.rope_theta, factors)[None, :]
        self._cos, self._sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
        self.cos, self.sin = Tensor(self._cos, device=device), Tensor(self._sin, device=device)
        # attention as one hand-written kernel per layer on a CPU device (`cpu_attention`; None: where it applies), else
        # as a graph. The kernel takes the start position from this table, sliced at the bound start variable
        cpu = isinstance(Device[device], CPUDevice) and c.head_dim % 8 == 0
        if attention_kernel and not cpu:
            raise ModelError(f"the attention kernel runs on CPU devices with a head size that is a multiple of 8, not {device} / {c.head_dim}")
        self.attention_kernel = cpu if attention_kernel is None else attention_kernel
        self._positions = Tensor(np.arange(self.max_context, dtype=np.int32), device=device) if self.attention_kernel else None
        self.jit = jit
        # the decode step (`_token_step` where the embedding is on the device, else `_step`); the caches exist: capture at once
        step = self._token_step if self._embed_part is not None else self._step
        self._step_fn = TinyJit(step, warmup=0) if jit else step
        self._prefill_fns: dict[Any, Any] = {}  # padded prompt length (and "last" for last_only) -> its (captured) forward
        # k0, v0, k1, v1, ...: state the captured forwards write into in place (never replaced). They start unwritten:
        # a step reads only the rows up to its last token, all written before, so memory the OS has not handed out yet
        # is never touched (a 4096-token cache costs what the tokens used so far fill, not its full size)
        self.caches = [Tensor.empty(*self._cache_shape, dtype=dtypes.float32, device=device) for _ in range(2 * c.n_layers)]
        gguf.release_pages()  # the weights now live in device buffers; only embedding rows are read from the file again

    # ---- loading ----
    def _norm(self, gguf: GGUFFile, name: str, size: int) -> Tensor:
        tensor = Tensor(checked_tensor(gguf, name, (size,)).dequantize(), device=self.device)
        self._bytes[name] = tensor.nbytes()
        self._params += size
        return tensor

    def _linear(self, key: str, tensors: Sequence[GGUFTensor], count: bool = True, permute_heads: Sequence[int] = (),
                float32: bool = False) -> Linear:
        """Upload `tensors` (stacked along the output axis) as one Linear, recorded under `key`. `permute_heads[i]`:
        restore the half-split Q/K row order of tensor i for that many heads. `float32`: decode to float32 on the host."""

        def unpermute(i: int, array: np.ndarray) -> np.ndarray:
            return unpermute_qk_rows(array, permute_heads[i]) if i < len(permute_heads) else array

        linear = Linear(upload_matrices(tensors, self.device, unpermute if permute_heads else None, float32=float32, activations=self.activations))
        self._bytes[key] = linear.nbytes
        if count:
            self._params += sum(t.n_elements for t in tensors)
        return linear

    def _load_layer(self, gguf: GGUFFile, i: int) -> TensorLayer:
        c = self.config
        specs = layer_tensors(c, i)
        t = {field: checked_tensor(gguf, name, shape) for field, (name, shape) in specs.items() if len(shape) > 1}
        norms = {field: self._norm(gguf, name, shape[0]) for field, (name, shape) in specs.items() if len(shape) == 1}
        p = f"blk.{i}."
        heads = (c.n_heads, c.n_kv_heads) if c.permuted_qk else ()
        layer = TensorLayer(
            attn_norm=norms["attn_norm"], ffn_norm=norms["ffn_norm"], q_norm=norms.get("q_norm"), k_norm=norms.get("k_norm"),
            qkv=self._linear(p + "attn_qkv", [t["wq"], t["wk"], t["wv"]], permute_heads=heads), wo=self._linear(p + "attn_output", [t["wo"]]),
            gate_up=None, down=None, router=None, gate_exps=None, up_exps=None, down_exps=None)
        if c.n_experts:
            # the router stays float32: its logits pick experts, and rounding could flip a near-tie against the reference
            layer.router = self._linear(specs["router"][0], [t["router"]], float32=True)
            if self.router_mfma:
                bits = (np.ascontiguousarray(t["router"].dequantize(), np.float32).view(np.uint32) >> 16).astype(np.uint16)
                layer.router_bf16 = Tensor(bits).bitcast(dtypes.bfloat16).to(self.device).realize()
                if self._router_bias is None:  # olmoe's router has none: zeros, made once for every layer
                    self._router_bias = Tensor(np.zeros(c.n_experts, np.uint16)).bitcast(dtypes.bfloat16).to(self.device).realize()
            layer.gate_exps, layer.up_exps, layer.down_exps = (self._linear(specs[f][0], [t[f]]) for f in ("gate_exps", "up_exps", "down_exps"))
        else:
            layer.gate_up, layer.down = self._linear(p + "ffn_gate_up", [t["gate"], t["up"]]), self._linear(p + "ffn_down", [t["down"]])
        return layer

    # ---- sizes ----
    @property
    def _cache_shape(self) -> tuple[int, int, int]:
        return (self.max_context, self.config.n_kv_heads, self.config.head_dim)

    def reset(self) -> None:
        """Start again at position 0. The caches keep their rows: a step reads only rows it (or an earlier step of
        the new sequence) wrote."""

    @property
    def param_count(self) -> int:
        return self._params

    @property
    def weight_bytes(self) -> int:
        return sum(self._bytes.values()) + self.token_embd.nbytes

    @property
    def cache_bytes(self) -> int:
        c = self.config
        return 2 * c.n_layers * self.max_context * c.n_kv_heads * c.head_dim * 4

    def step_bytes(self, start_pos: int) -> int:
        c = self.config
        moved = self.token_embd.nbytes // self.config.vocab_size
        for name, size in self._bytes.items():
            # a token reads only the experts the router picks for it
            moved += size * c.n_experts_used // c.n_experts if name.endswith("_exps.weight") else size
        return moved + 2 * c.n_layers * c.n_kv_heads * (start_pos + 1) * c.head_dim * 4

    # ---- running ----
    def forward(self, tokens: Sequence[int], start_pos: int, last_only: bool = False) -> np.ndarray:
        c = self.config
        n_new = len(tokens)
        if n_new == 0 or start_pos < 0 or start_pos + n_new > self.max_context:
            raise ModelError(f"cannot run {n_new} tokens at position {start_pos} with a context of {self.max_context}")
        # checked as Python ints: a decode step's Python runs with caches the weights just streamed through, where each
        # numpy call costs tens of microseconds
        if not all(0 <= t < c.vocab_size for t in tokens):
            raise ModelError(f"token ids must be in 0..{c.vocab_size - 1}")
        ids = np.asarray(tokens, dtype=np.int64)
        start = self._start_var.bind(start_pos)
        if n_new == 1:
            x = self._token_var.bind(int(tokens[0])) if self._embed_part is not None else Tensor(self._embed(ids), device=self.device)
            return self._step_fn(x, start).numpy().astype(np.float32, copy=False)
        # A prompt goes through in one pass with a causal mask. Its position is a bound variable and the token count is
        # padded to a power of two, so few prompt graphs are ever compiled (and captured, one TinyJit per padded
        # count). The padding tokens write cache rows past the prompt, which no query reads before they are rewritten.
        padded = min(1 << (n_new - 1).bit_length(), self.max_context - start_pos)
        visible = np.arange(self.max_context)[None, :] <= np.arange(start_pos, start_pos + padded)[:, None]
        inputs = [self._embed(np.pad(ids, (0, padded - n_new))), self._cos[start_pos : start_pos + padded, None],
                  self._sin[start_pos : start_pos + padded, None], visible]
        key = (padded, "last") if last_only else padded
        if key not in self._prefill_fns:
            self._prefill_fns[key] = TinyJit(self._prefill, warmup=0) if self.jit else self._prefill
        # with last_only the output matrix multiplies the last prompt token's row alone (its index a bound variable)
        last = (Variable("last", 0, padded - 1).bind(n_new - 1),) if last_only else ()
        logits = self._prefill_fns[key](*[Tensor(np.ascontiguousarray(a), device=self.device) for a in inputs], start, *last)
        return logits.numpy()[: 1 if last_only else n_new].astype(np.float32, copy=False)

    def _embed(self, ids: np.ndarray) -> np.ndarray:
        """The float32 embedding rows of `ids`, decoded from the file's rows (read without keeping file pages resident:
        over a long run the lookups would otherwise make the whole table resident a second time, next to its device
        copy; see `GGUFTensor.rows`)."""
        return dequantize(self.token_embd.rows(ids), self.token_embd.ggml_type, (len(ids), self.config.dim))

    def _step(self, x: Tensor, start: Any) -> Tensor:
        """One token: x (1, dim) embedding at position `start` (a bound Variable), the caches (written in
        place) -> logits (1, vocab). The graph is the same at every position, so TinyJit captures it once."""
        where = _Positions(start, self.cos[start : start + 1].reshape(1, 1, -1), self.sin[start : start + 1].reshape(1, 1, -1), None)
        return self._forward(x, where).realize()

    def _token_step(self, token: Any, start: Any) -> Tensor:
        """`_step` for the token `token` (a bound Variable), its embedding row read from the output matrix on the device."""
        assert self._embed_part is not None and self._embed_part.ggml_type is not None
        ids = self._token_ids[token : token + 1].contiguous().realize()
        return self._step(embed_row(ids, self._embed_part.data, self._embed_part.ggml_type), start)

    def _prefill(self, x: Tensor, cos: Tensor, sin: Tensor, visible: Tensor, start: Any, last: Any = None) -> Tensor:
        """n tokens: x (n, dim) embeddings from position `start` (a bound Variable), their cos/sin (n, 1, head_dim/2),
        the causal mask (n, max_context), the caches (written in place) -> logits (n, vocab), or (1, vocab) of row
        `last` (a bound Variable) alone when given."""
        return self._forward(x, _Positions(start, cos, sin, visible), last).realize()

    def _forward(self, x: Tensor, where: _Positions, last: Any = None) -> Tensor:
        """x (n, dim) embeddings at the positions `where` describes -> logits (n, vocab), or (1, vocab) of row `last`
        alone when given, writing their K/V rows."""
        c = self.config
        if self._positions is not None:  # once for every layer's attention kernel
            where = dataclasses.replace(where, start_tensor=self._positions[where.start : where.start + 1].contiguous().realize())
        for i, layer in enumerate(self.layers):
            # the residual stream gets a buffer at each add: fused, every norm would sum all earlier layers' outputs
            # again (quadratic work) and each layer would compile kernels of its own instead of sharing the first's.
            # Each layer is realized on its own: one layer's graph is built, walked and planned at a time (29 of 30
            # plans come from the cache) instead of a 30-layer graph, which peaked at about 10 MB more
            # the norms, the SwiGLU product and the residual adds are computed by the matmul kernels around their
            # products where those are hand-written kernels (7 kernels fewer per SmolLM2 layer), else in the graph.
            # The attention's residual sum is realized too: the matmul kernels realize their inputs on their own, and a
            # value left lazy between such realizes was computed twice (for the norm, then again for the last add)
            x = self._attention(layer, x, where, self.caches[2 * i], self.caches[2 * i + 1]).realize()
            if layer.router is not None:
                x = (x + self._moe(layer, rms_norm(x, layer.ffn_norm, c.norm_eps))).realize()
            else:
                x = self._swiglu(x, layer.ffn_norm, layer.gate_up, layer.down).realize()
        if last is not None:
            x = x[last : last + 1]
        # the output norm stays in the graph: the last row alone (`last`) must equal the full forward's last row bit
        # for bit, and a kernel would form it for one row where the graph forms it for a prompt's
        return self.output(rms_norm(x, self.output_norm, c.norm_eps))

    def _attention(self, layer: TensorLayer, x: Tensor, where: _Positions, k_cache: Tensor, v_cache: Tensor) -> Tensor:
        """x (n, dim) the residual stream -> x plus the attention of its normalized rows."""
        c = self.config
        n = x.shape[0]
        q_out, kv_out = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        residual = x
        qkv = layer.qkv(x, Fused(norm=layer.attn_norm, eps=c.norm_eps))
        q, k, v = qkv[:, :q_out], qkv[:, q_out : q_out + kv_out], qkv[:, q_out + kv_out :]
        if c.qk_norm == "full":
            assert layer.q_norm is not None and layer.k_norm is not None
            q, k = rms_norm(q, layer.q_norm, c.norm_eps), rms_norm(k, layer.k_norm, c.norm_eps)
        q, k, v = q.reshape(n, c.n_heads, c.head_dim), k.reshape(n, c.n_kv_heads, c.head_dim), v.reshape(n, c.n_kv_heads, c.head_dim)
        if c.qk_norm == "head":
            assert layer.q_norm is not None and layer.k_norm is not None
            q, k = rms_norm(q, layer.q_norm, c.norm_eps), rms_norm(k, layer.k_norm, c.norm_eps)
        # q is materialized: fused into the scores, its rotation would be recomputed for every cached row
        q, k = rope_neox(q, where.cos, where.sin).contiguous(), rope_neox(k, where.cos, where.sin)
        # the new rows are written into the caches in place; attention reads only the rows up to the last token
        end = where.start + n
        k_cache[where.start : end].assign(k)
        v_cache[where.start : end].assign(v)
        if where.start_tensor is not None:
            attended = cpu_attention(q, k_cache, v_cache, where.start_tensor, getattr(Device[self.device], "n_cores", 1))
            return layer.wo(attended, Fused(residual=residual))
        keys, values = k_cache[0:end], v_cache[0:end]
        group = c.n_heads // c.n_kv_heads
        # grouped-query attention: each KV head serves `group` query heads; scores (kv_heads, group, n, rows)
        q = q.reshape(n, c.n_kv_heads, group, c.head_dim).permute(1, 2, 0, 3)
        scores = q @ keys.permute(1, 2, 0).unsqueeze(1) * (1.0 / math.sqrt(c.head_dim))
        if where.visible is not None:
            scores = where.visible[:, 0:end].where(scores, float("-inf"))
        # the probabilities are materialized: fused into the product, each would be recomputed for every output dimension
        out = scores.softmax(-1).contiguous() @ values.permute(1, 0, 2).unsqueeze(1)
        return layer.wo(out.permute(2, 0, 1, 3).reshape(n, q_out), Fused(residual=residual))

    def _swiglu(self, x: Tensor, norm: Tensor, gate_up: Linear | None, down: Linear | None) -> Tensor:
        """x (n, dim) the residual stream -> x plus the SwiGLU feed-forward of its normalized rows."""
        assert gate_up is not None and down is not None
        gu = gate_up(x, Fused(norm=norm, eps=self.config.norm_eps))
        return down(gu, Fused(swiglu=True, residual=x))

    def _moe(self, layer: TensorLayer, x: Tensor) -> Tensor:
        """Softmax-gated top-k mixture per token; every expert is computed and the unchosen ones get weight 0 (fixed graph)."""
        c = self.config
        assert layer.router is not None and layer.gate_exps is not None and layer.up_exps is not None and layer.down_exps is not None
        n = x.shape[0]
        probs = (self._router_mfma_logits(layer, x) if layer.router_bf16 is not None else layer.router(x)).softmax(-1)  # (n, experts)
        _, chosen = probs.topk(c.n_experts_used)
        experts = Tensor.arange(c.n_experts, dtype=dtypes.int32, device=self.device)
        picked = chosen.reshape(n, c.n_experts_used, 1) == experts.reshape(1, 1, -1)
        weights = picked.float().sum(1) * probs
        if c.norm_topk_prob:
            weights = weights / weights.sum(-1, keepdim=True)
        hidden = layer.gate_exps(x).silu() * layer.up_exps(x)  # (experts, n, hidden)
        per_expert = layer.down_exps(hidden)  # (experts, n, dim)
        return (weights.permute(1, 0).reshape(c.n_experts, n, 1) * per_expert).sum(0)

    def _router_mfma_logits(self, layer: TensorLayer, x: Tensor) -> Tensor:
        """x (n, dim) -> the router's logits (n, experts) by `router_mfma`: x in bfloat16, its rows padded with zeros to
        the kernel's 64-row blocks (a decoding step's one row too) and the padding dropped from the result."""
        assert layer.router_bf16 is not None and self._router_bias is not None
        n = x.shape[0]
        xb = x.cast(dtypes.bfloat16)
        if n % BLOCK_ROWS:
            xb = xb.pad(((0, BLOCK_ROWS - n % BLOCK_ROWS), (0, 0)))
        return router_mfma(xb, layer.router_bf16, self._router_bias)[:n]


class TensorBackend(Backend):
    """The uop_scheduler backend for one device (`--device CPU`, `CPU:1`, ...), decoding under TinyJit."""

    name = "CPU"

    def __init__(self, device: str = "CPU", jit: bool = True):
        self.name, self.jit = device.upper(), jit

    def load(self, gguf: GGUFFile, max_context: int | None = None, activations: str = "q8") -> LanguageModel:
        return TensorModel(gguf, max_context, device=self.name, jit=self.jit, activations=activations)
