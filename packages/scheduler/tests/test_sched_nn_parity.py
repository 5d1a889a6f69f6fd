"""tinygrad 0.14 `nn` parity: Conv1d, ConvTranspose1d/2d, GroupNorm, InstanceNorm, LayerNorm2d and LSTMCell against numpy
references written here, state_dict keys as tinygrad names them, LARS / LAMB / OptimizerGroup against numpy update rules,
safe_load_metadata and the tar / zip extractors."""

from __future__ import annotations

import io
import itertools
import json
import struct
import tarfile
import zipfile

import numpy as np
import pytest
from uop_scheduler import Tensor, nn
from uop_scheduler.nn.optim import LAMB, LARS, SGD, Adam, AdamW, OptimizerGroup
from uop_scheduler.nn.state import get_state_dict, safe_load_metadata, safe_save, tar_extract, zip_extract


def conv1d_ref(x, w, b, stride, pad, dil, groups):
    """Cross-correlation by direct loops; pad is (before, after)."""
    n, cin, length = x.shape
    cout, cin_g, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), pad))
    lo = (xp.shape[-1] - dil * (k - 1) - 1) // stride + 1
    out = np.zeros((n, cout, lo))
    for o, t in itertools.product(range(cout), range(lo)):
        g = o // (cout // groups)
        window = xp[:, g * cin_g:(g + 1) * cin_g, t * stride:t * stride + dil * (k - 1) + 1:dil]
        out[:, o, t] = (window * w[o]).sum((1, 2))
    return out + (0 if b is None else b[None, :, None])


def conv_transpose_ref(x, w, b, stride, pad, out_pad, dil, groups):
    """Transposed convolution by scattering each input element times the kernel, then cropping the padding."""
    n, cin, *spatial = x.shape
    cout_g, kernel = w.shape[1], w.shape[2:]
    full = [(s - 1) * st + d * (k - 1) + 1 + op for s, st, d, k, op in zip(spatial, stride, dil, kernel, out_pad)]
    out = np.zeros((n, cout_g * groups, *full))
    for ci in range(cin):
        g = ci // (cin // groups)
        for pos in itertools.product(*map(range, spatial)):
            for kpos in itertools.product(*map(range, kernel)):
                at = tuple(p * st + kk * d for p, st, kk, d in zip(pos, stride, kpos, dil))
                idx = (slice(None), slice(g * cout_g, (g + 1) * cout_g), *at)
                out[idx] += x[(slice(None), ci, *pos)][:, None] * w[(ci, slice(None), *kpos)]
    crop = tuple(slice(p, f - p) for p, f in zip(pad, full))
    return out[(slice(None), slice(None), *crop)] + b.reshape(1, -1, *[1] * len(spatial))


