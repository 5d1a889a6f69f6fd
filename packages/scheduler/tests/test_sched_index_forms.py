"""Index forms numpy (or tinygrad, where numpy has dropped them) accepts, against numpy's values."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor, Variable, dtypes
from uop_scheduler.errors import TensorIndexError

BASE = np.arange(20).reshape(4, 5)


def test_ellipsis_alone_is_the_tensor_itself():
    x = Tensor(BASE)
    assert x[...] is x


def test_a_list_holding_slices_is_a_tuple_of_indices():
    x = Tensor(BASE)
    np.testing.assert_array_equal(x[[slice(None), [1, 3]]].numpy(), BASE[:, [1, 3]])
    np.testing.assert_array_equal(x[[None, 1]].numpy(), BASE[None, 1])


def test_a_tuple_inside_the_index_is_a_sequence_of_positions():
    x = Tensor(BASE)
    np.testing.assert_array_equal(x[(0, 2), ].numpy(), BASE[[0, 2], ])
    np.testing.assert_array_equal(x[(0, 2), 1].numpy(), BASE[[0, 2], 1])


def test_a_bound_variable_indexes_one_position():
    t = Tensor.arange(12).reshape(3, 4)
    for value in range(3):
        v = Variable("v", 0, 2).bind(value)
        np.testing.assert_array_equal(t[v].numpy(), np.arange(12).reshape(3, 4)[value])
        np.testing.assert_array_equal(t[v, Tensor([0, 1, 2])].numpy(), np.arange(12).reshape(3, 4)[value, [0, 1, 2]])


def test_del_item_is_a_type_error():
    x = Tensor(BASE)
    with pytest.raises(TypeError, match="item deletion"):
        del x[0]


def test_gather_refuses_non_integer_indices_and_bad_axes():
    t = Tensor.uniform(2, 3, 1, 4)
    idx = t.argsort(dim=0)
    for bad in (idx.cast(dtypes.bool), idx.cast(dtypes.float32)):
        with pytest.raises(RuntimeError, match="integer index"):
            t.gather(0, bad)
    with pytest.raises(RuntimeError, match="ndim"):
        t.gather(0, idx[0])
    with pytest.raises(IndexError):
        t.gather(7, idx)
    with pytest.raises(TensorIndexError):
        Tensor(BASE)[1.5]


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.integers(0, 2**16), st.integers(0, 6))
def test_nonzero_matches_numpy_argwhere(shape, seed, size):
    a = np.random.default_rng(seed).integers(0, 3, shape) * (np.random.default_rng(seed + 1).random(shape) < 0.5)
    want = np.argwhere(a)
    np.testing.assert_array_equal(Tensor(a).nonzero().numpy(), want)
    padded = np.full((size, a.ndim), -1)
    padded[:min(size, len(want))] = want[:size]
    np.testing.assert_array_equal(Tensor(a).nonzero(size=size, fill_value=-1).numpy(), padded)


def test_nonzero_with_a_size_replays_under_tinyjit():
    from uop_scheduler import TinyJit
    f = TinyJit(lambda x: x.nonzero(size=3, fill_value=-1).realize())
    for _ in range(3):
        for data, want in (([1, 0, 2, 0, 3], [[0], [2], [4]]), ([0, 0, 5, 0, 0], [[2], [-1], [-1]]), ([0] * 5, [[-1]] * 3)):
            np.testing.assert_array_equal(f(Tensor(data)).numpy(), want)


@pytest.mark.parametrize("index", [((2, 3, 4),), ([2, 3, 4],), [2, 3, 4], (np.array([2, 3, 4]),)])
def test_a_write_through_positions_in_a_tuple_lands(index):
    # a tuple inside the index used to read as a gathered copy, and the write into that copy was lost
    x, n = Tensor(np.arange(1, 11)).contiguous(), np.arange(1, 11)
    x[index] = 3
    n[index if isinstance(index, (tuple, list)) else (index,)] = 3
    np.testing.assert_array_equal(x.numpy(), n)


def test_a_list_of_index_tensors_is_a_tuple_of_indices():
    n = np.arange(12).reshape(4, 3)
    x = Tensor(n).contiguous()
    np.testing.assert_array_equal(x[[Tensor([0, 1]), Tensor([1, 2])]].numpy(), n[[0, 1], [1, 2]])
    x[[Tensor([0, 1]), Tensor([1, 2])]] = -1
    n[[0, 1], [1, 2]] = -1
    np.testing.assert_array_equal(x.numpy(), n)


def test_a_detached_tensor_is_a_leaf_of_its_own():
    a = Tensor([1.0, 2.0, 3.0]).contiguous().realize()
    d = a.detach()
    (d * d).sum().backward()
    np.testing.assert_array_equal(d.grad.numpy(), [2.0, 4.0, 6.0])
    assert a.grad is None or not a.grad.numpy().any()
