"""Running a benchmark on a loaded model: warmup, prefill (ppN) and decode (tgN) timings with the per-step lines."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence

from .errors import ModelError
from .gguf_reader import GGUFFile
from .model_api import LanguageModel
from .report import TestResult, format_step_line
from .tokenizer import Tokenizer

# llama.cpp's `general.file_type` (enum llama_ftype) names, for the quant column of logs and tables
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M",
              13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}
PREFILL_REPETITIONS = 3


def quant_name(gguf: GGUFFile) -> str:
    """The model's quantization: its declared file type, else the type holding most of its bytes."""
    declared = gguf.metadata.get("general.file_type")
    if declared in FILE_TYPES:
        return FILE_TYPES[declared]
    by_bytes: Counter[str] = Counter()
    for tensor in gguf.tensors.values():
        by_bytes[tensor.ggml_type.name] += tensor.nbytes
    return by_bytes.most_common(1)[0][0] if by_bytes else "unknown"


def warm_up(model: LanguageModel, prompt: Sequence[int]) -> None:
    """Run two short generations so one-time costs (compilation, allocation, caches) are not timed."""
    for _ in range(2):
        for _step, _token in zip(range(2), model.generate(prompt)):
            pass


def time_prefill(model: LanguageModel, prompt: Sequence[int], n_tokens: int, clock: Callable[[], int] = time.perf_counter_ns) -> TestResult:
    """ppN: the time to run `n_tokens` prompt tokens (the prompt repeated to that length) from an empty cache."""
    if n_tokens > model.max_context:
        raise ModelError(f"--prefill {n_tokens} exceeds the context of {model.max_context}; {model.context_advice()}")
    ids = [prompt[i % len(prompt)] for i in range(n_tokens)]
    # untimed passes first: a backend that compiles, captures and links a graph per prompt length does so here
    for _ in range(3):
        model.reset()
        model.forward(ids, 0, last_only=True)
    samples = []
    for _ in range(PREFILL_REPETITIONS):
        model.reset()
        start = clock()
        model.forward(ids, 0, last_only=True)  # as generation runs a prompt (and llama-bench's ppN)
        samples.append(clock() - start)
    return TestResult(f"pp{n_tokens}", n_tokens, tuple(samples))


def time_decode(model: LanguageModel, tokenizer: Tokenizer, prompt: Sequence[int], steps: int, emit: Callable[[str], None],
                clock: Callable[[], int] = time.perf_counter_ns) -> TestResult:
    """tgN: time each of `steps` generation steps, emitting the seed's line (with the text so far) after each."""
    if len(prompt) + steps - 1 > model.max_context:
        raise ModelError(f"{steps} steps after a {len(prompt)}-token prompt exceed the context of {model.max_context}; {model.context_advice()}")
    tokens = list(prompt)
    generator = model.generate(prompt)
    samples = []
    for _ in range(steps):
        position = len(tokens) - 1
        start = clock()
        token = next(generator)
        elapsed = max(clock() - start, 1)
        tokens.append(token)
        samples.append(elapsed)
        emit(format_step_line(elapsed, model.step_bytes(position), model.weight_bytes + model.cache_bytes, tokenizer.decode(tokens)))
    return TestResult(f"tg{steps}", 1, tuple(samples))
