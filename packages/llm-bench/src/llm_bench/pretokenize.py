"""Pre-tokenizer presets (how text is split into words before BPE), with Unicode classes emulated for the stdlib `re`.

The upstream regexes use `\\p{L}` (letters), `\\p{N}` (numbers) and Unicode `\\s`; the stdlib `re` has none of these,
so the classes are built once from `unicodedata` as compact codepoint ranges.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import numpy as np

from .errors import TokenizerError

# Covers the Unicode planes where letters, numbers and separators are assigned (planes 0-3); planes 14-16 hold none.
_SCAN_LIMIT = 0x40000
# \s in the upstream (PCRE/Oniguruma) regexes is Unicode White_Space: these controls plus the Z (separator) categories
_WHITESPACE_CONTROLS = "\t\n\x0b\x0c\r\x85"


@functools.cache
def _major_categories() -> np.ndarray:
    """The first letter of every scanned codepoint's Unicode category, as bytes (one scan shared by all classes)."""
    return np.frombuffer("".join([unicodedata.category(c)[0] for c in map(chr, range(_SCAN_LIMIT))]).encode("ascii"), np.uint8)


@functools.cache
def unicode_class(category_prefix: str) -> str:
    """A `re` character-class body matching every codepoint whose major category is `category_prefix` ("L", "N", "Z")."""
    inside = (_major_categories() == ord(category_prefix)).astype(np.int8)
    # each run of consecutive codepoints becomes one a-z range, keeping the class short and fast
    edges = np.flatnonzero(np.diff(np.concatenate(([0], inside, [0]))))
    return "".join(re.escape(chr(a)) + (f"-{re.escape(chr(b - 1))}" if b - 1 > a else "") for a, b in zip(edges[::2], edges[1::2]))


def _template_classes() -> dict[str, str]:
    letters, numbers = unicode_class("L"), unicode_class("N")
    space = re.escape(_WHITESPACE_CONTROLS) + unicode_class("Z")
    return {"L": letters, "N": numbers, "S": space}


# {L}, {N}, {S} stand for the bodies of \p{L}, \p{N} and \s; [{S}] is \s and [^{S}] is \S
_PRESET_TEMPLATES: dict[str, str] = {
    # Llama 3 (llama.cpp LLAMA_VOCAB_PRE_TYPE_LLAMA3): numbers in groups of up to three digits
    "llama-bpe": (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n{N}{L}]?[{L}]+|[{N}]{1,3}"
                  r"| ?[^{S}{L}{N}]+[\r\n]*|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+"),
    # Qwen2 / Qwen3: as Llama 3 but every digit is its own word
    "qwen2": (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n{N}{L}]?[{L}]+|[{N}]"
              r"| ?[^{S}{L}{N}]+[\r\n]*|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+"),
    # OLMo uses the GPT-2 split
    "olmo": r"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+",
}
_ALIASES = {"llama3": "llama-bpe", "llama-v3": "llama-bpe", "gpt2": "olmo", "default": "olmo", "qwen3": "qwen2"}

PRESETS = tuple(_PRESET_TEMPLATES)
# Llama 3 takes a word that is itself in the vocabulary as one token before trying merges (llama.cpp `ignore_merges`)
WHOLE_WORD_FIRST = frozenset({"llama-bpe"})


def canonical_preset(name: str) -> str:
    """The preset a `tokenizer.ggml.pre` value selects, or a `TokenizerError` listing the supported ones."""
    preset = _ALIASES.get(name, name)
    if preset not in _PRESET_TEMPLATES:
        raise TokenizerError(f"tokenizer pre-tokenizer {name!r} is not supported; supported: {', '.join(PRESETS + tuple(_ALIASES))}")
    return preset


@functools.cache
def preset_regex(name: str) -> re.Pattern[str]:
    """The compiled word-splitting regex of a preset."""
    template = _PRESET_TEMPLATES[canonical_preset(name)]
    classes = _template_classes()
    return re.compile(template.replace("{L}", classes["L"]).replace("{N}", classes["N"]).replace("{S}", classes["S"]))


def split_words(text: str, preset: str) -> list[str]:
    """Split `text` into pre-tokenizer words; the words always concatenate back to `text`."""
    words: list[str] = []
    pos = 0
    for match in preset_regex(preset).finditer(text):
        if match.start() > pos:
            # the presets cover every character; keep any gap anyway so encoding never loses text
            words.append(text[pos : match.start()])
        words.append(match.group())
        pos = match.end()
    if pos < len(text):
        words.append(text[pos:])
    return words
