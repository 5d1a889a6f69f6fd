"""Tensor programs on MOCKQCOM (the QCOM backend over the mock kgsl, batched by the hcq2 engine), compared with numpy."""

import numpy as np
import pytest
from hcq_runtime import Device
from uop_scheduler import Tensor, TinyJit
from uopir import dtypes

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 16)).astype(np.float32)
W = RNG.standard_normal((16, 8)).astype(np.float32)


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


CASES = {
    "elementwise": (lambda t, w: (t * 2 + 1).relu().exp(), lambda x, w: np.exp(np.maximum(x * 2 + 1, 0))),
    "reductions": (lambda t, w: t.sum(0) + t.max(0), lambda x, w: x.sum(0) + x.max(0)),
    "matmul": (lambda t, w: t @ w, lambda x, w: x @ w),
    "softmax": (lambda t, w: t.softmax(-1), lambda x, w: np_softmax(x)),
    "movement": (lambda t, w: t.reshape(4, 24).permute(1, 0)[::2].flip(0).pad(((1, 0), (0, 2))),
                 lambda x, w: np.pad(x.reshape(4, 24).T[::2][::-1], ((1, 0), (0, 2)))),
    "half": (lambda t, w: (t.cast(dtypes.float16) * 3).cast(dtypes.float32), lambda x, w: (x.astype(np.float16) * 3).astype(np.float32)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_tensor_ops_on_mockqcom(name):
    tensor_fn, numpy_fn = CASES[name]
    got = tensor_fn(Tensor(X, device="MOCKQCOM"), Tensor(W, device="MOCKQCOM")).numpy()
    np.testing.assert_allclose(got, numpy_fn(X, W), rtol=2e-5, atol=2e-5)


def test_gradients_and_copies_to_and_from_mockqcom():
    t = Tensor(X, device="MOCKQCOM", requires_grad=True)
    ((t @ Tensor(W, device="MOCKQCOM")).square().sum()).backward()
    np.testing.assert_allclose(t.grad.to("CPU").numpy(), 2 * (X @ W) @ W.T, rtol=1e-4, atol=1e-4)


def test_tinyjit_replays_on_mockqcom_keep_the_device_state():
    @TinyJit
    def step(x: Tensor, w: Tensor) -> Tensor:
        return (x @ w).relu() + 1

    w = Tensor(W, device="MOCKQCOM")
    for i in range(4):
        x = X + i
        np.testing.assert_allclose(step(Tensor(x, device="MOCKQCOM"), w).numpy(), np.maximum(x @ W, 0) + 1, rtol=1e-4, atol=1e-4)
    dev = Device["MOCKQCOM"]
    refs = step.captured.linked.refs  # the seed's device-state test: the stack and the dummy page are references
    assert any(r is dev._stack for r in refs) and any(r is dev.dummy for r in refs)
