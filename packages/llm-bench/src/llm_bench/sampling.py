"""Choosing the next token from logits: greedy, or sampling at a temperature."""

from __future__ import annotations

import numpy as np


def sample(logits: np.ndarray, temperature: float = 0.0, rng: np.random.Generator | None = None) -> int:
    """Greedy argmax when `temperature` is 0, else a draw from softmax(logits / temperature) using `rng`."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return int(np.argmax(logits))
    scaled = logits.astype(np.float64) / temperature
    probs = np.exp(scaled - scaled.max())
    probs /= probs.sum()
    return int((rng if rng is not None else np.random.default_rng()).choice(len(probs), p=probs))
