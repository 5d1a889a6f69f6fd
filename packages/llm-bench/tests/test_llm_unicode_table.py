"""The Unicode category table the pre-tokenizer's classes are built from, kept in the model cache between processes."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from llm_bench import pretokenize


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_BENCH_CACHE", str(tmp_path))
    pretokenize._major_categories.cache_clear()
    yield tmp_path / "unicode" / f"major-categories-{unicodedata.unidata_version}-{pretokenize._SCAN_LIMIT:x}.bin"
    pretokenize._major_categories.cache_clear()


def _scanned() -> np.ndarray:
    return np.frombuffer("".join(unicodedata.category(chr(c))[0] for c in range(pretokenize._SCAN_LIMIT)).encode("ascii"), np.uint8)


def test_the_table_is_kept_and_read_back_by_a_new_process(cache):
    first = pretokenize._major_categories()
    assert cache.read_bytes() == first.tobytes() == _scanned().tobytes()
    pretokenize._major_categories.cache_clear()  # a new process: the kept table, the same bytes
    np.testing.assert_array_equal(pretokenize._major_categories(), first)


@pytest.mark.parametrize("damage", ["short", "not a category letter"])
def test_a_damaged_table_is_scanned_again_and_replaced(cache, damage):
    cache.parent.mkdir(parents=True)
    good = _scanned()
    cache.write_bytes(good[:100].tobytes() if damage == "short" else b"x" * good.size)
    assert pretokenize._major_categories().tobytes() == good.tobytes() == cache.read_bytes()


def test_a_cache_it_cannot_write_still_gives_the_table(cache):
    cache.parent.write_text("a file where the folder would be")  # (a read-only folder stops no one running as root)
    assert pretokenize._major_categories().tobytes() == _scanned().tobytes()


def test_the_classes_split_words_as_before(cache):
    assert pretokenize.split_words("Hello, wörld 42 ünïcode!", "gpt2") == ["Hello", ",", " wörld", " 42", " ünïcode", "!"]
