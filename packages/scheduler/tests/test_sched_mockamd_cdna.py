"""Tensor programs on a CDNA (gfx9, wave64) MOCKAMD: `MOCKAMD:gfx940` / `MOCKAMD:gfx90a` compile with clang-15 for that
target, dispatch with the gfx9 PM4 / SDMA packet forms the mock GPU checks, and run in the amd-isa emulator's CDNA mode;
results are compared with numpy. CDNA emulation is slower than RDNA3, so the shapes stay tiny."""

import shutil

import numpy as np
import pytest
from hcq_runtime import Device
from uop_scheduler import Tensor, TinyJit

pytestmark = pytest.mark.skipif(shutil.which("clang-15") is None or shutil.which("ld.lld-15") is None,
                                reason="clang-15 and ld.lld-15 are needed to build AMD kernels")
CDNA = "MOCKAMD:gfx940"  # MI300's ISA; clang-15 has no gfx942
RNG = np.random.default_rng(7)
A = RNG.standard_normal((4, 12)).astype(np.float32)
B = RNG.standard_normal((12, 6)).astype(np.float32)


def np_log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


CASES = {
    "elementwise": (lambda a, b: (a * 3 - 1).relu().sqrt() + a.abs(), lambda a, b: np.sqrt(np.maximum(a * 3 - 1, 0)) + np.abs(a)),
    "reduce": (lambda a, b: a.sum(1) - a.min(1), lambda a, b: a.sum(1) - a.min(1)),
    "matmul": (lambda a, b: (a @ b).tanh(), lambda a, b: np.tanh(a @ b)),
    "log_softmax": (lambda a, b: a.log_softmax(-1), lambda a, b: np_log_softmax(a)),
    "movement": (lambda a, b: a.reshape(6, 8).T[1::2].flip(1).pad(((0, 1), (2, 0))),
                 lambda a, b: np.pad(a.reshape(6, 8).T[1::2][:, ::-1], ((0, 1), (2, 0)))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_tensor_ops_on_cdna_mockamd(name):
    tensor_fn, numpy_fn = CASES[name]
    gpu = Device[CDNA].driver.gpu
    before = gpu.dispatches
    got = tensor_fn(Tensor(A, device=CDNA), Tensor(B, device=CDNA)).numpy()
    np.testing.assert_allclose(got, numpy_fn(A, B), rtol=2e-5, atol=2e-5)
    assert gpu.dispatches > before and Device[CDNA].arch == "gfx940", "the kernels ran on the CDNA mock GPU"


def test_gfx90a_runs_the_same_program():
    dev = "MOCKAMD:gfx90a"
    got = (Tensor(A, device=dev) @ Tensor(B, device=dev)).relu().sum(0).numpy()
    np.testing.assert_allclose(got, np.maximum(A @ B, 0).sum(0), rtol=2e-5, atol=2e-5)


def test_gradients_on_cdna_and_copies_between_rdna_and_cdna():
    t = Tensor(A, device=CDNA, requires_grad=True)
    ((t @ Tensor(B, device=CDNA)).square().mean()).backward()
    np.testing.assert_allclose(t.grad.to("CPU").numpy(), 2 * (A @ B) @ B.T / (A.shape[0] * B.shape[1]), rtol=1e-4, atol=1e-5)
    rdna = Tensor(A, device="MOCKAMD").realize()
    np.testing.assert_array_equal((rdna.to(CDNA) * 2).to("MOCKAMD").numpy(), A * 2)


def test_tinyjit_replays_on_cdna_in_one_submit():
    @TinyJit
    def step(x: Tensor, w: Tensor) -> Tensor:
        return (x @ w + 1).relu()

    w = Tensor(B, device=CDNA)
    for i in range(3):
        x = A - i
        np.testing.assert_allclose(step(Tensor(x, device=CDNA), w).numpy(), np.maximum(x @ B + 1, 0), rtol=1e-4, atol=1e-4)
    assert step.captured is not None and step.captured.linked is not None and step.captured.linked.submits == 1
