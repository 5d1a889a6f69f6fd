"""GPT-2 style byte-level BPE tokenizer driven by GGUF `tokenizer.ggml.*` metadata."""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .errors import TokenizerError
from .pretokenize import WHOLE_WORD_FIRST, canonical_preset, split_words
from .string_array import StringArray, positions_within


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

    The vocabulary stays packed (`StringArray`) and merging works on token ids: each merge is a pair of ids with its
    rank and the id it makes, in sorted numpy arrays. For a 49k-token vocabulary that is about 3 MB, where strings
    in dictionaries took 16 MB (the GGUF lists and the lookup tables). When a vocabulary holds one string twice, the
    later id is the one merging produces (as a dictionary built in order would give).
    """

    def __init__(self, tokens: Sequence[str], merges: Sequence[str], preset: str = "llama-bpe", token_types: Sequence[int] | None = None,
                 bos_id: int | None = None, eos_id: int | None = None, add_bos: bool = False, eot_id: int | None = None):
        if token_types is not None and len(token_types) != len(tokens):
            raise TokenizerError(f"tokenizer has {len(tokens)} tokens but {len(token_types)} token types; the model file is corrupt")
        self.tokens = tokens if isinstance(tokens, StringArray) else StringArray.from_strings(tokens)
        n = len(self.tokens)
        types = np.asarray(token_types if token_types is not None else np.full(n, int(TokenType.NORMAL)))
        self.token_types = types.astype(np.uint8) if types.size and 0 <= types.min() and types.max() < 256 else types.astype(np.int64)
        self.preset = canonical_preset(preset)
        for name, tid in (("BOS", bos_id), ("EOS", eos_id), ("EOT", eot_id)):
            if tid is not None and not 0 <= tid < n:
                raise TokenizerError(f"{name} token id {tid} is outside the vocabulary of {n} tokens")
        self.bos_id, self.eos_id, self.eot_id, self.add_bos = bos_id, eos_id, eot_id, add_bos
        special = np.isin(self.token_types, (TokenType.CONTROL, TokenType.USER_DEFINED))
        self.special_ids = {self.tokens[i]: i for i in np.flatnonzero(special).tolist()}
        self._index = _TokenIndex(self.tokens, ~special)
        self.merges = merges if isinstance(merges, StringArray) else StringArray.from_strings(merges)
        self._pairs, self._pair_rank, self._pair_result = self._index.merge_table(self.merges)
        self._byte_chars = byte_to_unicode()
        self._byte_ids = [self._index.find(ch.encode("utf-8")) for ch in self._byte_chars.values()]
        # longest first, so a special token that is a prefix of another never wins
        specials = sorted(self.special_ids, key=len, reverse=True)
        self._special_split = re.compile("|".join(map(re.escape, specials))) if specials else None
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
            value = metadata[key]
            if not isinstance(value, StringArray) and (not isinstance(value, list) or not all(isinstance(x, str) for x in value)):
                raise TokenizerError(f"{key} must be a list of strings, got {_kind(value)}")
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
        raw = word.encode("utf-8")
        ids: list[int | None] = []
        if self.preset in WHOLE_WORD_FIRST and len(raw) > 1:
            whole = self._index.find("".join(self._byte_chars[b] for b in raw).encode("utf-8"))
            if whole is not None:
                ids = [whole]
        if not ids:
            ids = [self._byte_ids[b] for b in raw]
            if None in ids:
                missing = self._byte_chars[raw[ids.index(None)]]
                raise TokenizerError(f"the vocabulary has no token {missing!r} needed to encode {word!r}; the merges and tokens disagree")
        n_tokens, pairs = len(self.tokens), self._pairs
        while len(ids) > 1 and len(pairs):
            arr = np.array(ids, np.int64)
            keys = arr[:-1] * n_tokens + arr[1:]
            at = np.minimum(np.searchsorted(pairs, keys), len(pairs) - 1)
            ranks = np.where(pairs[at] == keys, self._pair_rank[at], np.iinfo(np.int32).max)
            best = int(ranks.argmin())
            if ranks[best] == np.iinfo(np.int32).max:
                break
            left, right, made = ids[best], ids[best + 1], int(self._pair_result[at[best]])
            if made < 0:
                joined = self.tokens[left] + self.tokens[right]
                raise TokenizerError(f"the vocabulary has no token {joined!r} needed to encode {word!r}; the merges and tokens disagree")
            merged: list[int | None] = []
            i = 0
            # merge every non-overlapping occurrence of the best pair, left to right (as GPT-2 does)
            while i < len(ids):
                if i + 1 < len(ids) and ids[i] == left and ids[i + 1] == right:
                    merged.append(made)
                    i += 2
                else:
                    merged.append(ids[i])
                    i += 1
            ids = merged
        out = tuple(ids)  # type: ignore[arg-type]
        if len(self._word_cache) < 65536:
            self._word_cache[word] = out
        return out

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
            return text.encode("utf-8", "surrogatepass")
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


# Strings are found by a 64-bit polynomial hash of their bytes (sum of b[j] * _HASH_BASE**j, mod 2**64), computed for a
# whole packed array at once with numpy; every hit is then compared byte for byte, so a collision costs time, not
# correctness.
_HASH_BASE = 0x100000001B3
_MASK = (1 << 64) - 1


def _powers(n: int) -> np.ndarray:
    out = np.ones(n + 1, np.uint64)
    out[1:] = np.cumprod(np.full(n, _HASH_BASE, np.uint64))
    return out


def _hash_spans(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, powers: np.ndarray) -> np.ndarray:
    """The hash of each span [starts[i], starts[i] + lengths[i]) of the uint8 array `data`."""
    within = positions_within(lengths)
    terms = data[np.repeat(starts, lengths) + within].astype(np.uint64) * powers[within]
    out = np.zeros(len(lengths), np.uint64)
    filled = lengths > 0  # reduceat sums from each start to the next; an empty span has no terms of its own
    if filled.any():
        out[filled] = np.add.reduceat(terms, (np.cumsum(lengths) - lengths)[filled])
    return out


def _hash_bytes(data: bytes) -> int:
    h, p = 0, 1
    for b in data:
        h = (h + b * p) & _MASK
        p = (p * _HASH_BASE) & _MASK
    return h


def _same_spans(a: np.ndarray, a_starts: np.ndarray, b: np.ndarray, b_starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per i: whether a[a_starts[i]:][:lengths[i]] equals b[b_starts[i]:][:lengths[i]]."""
    within = positions_within(lengths)
    differs = a[np.repeat(a_starts, lengths) + within] != b[np.repeat(b_starts, lengths) + within]
    same = np.ones(len(lengths), bool)
    same[np.repeat(np.arange(len(lengths)), lengths)[differs]] = False
    return same


