"""Cross-check the stdlib-`re` emulation of the presets against the upstream \\p{..} regexes run by the `regex` package,
when it is installed (`uv run --with regex pytest ...`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_bench import split_words

regex = pytest.importorskip("regex")

# the upstream patterns as llama.cpp / Hugging Face write them
UPSTREAM = {
    "llama-bpe": r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "olmo": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}
COMPILED = {name: regex.compile(pattern) for name, pattern in UPSTREAM.items()}

# characters unassigned in this Python's Unicode tables (category Cn) may be letters in the regex package's newer tables
assigned = st.characters(exclude_categories=("Cn", "Cs"))
mixed_text = st.text(alphabet=st.one_of(st.sampled_from(list(" \t\n\r'sStTdDmMlLvVeE0123456789.,!?-")), assigned), max_size=60)


@given(mixed_text, st.sampled_from(sorted(UPSTREAM)))
@settings(max_examples=300, derandomize=True, deadline=None)
def test_presets_agree_with_upstream_regex(text, preset):
    assert split_words(text, preset) == COMPILED[preset].findall(text)
