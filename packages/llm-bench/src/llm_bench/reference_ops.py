"""The numpy building blocks of the reference forward passes (float32, written for clarity over speed)."""

from __future__ import annotations

import math

import numpy as np


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(x)."""
    return x / (1.0 + np.exp(-x))


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax."""
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return shifted / np.sum(shifted, axis=axis, keepdims=True)


def rope_frequencies(head_dim: int, theta: float, freq_factors: np.ndarray | None = None) -> np.ndarray:
    """Inverse frequencies theta^(-2i/d) for i < d/2, divided by per-pair factors when the model has them (Llama 3 scaling)."""
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if freq_factors is not None:
        inv = inv / freq_factors.astype(np.float64)
    return inv


def apply_rope_neox(x: np.ndarray, positions: np.ndarray, inv_freq: np.ndarray) -> np.ndarray:
    """Rotate (x[i], x[i + d/2]) pairs by position * inv_freq[i] ("rotate half" / NEOX layout). x: (..., T, d)."""
    angles = positions[:, None].astype(np.float64) * inv_freq[None, :]
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def unpermute_qk_rows(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo the row order llama.cpp's converter gives llama Q/K weights.

    The converter interleaves each head's two rotation halves (row 2i <- i, row 2i+1 <- i + d/2) so ggml can rotate
    adjacent pairs; restoring the half-split order lets one NEOX RoPE serve every architecture.
    """
    rows, cols = weight.shape
    return weight.reshape(n_heads, rows // n_heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, start_pos: int) -> np.ndarray:
    """Causal scaled dot-product attention with grouped KV heads.

    q: (H, T, d) for the T new positions starting at `start_pos`; k, v: (KVH, start_pos + T, d). Returns (H, T, d).
    """
    n_heads, n_new, head_dim = q.shape
    group = n_heads // k.shape[0]
    k_full, v_full = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
    # a Python float scale keeps float32 activations float32 (a numpy float64 scalar would promote them)
    scores = q @ k_full.transpose(0, 2, 1) * (1.0 / math.sqrt(head_dim))
    # query t (absolute position start_pos + t) sees keys up to and including its own position
    visible = np.arange(k.shape[1])[None, :] <= (start_pos + np.arange(n_new))[:, None]
    scores = np.where(visible[None], scores, -np.inf)
    return softmax(scores) @ v_full


def swiglu(x: np.ndarray, gate: np.ndarray, up: np.ndarray, down: np.ndarray) -> np.ndarray:
    """down(silu(gate(x)) * up(x)) with weights stored (out_features, in_features)."""
    return (silu(x @ gate.T) * (x @ up.T)) @ down.T


def top_k_experts(router_logits: np.ndarray, k: int, normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """Softmax gating: per token, the k most probable experts (ties to the lower index) and their probabilities."""
    probs = softmax(router_logits)
    chosen = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    weights = np.take_along_axis(probs, chosen, axis=-1)
    if normalize:
        weights = weights / weights.sum(axis=-1, keepdims=True)
    return chosen, weights


def moe(x: np.ndarray, router: np.ndarray, gate: np.ndarray, up: np.ndarray, down: np.ndarray, k: int, normalize: bool) -> np.ndarray:
    """Mixture of SwiGLU experts. x: (T, D); router: (E, D); gate/up: (E, F, D); down: (E, D, F)."""
    chosen, weights = top_k_experts(x @ router.T, k, normalize)
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        for slot in range(k):
            e = chosen[t, slot]
            out[t] += weights[t, slot] * swiglu(x[t], gate[e], up[e], down[e])
    return out
