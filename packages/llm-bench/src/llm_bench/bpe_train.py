"""Learning a small byte-level BPE vocabulary from text (used to build the tiny built-in models' tokenizers)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .pretokenize import split_words
from .tokenizer import byte_to_unicode


@dataclass(frozen=True)
class LearnedVocab:
    """Byte-level BPE vocabulary: the 256 byte tokens, then one token per merge, in rank order."""

    tokens: list[str]
    merges: list[str]


def learn_bpe(text: str, n_merges: int, preset: str = "llama-bpe") -> LearnedVocab:
    """Learn up to `n_merges` merges from `text` by repeatedly merging the most frequent adjacent pair.

    Deterministic: ties between equally frequent pairs go to the lexicographically smallest pair.
    """
    chars = byte_to_unicode()
    words = Counter(tuple(chars[b] for b in word.encode("utf-8")) for word in split_words(text, preset))
    tokens = list(chars.values())
    known = set(tokens)
    merges: list[str] = []
    for _ in range(n_merges):
        pairs: Counter[tuple[str, str]] = Counter()
        for word, count in words.items():
            for left, right in zip(word, word[1:]):
                pairs[(left, right)] += count
        if not pairs:
            break
        best_count = max(pairs.values())
        if best_count < 2:
            break
        left, right = min(pair for pair, count in pairs.items() if count == best_count)
        merges.append(f"{left} {right}")
        # different merge paths can spell the same token; the vocabulary lists it once
        if left + right not in known:
            known.add(left + right)
            tokens.append(left + right)
        words = Counter({_merge_pair(word, left, right): count for word, count in words.items()})
    return LearnedVocab(tokens, merges)


def _merge_pair(word: tuple[str, ...], left: str, right: str) -> tuple[str, ...]:
    out: list[str] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == left and word[i + 1] == right:
            out.append(left + right)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)
