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


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_reshape_index_with_symbolic_dims_matches_numpy_unravel(old_shape, data):
    # some dims are variables (a view shrunk by a bound Variable); the new shape merges runs of adjacent old dims (their
    # product, symbolic where a variable is in it) and puts size-1 dims in. Evaluated at the variables' values, every
    # position must land where numpy's unravel puts it
    symbolic = [data.draw(st.booleans()) for _ in old_shape]
    variables = [UOp.variable(f"v{k}", 1, 8) for k in range(len(old_shape))]
    old = tuple(v if s else d for v, s, d in zip(variables, symbolic, old_shape))
    new: list = []
    k = 0
    while k < len(old):
        run = data.draw(st.integers(1, len(old) - k))
        size = 1
        for d in old[k:k + run]:
            size = size * d
        new += [1] * data.draw(st.integers(0, 1)) + [size]
        k += run
    ranges = tuple(UOp.range(d, i) for i, d in enumerate(new))
    idx = reshape_index(ranges, tuple(new), old)
    values = {f"v{k}": d for k, d in enumerate(old_shape)}  # each variable takes the dim it stands for
    concrete_new = tuple(d if isinstance(d, int) else d.sym_infer(values) for d in new)
    flat = data.draw(st.integers(0, int(np.prod(old_shape)) - 1))
    env = values | {f"r{i}": int(p) for i, p in enumerate(np.unravel_index(flat, concrete_new))}
    got = tuple(e.sym_infer(env) if isinstance(e, UOp) else e for e in idx)
    assert got == tuple(int(p) for p in np.unravel_index(flat, old_shape))