class _TokenIndex:
    """Finds the id of a token's string (the `keep` ones of a packed vocabulary), one at a time or a packed array at once."""

    def __init__(self, vocab: StringArray, keep: np.ndarray):
        self.vocab = vocab
        self.data = np.frombuffer(vocab.blob, np.uint8)
        self.starts, self.lengths = vocab.offsets[:-1], vocab.lengths()
        ids = np.flatnonzero(keep)
        hashes = _hash_spans(self.data, self.starts[ids], self.lengths[ids], _powers(int(self.lengths.max(initial=0))))
        order = np.lexsort((ids, hashes))  # by hash, then id: the last of equal hashes is the latest id
        self.hashes, self.ids = hashes[order], ids[order].astype(np.int32)

    def find(self, data: bytes) -> int | None:
        """The id of the token whose UTF-8 bytes are `data` (the latest one if there are several), or None."""
        h = np.uint64(_hash_bytes(data))
        lo, hi = int(np.searchsorted(self.hashes, h, "left")), int(np.searchsorted(self.hashes, h, "right"))
        for k in range(hi - 1, lo - 1, -1):
            if self.vocab.raw(int(self.ids[k])) == data:
                return int(self.ids[k])
        return None

    def _find_hashed(self, hashes: np.ndarray, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], query: Any) -> np.ndarray:
        """Ids for the queries whose hashes are `hashes` and whose bytes are the concatenation of `parts` (each a uint8
        array, span starts and span lengths); `query(i)` gives query i's bytes for the slow path. -1 where absent."""
        if not len(self.hashes):
            return np.full(len(hashes), -1, np.int64)
        at = np.searchsorted(self.hashes, hashes, "right") - 1
        hit = (at >= 0) & (self.hashes[np.maximum(at, 0)] == hashes)
        cand = np.where(hit, self.ids[np.maximum(at, 0)], -1).astype(np.int64)
        total = sum(p[2] for p in parts)
        ok = hit & (self.lengths[np.maximum(cand, 0)] == total)
        rows = np.flatnonzero(ok)
        offset = self.starts[cand[rows]]
        for data, starts, lengths in parts:
            ok[rows] &= _same_spans(self.data, offset, data, starts[rows], lengths[rows])
            offset = offset + lengths[rows]
        for i in np.flatnonzero(hit & ~ok).tolist():  # a collision, or an earlier duplicate: look it up one by one
            found = self.find(query(i))
            cand[i] = -1 if found is None else found
        return cand

    def merge_table(self, merges: StringArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The merges as sorted pair keys (left id * vocabulary size + right id) with the rank (first one wins) and the id
        of the token each makes (-1 if the vocabulary lacks it). A merge whose parts are not tokens can never apply."""
        n = len(merges)
        data = np.frombuffer(merges.blob, np.uint8)
        starts, lengths = merges.offsets[:-1], merges.lengths()
        spaces = np.flatnonzero(data == ord(" "))
        first = np.searchsorted(spaces, starts)  # the first space at or after each merge's start
        at = np.full(n, -1, np.int64)
        if len(spaces):
            found = first < len(spaces)
            at[found] = spaces[first[found]] - starts[found]
        bad = (at <= 0) | (at >= lengths - 1)  # no space, a space first or last, or only one in a later merge
        if bad.any():
            rank = int(np.flatnonzero(bad)[0])
            raise TokenizerError(f"merge #{rank} {merges[rank]!r} is not two tokens separated by one space; the model file is corrupt")
        left_len, right_start, right_len = at, starts + at + 1, lengths - at - 1
        powers = _powers(int(lengths.max(initial=0)))
        h_left = _hash_spans(data, starts, left_len, powers)
        h_right = _hash_spans(data, right_start, right_len, powers)
        left = self._find_hashed(h_left, [(data, starts, left_len)], lambda i: merges.raw(i)[: left_len[i]])
        right = self._find_hashed(h_right, [(data, right_start, right_len)], lambda i: merges.raw(i)[left_len[i] + 1 :])
        h_made = h_left + powers[left_len] * h_right
        made = self._find_hashed(h_made, [(data, starts, left_len), (data, right_start, right_len)],
                                 lambda i: merges.raw(i)[: left_len[i]] + merges.raw(i)[left_len[i] + 1 :])
        usable = (left >= 0) & (right >= 0)
        keys = left[usable] * len(self.vocab) + right[usable]
        ranks = np.flatnonzero(usable)
        order = np.lexsort((ranks, keys))
        keys, ranks, made = keys[order], ranks[order], made[usable][order]
        firsts = np.ones(len(keys), bool)
        firsts[1:] = keys[1:] != keys[:-1]
        return keys[firsts], ranks[firsts].astype(np.int32), made[firsts].astype(np.int32)


def _kind(value: Any) -> str:
    """A short description of a metadata value for an error message."""
    if isinstance(value, list):
        kinds = sorted({type(x).__name__ for x in value})
        return f"a list of {', '.join(kinds) or 'nothing'}"
    return f"{type(value).__name__} {value!r}"[:80]
