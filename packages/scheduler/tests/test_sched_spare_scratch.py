"""A schedule that repeats keeps its scratch buffers (`realizer.spare_scratch`) from one eager run to the next: the
next run computes into the same memory instead of minting new buffers. Values are checked against numpy on every run,
with inputs and in-place updates that change between runs."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hcq_runtime import Buffer, CompileError, amd_toolchain, buffer_for
from uop_scheduler import ArgumentError, Tensor, clear_schedule_cache, nn
from uop_scheduler import realizer as R
from uop_scheduler.schedule import cached_schedules

RNG = np.random.default_rng(11)


def program(x: Tensor, w: Tensor) -> Tensor:
    # the matmul and the row maxima are buffers only the same schedule reads again: scratch
    h = x @ w
    return (h - h.max(-1, keepdim=True)).exp().sum(0) + (h * 2).sum(1).max()


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    h = x.astype(np.float64) @ w
    return np.exp(h - h.max(-1, keepdims=True)).sum(0) + (h * 2).sum(1).max()


def repeated_plan():
    plans = [p for p in cached_schedules() if p.runs[0] >= 2]
    assert len(plans) == 1
    return plans[0]


def _mockamd():
    """MOCKAMD as a parameter that skips when no installed clang builds for its GPU (the hcq queue path)."""
    try:
        amd_toolchain("gfx1100")
        missing = None
    except CompileError as e:
        missing = str(e)
    return pytest.param("MOCKAMD", marks=pytest.mark.skipif(missing is not None, reason=missing or ""))


@pytest.mark.parametrize("device", ["CPU", _mockamd()])
def test_a_repeating_schedule_runs_on_the_scratch_buffers_of_its_last_run(device):
    clear_schedule_cache()
    w_np = RNG.standard_normal((24, 40)).astype(np.float32)
    w = Tensor(w_np, device=device).realize()
    spares = []
    for i in range(6):
        x_np = RNG.standard_normal((16, 24)).astype(np.float32)
        out = program(Tensor(x_np, device=device), w)
        np.testing.assert_allclose(out.numpy(), reference(x_np, w_np), rtol=1e-4, atol=1e-4)
        # and an in-place update of an input between runs: the next run reads the new values
        w.assign(w * 0.5 + 0.25).realize()
        w_np = w_np * np.float32(0.5) + np.float32(0.25)
        if i >= 1:
            plan = next(p for p in cached_schedules() if p.runs[0] == i + 1 and p.scratch)
            spares.append(plan.spare)
    assert spares[0] is not None and len(spares[0]) == len(plan.scratch) >= 1
    # from the third run on, the same BUFFERs: the kept ones were taken and kept again
    assert all(s is not None and all(a is b for a, b in zip(s, spares[0])) for s in spares[1:])


def test_a_schedule_run_once_keeps_nothing():
    clear_schedule_cache()
    x_np, w_np = RNG.standard_normal((16, 24)).astype(np.float32), RNG.standard_normal((24, 40)).astype(np.float32)
    program(Tensor(x_np), Tensor(w_np)).numpy()
    assert all(p.spare is None for p in cached_schedules())
    program(Tensor(x_np), Tensor(w_np)).numpy()
    assert repeated_plan().spare is not None


@pytest.mark.parametrize("poison", ["0", "1"])
def test_kept_scratch_is_poisoned_again_in_debug_mode(monkeypatch, poison):
    # a kernel that (wrongly) read scratch before writing it would read the last run's values: in debug mode it reads
    # the pattern fresh memory gets (NaN for floats), as without kept scratch
    monkeypatch.setenv("UOP_POISON", poison)
    clear_schedule_cache()
    x_np, w_np = RNG.standard_normal((16, 24)).astype(np.float32), RNG.standard_normal((24, 40)).astype(np.float32)
    for _ in range(3):
        np.testing.assert_allclose(program(Tensor(x_np), Tensor(w_np)).numpy(), reference(x_np, w_np), rtol=1e-4, atol=1e-4)
    plan = repeated_plan()
    before = [buffer_for(u).numpy().copy() for u in plan.spare]
    spare = plan.spare
    poisoned = []
    original = Buffer.poison

    def watch(self):
        poisoned.append(self)
        return original(self)

    monkeypatch.setattr(Buffer, "poison", watch)
    program(Tensor(x_np), Tensor(w_np)).numpy()
    assert len(poisoned) == (len(spare) if poison == "1" else 0)
    assert plan.spare is not None and all(a is b for a, b in zip(plan.spare, spare))
    assert all(np.isfinite(b).all() for b in before)  # what the last run left there (values, not the pattern)
    if poison == "1":
        # the pattern itself: all-ones bits, NaN as float
        fresh = Buffer("CPU", 4, plan.new_buffers[0][2]).poison().numpy()
        assert np.isnan(fresh).all()


def test_the_kept_scratch_is_bounded_and_the_least_recently_used_schedule_gives_its_up(monkeypatch):
    clear_schedule_cache()
    small = [RNG.standard_normal(s).astype(np.float32) for s in ((16, 24), (24, 40))]
    large = [RNG.standard_normal(s).astype(np.float32) for s in ((32, 24), (24, 40))]
    for _ in range(3):
        program(*map(Tensor, small)).numpy()
    first = next(p for p in cached_schedules() if p.spare is not None)
    for _ in range(2):
        program(*map(Tensor, large)).numpy()
    second = next(p for p in cached_schedules() if p is not first and p.runs[0] >= 2)
    assert first.spare is not None and second.spare is not None  # both fit the default bound
    # room for the second schedule's scratch only: its next run keeps it, and the first gives its up
    monkeypatch.setattr(R, "SPARE_SCRATCH_BYTES", R._scratch_bytes(second) + 1)
    assert R._scratch_bytes(first) > 1
    np.testing.assert_allclose(program(*map(Tensor, large)).numpy(), reference(*large), rtol=1e-4, atol=1e-4)
    assert second.spare is not None and first.spare is None
    # a schedule whose scratch alone is over the bound keeps none
    monkeypatch.setattr(R, "SPARE_SCRATCH_BYTES", 16)
    program(*map(Tensor, small)).numpy()
    assert first.spare is None
    np.testing.assert_allclose(program(*map(Tensor, small)).numpy(), reference(*small), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bound", [0, R.SPARE_SCRATCH_BYTES])
def test_training_steps_on_kept_scratch_follow_numpy(monkeypatch, bound):
    # an MLP trained with SGD for a few steps, its loss and weights against numpy's, with scratch kept or not
    monkeypatch.setattr(R, "SPARE_SCRATCH_BYTES", bound)
    clear_schedule_cache()
    x_np = RNG.standard_normal((8, 12)).astype(np.float32)
    y_np = RNG.integers(0, 5, 8).astype(np.int32)
    w1_np, w2_np = RNG.standard_normal((12, 16)).astype(np.float32) * 0.3, RNG.standard_normal((16, 5)).astype(np.float32) * 0.3
    w1, w2 = Tensor(w1_np, requires_grad=True), Tensor(w2_np, requires_grad=True)
    x, y = Tensor(x_np), Tensor(y_np)
    opt = nn.optim.SGD([w1, w2], lr=0.1)
    a1, a2 = w1_np.astype(np.float64), w2_np.astype(np.float64)
    for _ in range(5):
        Tensor.training = True
        opt.zero_grad()
        loss = (x @ w1).relu().matmul(w2).sparse_categorical_crossentropy(y)
        loss.backward()
        loss.realize(*opt.schedule_step())
        # numpy: the same step in float64
        h = np.maximum(x_np @ a1, 0)
        z = h @ a2
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        expected = -np.log(p[np.arange(8), y_np]).mean()
        g = p.copy()
        g[np.arange(8), y_np] -= 1
        g /= 8
        g2, gh = h.T @ g, g @ a2.T
        g1 = x_np.T @ (gh * (h > 0))
        a1, a2 = a1 - 0.1 * g1, a2 - 0.1 * g2
        np.testing.assert_allclose(loss.item(), expected, rtol=1e-4)
    Tensor.training = False
    np.testing.assert_allclose(w1.numpy(), a1, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w2.numpy(), a2, rtol=1e-4, atol=1e-5)
    kept = [p for p in cached_schedules() if p.spare is not None]
    assert bool(kept) == (bound > 0)


def test_the_bound_comes_from_the_environment_and_a_bad_value_is_one_clear_error():
    code = "from uop_scheduler import realizer; print(realizer.SPARE_SCRATCH_BYTES)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "UOP_SPARE_SCRATCH_MB": "1.5"}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(3 << 19)
    assert R._spare_scratch_bytes("0") == 0 and R._spare_scratch_bytes("64") == 64 << 20
    with pytest.raises(ArgumentError, match="UOP_SPARE_SCRATCH_MB='lots'"):
        R._spare_scratch_bytes("lots")
    with pytest.raises(ArgumentError, match="0 keeps none"):
        R._spare_scratch_bytes("-1")


def test_a_run_that_raises_gives_its_kept_scratch_up_and_the_next_run_keeps_new_buffers(monkeypatch):
    clear_schedule_cache()
    x_np, w_np = RNG.standard_normal((16, 24)).astype(np.float32), RNG.standard_normal((24, 40)).astype(np.float32)
    for _ in range(3):
        program(Tensor(x_np), Tensor(w_np)).numpy()
    plan = repeated_plan()
    kept = plan.spare
    assert kept is not None and plan in R._spare_bytes

    def failing(*args, **kwargs):
        raise RuntimeError("a kernel failed")

    monkeypatch.setattr(R, "_run", failing)
    with pytest.raises(RuntimeError, match="a kernel failed"):
        program(Tensor(x_np), Tensor(w_np)).numpy()
    assert plan.spare is None and plan not in R._spare_bytes  # nothing counted for scratch no schedule holds
    monkeypatch.undo()
    np.testing.assert_allclose(program(Tensor(x_np), Tensor(w_np)).numpy(), reference(x_np, w_np), rtol=1e-4, atol=1e-4)
    assert plan.spare is not None and not any(a is b for a, b in zip(plan.spare, kept))
