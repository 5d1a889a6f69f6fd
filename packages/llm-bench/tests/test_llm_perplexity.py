"""llm-bench perplexity's arithmetic on a model whose logits are known, and its errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from llm_bench.cli import main
from llm_bench.errors import LLMBenchError
from llm_bench.perplexity import perplexity
from llm_bench.tokenizer import Tokenizer


class FixedModel:
    """Logits that favour token (previous + 1) % V with weight `w`: log-probabilities are known in closed form."""

    max_context = 64

    def __init__(self, vocab: int, w: float):
        self.vocab, self.w, self.resets = vocab, w, 0

    def reset(self):
        self.resets += 1

    def forward(self, tokens, start_pos):
        out = np.zeros((len(tokens), self.vocab), np.float32)
        for i, t in enumerate(tokens):
            out[i, (t + 1) % self.vocab] = self.w
        return out


def byte_tokenizer() -> Tokenizer:
    from llm_bench.tokenizer import byte_to_unicode
    return Tokenizer(list(byte_to_unicode().values()), [], "olmo")


def test_chunks_are_scored_on_their_second_half_with_llama_perplexity_arithmetic():
    tok, model = byte_tokenizer(), FixedModel(256, 2.0)
    text = "".join(chr(97 + i % 20) for i in range(40))  # 40 tokens: 2 chunks of 16 (8 left over, dropped)
    result = perplexity(model, tok, text, ctx=16)
    assert (result.chunks, result.scored_tokens, model.resets) == (2, 2 * 7, 2)
    ids = tok.encode(text)
    p_hit, p_miss = math.exp(2) / (math.exp(2) + 255), 1 / (math.exp(2) + 255)
    nll = 0.0
    for c in range(2):
        chunk = ids[16 * c : 16 * c + 16]
        for k in range(8, 15):  # logits at positions ctx/2 .. ctx-2 predict the next token
            nll -= math.log(p_hit if chunk[k + 1] == (chunk[k] + 1) % 256 else p_miss)
    assert result.ppl == pytest.approx(math.exp(nll / 14), rel=1e-9)


def test_a_text_shorter_than_two_chunks_is_a_clear_error():
    with pytest.raises(LLMBenchError, match="needs at least 32"):
        perplexity(FixedModel(256, 1.0), byte_tokenizer(), "short text", ctx=16)


def test_the_command_reports_a_missing_file_as_an_error(tmp_path, capsys):
    assert main(["perplexity", "-m", "tiny-llama", "-f", str(tmp_path / "nope.txt")]) == 1
    assert capsys.readouterr().err.startswith("error: cannot read")
