"""Tokenizer: pre-tokenizer presets on known splits, BPE against an independent reference merger, specials, round trips."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_bench import Tokenizer, TokenizerError, learn_bpe, split_words

CORPUS = "the cat sat on the mat. the dog sat on the log! 123 4567 don't stop, it's there; they're here.\n\nnew lines\tand tabs"


def gpt2_byte_chars() -> dict[int, str]:
    # written out from the GPT-2 encoder.py definition, independently of the package
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def reference_bpe(word: bytes, merges: list[str]) -> list[str]:
    """Merge by repeatedly joining the lowest-ranked adjacent pair, one occurrence at a time (leftmost first)."""
    chars = gpt2_byte_chars()
    rank = {tuple(m.split(" ")): i for i, m in enumerate(merges)}
    parts = [chars[b] for b in word]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = rank.get((parts[i], parts[i + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return parts
        parts[best[1] : best[1] + 2] = [parts[best[1]] + parts[best[1] + 1]]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    vocab = learn_bpe(CORPUS * 3, 120)
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot|>"]
    tokens = vocab.tokens + specials
    types = [1] * len(vocab.tokens) + [3, 3, 3]
    n = len(vocab.tokens)
    return Tokenizer(tokens, vocab.merges, "llama-bpe", types, bos_id=n, eos_id=n + 1, add_bos=True, eot_id=n + 2)


@pytest.mark.parametrize(("preset", "text", "words"), [
    ("llama-bpe", "Hello world 12345 don't", ["Hello", " world", " ", "123", "45", " don", "'t"]),
    ("llama-bpe", "I'M here\n\n  x", ["I", "'M", " here", "\n\n", " ", " x"]),
    ("qwen2", "ab 123", ["ab", " ", "1", "2", "3"]),
    ("olmo", "Hello world 12345 don't", ["Hello", " world", " 12345", " don", "'t"]),
    ("llama-bpe", "héllo мир ٣٤", ["héllo", " мир", " ", "٣٤"]),
    ("llama-bpe", "a\u3000b", ["a", "\u3000b"]),
    # the presets below, worked out by hand from llama.cpp's stage lists (src/llama-vocab.cpp, llm_tokenizer_bpe): each
    # stage splits every piece of the one before into its matches and the text between them
    ("smollm", "abc123 def", ["abc", "1", "2", "3", " def"]),
    ("smollm", "a 1", ["a", " ", "1"]),
    ("smollm", "x  \n y", ["x", "  \n", " y"]),
    ("falcon", "Hello, world!! 12345", ["Hello", ",", " world", "!!", " ", "123", "45"]),
    ("default", "a 12345", ["a", " ", "123", "45"]),
    ("deepseek-coder", "ab, 12\n", ["ab", ",", " ", "1", "2", "\n"]),
    ("deepseek-v3", "x 1234", ["x", " ", "123", "4"]),
    ("tekken", "HelloWorld ABC def", ["Hello", "World", " ABC", " def"]),
    ("tekken", "ABCdef", ["ABCdef"]),
    ("llama4", "I'm OK", ["I'm", " OK"]),
    ("bloom", "Hi, there.", ["Hi", ",", " there", "."]),
    # a non-ASCII space is \s to every stage but not the literal U+3000 in deepseek-llm's class
    ("deepseek-llm", "a\u3000b", ["a", "\u3000b"]),
])
def test_presets_split_known_text(preset, text, words):
    assert split_words(text, preset) == words


def test_unknown_preset_is_clear():
    with pytest.raises(TokenizerError, match="'klingon' is not supported"):
        Tokenizer([], [], "klingon")


def test_learned_merges_are_frequent_pairs():
    vocab = learn_bpe("aaab aaab aaab", 2, "llama-bpe")
    # words "aaab", " aaab" x2: ("a","a") occurs 6 times, then ("aa","a")... ties broken lexicographically
    assert vocab.merges[0] == "a a"
    assert len(vocab.tokens) == 256 + len(vocab.merges)


def test_encode_matches_reference_merger(tok):
    for word in ["the", " cat", " mat", " there", "Zebra", " 456", "don", "\n\n"]:
        ids = tok.encode(word, add_bos=False)
        assert [tok.tokens[i] for i in ids] == reference_bpe(word.encode(), [m for m in _merges(tok)])


def _merges(tok):
    return list(tok.merges)


def test_bos_and_specials(tok):
    ids = tok.encode("the<|eot|>cat")
    assert ids[0] == tok.bos_id
    assert tok.special_ids["<|eot|>"] in ids
    assert tok.decode(ids[1:]) == "the<|eot|>cat"
    assert tok.decode(ids, skip_special=True) == "thecat"
    assert tok.encode("<|eot|>", add_bos=False, parse_special=False) != [tok.special_ids["<|eot|>"]]
    assert tok.is_end(tok.eos_id) and tok.is_end(tok.special_ids["<|eot|>"]) and not tok.is_end(ids[-1])


def test_merging_shortens_common_words(tok):
    assert len(tok.encode(" the", add_bos=False)) == 1
    assert len(tok.encode("qqqq", add_bos=False)) == 4


@pytest.fixture(scope="module")
def per_preset(tok) -> list[Tokenizer]:
    return [Tokenizer(tok.tokens, _merges(tok), preset, tok.token_types) for preset in ("llama-bpe", "qwen2", "olmo")]


@given(st.text(max_size=40))
@settings(max_examples=150, derandomize=True, deadline=None)
def test_round_trip_random_unicode(per_preset, text):
    if any(s in text for s in per_preset[0].special_ids):
        return
    for tokenizer in per_preset:
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_from_metadata_errors():
    with pytest.raises(TokenizerError, match="only byte-level BPE"):
        Tokenizer.from_metadata({"tokenizer.ggml.model": "llama"})
    with pytest.raises(TokenizerError, match="no tokenizer.ggml.merges"):
        Tokenizer.from_metadata({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a"]})
    with pytest.raises(TokenizerError, match="not two tokens"):
        Tokenizer(["a"], ["ab"])


def test_llama3_takes_whole_words_before_merging():
    chars = gpt2_byte_chars()
    tokens = [chars[b] for b in range(256)] + ["ab", "abc"]  # "abc" is a token no merge reaches
    merges = ["a b"]
    llama = Tokenizer(tokens, merges, "llama-bpe")
    qwen = Tokenizer(tokens, merges, "qwen2")
    assert llama.encode("abc") == [257]
    assert qwen.encode("abc") == [256, tokens.index("c")]


@pytest.mark.parametrize("name", ["smollm", "gpt-2", "starcoder", "refact", "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon",
                                  "mpt", "tekken", "default", "llama3", "llama-bpe", "qwen2", "olmo", "dbrx", "llama4", "command-r"])
def test_every_llama_cpp_pre_tokenizer_of_the_supported_families_is_known(name):
    text = "Hello, World! It's 2024: naïve café — 東京 \t\n  end  "
    assert "".join(split_words(text, name)) == text


def test_an_unknown_pre_tokenizer_names_the_known_ones():
    with pytest.raises(TokenizerError, match="'klingon' is not supported; supported: .*smollm"):
        Tokenizer([], [], "klingon")


def _dict_tokenizer_ids(tokens: list[str], merges: list[str], word: bytes) -> list[int]:
    """An independent merger over strings and dicts (the later of duplicate tokens wins, as a dict built in order)."""
    ids = {t: i for i, t in enumerate(tokens)}
    return [ids[p] for p in reference_bpe(word, merges)]


@given(st.text(max_size=30), st.lists(st.integers(0, 10**6), max_size=8))
@settings(max_examples=120, derandomize=True, deadline=None)
def test_packed_vocabulary_with_duplicates_matches_a_dict_merger(tok, text, picks):
    # some tokens appear twice (a later id with the same string): merging must produce the later id
    tokens, merges = list(tok.tokens)[: -3], list(tok.merges)
    dups = [tokens[p % len(tokens)] for p in picks]
    tokens = tokens + dups
    packed = Tokenizer(tokens, merges, "olmo")
    for word in split_words(text, "olmo"):
        assert list(packed.encode(word)) == _dict_tokenizer_ids(tokens, merges, word.encode())


def test_hash_collisions_only_cost_time(tok, monkeypatch):
    # with a hash that is the plain sum of the bytes every anagram collides ("ab" and "ba", " the" and "eth "):
    # lookups fall back to comparing bytes and give the same ids
    import llm_bench.tokenizer as module
    monkeypatch.setattr(module, "_HASH_BASE", 1)
    colliding = Tokenizer(tok.tokens, list(tok.merges), "llama-bpe", tok.token_types)
    hashes = colliding._index.hashes.tolist()
    assert len(hashes) - len(set(hashes)) >= 50  # a third of the merged tokens share a hash with another
    for text in (CORPUS, CORPUS.upper(), "tac tas no eht", "ɐ ǝɥʇ 東京"):
        assert colliding.encode(text, add_bos=False) == tok.encode(text, add_bos=False)
        assert colliding.decode(colliding.encode(text)) == text


def test_a_merge_making_no_token_is_a_clear_error():
    chars = gpt2_byte_chars()
    tokens = [chars[b] for b in range(256)]
    with pytest.raises(TokenizerError, match="no token 'ab' needed to encode 'xab'"):
        Tokenizer(tokens, ["a b"], "llama-bpe").encode("xab")
    # a merge whose parts are not tokens can never apply
    assert Tokenizer(tokens, ["ab c"], "llama-bpe").encode("abc") == [tokens.index(c) for c in "abc"]
    for bad in (["ab"], [" ab"], ["ab "], ["a b", "x"]):
        with pytest.raises(TokenizerError, match="not two tokens separated by one space"):
            Tokenizer(tokens, bad)
