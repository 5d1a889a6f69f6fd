"""Pre-tokenizer presets (how text is split into words before BPE), with Unicode classes emulated for the stdlib `re`.

The upstream regexes use `\\p{L}` (letters), `\\p{N}` (numbers) and Unicode `\\s`; the stdlib `re` has none of these,
so the classes are built once from `unicodedata` as compact codepoint ranges.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from .errors import TokenizerError
from .files import written_atomically

# Covers the Unicode planes where letters, numbers and separators are assigned (planes 0-3); planes 14-16 hold none.
_SCAN_LIMIT = 0x40000
# \s in the upstream (PCRE/Oniguruma) regexes is Unicode White_Space: these controls plus the Z (separator) categories
_WHITESPACE_CONTROLS = "\t\n\x0b\x0c\r\x85"


@functools.cache
def _major_categories() -> np.ndarray:
    """The first letter of every scanned codepoint's Unicode category, as bytes (one scan shared by all classes). The
    scan (~30 ms, each process's first tokenization) is kept in the model cache under the Unicode version of Python's
    `unicodedata`; a kept table that is not one letter of a major category per codepoint is scanned again."""
    from .registry import cache_dir  # (the registry's models import the tokenizer trainer, which imports this module)

    path = cache_dir() / "unicode" / f"major-categories-{unicodedata.unidata_version}-{_SCAN_LIMIT:x}.bin"
    try:
        kept = np.frombuffer(path.read_bytes(), np.uint8)
        if kept.size == _SCAN_LIMIT and np.isin(kept, _MAJOR_LETTERS).all():
            return kept
    except OSError:
        pass
    table = np.frombuffer("".join([unicodedata.category(c)[0] for c in map(chr, range(_SCAN_LIMIT))]).encode("ascii"), np.uint8)
    try:
        with written_atomically(path) as out:
            out.write(table.tobytes())
    except OSError:  # (a read-only cache: scanned again by the next process)
        pass
    return table


#: the first letters of Unicode's general categories (Letter, Mark, Number, Punctuation, Symbol, Separator, Other)
_MAJOR_LETTERS = np.frombuffer(b"LMNPSZC", np.uint8)


@functools.cache
def unicode_class(category_prefix: str) -> str:
    """A `re` character-class body matching every codepoint whose major category is `category_prefix` ("L", "N", "Z")."""
    inside = (_major_categories() == ord(category_prefix)).astype(np.int8)
    # each run of consecutive codepoints becomes one a-z range, keeping the class short and fast
    edges = np.flatnonzero(np.diff(np.concatenate(([0], inside, [0]))))
    return "".join(re.escape(chr(a)) + (f"-{re.escape(chr(b - 1))}" if b - 1 > a else "") for a, b in zip(edges[::2], edges[1::2]))


def _template_classes() -> dict[str, str]:
    space = re.escape(_WHITESPACE_CONTROLS) + unicode_class("Z")
    return {"L": unicode_class("L"), "N": unicode_class("N"), "S": space, "P": unicode_class("P"), "Y": unicode_class("S"),
            "M": unicode_class("M")}


# Stage templates. {L} {N} {P} {M} stand for the bodies of \p{L}, \p{N}, \p{P} and \p{M}, {Y} for \p{S} (symbols) and
# {S} for \s; [{S}] is \s and [^{S}] is \S. llama.cpp runs a preset's stages in order, each splitting every piece the
# previous ones made into its matches and the text between them (both kept); a stage sees only its piece, so `\Z` and
# lookaheads stop at the piece's end.
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+"
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_LLAMA3 = _CONTRACTIONS + r"|[^\r\n{N}{L}]?[{L}]+|[{N}]{1,3}| ?[^{S}{L}{N}]+[\r\n]*|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+"
_QWEN2 = _CONTRACTIONS + r"|[^\r\n{N}{L}]?[{L}]+|[{N}]| ?[^{S}{L}{N}]+[\r\n]*|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+"
# a letter that is not a-z (upper case, or a letter without case) / not A-Z, as llama.cpp's adapted patterns define them
_UPPERISH, _LOWERISH = r"(?:(?![a-z])[{L}])", r"(?:(?![A-Z])[{L}])"
_TEKKEN = (rf"[^\r\n{{L}}{{N}}]?{_UPPERISH}*{_LOWERISH}+|[^\r\n{{L}}{{N}}]?{_UPPERISH}+{_LOWERISH}*|[{{N}}]"
           r"| ?[^{S}{L}{N}]+[\r\n/]*|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+")
_GPT4O = (rf"[^\r\n{{L}}{{N}}]?{_UPPERISH}*{_LOWERISH}+{_CONTRACTIONS}?|[^\r\n{{L}}{{N}}]?{_UPPERISH}+{_LOWERISH}*{_CONTRACTIONS}?"
          r"|[{N}]{1,3}| ?[^{S}{L}{N}]+[\r\n/]*|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+")
_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
# the letters deepseek-llm's second stage lists (llama.cpp spells them out)
_DEEPSEEK_LETTERS = ("A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377"
                     "\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556"
                     "\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a"
                     "\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4"
                     "\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc"
                     "\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f"
                     "\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b"
                     "\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a"
                     "\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2"
                     "\U000118a0-\U000118df\U0001e900-\U0001e943")
_BLOOM = " ?[^({S}|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"


@dataclass(frozen=True)
class Preset:
    """A pre-tokenizer: its split stages and whether a word that is a token is taken whole before merging
    (llama.cpp's `ignore_merges`)."""

    stages: tuple[str, ...]
    whole_words: bool = False


_PRESETS: dict[str, Preset] = {
    # Llama 3: numbers in groups of up to three digits, whole-word tokens first
    "llama-bpe": Preset((_LLAMA3,), whole_words=True),
    "dbrx": Preset((_LLAMA3,)),  # Llama 3's split, merges always applied
    "qwen2": Preset((_QWEN2,)),  # as Llama 3 but every digit is its own word
    "olmo": Preset((_GPT2,)),  # GPT-2's split
    # GPT-2's split after every digit is made a word of its own (SmolLM, StarCoder, Refact, Command-R)
    "starcoder": Preset((r"[{N}]", _GPT2)),
    "falcon": Preset((r"[{P}\$\+<=>\^~\|`]+", _GPT2, r"[0-9][0-9][0-9]")),
    # llama.cpp's split for a vocabulary that names no pre-tokenizer
    "default": Preset((r"[{P}\$\+<=>\^~\|]+", _GPT2, r"[{N}]+", r"[0-9][0-9][0-9]")),
    "deepseek-llm": Preset((r"[\r\n]", r"[{S}]?[" + _DEEPSEEK_LETTERS + "]+", r"[{S}]?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
                            r"[{S}]+\Z", _CJK, r"[{N}]+")),
    "deepseek-coder": Preset((r"[\r\n]", r"[{S}]?[{L}]+", r"[{S}]?[{P}]+", _CJK, r"[{N}]")),
    "deepseek-v3": Preset((r"[{N}]{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
                           r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n{L}{P}{Y}]?[{L}{M}]+| ?[{P}{Y}]+[\r\n]*"
                           r"|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+")),
    "tekken": Preset((_TEKKEN,), whole_words=True),
    "gpt-4o": Preset((_GPT4O,)),  # also Llama 4's
    "bloom": Preset((_BLOOM,)),
    "viking": Preset((_BLOOM, r"[{N}]")),
}
# every `tokenizer.ggml.pre` name llama.cpp maps to one of the presets above
_ALIASES = {
    **dict.fromkeys(("llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"), "llama-bpe"),
    **dict.fromkeys(("smaug-bpe",), "dbrx"),
    **dict.fromkeys(("qwen3", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "megrez", "hunyuan", "solar-open"), "qwen2"),
    **dict.fromkeys(("gpt2", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
                     "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "jais", "exaone4", "trillion",
                     "granite-docling"), "olmo"),
    **dict.fromkeys(("smollm", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"), "starcoder"),
    **dict.fromkeys(("hunyuan-dense", "joyai-llm", "hy_v4"), "deepseek-v3"),
    **dict.fromkeys(("llama4", "kanana2", "talkie", "minimax-m2"), "gpt-4o"),
    **dict.fromkeys(("poro-chat", "gpt3-finnish"), "bloom"),
}

PRESETS = tuple(_PRESETS)
# the presets that take a word that is itself in the vocabulary as one token before trying merges
WHOLE_WORD_FIRST = frozenset(name for name, p in _PRESETS.items() if p.whole_words)


def canonical_preset(name: str) -> str:
    """The preset a `tokenizer.ggml.pre` value selects, or a `TokenizerError` listing the supported ones."""
    preset = _ALIASES.get(name, name)
    if preset not in _PRESETS:
        raise TokenizerError(f"tokenizer pre-tokenizer {name!r} is not supported; supported: {', '.join(sorted(PRESETS + tuple(_ALIASES)))}")
    return preset


@functools.cache
def preset_stages(name: str) -> tuple[re.Pattern[str], ...]:
    """The compiled split stages of a preset."""
    classes = _template_classes()
    out = []
    for template in _PRESETS[canonical_preset(name)].stages:
        for key, body in classes.items():
            template = template.replace("{" + key + "}", body)
        out.append(re.compile(template))
    return tuple(out)


@functools.cache
def _whitespace_table() -> dict[int, int]:
    """Every non-ASCII whitespace codepoint -> U+000B: llama.cpp matches its non-custom stages on such a view of the
    text (so a literal non-ASCII space in a class, U+3000 say, never matches, while \\s matches them all)."""
    return {cp: 0x0B for cp in range(0x80, 0x3100) if chr(cp).isspace() and unicodedata.category(chr(cp))[0] in "ZC"}


def split_words(text: str, preset: str) -> list[str]:
    """Split `text` into pre-tokenizer words as llama.cpp does; the words always concatenate back to `text`."""
    view = text.translate(_whitespace_table())
    bounds = [(0, len(text))]
    for stage in preset_stages(preset):
        pieces: list[tuple[int, int]] = []
        for start, end in bounds:
            pos = start
            for match in stage.finditer(view[start:end]):
                a, b = start + match.start(), start + match.end()
                if a == b:
                    continue
                if a > pos:
                    pieces.append((pos, a))
                pieces.append((a, b))
                pos = b
            if pos < end:
                pieces.append((pos, end))
        bounds = pieces
    return [text[a:b] for a, b in bounds]
