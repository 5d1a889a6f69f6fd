"""Eager training steps cost time linear in the model's size: the per-realize bookkeeping (which targets belong to a
device, which values keep their graphs for gradients, which lazy values a write's schedule computes too) does a fixed
number of passes, not one pass per settled tensor. Checked by counting the passes (wall-clock times would be flaky),
with the values checked against numpy."""

from __future__ import annotations

import numpy as np
from uop_scheduler import Tensor, nn, schedule
from uop_scheduler.identity import IdentitySet


def _model(layers: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal((8, 8)).astype(np.float32) * 0.3 for _ in range(layers)]
    x = rng.standard_normal((4, 8)).astype(np.float32)
    return x, ws


def _numpy_sgd_step(x: np.ndarray, ws: list[np.ndarray], lr: float) -> tuple[float, list[np.ndarray]]:
    hs, h = [x], x
    for w in ws:
        h = np.maximum(h @ w, 0)
        hs.append(h)
    g = np.ones_like(h)
    grads = []
    for i in reversed(range(len(ws))):
        g = g * (hs[i + 1] > 0)
        grads.append(hs[i].T @ g)
        g = g @ ws[i].T
    grads.reverse()
    return float(h.sum()), [w - lr * gw for w, gw in zip(ws, grads)]


def _counted_step(layers: int, monkeypatch) -> tuple[dict[str, int], float, list[np.ndarray]]:
    x_np, ws_np = _model(layers)
    ws = [Tensor(w, requires_grad=True) for w in ws_np]
    x = Tensor(x_np)
    opt = nn.optim.SGD(ws, lr=0.1)
    counts = {"nodes searched for a device": 0, "iterations": 0}
    placed, iterate = schedule._placed, IdentitySet.__iter__

    def counted_placed(n):  # the device search asks this of every node it enters
        counts["nodes searched for a device"] += 1
        return placed(n)

    def counted_iter(self):
        counts["iterations"] += 1
        return iterate(self)

    Tensor.training = True
    try:
        # the last step is counted, its schedule cached as in a training loop (from the fourth step on here: under
        # tinygrad's rule the batch x gets a gradient too, which accumulates, so the first three steps differ)
        for step in range(5):
            opt.zero_grad()
            h = x
            for w in ws:
                h = (h @ w).relu()
            loss = h.sum()
            loss.backward()
            targets = opt.schedule_step()
            if step == 4:
                monkeypatch.setattr(schedule, "_placed", counted_placed)
                monkeypatch.setattr(IdentitySet, "__iter__", counted_iter)
            loss.realize(*targets)
            monkeypatch.undo()
    finally:
        Tensor.training = False
    return counts, loss.item(), [w.numpy() for w in ws]


def test_a_training_steps_bookkeeping_does_not_grow_with_the_number_of_layers(monkeypatch):
    small, _, _ = _counted_step(4, monkeypatch)
    large, loss, ws = _counted_step(24, monkeypatch)
    # each realize collects the gradient leaves once, however many parameters and gradients it settles, and searches
    # its targets' devices with one memo: nodes searched grow with the graph, not with graph x targets (both were
    # quadratic steps; one search per target entered 45x the nodes at 6x the layers)
    assert large["iterations"] == small["iterations"]
    assert large["nodes searched for a device"] <= 6 * small["nodes searched for a device"]
    x, ws0 = _model(24)
    for _ in range(4):
        _, ws0 = _numpy_sgd_step(x, ws0, lr=0.1)
    want_loss, want_ws = _numpy_sgd_step(x, ws0, lr=0.1)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-4)
    for got, want in zip(ws, want_ws):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
