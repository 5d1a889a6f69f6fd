"""No kernel's C source nests brackets deeper than clang-15 and clang-19 accept (256 by default): the C renderer names
an expression once its text would hold too many (`MAX_INLINE_BRACKETS`). A vector operation on ints wraps each operand
in casts to the unsigned vector and back, so a chain of 64 of them (topk's picks summed one candidate at a time) was
~330 deep and failed to compile with clang-19, while clang-22 took it."""

import numpy as np
import pytest
from hcq_runtime import Device, kernel_cache
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor
from uop_scheduler.reduce import TOPK_PICKS
from uopir import Ops, to_program
from uopir.renderer.cstyle import MAX_INLINE_BRACKETS

CLANG_BRACKET_DEPTH = 256


def deepest(src: str) -> int:
    depth = worst = 0
    for ch in src:
        if ch in "([{":
            depth += 1
            worst = max(worst, depth)
        elif ch in ")]}":
            depth -= 1
    return worst


def deepest_statement(src: str) -> int:
    """The deepest bracket nesting inside one statement (a function body's braces do not count)."""
    return max((deepest(line) for line in src.splitlines() if not line.rstrip().endswith(("{", "}"))), default=0)


def record_sources(mp: pytest.MonkeyPatch) -> list[str]:
    """The C source of every CPU kernel compiled from now on under `mp` (the compile cache is bypassed)."""
    seen: list[str] = []
    mp.setattr(kernel_cache, "_kernels", {})
    original = kernel_cache._program

    def record(body, device):
        if device == "CPU" and body.op is Ops.SINK:
            seen.append(to_program(body, Device["CPU"].renderer, n_cores=Device["CPU"].n_cores).src[2].arg)
        return original(body, device)

    mp.setattr(kernel_cache, "_program", record)
    return seen


def test_the_helper_counts_nesting():
    assert deepest("a = ((b) + (c[(d)]));") == 4 and deepest_statement("void f() {\n  x = (y);\n}") == 1


def test_topk_picks_of_an_int_count_stay_within_the_depth(monkeypatch):
    sources = record_sources(monkeypatch)
    x = np.random.default_rng(0).standard_normal((600, 70)).astype(np.float32)
    values, indices = Tensor(x).topk(TOPK_PICKS, dim=0)
    want = np.argsort(-x, axis=0, kind="stable")[:TOPK_PICKS]
    np.testing.assert_array_equal(indices.numpy(), want)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, want, 0))
    assert sources and max(map(deepest_statement, sources)) < CLANG_BRACKET_DEPTH


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.integers(40, 120), st.sampled_from(["int32", "int16", "float32"]), st.integers(0, 2**16))
def test_long_left_leaning_sums_stay_within_the_depth(terms, dtype, seed):
    """The sum of `terms` shifted windows of one vector, each term a window or a select over it and each combined into
    the running value by a random wrapping operation: one expression whose operands are all used once, so nothing but
    the depth bound names a part of it; against numpy."""
    rng = np.random.default_rng(seed)
    width = 32
    x = rng.integers(-9, 9, width + terms).astype(dtype)
    kinds, combines = rng.integers(0, 2, terms), rng.integers(0, 3, terms)
    with pytest.MonkeyPatch.context() as mp:
        seen = record_sources(mp)
        t = Tensor(x)
        got, want = None, None
        for i in range(terms):
            term, ref = t[i:i + width], x[i:i + width]
            if kinds[i]:
                term, ref = (term < 0).where(term, 2), np.where(ref < 0, ref, np.array(2, dtype))
            if got is None:
                got, want = term, ref
            elif combines[i] == 0:
                got, want = got + term, want + ref
            elif combines[i] == 1:
                got, want = got - term, want - ref
            else:  # (kept small: a product of many terms would overflow a float's exact range)
                got, want = got * 1 + term * 2, want + ref * np.array(2, dtype)
        np.testing.assert_array_equal(got.numpy(), want)
        assert seen and max(map(deepest_statement, seen)) < CLANG_BRACKET_DEPTH


def test_the_bound_leaves_room_for_the_statement_around_an_expression():
    assert MAX_INLINE_BRACKETS + 32 < CLANG_BRACKET_DEPTH
