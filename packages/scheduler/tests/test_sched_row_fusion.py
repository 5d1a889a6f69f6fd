"""Row reductions fused into the one kernel that reads them (`schedule._row_fused`, on devices whose kernels are loops):
softmax's max and sum, a norm's mean and variance. Values are compared with numpy in float64 over generated shapes
(leading row axes, one or two row axes, odd and size-1 sizes) and programs; kernel counts check what fuses and what
must not (a reduction over leading axes, one read by two kernels, a row longer than ROW_FUSE_MAX)."""

import numpy as np
import pytest
from hcq_runtime import counters
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor
from uop_scheduler.schedule import ROW_FUSE_MAX, row_fusion

pytestmark = pytest.mark.skipif(not row_fusion("CPU"), reason="row fusion is off (UOP_ROW_FUSION=0)")


def kernels_for(*ts: Tensor) -> int:
    counters.reset()
    Tensor.realize(*ts)
    return counters.kernels


def np_softmax(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    e = np.exp(x - x.max(axes, keepdims=True))
    return e / e.sum(axes, keepdims=True)


def np_layernorm(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    centered = x - x.mean(axes, keepdims=True)
    return centered / np.sqrt((centered * centered).mean(axes, keepdims=True) + 1e-5)


def softmax(t: Tensor, ax: tuple[int, ...]) -> Tensor:
    if len(ax) == 1:
        return t.softmax(ax[0])
    e = (t - t.max(ax, keepdim=True)).exp()
    return e / e.sum(ax, keepdim=True)


def log_softmax(t: Tensor, ax: tuple[int, ...]) -> Tensor:
    if len(ax) == 1:
        return t.log_softmax(ax[0])
    shifted = t - t.max(ax, keepdim=True)
    return shifted - shifted.exp().sum(ax, keepdim=True).log()


def layernorm(t: Tensor, ax: tuple[int, ...]) -> Tensor:
    centered = t - t.mean(ax, keepdim=True)
    return centered / (centered.square().mean(ax, keepdim=True) + 1e-5).sqrt()


# (the program on a Tensor, the same in float64 numpy), each over the trailing `axes`
PROGRAMS = {
    "softmax": (softmax, np_softmax),
    "log_softmax": (log_softmax, lambda x, ax: np.log(np_softmax(x, ax))),
    "layernorm": (layernorm, np_layernorm),
    "rmsnorm": (lambda t, ax: t * (t * t).mean(ax, keepdim=True).add(1e-5).rsqrt(),
                lambda x, ax: x / np.sqrt((x * x).mean(ax, keepdims=True) + 1e-5)),
    "centered_sum": (lambda t, ax: (t - t.max(ax, keepdim=True)).sum(ax), lambda x, ax: (x - x.max(ax, keepdims=True)).sum(ax)),
    "share": (lambda t, ax: t / t.abs().sum(ax, keepdim=True).add(1), lambda x, ax: x / (np.abs(x).sum(ax, keepdims=True) + 1)),
}


@st.composite
def row_programs(draw):
    lead = draw(st.lists(st.integers(1, 9), min_size=1, max_size=3))
    row = draw(st.lists(st.integers(1, 40), min_size=1, max_size=2))
    name = draw(st.sampled_from(sorted(PROGRAMS)))
    seed = draw(st.integers(0, 2**16))
    return tuple(lead), tuple(row), name, seed


@given(row_programs())
@settings(max_examples=60, deadline=None, derandomize=True)
def test_row_programs_match_numpy(case):
    lead, row, name, seed = case
    x = (np.random.default_rng(seed).standard_normal((*lead, *row)) * 3).astype(np.float32)
    axes = tuple(range(len(lead), len(lead) + len(row)))
    ours, ref = PROGRAMS[name]
    got = ours(Tensor(x), axes).numpy()
    np.testing.assert_allclose(got, ref(x.astype(np.float64), axes), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layernorm", "rmsnorm"])
def test_a_row_program_is_one_kernel(name):
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    out = PROGRAMS[name][0](Tensor(x), (1,))
    assert kernels_for(out) == 1
    np.testing.assert_allclose(out.numpy(), PROGRAMS[name][1](x.astype(np.float64), (1,)), rtol=2e-5, atol=2e-5)


def test_what_does_not_fuse_is_still_computed_right():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 24)).astype(np.float32)
    # a reduction over the leading axis: each element's row would be a column the loops cross (its max stays a kernel)
    col = Tensor(x).softmax(0)
    assert kernels_for(col) > 1
    np.testing.assert_allclose(col.numpy(), np_softmax(x.astype(np.float64), (0,)), rtol=1e-5, atol=1e-6)
    # a row's sum read by two kernels (two outputs): computed once into a buffer, not once per kernel
    t = Tensor(x)
    total = t.sum(1, keepdim=True)
    a, b = t / total, (t * 2).exp() - total
    assert kernels_for(a, b) == 3
    np.testing.assert_allclose(a.numpy(), x / x.sum(1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b.numpy(), np.exp(x * 2) - x.sum(1, keepdims=True), rtol=1e-5, atol=1e-4)
    # a row longer than ROW_FUSE_MAX: the reductions are kernels of their own
    long = rng.standard_normal((2, ROW_FUSE_MAX + 8)).astype(np.float32)
    out = Tensor(long).softmax(-1)
    assert kernels_for(out) == 3
    np.testing.assert_allclose(out.numpy(), np_softmax(long.astype(np.float64), (1,)), rtol=1e-5, atol=1e-8)


def test_row_reductions_in_gradients_match_numpy():
    # the backward of softmax and of a norm reduces rows of the upstream gradient too (sum(g * s) per row)
    rng = np.random.default_rng(3)
    x, g = rng.standard_normal((12, 33)), rng.standard_normal((12, 33))
    t = Tensor(x.astype(np.float32), requires_grad=True)
    (t.softmax(-1) * Tensor(g.astype(np.float32))).sum().backward()
    s = np_softmax(x, (1,))
    np.testing.assert_allclose(t.grad.numpy(), s * (g - (g * s).sum(1, keepdims=True)), rtol=1e-4, atol=1e-6)
    t = Tensor(x.astype(np.float32), requires_grad=True)
    (PROGRAMS["rmsnorm"][0](t, (1,)) * Tensor(g.astype(np.float32))).sum().backward()
    r = 1 / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5)
    want = g * r - x * (r**3) * (g * x).sum(1, keepdims=True) / x.shape[1]
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-4, atol=1e-5)


def test_rows_of_a_symbolic_length_match_numpy():
    # the live rows of a KV cache: the row's length is a bound variable (its largest value bounds the row), one kernel
    # and one schedule for every length
    from uop_scheduler import Variable

    x = np.random.default_rng(4).standard_normal((6, 40)).astype(np.float32)
    t = Tensor(x).realize()
    for n in (1, 17, 40):
        view = t[:, :Variable("n", 1, 40).bind(n)]
        for name in ("softmax", "layernorm"):
            out = PROGRAMS[name][0](view, (1,)).contiguous()
            assert kernels_for(out) == 1
            np.testing.assert_allclose(out.numpy(), PROGRAMS[name][1](x[:, :n].astype(np.float64), (1,)), rtol=2e-5, atol=2e-5)
