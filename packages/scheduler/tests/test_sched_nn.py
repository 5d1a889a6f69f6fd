"""Matmul, convolution, pooling, normalization and friends against numpy references written independently."""

import numpy as np
import pytest
from uop_scheduler import Tensor, dtypes


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 2)), ((2, 4), (4,)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_shapes(rng, close, sa, sb):
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    close(Tensor(a) @ Tensor(b), a @ b, rtol=1e-5, atol=1e-5)
    close(Tensor(a).dot(Tensor(b)), np.matmul(a, b), rtol=1e-5, atol=1e-5)


def _dot_by_tensor_ops(x: Tensor, w: Tensor) -> Tensor:
    """numpy's matmul broadcasting written with tensor ops: the reference graph of `dot`'s UOp-built path."""
    extra = min(x.ndim - 1, w.ndim - 1, 1)
    axis_w = -min(w.ndim, 2)
    xr = x.reshape(*x.shape[0:-1], *[1] * extra, x.shape[-1])
    wr = w.reshape(*w.shape[0:-2], *[1] * extra, *w.shape[axis_w:]).transpose(-1, axis_w)
    return xr.mul(wr).sum(-1)


@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)),
                                   ((1, 2, 3), (5, 3, 4)), ((4, 1, 2, 3), (5, 3, 4))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_matmuls_build_the_tensor_ops_graph(rng, sa, sb, dtype):
    x, w = Tensor(rng.standard_normal(sa).astype(dtype)), Tensor(rng.standard_normal(sb).astype(dtype))
    got = x @ w
    assert got.uop is _dot_by_tensor_ops(x, w).uop  # hash-consed: the same node is the same graph
    np.testing.assert_allclose(got.numpy(), np.matmul(x.numpy(), w.numpy()), rtol=1e-5, atol=1e-5)


def test_matmul_dtypes(rng, close):
    a, b = rng.integers(-5, 5, (3, 4)).astype(np.int32), rng.integers(-5, 5, (4, 2)).astype(np.int32)
    close(Tensor(a) @ Tensor(b), a @ b)
    h, g = rng.standard_normal((3, 8)).astype(np.float16), rng.standard_normal((8, 2)).astype(np.float16)
    out = Tensor(h) @ Tensor(g)
    assert out.dtype is dtypes.float16
    close(out, (h.astype(np.float32) @ g.astype(np.float32)).astype(np.float16), rtol=2e-3, atol=2e-3)


def test_linear_and_einsum(rng, close):
    x, w, b = rng.standard_normal((5, 3)), rng.standard_normal((3, 2)), rng.standard_normal(2)
    x, w, b = x.astype(np.float32), w.astype(np.float32), b.astype(np.float32)
    close(Tensor(x).linear(Tensor(w), Tensor(b)), x @ w + b, rtol=1e-5, atol=1e-5)
    close(Tensor.einsum("ij,jk->ik", Tensor(x), Tensor(w)), np.einsum("ij,jk->ik", x, w), rtol=1e-5, atol=1e-5)
    close(Tensor.einsum("ij,kj->ki", Tensor(x), Tensor(x)), np.einsum("ij,kj->ki", x, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("formula,shapes", [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij,jk", [(3, 4), (4, 2)]), ("bij->jb", [(2, 3, 4)]),
                                            ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)])])
def test_einsum(rng, close, formula, shapes):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    close(Tensor.einsum(formula, *[Tensor(a) for a in arrays]), np.einsum(formula, *arrays), rtol=1e-5, atol=1e-5)


def conv2d_ref(x, w, stride=1, padding=0, dilation=1, groups=1):
    """Direct loops over output pixels, written without any im2col trick."""
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    bs, cin, h, wd = x.shape
    cout, cpg, kh, kw = w.shape
    oh, ow = (h - dilation * (kh - 1) - 1) // stride + 1, (wd - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((bs, cout, oh, ow), np.float64)
    opg = cout // groups
    for o in range(cout):
        g = o // opg
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * cpg:(g + 1) * cpg, i * stride:i * stride + dilation * (kh - 1) + 1:dilation,
                          j * stride:j * stride + dilation * (kw - 1) + 1:dilation]
                out[:, o, i, j] = (patch * w[o]).sum((1, 2, 3))
    return out.astype(np.float32)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (1, 1, 1, 2), (3, 0, 1, 1)])
