"""nn layers, optimizers and state: training converges, optimizers match numpy references, safetensors round-trips."""

import numpy as np
import pytest
from uop_scheduler import Tensor, dtypes, nn
from uop_scheduler.nn.optim import SGD, Adam, AdamW
from uop_scheduler.nn.state import SafetensorsError, get_parameters, get_state_dict, load_state_dict, safe_load, safe_save


class MLP:
    def __init__(self):
        self.l1, self.l2 = nn.Linear(2, 16), nn.Linear(16, 2)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


def blobs(n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, n)
    points = rng.standard_normal((n, 2)) * 0.5 + np.where(labels[:, None] == 1, 1.5, -1.5)
    return points.astype(np.float32), labels


def cross_entropy(logits: Tensor, labels: np.ndarray) -> Tensor:
    return -(logits.log_softmax(-1) * Tensor(np.eye(2, dtype=np.float32)[labels])).sum(-1).mean()


def test_mlp_training_converges_deterministically():
    losses = []
    for _ in range(2):
        Tensor.manual_seed(42)
        model = MLP()
        opt = Adam(get_parameters(model), lr=0.05)
        x, y = blobs()
        for _ in range(40):
            opt.zero_grad()
            loss = cross_entropy(model(Tensor(x)), y)
            loss.backward()
            opt.step()
        losses.append(loss.item())
    assert losses[0] < 0.1, f"loss after 40 Adam steps is {losses[0]}"
    assert losses[0] == losses[1]  # same seed, same run


def test_sgd_momentum_nesterov_and_adamw_match_numpy():
    w0 = np.array([1.0, -2.0, 3.0], dtype=np.float32)

    def grad(w):  # of sum(w**2 * c)
        return 2 * w * np.array([1.0, 0.5, 2.0], dtype=np.float32)

    for make, reference in [
        (lambda p: SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), "sgd"),
        (lambda p: AdamW([p], lr=0.1, weight_decay=0.1), "adamw"),
    ]:
        p = Tensor(w0.copy(), requires_grad=True)
        opt = make(p)
        w, buf, m, v = w0.astype(np.float64), np.zeros(3), np.zeros(3), np.zeros(3)
        for t in range(1, 4):
            opt.zero_grad()
            (p.square() * Tensor(np.array([1.0, 0.5, 2.0], dtype=np.float32))).sum().backward()
            opt.step()
            g = grad(w)
            if reference == "sgd":
                g = g + 0.01 * w
                buf = 0.9 * buf + g
                w = w - 0.1 * (g + 0.9 * buf)
            else:
                m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
                w = w - 0.1 * (m / (1 - 0.9**t) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8) + 0.1 * w)
            np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-6, err_msg=f"{reference} step {t}")


def test_layers_forward_against_numpy():
    Tensor.manual_seed(1)
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    lin = nn.Linear(6, 3)
    np.testing.assert_allclose(lin(Tensor(x)).numpy(), x @ lin.weight.numpy().T + lin.bias.numpy(), rtol=1e-5, atol=1e-6)
    ln = nn.LayerNorm(6)
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-5)
    rms = nn.RMSNorm(6)
    np.testing.assert_allclose(rms(Tensor(x)).numpy(), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6), rtol=1e-5, atol=1e-6)
    emb = nn.Embedding(10, 4)
    np.testing.assert_allclose(emb(Tensor(np.array([3, 0, 9]))).numpy(), emb.weight.numpy()[[3, 0, 9]], rtol=1e-6)


def test_batchnorm_training_updates_running_statistics():
    bn = nn.BatchNorm(3)
    x = np.random.default_rng(3).standard_normal((8, 3, 2, 2)).astype(np.float32)
    Tensor.training = True
    try:
        out = bn(Tensor(x)).numpy()
    finally:
        Tensor.training = False
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    np.testing.assert_allclose(out, (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * var * 32 / 31, rtol=1e-5)
    assert bn.num_batches_tracked.shape == () and bn.num_batches_tracked.dtype == dtypes.int64 and bn.num_batches_tracked.item() == 1


def test_safetensors_round_trip_and_errors(tmp_path):
    tensors = {
        "f32": Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)),
        "f16": Tensor(np.array([1.5, -2.25], dtype=np.float16)),
        "bf16": Tensor([1.0, -3.5, 0.25], dtype=dtypes.bfloat16),
        "i64": Tensor(np.array([-(2**40), 7], dtype=np.int64)),
        "u8": Tensor(np.array([0, 255], dtype=np.uint8)),
        "flag": Tensor(np.array([True, False])),
    }
    path = tmp_path / "model.safetensors"
    safe_save(tensors, path, metadata={"format": "pt"})
    raw = path.read_bytes()
    header_len = int.from_bytes(raw[:8], "little")
    assert b'"F32"' in raw[8:8 + header_len] and b'"BF16"' in raw[8:8 + header_len]
    loaded = safe_load(path)
    for name, t in tensors.items():
        assert loaded[name].dtype == t.dtype and loaded[name].shape == t.shape
        np.testing.assert_array_equal(loaded[name].numpy(), t.numpy())
    path.write_bytes(raw[:-3])
    with pytest.raises(SafetensorsError, match="truncated or corrupt"):
        safe_load(path)
    path.write_bytes(raw[:5])
    with pytest.raises(SafetensorsError, match="too short"):
        safe_load(path)


def test_state_dict_names_and_loading():
    Tensor.manual_seed(3)
    model, other = MLP(), MLP()
    state = get_state_dict(model)
    assert sorted(state) == ["l1.bias", "l1.weight", "l2.bias", "l2.weight"]
    load_state_dict(other, state)
    x = Tensor(np.ones((1, 2), dtype=np.float32))
    np.testing.assert_array_equal(other(x).numpy(), model(x).numpy())


def test_assign_value_semantics_and_refusals():
    a = Tensor.ones(4).contiguous().realize()
    before = a * 3
    a.assign(Tensor.full((4,), 2.0))
    np.testing.assert_array_equal((a + (before - 1)).numpy(), 4)  # the earlier read keeps the old value
    x, y = Tensor.full((4,), 2.0).contiguous().realize(), Tensor.full((4,), 3.0).contiguous().realize()
    c = x + 9
    x += y
    y += c
    Tensor.realize(x, y)
    np.testing.assert_array_equal(x.numpy(), 5)
    np.testing.assert_array_equal(y.numpy(), 14)
    with pytest.raises(RuntimeError, match="assign dtype mismatch"):
        a.assign(Tensor([1, 2, 3, 4]))
    a[0:2].assign(Tensor([5.0, 6.0]))  # a write through a view lands in the viewed tensor
    np.testing.assert_array_equal(a.numpy(), [5, 6, 2, 2])
