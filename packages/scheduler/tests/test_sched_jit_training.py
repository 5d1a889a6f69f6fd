"""TinyJit gives exactly the eager results on training steps: N jitted steps of a random small model and optimizer equal
N eager steps, losses and every parameter, BatchNorm in training mode and dropout included (the replayed step used to
read a copy of the parameters taken at capture, so every replay applied the same update)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uop_scheduler import Context, Tensor, TinyJit, nn

OPTIMIZERS = {
    "sgd": lambda ps: nn.optim.SGD(ps, lr=0.05),
    "momentum": lambda ps: nn.optim.SGD(ps, lr=0.05, momentum=0.9),
    "nesterov": lambda ps: nn.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda ps: nn.optim.Adam(ps, lr=0.01),
    "adamw": lambda ps: nn.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
}


class Model:
    def __init__(self, n_in: int, hidden: int, batchnorm: bool, dropout: bool = False):
        self.dropout = dropout
        self.l1 = nn.Linear(n_in, hidden)
        self.bn = nn.BatchNorm(hidden) if batchnorm else None
        self.l2 = nn.Linear(hidden, 1)

    def __call__(self, x: Tensor) -> Tensor:
        h = self.l1(x)
        if self.bn is not None:
            h = self.bn(h)
        h = h.relu()
        return self.l2(h.dropout(0.3) if self.dropout else h)


def squared_error_step(model: Model, opt):
    """The standard training step: zero the gradients, a squared-error loss, backward, an optimizer step."""

    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = (model(x) - y).square().mean()
        loss.backward()
        opt.step()
        return loss.realize()

    return step


def train(jit: bool | str, opt_name: str, hidden: int, batchnorm: bool, steps: int, seed: int, dropout: bool = False):
    Tensor.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = Model(3, hidden, batchnorm, dropout)
    params = nn.state.get_parameters(model)
    opt = OPTIMIZERS[opt_name](params)
    data = [(rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal((8, 1)).astype(np.float32)) for _ in range(steps)]

    step = squared_error_step(model, opt)
    fn = TinyJit(step, prune=jit == "prune") if jit else step
    with Context(TRAINING=1):
        losses = [fn(Tensor(x), Tensor(y)).numpy().item() for x, y in data]
    return losses, [p.numpy() for p in nn.state.get_parameters(model)]


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.sampled_from(sorted(OPTIMIZERS)), st.integers(2, 6), st.booleans(), st.integers(3, 7), st.integers(0, 1000), st.booleans(),
       st.sampled_from([True, "prune"]))
def test_jitted_training_steps_equal_eager_steps(opt_name, hidden, batchnorm, steps, seed, dropout, mode):
    eager_losses, eager_params = train(False, opt_name, hidden, batchnorm, steps, seed, dropout)
    jit_losses, jit_params = train(mode, opt_name, hidden, batchnorm, steps, seed, dropout)
    np.testing.assert_allclose(jit_losses, eager_losses, rtol=1e-5, atol=1e-6)
    for got, want in zip(jit_params, eager_params, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_jitted_sgd_on_a_linear_model_keeps_training():
    # the case: with the bug, the bias moved by the same amount on every replay
    eager_losses, eager_params = train(False, "sgd", 4, False, 8, 1)
    jit_losses, jit_params = train(True, "sgd", 4, False, 8, 1)
    assert len(set(jit_losses[2:])) == len(jit_losses[2:])  # every replay has a loss of its own
    np.testing.assert_allclose(jit_losses, eager_losses, rtol=1e-5, atol=1e-6)
    for got, want in zip(jit_params, eager_params, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_pruned_training_step_with_every_kind_of_state_equals_eager():
    # prune=True drops only kernels whose effect is the same every replay: optimizer moments, BatchNorm statistics and
    # the RNG state all advance, so their kernels stay
    eager_losses, eager_params = train(False, "adam", 4, True, 6, 3, dropout=True)
    jit_losses, jit_params = train("prune", "adam", 4, True, 6, 3, dropout=True)
    np.testing.assert_allclose(jit_losses, eager_losses, rtol=1e-5, atol=1e-6)
    for got, want in zip(jit_params, eager_params, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_gradients_read_after_each_replay_are_that_replay_s_gradients():
    # the step leaves the gradients unrealized (the optimizer's kernels read them fused); read after a replay they were
    # the capture call's gradients, computed from its inputs
    def run(jit: bool, same_input: bool):
        Tensor.manual_seed(7)
        rng = np.random.default_rng(7)
        model = Model(3, 4, False)
        params = nn.state.get_parameters(model)
        opt = nn.optim.SGD(params, lr=0.1, momentum=0.5)

        step = squared_error_step(model, opt)
        fn = TinyJit(step) if jit else step
        x0, y0 = rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal((8, 1)).astype(np.float32)
        grads = []
        with Context(TRAINING=1):
            for _ in range(5):
                x, y = (x0, y0) if same_input else (rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal((8, 1)).astype(np.float32))
                fn(Tensor(x), Tensor(y))
                grads.append([p.grad.numpy() for p in params])
        return grads

    for same_input in (False, True):
        for got, want in zip(run(True, same_input), run(False, same_input), strict=True):
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
