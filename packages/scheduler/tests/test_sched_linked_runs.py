"""Eager runs of a cached plan: from its second run, a plan of CPU calls runs linked (one native call launching every
kernel), with each run's buffers and variable values patched in. Values are checked against numpy on every run."""

from __future__ import annotations

import numpy as np
from hcq_runtime import Linked, buffer_for, counters, runner_ready
from uop_scheduler import Tensor, Variable, clear_schedule_cache
from uop_scheduler.realizer import _input_buffer, _run, _schedule_buffers, done, schedule_for
from uop_scheduler.schedule import cached_schedules, walk_graph

RNG = np.random.default_rng(7)


def mlp(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return (x @ w + b).relu().softmax(-1).sum(0)


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ w + b, 0)
    e = np.exp(h - h.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).sum(0)


def plan_of(t: Tensor):
    walk = walk_graph((t.uop,), done, "CPU")
    return schedule_for(walk, (t.uop,), "CPU")  # the plan a realize takes


def test_a_plan_runs_linked_from_its_second_run_with_each_runs_buffers():
    assert runner_ready(wait=True)  # built in the background otherwise: a plan links at its first run after that
    clear_schedule_cache()
    kernels = []
    for i in range(4):
        x, w, b = (RNG.standard_normal(s).astype(np.float32) for s in ((6, 5), (5, 7), (7,)))
        t = mlp(Tensor(x), Tensor(w), Tensor(b))
        plan = plan_of(t)
        assert plan.runs[0] == i  # one plan for every run
        counters.reset()
        np.testing.assert_allclose(t.numpy(), reference(x, w, b), rtol=1e-5, atol=1e-6)
        kernels.append(counters.kernels)
        assert isinstance(plan.runs[1], Linked) == (i >= 1)
    assert len(set(kernels)) == 1 and kernels[0] >= 2  # the counters see the linked runs' kernels too


def test_positions_sharing_a_buffer_in_one_run_and_not_in_the_next():
    # the link is made over one placeholder per position: the plan is right for either pattern of buffers
    assert runner_ready(wait=True)
    clear_schedule_cache()
    an, bn = (RNG.standard_normal(8).astype(np.float32) for _ in range(2))
    a, b = Tensor(an).realize(), Tensor(bn).realize()
    t = (a + b * 2).exp()
    walk = walk_graph((t.uop,), done, "CPU")
    plan = schedule_for(walk, (t.uop,), "CPU")
    held = [_input_buffer(n) for n in walk.inputs]
    buffers = _schedule_buffers(plan, held)
    assert len(buffers) == 3
    runs = [(buffers, an + bn * 2)]
    for k in range(3):
        fresh = _schedule_buffers(plan, held)[2]  # a new output buffer per run
        same = [buffers[0], buffers[0], fresh] if k % 2 == 0 else [buffers[0], buffers[1], fresh]
        runs.append((same, an + an * 2 if k % 2 == 0 else an + bn * 2))
    for bufs, expected in runs:
        _run(plan, bufs, {})
        np.testing.assert_allclose(buffer_for(bufs[2]).numpy(), np.exp(expected), rtol=1e-6)
    assert isinstance(plan.runs[1], Linked)


def test_bound_variables_take_each_runs_value_when_linked():
    base = np.arange(40, dtype=np.float32).reshape(4, 10) / 3
    src = Tensor(base).realize()
    for i in (3, 7, 1, 10, 5):
        got = (src[:, :Variable("n", 1, 10).bind(i)] * 2 + 1).sum(1).numpy()
        np.testing.assert_allclose(got, (base[:, :i] * 2 + 1).sum(1), rtol=1e-6)


def test_in_place_updates_stay_right_when_linked():
    # a training-like loop: the same writes, each run over the buffers the last one left
    wn = RNG.standard_normal((4, 4)).astype(np.float32)
    w = Tensor(wn.copy()).realize()
    for _ in range(5):
        w.assign(w * 0.5 + w.sum(0) * 0.1).realize()
        wn = wn * 0.5 + wn.sum(0) * 0.1
        np.testing.assert_allclose(w.numpy(), wn, rtol=1e-5)


def test_debug_2_still_prints_each_kernel_of_a_repeated_plan(capsys, monkeypatch):
    assert runner_ready(wait=True)  # so the third run would be linked but for DEBUG=2
    clear_schedule_cache()
    monkeypatch.setenv("DEBUG", "2")
    for _ in range(3):
        x = Tensor(RNG.standard_normal((3, 4)).astype(np.float32))
        capsys.readouterr()
        (x.exp().sum(1) + x.max(1)).realize()
        lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("*** ") and "compile" not in line]
        assert lines, "every run prints its kernels"


def test_a_copy_between_cpu_devices_is_linked_as_a_copy():
    assert runner_ready(wait=True)
    clear_schedule_cache()
    for _ in range(3):
        an = RNG.standard_normal(16).astype(np.float32)
        t = (Tensor(an, device="CPU").to("CPU:1") * 3).to("CPU")
        counters.reset()
        np.testing.assert_allclose(t.numpy(), an * 3, rtol=1e-6)
        assert counters.copies >= 2  # both copies counted, call by call (first run) or linked
    assert any(isinstance(p.runs[1], Linked) and p.runs[1].n_copies >= 2 for p in cached_schedules())


def test_a_cold_process_runs_call_by_call_until_the_runner_is_built(tmp_path):
    # with the compile cache off, the runner is built in the background from a plan's first run; runs before it is
    # ready go call by call (no pause for its compile), and are right either way
    import os
    import subprocess
    import sys

    code = ("import numpy as np\nfrom uop_scheduler import Tensor\nfrom hcq_runtime import runner_ready\n"
            "for i in range(4):\n"
            "    a = np.arange(8, dtype=np.float32) + i\n"
            "    np.testing.assert_allclose((Tensor(a) * 3).exp().numpy(), np.exp(a * 3), rtol=1e-5)\n"
            "assert runner_ready(wait=True)\nprint('ok')\n")
    env = {**os.environ, "DISABLE_COMPILER_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
