"""The assembler's fast paths keep their meaning: top-level splitting against a character-by-character reference, and
the operand cache never shares a mutable value."""

from amd_isa.arch import get_arch
from amd_isa.assembler import _split_top, parse_operand
from hypothesis import given, settings
from hypothesis import strategies as st


def reference_split(text: str, seps: str) -> list[str]:
    """Split on `seps` outside (), [] and |...|, one character at a time."""
    parts, depth, bars, current = [], 0, False, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "|":
            bars = not bars
        if ch in seps and depth == 0 and not bars:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


@settings(max_examples=400, derandomize=True, deadline=None)
@given(text=st.text(alphabet="v0[]:(),| \t-sa1", max_size=30), seps=st.sampled_from([",", " \t"]))
def test_split_top_matches_the_character_reference(text, seps):
    assert _split_top(text, seps) == reference_split(text, seps)


def test_split_top_on_real_operand_lists():
    line = "v[0:3], -|v4|, neg(v[5:6]), [v7, v8], op_sel:[1, 0] offset:16"
    assert _split_top(line, ",") == ["v[0:3]", "-|v4|", "neg(v[5:6])", "[v7, v8]", "op_sel:[1, 0] offset:16"]
    assert _split_top("v1 op_sel:[1, 0] clamp", " \t") == ["v1", "op_sel:[1, 0]", "clamp"]


def test_operand_cache_returns_equal_values_and_fresh_lists():
    arch = get_arch("rdna3")
    first, second = parse_operand(arch, "[v4, v6]"), parse_operand(arch, "[v4, v6]")
    assert first == second and first is not second
    first.append("mutated")
    assert parse_operand(arch, "[v4, v6]") == second
    assert parse_operand(arch, "v[0:3]") == parse_operand(arch, "v[0:3]")

