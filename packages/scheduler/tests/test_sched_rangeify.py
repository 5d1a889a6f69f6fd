"""Index math of rangeify, evaluated numerically against Python's own integer arithmetic."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler.rangeify import reshape_index
from uopir import UOp


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_reshape_index_matches_numpy_unravel(old_shape, data):
    # a flat position decomposed over the new shape must land on the same element of the old shape as numpy says
    size = int(np.prod(old_shape))
    new_shape = data.draw(st.permutations(old_shape))
    new_shape = tuple(new_shape) if int(np.prod(new_shape)) == size else tuple(old_shape)
    ranges = tuple(UOp.range(d, i) for i, d in enumerate(new_shape))
    idx = reshape_index(ranges, new_shape, tuple(old_shape))
    flat = data.draw(st.integers(0, size - 1))
    new_pos = np.unravel_index(flat, new_shape)
    env = {f"r{i}": int(p) for i, p in enumerate(new_pos)}
    got = tuple(e.sym_infer(env) if isinstance(e, UOp) else e for e in idx)
    assert got == tuple(int(p) for p in np.unravel_index(flat, old_shape))
