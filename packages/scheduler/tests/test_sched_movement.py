"""Movement ops and indexing against numpy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor, dtypes


@pytest.fixture
def x(rng):
    return rng.standard_normal((2, 3, 4)).astype(np.float32)


def test_reshape_permute_expand(x, close):
    t = Tensor(x)
    close(t.reshape(6, 4), x.reshape(6, 4))
    close(t.reshape(-1), x.reshape(-1))
    close(t.reshape(4, -1, 2), x.reshape(4, -1, 2))
    close(t.view((3, 8)), x.reshape(3, 8))
    close(t.permute(2, 0, 1), x.transpose(2, 0, 1))
    close(t.transpose(0, 2), x.swapaxes(0, 2))
    close(Tensor(x[0]).T, x[0].T)
    close(Tensor(x[:, :1]).expand(2, 3, 4), np.broadcast_to(x[:, :1], (2, 3, 4)))
    close(Tensor(x[:, :1]).expand(5, -1, 3, -1), np.broadcast_to(x[:, :1], (5, 2, 3, 4)))
    close(t.flatten(), x.flatten())
    close(t.flatten(1), x.reshape(2, 12))
    close(t.unflatten(2, (2, 2)), x.reshape(2, 3, 2, 2))
    close(Tensor(x[:, :1]).squeeze(), x[:, 0])
    close(t.unsqueeze(1), x[:, None])
    close(t.unsqueeze(-1), x[..., None])


def test_reshape_chains_mix_with_math(x, close):
    t = Tensor(x)
    close(t.permute(1, 0, 2).reshape(3, 8).T * 2 + 1, x.transpose(1, 0, 2).reshape(3, 8).T * 2 + 1)
    close((t.reshape(4, 6) + t.reshape(4, 6).flip(0)).sum(1), (x.reshape(4, 6) + x.reshape(4, 6)[::-1]).sum(1), atol=1e-5)


def test_pad_shrink_flip(x, close):
    t = Tensor(x)
    close(t.pad(((0, 0), (1, 2), (3, 0))), np.pad(x, ((0, 0), (1, 2), (3, 0))))
    close(t.pad((1, 1)), np.pad(x, ((0, 0), (0, 0), (1, 1))))
    close(t.pad((1, 2, 0, 1), value=-5.0), np.pad(x, ((0, 0), (0, 1), (1, 2)), constant_values=-5.0))
    close(t.pad((-1, 1)), np.pad(x[..., 1:], ((0, 0), (0, 0), (0, 1))))
    close(t.pad((2, 1), mode="reflect"), np.pad(x, ((0, 0), (0, 0), (2, 1)), mode="reflect"))
    close(t.pad((2, 3), mode="replicate"), np.pad(x, ((0, 0), (0, 0), (2, 3)), mode="edge"))
    close(t.pad((1, 2), mode="circular"), np.pad(x, ((0, 0), (0, 0), (1, 2)), mode="wrap"))
    close(t.shrink(((0, 1), None, (1, 3))), x[0:1, :, 1:3])
    close(t.flip(0, 2), x[::-1, :, ::-1])
    close(Tensor([[1, 2], [3, 4]]).pad((1, 1)).sum(), np.array(10, np.int32))


def test_repeat_cat_stack_split(x, close):
    t = Tensor(x)
    close(t.repeat(2, 1, 3), np.tile(x, (2, 1, 3)))
    close(t.repeat(2, 1, 1, 1), np.tile(x, (2, 1, 1, 1)))
    y = x * 2
    close(t.cat(Tensor(y), dim=1), np.concatenate([x, y], 1))
    close(t.cat(Tensor(y), Tensor(x), dim=-1), np.concatenate([x, y, x], -1))
    close(Tensor([1, 2]).cat(Tensor([3.5])), np.array([1, 2, 3.5], np.float32))
    close(t.stack(Tensor(y), dim=1), np.stack([x, y], 1))
    parts = t.split(3, dim=2)
    assert [p.shape for p in parts] == [(2, 3, 3), (2, 3, 1)]
    close(parts[1], x[:, :, 3:])
    close(t.split([1, 2], dim=1)[1], x[:, 1:])
    assert [c.shape[2] for c in t.chunk(2, dim=2)] == [2, 2]


GETITEMS = [
    (1,), (-1,), (slice(None), 2), (slice(1, None), slice(None, None, 2)), (Ellipsis, 1), (None, 0, Ellipsis, None),
    (slice(None, None, -1),), (1, slice(3, 0, -2), slice(None, None, 3)), (slice(0, 0),), (0, 1, 2), (Ellipsis, slice(-3, -1), None),
]


@pytest.mark.parametrize("idx", GETITEMS, ids=[repr(i) for i in GETITEMS])
def test_getitem_basic(x, close, idx):
    close(Tensor(x)[idx], x[idx])


def test_getitem_tensor_indices(x, close):
    t = Tensor(x)
    idx = np.array([2, 0, -1], np.int32)
    close(t[:, Tensor(idx)], x[:, idx])
    close(t[Tensor([1, 0])], x[[1, 0]])
    close(t[[0, 1], :, [3, 2]], x[[0, 1], :, [3, 2]])
    close(t[:, Tensor([[0, 1], [2, 2]]), Tensor([1, 3])], x[:, np.array([[0, 1], [2, 2]]), np.array([1, 3])])
    b = np.array([[True, False], [False, True]])
    close(Tensor(b)[Tensor([1, 1])], b[[1, 1]])


def test_gather(rng, close):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[0, 3], [1, 1], [2, 0]], np.int32)
    close(Tensor(x).gather(1, Tensor(idx)), np.take_along_axis(x, idx, 1))
    idx0 = np.array([[2, 0, 1, 1]], np.int32)
    close(Tensor(x).gather(0, Tensor(idx0)), np.take_along_axis(x, idx0, 0))


def test_movement_on_ints_and_bools(close):
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    close(Tensor(a).T.flip(0)[1:], a.T[::-1][1:])
    b = a % 3 == 0
    close(Tensor(b).pad((1, 0)), np.pad(b, ((0, 0), (1, 0))))
    assert Tensor(b).pad((1, 0)).dtype is dtypes.bool


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(1, 7), st.integers(-8, 8), st.integers(-8, 8), st.sampled_from([1, 2, 3, -1, -2]))
def test_slice_property(n, start, stop, step):
    # any Python slice of a 1-D tensor matches numpy
    x = np.arange(n, dtype=np.int32) * 3 - 5
    np.testing.assert_array_equal(Tensor(x)[start:stop:step].numpy(), x[start:stop:step])


def _apply_random_movements(data, x: np.ndarray, t: Tensor) -> tuple[np.ndarray, Tensor]:
    """Apply the same random chain of movement ops to a numpy array (the oracle) and a Tensor."""
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["reshape", "permute", "pad", "shrink", "flip", "expand"]))
        if kind == "reshape" and x.size:
            n = x.size
            first = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
            rest = n // first
            second = data.draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0]))
            shape = (first, second, rest // second)
            x, t = x.reshape(shape), t.reshape(shape)
        elif kind in ("permute", "reshape"):
            order = data.draw(st.permutations(range(x.ndim)))
            x, t = x.transpose(order), t.permute(order)
        elif kind == "pad":
            pads = [tuple(data.draw(st.integers(0, 2)) for _ in range(2)) for _ in range(x.ndim)]
            x, t = np.pad(x, pads), t.pad(pads)
        elif kind == "shrink":
            bounds = [sorted(data.draw(st.lists(st.integers(0, d), min_size=2, max_size=2))) for d in x.shape]
            x, t = x[tuple(slice(b, e) for b, e in bounds)], t.shrink([tuple(b) for b in bounds])
        elif kind == "flip":
            axis = data.draw(st.integers(0, x.ndim - 1))
            x, t = np.flip(x, axis), t.flip(axis)
        else:
            x, t = np.broadcast_to(x[None], (2, *x.shape)), t.unsqueeze(0).expand(2, *t.shape)
    return x, t


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.data())
def test_movement_chain_property(data):
    # rangeify must agree with numpy for any chain of views, with elementwise math on top and a reduce after
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7
    ref, t = _apply_random_movements(data, x, Tensor(x))
    np.testing.assert_array_equal((t * 2 + 1).numpy(), ref * 2 + 1)
    if ref.size:
        np.testing.assert_allclose(t.sum(0).numpy(), ref.sum(0), rtol=1e-6)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.data())
def test_permuted_copies_property(data):
    # permutes large enough that the CPU kernel tiles them (vectors along the output's rows and along the axis the
    # source reads contiguously, see uopir.codegen.opts._transpose_axis), of sizes the tile does and does not divide,
    # flipped or sliced, of 1- to 8-byte elements, alone and added to a second operand read in order: numpy's values
    dims = data.draw(st.lists(st.sampled_from([1, 3, 8, 16, 17, 32, 48, 64]), min_size=2, max_size=4))
    dtype = data.draw(st.sampled_from([np.float32, np.int8, np.float16, np.int64]))
    x = (np.arange(np.prod(dims)) % 251 - 120).astype(dtype).reshape(dims)
    order = data.draw(st.permutations(range(len(dims))))
    t = Tensor(x)
    if data.draw(st.booleans()):
        x, t = np.flip(x, 0), t.flip(0)
    if data.draw(st.booleans()) and x.shape[-1] > 2:
        x, t = x[..., 1:], t[..., 1:]
    want = x.transpose(order)
    np.testing.assert_array_equal(t.permute(order).contiguous().numpy(), want)
    other = np.ones(want.shape, dtype)
    np.testing.assert_array_equal((t.permute(order) + Tensor(other)).numpy(), want + other)
