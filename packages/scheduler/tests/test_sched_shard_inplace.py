"""`Tensor.shard_` (tinygrad's in-place sharding), tensors created on several devices, and optimizers over sharded
parameters, each against the same program on one device or numpy."""

import numpy as np
import pytest
from hcq_runtime import canonicalize
from uop_scheduler import ShardedTensor, Tensor, nn
from uop_scheduler.nn import optim, state

DEVS = ("CPU:0", "CPU:1")
NAMES = tuple(canonicalize(d) for d in DEVS)


@pytest.mark.parametrize("axis", [0, 1, None])
def test_shard_in_place_is_the_same_object(rng, close, axis):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    t = Tensor(x)
    assert t.shard_(DEVS, axis) is t
    assert isinstance(t, Tensor) and t.shape == (4, 6) and t.device == NAMES
    close(t, x)
    close(t + 1, x + 1)
    close(t * Tensor(x), x * x, rtol=1e-6)
    close(t.sum(), x.sum(), rtol=1e-5, atol=1e-5)
    close(t.exp().max(1), np.exp(x).max(1), rtol=1e-6)


def test_reflected_scalar_ops_on_sharded_values(rng, close):
    """`1 - s` computed `s - s` (the reflected operator passed the shard where the scalar belonged)."""
    x = rng.uniform(0.5, 2.0, (4, 6)).astype(np.float32)
    for s in (Tensor(x).shard(DEVS, 0), Tensor(x).shard_(DEVS, 1)):
        close(1 + s, 1 + x)
        close(1 - s, 1 - x)
        close(2 * s, 2 * x)
        close(2 / s, 2 / x, rtol=1e-6)
        close(2**s, 2**x, rtol=1e-6)
        close(s**2, x**2, rtol=1e-6)
        close(Tensor(x) - s, np.zeros_like(x))


def test_shard_in_place_keeps_earlier_views_and_pending_writes(close):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    t = Tensor(x).contiguous().realize()
    view = t[1:3]
    t[0] = 100.0  # pending: the shards must see it
    t.shard_(DEVS, 0)
    expected = x.copy()
    expected[0] = 100.0
    close(t, expected)
    close(view, expected[1:3])  # a view made before stays the value it had
    t.assign(Tensor(x * 2).shard(DEVS, 0))
    close(t, x * 2)
    close(view, expected[1:3])


def test_tensor_on_several_devices_is_replicated(close):
    z = Tensor.zeros(2, 3, device=DEVS)
    assert isinstance(z, Tensor) and z.device == NAMES
    close(z + 1, np.ones((2, 3), np.float32))
    assert isinstance(Tensor([1.0, 2.0]).to(DEVS), ShardedTensor)


def test_to_in_place_gathers_back(rng, close):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    t = Tensor(x).shard_(DEVS, 1)
    assert t.to_("CPU:1") is t and type(t) is Tensor and t.device == canonicalize("CPU:1")
    close(t * 2, x * 2)
    t.to_(DEVS)
    assert t.device == NAMES
    close(t, x)


def _train(shard: bool, make_opt, rng_seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(rng_seed)
    x, y = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    Tensor.manual_seed(0)
    layer = nn.Linear(3, 2)
    if shard:
        for p in state.get_parameters(layer):
            p.shard_(DEVS)
    opt = make_opt(state.get_parameters(layer))
    xs, ys = (Tensor(x).shard(DEVS, 0), Tensor(y).shard(DEVS, 0)) if shard else (Tensor(x), Tensor(y))
    for _ in range(3):
        opt.zero_grad()
        ((layer(xs) - ys) ** 2).mean().backward()
        opt.step()
    return layer.weight.numpy()


@pytest.mark.parametrize("make_opt", [lambda ps: optim.SGD(ps, lr=0.1), lambda ps: optim.Adam(ps, lr=0.1),
                                      lambda ps: optim.LAMB(ps, lr=0.1)], ids=["sgd", "adam", "lamb"])
def test_training_params_sharded_in_place(make_opt):
    """Data-parallel training over parameters sharded in place steps them as on one device."""
    np.testing.assert_allclose(_train(True, make_opt), _train(False, make_opt), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sharded", [True, False])
def test_lamb_state_offloaded_to_cpu(rng, sharded):
    """tinygrad's test_lamb_cpu_offload_multi: the moments moved to the CPU with `to_` are updated there."""
    x = rng.standard_normal((4, 6)).astype(np.float32)

    def run(offload: bool) -> np.ndarray:
        t = Tensor(x.copy()).shard(DEVS, axis=1) if sharded else Tensor(x.copy(), device="CPU:1")
        device = t.device
        opt = optim.LAMB([t])
        if offload:
            for p in opt.m + opt.v + [opt.b1_t, opt.b2_t]:
                p.to_("CPU")
        for _ in range(2):
            opt.zero_grad()
            (t * t).sum().backward()
            opt.step()
        assert t.device == device
        assert opt.m[0].device == ("CPU" if offload else device)
        return t.numpy()

    np.testing.assert_allclose(run(True), run(False), rtol=1e-5, atol=1e-6)


def test_a_constant_gradient_an_optimizer_kernel_read_is_not_placed_on_its_device():
    """Adam's kernel reads w.sum()'s gradient, a constant of ones with no device: computed with the kernel's schedule
    it must not be recorded as that device's value, or the same constant on other devices (the sharded training's
    gradient of a mean) would be read from it there."""
    for make in (optim.SGD, optim.Adam):
        for params in ("once", "twice"):
            w = Tensor([1.0, 2.0])
            opt = make([w] if params == "once" else [w, w], lr=0.1)
            for _ in range(2):
                opt.zero_grad()
                w.sum().backward()
                opt.step()
            np.testing.assert_allclose(w.numpy(), [0.8, 1.8], rtol=1e-5)
    np.testing.assert_allclose(_train(True, lambda ps: optim.SGD(ps, lr=0.1)), _train(False, lambda ps: optim.SGD(ps, lr=0.1)),
                               rtol=1e-5, atol=1e-6)
