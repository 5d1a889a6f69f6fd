"""Tensor programs on the hcq2 queue devices, compared with numpy: MOCKAMD (the AMD backend over the mock KFD GPU,
kernels in the amd-isa emulator) and MOCKQCOM (the QCOM backend over the mock kgsl). A representative subset of the
Tensor, value-semantics and TinyJit tests, within CI's time budget."""

import shutil

import numpy as np
import pytest
from hcq_runtime import Device
from uop_scheduler import Tensor, TinyJit, dtypes

AMD_TOOLS = pytest.mark.skipif(shutil.which("clang-15") is None or shutil.which("ld.lld-15") is None,
                               reason="clang-15 and ld.lld-15 are needed to build AMD kernels")
DEVICES = [pytest.param("MOCKAMD", marks=AMD_TOOLS), "MOCKQCOM"]
RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 16)).astype(np.float32)
W = RNG.standard_normal((16, 8)).astype(np.float32)


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


CASES = {
    "elementwise": (lambda t, w: (t * 2 + 1).relu().exp(), lambda x, w: np.exp(np.maximum(x * 2 + 1, 0))),
    "broadcast": (lambda t, w: t - t.mean(1, keepdim=True), lambda x, w: x - x.mean(1, keepdims=True)),
    "reductions": (lambda t, w: t.sum(0) + t.max(0), lambda x, w: x.sum(0) + x.max(0)),
    "matmul": (lambda t, w: t @ w, lambda x, w: x @ w),
    "softmax": (lambda t, w: t.softmax(-1), lambda x, w: np_softmax(x)),
    "movement": (lambda t, w: t.reshape(4, 24).permute(1, 0)[::2].flip(0).pad(((1, 0), (0, 2))),
                 lambda x, w: np.pad(x.reshape(4, 24).T[::2][::-1], ((1, 0), (0, 2)))),
    "half": (lambda t, w: (t.cast(dtypes.float16) * 3).cast(dtypes.float32), lambda x, w: (x.astype(np.float16) * 3).astype(np.float32)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_tensor_ops(device, name):
    tensor_fn, numpy_fn = CASES[name]
    got = tensor_fn(Tensor(X, device=device), Tensor(W, device=device)).numpy()
    np.testing.assert_allclose(got, numpy_fn(X, W), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_and_copies_to_and_from_the_device(device):
    t = Tensor(X, device=device, requires_grad=True)
    ((t @ Tensor(W, device=device)).square().sum()).backward()
    np.testing.assert_allclose(t.grad.to("CPU").numpy(), 2 * (X @ W) @ W.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_tinyjit_replays_as_one_submit_that_keeps_the_device_state(device):
    @TinyJit
    def step(x: Tensor, w: Tensor) -> Tensor:
        return (x @ w).relu() + 1

    w = Tensor(W, device=device)
    for i in range(4):
        x = X + i
        np.testing.assert_allclose(step(Tensor(x, device=device), w).numpy(), np.maximum(x @ W, 0) + 1, rtol=1e-4, atol=1e-4)
    assert step.captured is not None and step.captured.linked is not None and step.captured.linked.submits == 1
    if device == "MOCKQCOM":  # the seed's device-state test: the stack and the dummy page are references of the call
        dev, refs = Device[device], step.captured.linked.refs
        assert any(r is dev._stack for r in refs) and any(r is dev.dummy for r in refs)


@pytest.mark.parametrize("device", DEVICES)
def test_writes_keep_value_semantics(device):
    a = Tensor(np.ones(8, np.float32), device=device).realize()
    before = a * 3
    a[2:6] = Tensor(np.full(4, 2.0, np.float32), device=device)
    np.testing.assert_array_equal((a + (before - 1)).numpy(), [3, 3, 4, 4, 4, 4, 3, 3])
    x, y = Tensor(np.full(4, 2.0, np.float32), device=device).realize(), Tensor(np.full(4, 3.0, np.float32), device=device).realize()
    c = x + 9
    x += y
    y += c
    Tensor.realize(x, y)
    np.testing.assert_array_equal(np.concatenate([x.numpy(), y.numpy()]), [5] * 4 + [14] * 4)
    f = Tensor(np.array([1, 2, 3, 4], np.float32), device=device).realize()
    f.bitcast(dtypes.uint32).assign(Tensor(np.array([0x40800000, 0x40400000, 0x40000000, 0x3F800000], np.uint32), device=device))
    np.testing.assert_array_equal(f.numpy(), [4, 3, 2, 1])


@AMD_TOOLS
def test_profiled_tinyjit_replays_trace_every_dispatch(monkeypatch):
    monkeypatch.setenv("PROFILE", "1")
    dev = "MOCKAMD:11"  # opened here with profiling on

    @TinyJit
    def step(x: Tensor) -> Tensor:
        return (x * 2 + 1).contiguous()

    for i in range(4):
        np.testing.assert_array_equal(step(Tensor(X + i, device=dev)).numpy(), (X + i) * 2 + 1)
    names = [t.name for t in Device[dev].profile_traces()]
    assert names[0].startswith("E_") and f"{names[0]} n4" in names  # the replays (one hcq2 submit each) trace too