def test_conv2d(rng, close, stride, padding, dilation, groups):
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((4, 4 // groups, 3, 2)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    got = Tensor(x).conv2d(Tensor(w), Tensor(b), groups=groups, stride=stride, padding=padding, dilation=dilation)
    close(got, conv2d_ref(x, w, stride, padding, dilation, groups) + b[None, :, None, None], rtol=1e-4, atol=1e-4)


def test_conv_transpose2d(rng, close):
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    stride = 2
    # scatter definition: every input pixel adds w * value into the output window it maps to
    out = np.zeros((1, 3, (3 - 1) * stride + 2, (4 - 1) * stride + 2), np.float32)
    for ci in range(2):
        for i in range(3):
            for j in range(4):
                out[0, :, i * stride:i * stride + 2, j * stride:j * stride + 2] += x[0, ci, i, j] * w[ci]
    close(Tensor(x).conv_transpose2d(Tensor(w), stride=stride), out, rtol=1e-4, atol=1e-4)
    close(Tensor(x).conv_transpose2d(Tensor(w), stride=stride, padding=1), out[:, :, 1:-1, 1:-1], rtol=1e-4, atol=1e-4)


def pool_ref(x, k, s, fn):
    bs, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    return np.array([[[[fn(x[b, ch, i * s:i * s + k, j * s:j * s + k]) for j in range(ow)] for i in range(oh)]
                      for ch in range(c)] for b in range(bs)], np.float32)


@pytest.mark.parametrize("k,s", [(2, 2), (3, 1), (3, 2)])
def test_pools(rng, close, k, s):
    x = rng.standard_normal((1, 2, 7, 8)).astype(np.float32)
    close(Tensor(x).max_pool2d(k, s), pool_ref(x, k, s, np.max))
    close(Tensor(x).avg_pool2d(k, s), pool_ref(x, k, s, np.mean), rtol=1e-5, atol=1e-6)


def test_pool_padding(rng, close):
    x = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    close(Tensor(x).max_pool2d(3, 1, padding=1), pool_ref(xp, 3, 1, np.max))
    xi = np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4) - 20
    close(Tensor(xi).max_pool2d(2, 2, padding=1), pool_ref(np.pad(xi, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-99), 2, 2, np.max)
          .astype(np.int32))


def test_layernorm_batchnorm(rng, close):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    close(Tensor(x).layernorm(), (x - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    w, b, m, inv = (rng.standard_normal(4).astype(np.float32) for _ in range(4))
    ref = (x - m[None, :, None]) * w[None, :, None] * inv[None, :, None] + b[None, :, None]
    close(Tensor(x).batchnorm(Tensor(w), Tensor(b), Tensor(m), Tensor(inv)), ref, rtol=1e-5, atol=1e-5)


def test_one_hot_triu_tril(close):
    close(Tensor([0, 2, 1]).one_hot(4), np.eye(4, dtype=np.int32)[[0, 2, 1]])
    close(Tensor([0, 2, 1]).one_hot(), np.eye(3, dtype=np.int32)[[0, 2, 1]])
    a = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    close(Tensor(a).triu(), np.triu(a))
    close(Tensor(a).triu(1), np.triu(a, 1))
    close(Tensor(a).tril(-1), np.tril(a, -1))


def test_dropout_only_in_training(rng):
    x = Tensor.ones(1000)
    assert (x.dropout(0.5).numpy() == 1).all()
    Tensor.training = True
    try:
        y = x.dropout(0.25).numpy()
    finally:
        Tensor.training = False
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)} and 0.15 < (y == 0).mean() < 0.35


def test_scaled_dot_product_attention(rng, close):
    q, k, v = (rng.standard_normal((2, 5, 4)).astype(np.float32) for _ in range(3))

    def ref(causal):
        s = q @ k.transpose(0, 2, 1) / 2.0
        if causal:
            s = np.where(np.tril(np.ones((5, 5), bool)), s, -np.inf)
        e = np.exp(s - s.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ v

    close(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v)), ref(False), rtol=1e-4, atol=1e-5)
    close(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True), ref(True), rtol=1e-4, atol=1e-5)


