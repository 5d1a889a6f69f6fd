"""Perplexity of a text as llama.cpp's `llama-perplexity` computes it (its default, non-strided mode).

The text is tokenized (with BOS when the model adds one) and cut into chunks of `ctx` tokens; the tokens after the
last whole chunk are dropped, and at least two chunks are needed. Each chunk runs from an empty KV cache, its first
token replaced by BOS when the model adds one, and only its second half is scored: the logits at positions
ctx/2 .. ctx-2 each predict the next token. The perplexity is exp of the mean negative log-likelihood over all scored
tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .errors import LLMBenchError
from .model_api import LanguageModel
from .tokenizer import Tokenizer


@dataclass
class PerplexityResult:
    ppl: float
    chunks: int
    scored_tokens: int
    per_chunk: list[float]  # the running perplexity after each chunk, as llama-perplexity prints it


def log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def perplexity(model: LanguageModel, tokenizer: Tokenizer, text: str, ctx: int, chunks: int | None = None,
               progress: Callable[[int, int, float], None] | None = None) -> PerplexityResult:
    """`text`'s perplexity under `model` with chunks of `ctx` tokens, the first `chunks` of them when given (llama-
    perplexity's --chunks); see the module docstring."""
    if ctx < 4:
        raise LLMBenchError(f"--ctx must be at least 4, got {ctx}")
    if ctx > model.max_context:
        raise LLMBenchError(f"--ctx {ctx} is larger than the model's context of {model.max_context}; lower it, or {model.context_advice()}")
    add_bos = tokenizer.add_bos and tokenizer.bos_id is not None
    tokens = tokenizer.encode(text, add_bos=add_bos)
    if len(tokens) < 2 * ctx:
        raise LLMBenchError(f"the text tokenizes to {len(tokens)} tokens; perplexity with --ctx {ctx} needs at least {2 * ctx}")
    n_chunks, first = len(tokens) // ctx, ctx // 2
    if chunks is not None:
        if chunks < 1:
            raise LLMBenchError(f"--chunks must be >= 1, got {chunks}")
        n_chunks = min(n_chunks, chunks)
    nll, count, running = 0.0, 0, []
    for i in range(n_chunks):
        chunk = tokens[i * ctx : (i + 1) * ctx]
        if add_bos:
            chunk = [tokenizer.bos_id, *chunk[1:]]
        model.reset()
        logp = log_softmax(model.forward(chunk, 0)[first : ctx - 1])
        targets = np.asarray(chunk[first + 1 : ctx])
        nll -= float(logp[np.arange(len(targets)), targets].sum())
        count += len(targets)
        running.append(math.exp(nll / count))
        if progress is not None:
            progress(i + 1, n_chunks, running[-1])
    return PerplexityResult(math.exp(nll / count), n_chunks, count, running)
