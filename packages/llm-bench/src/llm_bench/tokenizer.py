"""GPT-2 style byte-level BPE tokenizer driven by GGUF `tokenizer.ggml.*` metadata."""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import TokenizerError
from .pretokenize import WHOLE_WORD_FIRST, canonical_preset, split_words


class TokenType(enum.IntEnum):
    """`tokenizer.ggml.token_type` values (llama.cpp's llama_token_type)."""

    UNDEFINED = 0
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


@functools.cache
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters: printable Latin-1 bytes map to themselves,
    the rest to codepoints from U+0100 upwards, so that every byte-level token is a visible string."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = (b for b in range(256) if b not in printable)
    table = {b: chr(b) for b in printable}
    table.update({b: chr(256 + i) for i, b in enumerate(shifted)})
    return dict(sorted(table.items()))


@functools.cache
def unicode_to_byte() -> dict[str, int]:
    """The inverse of `byte_to_unicode`."""
    return {ch: b for b, ch in byte_to_unicode().items()}


class Tokenizer:
    """Byte-level BPE: split text at special tokens, pre-tokenize into words, merge each word's bytes by merge rank.

    `tokens` are the vocabulary strings in byte-level form, `token_types` their `TokenType`s, `merges` the
    "left right" pairs in priority order (rank = position). CONTROL and USER_DEFINED tokens are special: they are
    matched verbatim in the input text and never produced by merging. With the llama-bpe preset a word that is
    itself a token is taken whole, as llama.cpp and Hugging Face do for Llama 3 (`ignore_merges`).
    """

    def __init__(self, tokens: Sequence[str], merges: Sequence[str], preset: str = "llama-bpe", token_types: Sequence[int] | None = None,
                 bos_id: int | None = None, eos_id: int | None = None, add_bos: bool = False, eot_id: int | None = None):
        if token_types is not None and len(token_types) != len(tokens):
            raise TokenizerError(f"tokenizer has {len(tokens)} tokens but {len(token_types)} token types; the model file is corrupt")
        self.tokens = list(tokens)
        self.token_types = [int(t) for t in token_types] if token_types is not None else [int(TokenType.NORMAL)] * len(tokens)
        self.preset = canonical_preset(preset)
        for name, tid in (("BOS", bos_id), ("EOS", eos_id), ("EOT", eot_id)):
            if tid is not None and not 0 <= tid < len(self.tokens):
                raise TokenizerError(f"{name} token id {tid} is outside the vocabulary of {len(self.tokens)} tokens")
        self.bos_id, self.eos_id, self.eot_id, self.add_bos = bos_id, eos_id, eot_id, add_bos
        special_types = (TokenType.CONTROL, TokenType.USER_DEFINED)
        self.special_ids = {tok: i for i, tok in enumerate(self.tokens) if self.token_types[i] in special_types}
        self._ids = {tok: i for i, tok in enumerate(self.tokens) if self.token_types[i] not in special_types}
        # keyed by the merge strings themselves ("left right"): the metadata holds them already, while (left, right)
        # pairs made ~100k new strings and 49k tuples (10 MB for a 49k-token vocabulary). Byte-level tokens never
        # hold a space, so the first space splits a merge, and a lookup joins the pair the same way.
        self._ranks: dict[str, int] = {}
        for rank, merge in enumerate(merges):
            at = merge.find(" ")
            if at <= 0 or at == len(merge) - 1:
                raise TokenizerError(f"merge #{rank} {merge!r} is not two tokens separated by one space; the model file is corrupt")
            self._ranks.setdefault(merge, rank)
        # longest first, so a special token that is a prefix of another never wins
        specials = sorted(self.special_ids, key=len, reverse=True)
        self._special_split = re.compile("|".join(map(re.escape, specials))) if specials else None
        self._byte_chars = byte_to_unicode()
        self._word_cache: dict[str, tuple[int, ...]] = {}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Tokenizer:
        """Build from GGUF metadata (`tokenizer.ggml.model` must be "gpt2", i.e. byte-level BPE)."""
        model = metadata.get("tokenizer.ggml.model")
        if model != "gpt2":
            raise TokenizerError(f"tokenizer.ggml.model is {model!r}; only byte-level BPE ('gpt2') vocabularies are supported")
        for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
            if key not in metadata:
                raise TokenizerError(f"the model has no {key}; it cannot be tokenized")
            if not isinstance(metadata[key], list) or not all(isinstance(x, str) for x in metadata[key]):
                raise TokenizerError(f"{key} must be a list of strings, got {_kind(metadata[key])}")
        n_tokens = len(metadata["tokenizer.ggml.tokens"])
        pre = metadata.get("tokenizer.ggml.pre", "llama-bpe")
        if not isinstance(pre, str):
            raise TokenizerError(f"tokenizer.ggml.pre must be a string, got {_kind(pre)}")
        types = metadata.get("tokenizer.ggml.token_type")
        if types is not None and (not isinstance(types, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in types)):
            raise TokenizerError(f"tokenizer.ggml.token_type must be a list of integers, got {_kind(types)}")
        ids = {}
        for name in ("bos", "eos", "eot"):
            key = f"tokenizer.ggml.{name}_token_id"
            value = metadata.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < n_tokens):
                raise TokenizerError(f"{key} must be a token id in 0..{n_tokens - 1}, got {value!r}")
            ids[name] = value
        add_bos = metadata.get("tokenizer.ggml.add_bos_token", False)
        if not isinstance(add_bos, (bool, int)):
            raise TokenizerError(f"tokenizer.ggml.add_bos_token must be a boolean, got {_kind(add_bos)}")
        return cls(metadata["tokenizer.ggml.tokens"], metadata["tokenizer.ggml.merges"], pre, types, ids["bos"], ids["eos"],
                   bool(add_bos), ids["eot"])

    @property
    def vocab_size(self) -> int:
        """Number of tokens."""
        return len(self.tokens)

    def _merge_word(self, word: str) -> tuple[int, ...]:
        cached = self._word_cache.get(word)
        if cached is not None:
            return cached
        parts = [self._byte_chars[b] for b in word.encode("utf-8")]
        whole = "".join(parts)
        if self.preset in WHOLE_WORD_FIRST and whole in self._ids:
            parts = [whole]
        while len(parts) > 1:
            ranked = [(self._ranks.get(f"{parts[i]} {parts[i + 1]}"), i) for i in range(len(parts) - 1)]
            candidates = [(rank, i) for rank, i in ranked if rank is not None]
            if not candidates:
                break
            first = min(candidates)[1]
            pair = (parts[first], parts[first + 1])
            merged: list[str] = []
            i = 0
            # merge every non-overlapping occurrence of the best pair, left to right (as GPT-2 does)
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == pair:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        try:
            ids = tuple(self._ids[p] for p in parts)
        except KeyError as e:
            raise TokenizerError(f"the vocabulary has no token {e.args[0]!r} needed to encode {word!r}; the merges and tokens disagree") from None
        if len(self._word_cache) < 65536:
            self._word_cache[word] = ids
        return ids

    def _encode_plain(self, text: str) -> list[int]:
        return [tid for word in split_words(text, self.preset) for tid in self._merge_word(word)]

    def encode(self, text: str, add_bos: bool | None = None, parse_special: bool = True) -> list[int]:
        """Token ids of `text`; BOS is prepended when `add_bos` (default: the model's `add_bos_token`) and one is defined.
        Text that is not valid Unicode (a lone surrogate, as `surrogateescape` makes of bad bytes) is a TokenizerError."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise TokenizerError(f"text is not valid Unicode: {e.reason} at position {e.start} ({text[e.start]!r})") from None
        ids: list[int] = []
        if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None:
            ids.append(self.bos_id)
        pos = 0
        if parse_special and self._special_split is not None:
            for match in self._special_split.finditer(text):
                ids += self._encode_plain(text[pos : match.start()])
                ids.append(self.special_ids[match.group()])
                pos = match.end()
        return ids + self._encode_plain(text[pos:])

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token stands for (special tokens: their text in UTF-8)."""
        if not 0 <= token_id < len(self.tokens):
            raise TokenizerError(f"token id {token_id} is outside the vocabulary of {len(self.tokens)} tokens")
        text = self.tokens[token_id]
        if self.token_types[token_id] in (TokenType.CONTROL, TokenType.USER_DEFINED):
            return text.encode("utf-8")
        to_byte = unicode_to_byte()
        try:
            return bytes(to_byte[ch] for ch in text)
        except KeyError:
            raise TokenizerError(f"token {token_id} ({text!r}) is not a byte-level BPE token") from None

    def decode(self, ids: Sequence[int], skip_special: bool = False) -> str:
        """The text of `ids`; invalid UTF-8 (a token sequence cut inside a character) becomes U+FFFD."""
        keep = (i for i in ids if not (skip_special and self.token_types[i] == TokenType.CONTROL))
        return b"".join(self.token_bytes(i) for i in keep).decode("utf-8", errors="replace")

    def is_end(self, token_id: int) -> bool:
        """Whether `token_id` ends generation (EOS, or the end-of-turn token of chat models)."""
        return token_id in (self.eos_id, self.eot_id)


def _kind(value: Any) -> str:
    """A short description of a metadata value for an error message."""
    if isinstance(value, list):
        kinds = sorted({type(x).__name__ for x in value})
        return f"a list of {', '.join(kinds) or 'nothing'}"
    return f"{type(value).__name__} {value!r}"[:80]