def test_mlp_forward(rng, close):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w1, b1 = rng.standard_normal((16, 12)).astype(np.float32), rng.standard_normal(12).astype(np.float32)
    w2, b2 = rng.standard_normal((12, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    out = Tensor(x).linear(Tensor(w1), Tensor(b1)).relu().linear(Tensor(w2), Tensor(b2)).log_softmax()
    h = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    close(out, h - np.log(np.exp(h - h.max(-1, keepdims=True)).sum(-1, keepdims=True)) - h.max(-1, keepdims=True), rtol=1e-4, atol=1e-4)


def test_conv1d_and_conv3d(rng, close):
    x1, w1 = rng.standard_normal((2, 3, 9)).astype(np.float32), rng.standard_normal((4, 3, 3)).astype(np.float32)
    ref1 = np.stack([sum(np.correlate(x1[b, c], w1[o, c], mode="valid") for c in range(3)) for b in range(2) for o in range(4)])
    close(Tensor(x1).conv2d(Tensor(w1)), ref1.reshape(2, 4, 7), rtol=1e-4, atol=1e-4)
    x3, w3 = rng.standard_normal((1, 2, 4, 4, 4)).astype(np.float32), rng.standard_normal((1, 2, 2, 2, 2)).astype(np.float32)
    ref3 = np.zeros((1, 1, 3, 3, 3), np.float32)
    for i in range(3):
        for j in range(3):
            for k in range(3):
                ref3[0, 0, i, j, k] = (x3[0, :, i:i + 2, j:j + 2, k:k + 2] * w3[0]).sum()
    close(Tensor(x3).conv2d(Tensor(w3)), ref3, rtol=1e-4, atol=1e-4)


def test_avg_pool_excluding_padding(close):
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    got = Tensor(x).avg_pool2d(2, 2, padding=1, count_include_pad=False)
    # windows at the border only average the real elements
    ref = np.array([[0, 1.5, 3], [6, 7.5, 9], [12, 13.5, 15]], np.float32)
    close(got, ref[None, None])


@pytest.mark.parametrize("kernel, stride, dilation", [((3, 3), 1, 1), ((2, 3), (2, 1), 1), ((3, 2), 1, (2, 1)), ((2, 2), 2, 1), ((1, 1), 1, 1),
                                                      ((3, 3), 3, 1), ((2, 2), 3, 1)])
def test_pool_windows_match_numpy_and_stay_views_of_the_input(rng, kernel, stride, dilation):
    # the sliding windows a convolution reads, built as one chain of view steps: numpy's windows, and (where no
    # padding is needed to cut the axis) a view of the input that follows a later write to it
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    t = Tensor(x.copy())
    win = t._pool(kernel, stride, dilation)
    s, d = (stride,) * 2 if isinstance(stride, int) else stride, (dilation,) * 2 if isinstance(dilation, int) else dilation

    def ref(a):
        w = np.lib.stride_tricks.sliding_window_view(a, (d[0] * (kernel[0] - 1) + 1, d[1] * (kernel[1] - 1) + 1), axis=(2, 3))
        return w[:, :, ::s[0], ::s[1], ::d[0], ::d[1]]

    np.testing.assert_array_equal(win.numpy(), ref(x))
    t.assign(t * 2).realize()
    cut = any(k <= st and dl == 1 for k, st, dl in zip(kernel, s, d))  # that axis went through a pad: a new value
    np.testing.assert_array_equal(win.numpy(), ref(x) if cut else ref(x * 2))