def norm_ref(x, axes, eps):
    return (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def lstm_ref(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """The LSTM equations (gate order i, f, g, o as PyTorch and tinygrad)."""
    i, f, g, o = np.split(x @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=1)
    c2 = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c2), c2


def set_random(t: Tensor, rng) -> np.ndarray:
    """Overwrite a parameter with random values (so zero/one initializations do not hide mistakes); return them."""
    v = rng.standard_normal(t.shape).astype(np.float32)
    t.assign(Tensor(v)).realize()
    return v


@pytest.mark.parametrize("kernel,stride,padding,dilation,groups", [(3, 1, 0, 1, 1), (3, 2, 1, 1, 2), (3, 1, "same", 2, 1), (4, 1, "same", 1, 1)])
def test_conv1d_matches_loops(rng, kernel, stride, padding, dilation, groups):
    conv = nn.Conv1d(4, 6, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups)
    x = rng.standard_normal((2, 4, 9)).astype(np.float32)
    span = dilation * (kernel - 1)  # "same" pads span // 2 before and the rest after, as PyTorch
    pad = (span // 2, span - span // 2) if padding == "same" else (padding, padding)
    ref = conv1d_ref(x, conv.weight.numpy(), conv.bias.numpy(), stride, pad, dilation, groups)
    out = conv(Tensor(x)).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    if padding == "same":
        assert out.shape[-1] == x.shape[-1]


def test_conv1d_weight_gradient_matches_numpy(rng):
    conv = nn.Conv1d(3, 2, 3, stride=2, padding=1, bias=False)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    r = rng.standard_normal((2, 2, 4)).astype(np.float32)
    conv.weight.requires_grad = True
    (conv(Tensor(x)) * Tensor(r)).sum().backward()
    # d/dw[o, c, k] of sum(r * out) = sum over n, t of r[n, o, t] * xpad[n, c, 2t + k]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    ref = np.stack([np.einsum("not,nct->oc", r, xp[:, :, k:k + 7:2]) for k in range(3)], axis=-1)
    np.testing.assert_allclose(conv.weight.grad.numpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dims,stride,padding,output_padding,dilation,groups", [
    (1, 2, 1, 1, 1, 1), (1, 1, 0, 0, 2, 2), (2, 2, 1, 0, 1, 1), (2, 1, 1, 0, 1, 2),
])
def test_conv_transpose_matches_scatter(rng, dims, stride, padding, output_padding, dilation, groups):
    if dims == 1:
        conv = nn.ConvTranspose1d(4, 6, 3, stride, padding, output_padding, dilation, groups)
    else:
        conv = nn.ConvTranspose2d(4, 6, 3, stride, padding, output_padding, dilation, groups)
    x = rng.standard_normal((2, 4, *[5] * dims)).astype(np.float32)
    assert conv.weight.shape == (4, 6 // groups, *[3] * dims)
    ref = conv_transpose_ref(x, conv.weight.numpy(), conv.bias.numpy(), (stride,) * dims, (padding,) * dims,
                             (output_padding,) * dims, (dilation,) * dims, groups)
    np.testing.assert_allclose(conv(Tensor(x)).numpy(), ref, rtol=1e-5, atol=1e-5)


def test_group_instance_and_layernorm2d_match_numpy(rng):
    x = (rng.standard_normal((2, 6, 3, 4)) * 2 + 1).astype(np.float32)
    gn = nn.GroupNorm(3, 6)
    w, b = set_random(gn.weight, rng), set_random(gn.bias, rng)
    ref = norm_ref(x.reshape(2, 3, -1), -1, 1e-5).reshape(x.shape) * w[:, None, None] + b[:, None, None]
    np.testing.assert_allclose(gn(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-4)

    inorm = nn.InstanceNorm(6, eps=1e-3)
    w, b = set_random(inorm.weight, rng), set_random(inorm.bias, rng)
    ref = norm_ref(x, (2, 3), 1e-3) * w[:, None, None] + b[:, None, None]
    np.testing.assert_allclose(inorm(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(nn.InstanceNorm(6, affine=False)(Tensor(x)).numpy(), norm_ref(x, (2, 3), 1e-5), rtol=1e-4, atol=1e-4)

    ln = nn.LayerNorm2d(6)
    w, b = set_random(ln.weight, rng), set_random(ln.bias, rng)
    ref = norm_ref(x, 1, 1e-5) * w[:, None, None] + b[:, None, None]
    np.testing.assert_allclose(ln(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-4)


def test_groupnorm_input_gradient_matches_finite_differences(rng):
    x = rng.standard_normal((1, 4, 3)).astype(np.float64)
    r = rng.standard_normal((1, 4, 3))
    gn = nn.GroupNorm(2, 4, affine=False)
    xt = Tensor(x.astype(np.float32), requires_grad=True)
    (gn(xt) * Tensor(r.astype(np.float32))).sum().backward()

    def f(v):
        return (norm_ref(v.reshape(1, 2, -1), -1, 1e-5).reshape(v.shape) * r).sum()

    h, num = 1e-6, np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = h
        num[idx] = (f(x + d) - f(x - d)) / (2 * h)
    np.testing.assert_allclose(xt.grad.numpy(), num, rtol=1e-3, atol=1e-4)


def test_lstm_cell_matches_the_equations_and_its_weight_gradient(rng):
    cell = nn.LSTMCell(3, 4)
    w_ih, w_hh = cell.weight_ih.numpy(), cell.weight_hh.numpy()
    b_ih, b_hh = set_random(cell.bias_ih, rng), set_random(cell.bias_hh, rng)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    h0, c0 = (rng.standard_normal((2, 4)).astype(np.float32) for _ in range(2))
    h, c = cell(Tensor(x), (Tensor(h0), Tensor(c0)))
    h_ref, c_ref = lstm_ref(x, h0, c0, w_ih, w_hh, b_ih, b_hh)
    np.testing.assert_allclose(h.numpy(), h_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c.numpy(), c_ref, rtol=1e-5, atol=1e-5)
    # no state: starts from zeros
    h, c = cell(Tensor(x))
    z = np.zeros((2, 4), np.float32)
    np.testing.assert_allclose(h.numpy(), lstm_ref(x, z, z, w_ih, w_hh, b_ih, b_hh)[0], rtol=1e-5, atol=1e-5)

    cell.weight_ih.requires_grad = True
    h, c = cell(Tensor(x), (Tensor(h0), Tensor(c0)))
    (h.sum() + c.sum()).backward()

    def f(w):
        hh, cc = lstm_ref(x.astype(np.float64), h0, c0, w, w_hh, b_ih, b_hh)
        return hh.sum() + cc.sum()

    w64, eps, num = w_ih.astype(np.float64), 1e-6, np.zeros(w_ih.shape)
    for idx in np.ndindex(w_ih.shape):
        d = np.zeros_like(w64)
        d[idx] = eps
        num[idx] = (f(w64 + d) - f(w64 - d)) / (2 * eps)
    np.testing.assert_allclose(cell.weight_ih.grad.numpy(), num, rtol=1e-3, atol=1e-4)


def test_state_dict_keys_are_tinygrads_attribute_names():
    # from tinygrad 0.14's nn/__init__.py: the attributes each layer sets in __init__
    expected = {
        nn.BatchNorm2d(3): ["weight", "bias", "num_batches_tracked", "running_mean", "running_var"],
        nn.BatchNorm3d(3, affine=False, track_running_stats=False): ["num_batches_tracked"],
        nn.Conv1d(2, 4, 3): ["weight", "bias"],
        nn.ConvTranspose1d(2, 4, 3, bias=False): ["weight"],
        nn.ConvTranspose2d(2, 4, 3): ["weight", "bias"],
        nn.GroupNorm(2, 4): ["weight", "bias"],
        nn.InstanceNorm(4, affine=False): [],
        nn.LayerNorm2d(4): ["weight", "bias"],
        nn.LSTMCell(3, 4): ["weight_ih", "weight_hh", "bias_ih", "bias_hh"],
        nn.LSTMCell(3, 4, bias=False): ["weight_ih", "weight_hh"],
        nn.RMSNorm(4, elementwise_affine=False): [],
    }
    for layer, keys in expected.items():
        assert sorted(get_state_dict(layer)) == sorted(keys), type(layer).__name__
    assert nn.BatchNorm2d is nn.BatchNorm and nn.BatchNorm3d is nn.BatchNorm
    assert nn.Conv1d(2, 4, 5).weight.shape == (4, 2, 5) and nn.LSTMCell(3, 4).weight_hh.shape == (16, 4)


def test_rmsnorm_without_affine_matches_numpy(rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(nn.RMSNorm(5, elementwise_affine=False)(Tensor(x)).numpy(),
                               x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6), rtol=1e-5, atol=1e-6)


def test_batchnorm_without_running_stats_uses_batch_statistics(rng):
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    out = nn.BatchNorm2d(3, track_running_stats=False)(Tensor(x)).numpy()
    np.testing.assert_allclose(out, norm_ref(x, (0, 2, 3), 1e-5), rtol=1e-4, atol=1e-4)


COEF = np.array([1.0, 0.5, 2.0, 3.0], dtype=np.float32)
W0 = np.array([1.0, -2.0, 3.0, 0.5], dtype=np.float32)


def run_steps(opt, p: Tensor, steps: int = 4) -> list[np.ndarray]:
    """Minimize sum(coef * p**2) for a few steps; the parameter after each."""
    seen = []
    for _ in range(steps):
        opt.zero_grad()
        (p.square() * Tensor(COEF)).sum().backward()
        opt.step()
        seen.append(p.numpy().astype(np.float64))
    return seen


def lars_ref(lr, momentum, wd, tcoef, nesterov, classic, steps=4):
    w, buf, out = W0.astype(np.float64), np.zeros(4), []
    for _ in range(steps):
        g = 2 * COEF * w
        r1, r2 = np.linalg.norm(w), np.linalg.norm(g)
        r = tcoef * r1 / (r2 + wd * r1) if tcoef and r1 > 0 and r2 > 0 else 1.0
        g = g + wd * w
        if classic:
            g = g * r * lr
        buf = momentum * buf + g
        g = g + momentum * buf if nesterov else buf
        if not classic:
            g = g * r * lr
        w = w - g
        out.append(w)
    return out


@pytest.mark.parametrize("nesterov,classic", [(False, True), (True, False)])
def test_lars_matches_numpy(nesterov, classic):
    p = Tensor(W0.copy(), requires_grad=True)
    got = run_steps(LARS([p], lr=0.5, momentum=0.9, weight_decay=0.01, nesterov=nesterov, classic=classic, tcoef=0.02), p)
    for t, (a, b) in enumerate(zip(got, lars_ref(0.5, 0.9, 0.01, 0.02, nesterov, classic))):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"step {t}")


def lamb_ref(lr, b1, b2, eps, wd, adam, steps=4):
    w, m, v, out = W0.astype(np.float64), np.zeros(4), np.zeros(4), []
    for t in range(1, steps + 1):
        g = 2 * COEF * w
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        up = m / (1 - b1**t) / (np.sqrt(v / (1 - b2**t)) + eps) + wd * w
        r = 1.0 if adam else np.linalg.norm(w) / np.linalg.norm(up)
        w = w - lr * r * up
        out.append(w)
    return out


@pytest.mark.parametrize("make,args", [
    (lambda p: LAMB([p], lr=0.1, weight_decay=0.05), (0.1, 0.9, 0.999, 1e-6, 0.05, False)),
    (lambda p: LAMB([p], lr=0.1, b1=0.8, b2=0.99), (0.1, 0.8, 0.99, 1e-6, 0.0, False)),
    (lambda p: AdamW([p], lr=0.1), (0.1, 0.9, 0.999, 1e-8, 0.01, True)),
    (lambda p: Adam([p], lr=0.1), (0.1, 0.9, 0.999, 1e-8, 0.0, True)),
])
def test_lamb_and_its_adam_forms_match_numpy(make, args):
    p = Tensor(W0.copy(), requires_grad=True)
    for t, (a, b) in enumerate(zip(run_steps(make(p), p), lamb_ref(*args))):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"step {t}")


def test_optimizer_group_steps_every_member():
    p, q = Tensor(W0.copy(), requires_grad=True), Tensor(W0.copy(), requires_grad=True)
    sgd, lamb = SGD([p], lr=0.05, momentum=0.9), LAMB([q], lr=0.1)
    group = OptimizerGroup(sgd, lamb)
    assert group[0] is sgd and group[1] is lamb and group.params == [p, q]
    want_p, want_q = lars_ref(0.05, 0.9, 0.0, 0.0, False, False), lamb_ref(0.1, 0.9, 0.999, 1e-6, 0.0, False)
    for t in range(4):
        group.zero_grad()
        assert p.grad is None and q.grad is None
        ((p.square() + q.square()) * Tensor(COEF)).sum().backward()
        group.step()
        np.testing.assert_allclose(p.numpy(), want_p[t], rtol=1e-4, atol=1e-5, err_msg=f"sgd step {t}")
        np.testing.assert_allclose(q.numpy(), want_q[t], rtol=1e-4, atol=1e-5, err_msg=f"lamb step {t}")


def test_optimizers_reject_negative_settings():
    p = Tensor(W0.copy(), requires_grad=True)
    for make in (lambda: SGD([p], lr=-1.0), lambda: LARS([p], momentum=-0.1), lambda: LAMB([p], weight_decay=-1.0)):
        with pytest.raises(ValueError):
            make()


def test_safe_load_metadata_returns_file_offset_and_header(tmp_path, rng):
    path = tmp_path / "m.safetensors"
    a = rng.standard_normal((2, 3)).astype(np.float32)
    safe_save({"a": Tensor(a), "b": Tensor(np.arange(5, dtype=np.int32))}, path, metadata={"format": "pt"})
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])  # the format, read independently
    t, start, header = safe_load_metadata(path)
    assert start == 8 + n and header == json.loads(raw[8:8 + n])
    assert header["__metadata__"] == {"format": "pt"} and header["a"]["shape"] == [2, 3]
    assert t.numpy().tobytes() == raw
    begin, end = header["a"]["data_offsets"]
    np.testing.assert_array_equal(np.frombuffer(raw[start + begin:start + end], np.float32).reshape(2, 3), a)
    assert safe_load_metadata(t)[1:] == (start, header)  # a uint8 tensor of the file works too


def test_tar_and_zip_extract_return_file_bytes(tmp_path):
    files = {"a.txt": b"hello", "dir/b.bin": bytes(range(200))}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (tmp_path / "x.tar").write_bytes(buf.getvalue())
    with zipfile.ZipFile(tmp_path / "x.zip", "w") as zf:
        zf.writestr("a.txt", files["a.txt"], compress_type=zipfile.ZIP_STORED)
        zf.writestr("dir/b.bin", files["dir/b.bin"], compress_type=zipfile.ZIP_DEFLATED)
    for got in (tar_extract(tmp_path / "x.tar"), zip_extract(tmp_path / "x.zip")):
        assert {k: v.numpy().tobytes() for k, v in got.items()} == files
