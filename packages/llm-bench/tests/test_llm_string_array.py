"""StringArray: packed strings behave as a read-only sequence of str; spans of a buffer are checked for UTF-8."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_bench.string_array import StringArray


@given(st.lists(st.text(), max_size=20))
@settings(max_examples=150, derandomize=True, deadline=None)
def test_packed_strings_read_back_as_a_list(strings):
    packed = StringArray.from_strings(strings)
    assert len(packed) == len(strings)
    assert list(packed) == strings and packed == strings and packed == tuple(strings)
    assert [packed[i] for i in range(-len(strings), 0)] == strings
    assert packed[1:5] == strings[1:5] and packed[::-2] == strings[::-2]
    assert [packed.raw(i) for i in range(len(strings))] == [s.encode("utf-8", "surrogatepass") for s in strings]
    assert packed.lengths().tolist() == [len(s.encode("utf-8", "surrogatepass")) for s in strings]
    assert packed == StringArray.from_strings(strings)
    if strings:
        assert packed != strings[:-1] and packed != [*strings[:-1], strings[-1] + "x"]
    with pytest.raises(IndexError):
        packed[len(strings)]


def test_spans_of_a_buffer_and_their_encoding():
    data = b"..abc..\xc3\xa9t\xc3.x"
    spans = StringArray.from_spans(data, np.array([2, 7, 0]), np.array([3, 3, 0]))
    assert list(spans) == ["abc", "ét", ""] and spans.invalid_utf8() is None
    bad = StringArray.from_spans(data, np.array([2, 7, 10]), np.array([3, 3, 1]))
    assert bad.invalid_utf8() == 2  # a lone lead byte
    # a string cut inside a character is invalid even when the next string would complete it
    cut = StringArray.from_spans(data, np.array([7, 8]), np.array([1, 2]))
    assert cut.invalid_utf8() == 0
    assert repr(cut) == "StringArray(['\ufffd', '\ufffdt'], 2 strings)" and StringArray.from_strings([]) == []
