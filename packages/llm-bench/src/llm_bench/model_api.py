"""The interface every compute backend implements: load a GGUF, run forward passes with a KV cache, generate."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

import numpy as np

from .errors import ModelError
from .gguf_reader import GGUFFile
from .model_config import ModelConfig
from .sampling import sample


class LanguageModel(ABC):
    """A loaded model with its KV cache. Subclasses implement `forward` and `reset`; generation is shared."""

    config: ModelConfig
    max_context: int

    def context_advice(self) -> str:
        """What to do when a run needs more context than `max_context`: raise --max-context, unless the context is
        already the model's own limit (then nothing larger exists: shorten the run)."""
        limit = self.config.context_length
        if self.max_context < limit:
            return f"raise --max-context (the model allows up to {limit})"
        return f"{limit} is this model's own limit: shorten the prompt or the run"
    device: str

    @abstractmethod
    def forward(self, tokens: Sequence[int], start_pos: int, last_only: bool = False) -> np.ndarray:
        """Run `tokens` at positions start_pos... through the model, filling the KV cache there.

        Returns float32 logits of shape (len(tokens), vocab_size), or (1, vocab_size) for the last token alone with
        `last_only` (what generation needs: the output matrix, the largest of a small model, then multiplies one row
        instead of the whole prompt, as llama.cpp's prompt processing does). Positions before `start_pos` must
        already be cached.
        """
        raise NotImplementedError

    @abstractmethod
    def reset(self) -> None:
        """Forget the KV cache."""
        raise NotImplementedError

    @property
    @abstractmethod
    def param_count(self) -> int:
        """Number of model parameters (elements of all weights)."""
        raise NotImplementedError

    @property
    @abstractmethod
    def weight_bytes(self) -> int:
        """Bytes the weights occupy on the device."""
        raise NotImplementedError

    @property
    @abstractmethod
    def cache_bytes(self) -> int:
        """Bytes the KV cache occupies on the device."""
        raise NotImplementedError

    @abstractmethod
    def step_bytes(self, start_pos: int) -> int:
        """Bytes one decode step at `start_pos` must read (weights it touches plus the KV cache so far): the GB/s numerator."""
        raise NotImplementedError

    def generate(self, prompt: Sequence[int], temperature: float = 0.0, seed: int | None = None) -> Iterator[int]:
        """Yield tokens after `prompt` until the context is full: the prompt in one pass, then one token per step."""
        if not prompt:
            raise ModelError("generation needs at least one prompt token (e.g. BOS)")
        if len(prompt) >= self.max_context:
            raise ModelError(f"the prompt has {len(prompt)} tokens but the context holds {self.max_context}; {self.context_advice()}")
        # numpy.random costs 5-7 MiB of resident code and tables: greedy decoding never loads it
        rng = np.random.default_rng(seed) if temperature > 0 else None
        self.reset()
        logits = self.forward(prompt, 0, last_only=True)
        pos = len(prompt)
        while True:
            token = sample(logits[-1], temperature, rng)
            yield token
            if pos >= self.max_context:
                return
            logits = self.forward([token], pos)
            pos += 1


#: how a model multiplies by its quantized matrices (`Backend.load(activations=...)`, `llm_bench.qdot`)
ACTIVATION_MODES = ("q8", "float")


class Backend(ABC):
    """A device family that can run models (`--device` names one)."""

    name: str

    @abstractmethod
    def load(self, gguf: GGUFFile, max_context: int | None = None, activations: str = "q8") -> LanguageModel:
        """Build a model from a parsed GGUF; `max_context` caps the KV cache (default: the model's context length).
        `activations`: "q8" rounds the activations of Q4_0/Q4_1/Q8_0 matrices to 8 bits as llama.cpp does (`qdot`;
        the CPU's integer kernels), "float" keeps every product in float32."""
        raise NotImplementedError
