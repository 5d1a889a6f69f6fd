"""Tensor programs on MOCKAMD targets other than the default gfx1100, compared with numpy: CDNA (gfx9, wave64:
`MOCKAMD:gfx940`, `gfx90a`, `gfx942`) and RDNA4 (`MOCKAMD:gfx1201`). Each compiles with the oldest installed clang that
knows the target (gfx942 and gfx1201 need LLVM 18+, e.g. clang-19), dispatches with that generation's PM4 / SDMA packet
forms the mock GPU checks, and runs in the amd-isa emulator's mode for it. Emulation is slow, so the shapes stay tiny."""

import numpy as np
import pytest
from hcq_runtime import CompileError, Device, amd_toolchain
from uop_scheduler import Tensor, TinyJit


def target(arch: str):
    """`MOCKAMD:<arch>` as a parameter that skips when no installed clang builds for it."""
    try:
        amd_toolchain(arch)
        missing = None
    except CompileError as e:
        missing = str(e)
    return pytest.param(f"MOCKAMD:{arch}", id=arch, marks=pytest.mark.skipif(missing is not None, reason=missing or ""))


MAIN_TARGETS = [target("gfx940"), target("gfx1201")]
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


@pytest.mark.parametrize("device", MAIN_TARGETS)
@pytest.mark.parametrize("name", list(CASES))
def test_tensor_ops(device, name):
    tensor_fn, numpy_fn = CASES[name]
    gpu = Device[device].driver.gpu
    before = gpu.dispatches
    got = tensor_fn(Tensor(A, device=device), Tensor(B, device=device)).numpy()
    np.testing.assert_allclose(got, numpy_fn(A, B), rtol=2e-5, atol=2e-5)
    assert gpu.dispatches > before and Device[device].arch == device.split(":")[1], "the kernels ran on that target's mock GPU"


@pytest.mark.parametrize("dev", [target("gfx90a"), target("gfx942")])
def test_other_cdna_targets_run_the_same_program(dev):
    got = (Tensor(A, device=dev) @ Tensor(B, device=dev)).relu().sum(0).numpy()
    np.testing.assert_allclose(got, np.maximum(A @ B, 0).sum(0), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("cdna", [target("gfx940")])
def test_gradients_on_cdna_and_copies_between_rdna_and_cdna(cdna):
    t = Tensor(A, device=cdna, requires_grad=True)
    ((t @ Tensor(B, device=cdna)).square().mean()).backward()
    np.testing.assert_allclose(t.grad.to("CPU").numpy(), 2 * (A @ B) @ B.T / (A.shape[0] * B.shape[1]), rtol=1e-4, atol=1e-5)
    rdna = Tensor(A, device="MOCKAMD").realize()
    np.testing.assert_array_equal((rdna.to(cdna) * 2).to("MOCKAMD").numpy(), A * 2)


@pytest.mark.parametrize("device", MAIN_TARGETS)
def test_tinyjit_replays_in_one_submit(device):
    @TinyJit
    def step(x: Tensor, w: Tensor) -> Tensor:
        return (x @ w + 1).relu()

    w = Tensor(B, device=device)
    for i in range(3):
        x = A - i
        np.testing.assert_allclose(step(Tensor(x, device=device), w).numpy(), np.maximum(x @ B + 1, 0), rtol=1e-4, atol=1e-4)
    assert step.captured is not None and step.captured.linked is not None and step.captured.linked.submits == 1
