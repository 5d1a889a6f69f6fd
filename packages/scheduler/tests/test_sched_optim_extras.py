"""Muon and Newton-Schulz against numpy, duplicate parameters, moving a tensor in place, and the TRAINING=0 guard."""

from __future__ import annotations

import numpy as np
import pytest
from uop_scheduler import Context, Tensor, dtypes
from uop_scheduler.errors import ShapeError, TensorRuntimeError
from uop_scheduler.nn import optim
from uop_scheduler.nn.optim import SGD, Adam, Muon


def np_newton_schulz(x: np.ndarray, steps: int, params, eps: float = 1e-7) -> np.ndarray:
    if x.shape[-2] > x.shape[-1]:
        return np.swapaxes(np_newton_schulz(np.swapaxes(x, -1, -2), steps, params, eps), -1, -2)
    g = x / (np.sqrt((x * x).sum(axis=(-2, -1), keepdims=True)) + eps)
    for _ in range(steps):
        gram = g @ np.swapaxes(g, -1, -2)
        terms = [g]
        for _ in params[1:]:
            terms.append(gram @ terms[-1])
        g = sum(p * t for p, t in zip(params, terms))
    return g


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (2, 3, 4)])
def test_newton_schulz_matches_numpy(shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    got = Tensor(x).newton_schulz(4, (3.4445, -4.775, 2.0315)).numpy()
    np.testing.assert_allclose(got, np_newton_schulz(x.astype(np.float64), 4, (3.4445, -4.775, 2.0315)), rtol=1e-4, atol=1e-5)


def test_newton_schulz_needs_a_matrix():
    with pytest.raises(ShapeError, match="two or more axes"):
        Tensor([1.0, 2.0]).newton_schulz(1, (1.0,))


def test_muon_steps_match_numpy():
    rng = np.random.default_rng(2)
    w0, x = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    w = Tensor(w0.copy(), requires_grad=True)
    opt = Muon([w], lr=0.05, momentum=0.9, weight_decay=0.1, ns_steps=3)
    ref, buf = w0.astype(np.float64), np.zeros_like(w0, np.float64)
    for _ in range(3):
        opt.zero_grad()
        (Tensor(x) @ w).square().sum().backward()
        opt.step()
        g = 2 * x.T.astype(np.float64) @ (x @ ref)
        buf = 0.9 * buf + g
        step = np_newton_schulz(g + 0.9 * buf, 3, (3.4445, -4.775, 2.0315))  # nesterov
        ref = ref * (1 - 0.1 * 0.05) - 0.05 * step
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opt", [SGD, Adam])
def test_a_parameter_passed_twice_is_stepped_once(opt):
    got = []
    for params in ("once", "twice"):
        w = Tensor([1.0, 2.0])
        o = opt([w] if params == "once" else [w, w], lr=0.1)
        for _ in range(2):
            o.zero_grad()
            w.sum().backward()
            o.step()
        got.append(w.numpy())
    np.testing.assert_array_equal(got[0], got[1])


def test_to_moves_the_tensor_object_and_keeps_its_value():
    a = Tensor([1.0, 2.0, 3.0])
    v = a * 2
    assert a.to_("CPU:1") is a
    assert a.device == "CPU:1"
    np.testing.assert_array_equal(a.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(v.numpy(), [2.0, 4.0, 6.0])


def test_an_optimizer_step_with_training_explicitly_off_is_an_error():
    w = Tensor([1.0])
    opt = SGD([w], lr=0.1)
    w.sum().backward()
    with Context(TRAINING=0), pytest.raises(TensorRuntimeError, match="TRAINING=0"):
        opt.step()
    opt.step()  # unset: allowed
    np.testing.assert_allclose(w.numpy(), [0.9])


@pytest.mark.parametrize("shape", [(3, 3), (3, 6), (6, 3), (2, 3, 4, 2)])
def test_qr_is_orthogonal_times_upper_triangular(shape):
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    q, r = Tensor(x).qr()
    qn, rn = q.numpy(), r.numpy()
    m = shape[-2]
    np.testing.assert_allclose(qn @ np.swapaxes(qn, -1, -2), np.broadcast_to(np.eye(m), qn.shape), atol=1e-5)
    np.testing.assert_allclose(qn @ rn, x, atol=1e-5)
    np.testing.assert_array_less(np.abs(np.tril(rn, -1)), 1e-5)
    # R is unique up to the sign of each row: its magnitudes are numpy's
    k = min(shape[-2], shape[-1])
    want = np.linalg.qr(x.astype(np.float64), mode="complete")[1]
    np.testing.assert_allclose(np.abs(rn[..., :k, :]), np.abs(want[..., :k, :]), atol=1e-4)


def test_qr_of_a_zero_column_has_no_nan():
    q, r = Tensor([[0.0, 1.0], [0.0, 2.0]]).qr()
    assert not np.isnan(q.numpy()).any() and not np.isnan(r.numpy()).any()
    np.testing.assert_allclose(q.numpy() @ r.numpy(), [[0.0, 1.0], [0.0, 2.0]], atol=1e-6)


@pytest.mark.parametrize("shape", [(4, 3), (2, 5), (2, 3, 3)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_against_numpy(shape, full):
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    u, s, vh = (t.numpy() for t in Tensor(x).svd(full_matrices=full))
    m, n = shape[-2:]
    k = min(m, n)
    np.testing.assert_allclose(s, np.linalg.svd(x.astype(np.float64), compute_uv=False), rtol=1e-5, atol=1e-5)
    assert u.shape == (*shape[:-2], m, m if full else k) and vh.shape == (*shape[:-2], n if full else k, n)
    for q in (u, np.swapaxes(vh, -1, -2)):  # orthonormal columns
        np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2), atol=1e-5)
    middle = np.zeros((*shape[:-2], u.shape[-1], vh.shape[-2]), np.float32)
    idx = np.arange(k)
    middle[..., idx, idx] = s
    np.testing.assert_allclose(u @ middle @ vh, x, atol=1e-5)


@pytest.mark.parametrize("x", [np.zeros((2, 2), np.float32), np.eye(3, dtype=np.float32), np.ones((3, 2), np.float32)])
def test_svd_of_rank_deficient_matrices(x):
    u, s, vh = (t.numpy() for t in Tensor(x).svd())
    assert not np.isnan(u).any() and not np.isnan(vh).any()
    np.testing.assert_allclose(s, np.linalg.svd(x, compute_uv=False), atol=1e-6)
    np.testing.assert_allclose(u[:, : len(s)] * s @ vh[: len(s)], x, atol=1e-5)


@pytest.mark.parametrize("make_opt", [lambda ps: optim.Adam(ps, lr=1e-2), lambda ps: optim.SGD(ps, lr=1e-2, momentum=0.9),
                                      lambda ps: optim.LAMB(ps, lr=1e-2)], ids=["adam", "sgd_momentum", "lamb"])
def test_the_second_step_needs_no_new_kernels(make_opt):
    """Optimizer state starts as zeros in buffers of its own: as constants, the first step's update kernels folded
    them in and every later step compiled a second set (an MLP's second eager step was 3x its third, cold)."""
    from hcq_runtime import counters

    rng = np.random.default_rng(7)
    x = Tensor(rng.standard_normal((5, 37)).astype(np.float32), requires_grad=False)
    y = Tensor(rng.integers(0, 7, 5).astype(np.int32))
    w1 = Tensor(rng.standard_normal((23, 37)).astype(np.float32) * 0.1, requires_grad=True)
    w2 = Tensor(rng.standard_normal((7, 23)).astype(np.float32) * 0.1, requires_grad=True)
    opt = make_opt([w1, w2])
    built = []
    for _ in range(3):
        opt.zero_grad()
        x.linear(w1.T).relu().linear(w2.T).sparse_categorical_crossentropy(y).backward()
        opt.step()
        built.append(counters.compiles)
    assert built[2] == built[1] == built[0], built


@pytest.mark.parametrize("make_opt", [lambda ps: optim.Adam(ps, lr=1e-2), lambda ps: optim.SGD(ps, lr=1e-2, momentum=0.9),
                                      lambda ps: optim.LAMB(ps, lr=1e-2)], ids=["adam", "sgd_momentum", "lamb"])
def test_optimizer_state_is_zeros_filled_without_a_kernel(make_opt):
    """The state buffers are filled from the host (a fill kernel per parameter shape was compiled, one after another,
    as the optimizer was made): zeros whatever the memory held before, for a scalar, an empty and a large parameter."""
    import gc

    from hcq_runtime import counters

    shapes = [(), (0,), (3, 5), (700, 600)]  # (the last is larger than one piece of host zeros)
    for shape in shapes:  # memory of the same sizes, dirty and freed: the allocator may hand it to the state
        Tensor(np.full(shape, np.nan, np.float32)).realize()
    gc.collect()
    params = [Tensor(np.ones(shape, np.float32), requires_grad=True).realize() for shape in shapes]
    compiles, kernels = counters.compiles, counters.kernels
    opt = make_opt(params)
    assert (counters.compiles, counters.kernels) == (compiles, kernels)
    states = [t for t in opt.state if t.shape in shapes]  # (the bias corrections and learning rate are scalars too)
    assert states and all(t.dtype == dtypes.float32 for t in states)
    for t in states:
        np.testing.assert_array_equal(t.numpy(), np.zeros(t.shape, np.float32))


def _graph_structure(u) -> list:
    """The graph of `u` node by node with buffer identities left out: two graphs over different buffers compare equal
    exactly when they compute the same thing the same way."""
    from uopir import Ops

    index: dict = {}
    out = []
    for n in u.toposort():
        index[n] = len(index)
        out.append((n.op, n.dtype, None if n.op is Ops.BUFFER else n.arg, tuple(index[s] for s in n.src)))
    return out


def _adam_run(make_opt, shapes, uop_steps: bool, steps: int = 3, fused: bool = False):
    rng = np.random.default_rng(7)
    params = [Tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in shapes]
    scales = [Tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    opt = make_opt(params)
    opt.uop_steps, opt.fused_steps = uop_steps, fused
    graphs = None
    for step in range(steps):
        opt.zero_grad()
        loss = sum((p * k).sin().sum() for p, k in zip(params, scales))
        loss.backward()
        targets = opt.schedule_step()
        if step == 1:
            graphs = [_graph_structure(p.uop) for p in params]
        Tensor.realize(*targets)
    return [t.numpy() for t in (*params, *opt.m, *opt.v)], graphs


@pytest.mark.parametrize("make_opt", [lambda ps: Adam(ps, lr=0.01), lambda ps: optim.AdamW(ps, lr=0.02, b1=0.8, weight_decay=0.1)],
                         ids=["adam", "adamw"])
@pytest.mark.parametrize("shapes", [[(5,), (3, 4)], [(1,), (2, 1, 3)]], ids=["plain", "size-1-axes"])
def test_adam_steps_built_from_uops_are_the_tensor_ops_graph(make_opt, shapes):
    """Adam(W)'s UOp-built step is the tensor code's graph node for node (the same kernels), so the values agree bit
    for bit over several steps."""
    fast, fast_graphs = _adam_run(make_opt, shapes, True)
    slow, slow_graphs = _adam_run(make_opt, shapes, False)
    assert fast_graphs == slow_graphs
    for a, b in zip(fast, slow):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


_ADAMS = [lambda ps: Adam(ps, lr=0.01), lambda ps: optim.AdamW(ps, lr=0.02, b1=0.8, weight_decay=0.1)]


@pytest.mark.parametrize("make_opt", _ADAMS, ids=["adam", "adamw"])
@pytest.mark.parametrize("shapes", [[(5,), (3, 4)], [(1,), (2, 1, 3)], [(33, 17)]], ids=["plain", "size-1-axes", "odd"])
def test_adam_steps_in_place_give_the_graphs_values_bit_for_bit(make_opt, shapes):
    """The in-place Adam(W) step (one hand-written kernel per parameter, reading the gradient the same schedule
    computes) gives the step graph's values bit for bit, parameters and both moments, over several steps."""
    fused, _ = _adam_run(make_opt, shapes, True, steps=4, fused=True)
    graph, _ = _adam_run(make_opt, shapes, True, steps=4, fused=False)
    for a, b in zip(fused, graph):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_adam_step_in_place_is_one_kernel_per_parameter_in_one_schedule():
    """Each parameter's update is one kernel (the graph made three: m, v, then the parameter), and a lazy loss that
    reads the weights the kernel overwrites is computed in the same realize, before it (as for a written step)."""
    from uop_scheduler.realizer import counters

    rng = np.random.default_rng(3)
    w = Tensor(rng.standard_normal((8, 4)).astype(np.float32), requires_grad=True)
    x = Tensor(rng.standard_normal((5, 8)).astype(np.float32))
    kernels: dict[bool, list[int]] = {True: [], False: []}
    item_kernels: dict[bool, list[int]] = {True: [], False: []}
    for fused in (True, False):
        w2 = Tensor(w.numpy(), requires_grad=True)
        opt = Adam([w2], lr=0.1)
        opt.fused_steps = fused
        for _ in range(3):
            wn = w2.numpy()
            opt.zero_grad()
            loss = (x @ w2).square().sum()
            loss.backward()
            before = counters.kernels
            opt.step()  # the loss is not a target: it reads the old weights, so the step computes it too
            kernels[fused].append(counters.kernels - before)
            before = counters.kernels
            value = loss.item()
            item_kernels[fused].append(counters.kernels - before)
            # the loss of the weights before the update (computed before the kernel overwrote them)
            np.testing.assert_allclose(value, np.square(x.numpy() @ wn).sum(), rtol=1e-5)
            assert not np.array_equal(w2.numpy(), wn)
    assert all(f <= g - 2 for f, g in zip(kernels[True], kernels[False])), kernels
    # the loss was computed by the step (reading it costs what it costs after a graph step: its scalar's copy out),
    # not later from a copy of the old weights the step had to keep
    assert item_kernels[True] == item_kernels[False], item_kernels


def test_adam_in_place_falls_back_for_a_parameter_without_a_buffer_of_its_own():
    """A parameter whose value is not a buffer it owns (here a computed value, never realized) takes the step
    graph; its values are those of a fresh run that realizes it first."""
    base = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    results = []
    for realize_first in (False, True):
        p = Tensor(base) * 1.0  # a computed value
        if realize_first:
            p.realize()
        p.requires_grad = True
        opt = Adam([p], lr=0.05)
        for _ in range(3):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step()
        results.append(p.numpy())
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-6), (np.float16, 2e-3)], ids=["float64", "float16"])
def test_adam_steps_a_parameter_of_another_dtype_with_float32_moments(dtype, rtol):
    """A float64 or half parameter keeps float32 moments (tinygrad's state dtype): each update is computed with them and
    cast to the parameter's dtype (the moments' assigns used to refuse the parameter-dtype value)."""
    start = np.array([1.0, -2.0, 0.5, 3.0], dtype)
    p = Tensor(start, requires_grad=True)
    opt = optim.AdamW([p], lr=0.01, weight_decay=0.1)
    want, m, v = start.astype(np.float64), np.zeros(4), np.zeros(4)
    for t in range(1, 4):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
        g = 2 * want
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        up = (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8) + 0.1 * want
        want = (want - 0.01 * up).astype(dtype).astype(np.float64)
        assert p.dtype == Tensor(start).dtype and opt.m[0].numpy().dtype == np.float32
        np.testing.assert_allclose(p.numpy(), want, rtol=rtol)


@pytest.mark.parametrize("view", ["permuted", "shrunk", "computed"])
def test_adam_in_place_reads_a_gradient_that_is_not_a_buffer_in_order(view):
    """A gradient set by hand as a view that reorders or drops a realized buffer's elements (or a lazy value) is
    computed into a buffer of its own for the in-place step (it was launched as the view: an IndexError), with the
    graph's values."""
    results = []
    for fused in (True, False):
        rng = np.random.default_rng(0)
        p = Tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
        opt = Adam([p], lr=0.1)
        opt.fused_steps = fused
        g = Tensor(rng.standard_normal((5, 4)).astype(np.float32)).realize()
        p.grad = {"permuted": g[:4, :3].T, "shrunk": g[1:4], "computed": g[:3] * 2}[view]
        for _ in range(2):
            opt.step()
        results.append(p.numpy())
    np.testing.assert_array_equal(results[0], results[1])


def test_adam_learning_rate_schedule_compiles_no_kernel_per_value():
    """A learning rate changed every step (a schedule) is read from a tensor by the in-place step: after the first
    change nothing is compiled again (as a constant, every value compiled the step's kernels anew, ~0.2 s per step of
    an MLP), and the values are the step graph's, bit for bit."""
    results = []
    for fused in (True, False):
        rng = np.random.default_rng(11)
        p = Tensor(rng.standard_normal((6, 5)).astype(np.float32), requires_grad=True)
        opt = optim.AdamW([p], lr=0.1, weight_decay=0.01)
        opt.fused_steps = fused
        compiled_late = _steps_under_a_schedule(opt, p, 0.0123)
        if fused:
            assert compiled_late == 0
        results.append(p.numpy())
    assert np.array_equal(results[0].view(np.uint32), results[1].view(np.uint32))


def _steps_under_a_schedule(opt, p: Tensor, offset: float, after_step=None) -> int:
    """Six steps of minimizing sum(p * p), the learning rate changed before each; `after_step(lr)` runs after each
    step. Returns how many kernels were compiled from the fourth step on."""
    from uop_scheduler.realizer import counters

    for step in range(6):
        opt.lr = 0.1 / (step + 1) + offset
        if step == 3:
            compiled = counters.compiles
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
        if after_step is not None:
            after_step(opt.lr)
    return counters.compiles - compiled


@pytest.mark.parametrize("make_opt", [lambda ps: Muon(ps, lr=0.1), lambda ps: optim.LAMB(ps, lr=0.1)], ids=["muon", "lamb"])
def test_learning_rate_schedules_compile_nothing_per_value(make_opt):
    """Muon (weight decay times lr after the orthogonalized step) and LAMB's graph step read the learning rate from a
    tensor too: changed every step, nothing is compiled after the first change."""
    p = Tensor(np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    assert _steps_under_a_schedule(make_opt([p]), p, 0.0321) == 0


def test_sgd_under_a_learning_rate_schedule_matches_numpy_and_compiles_nothing_per_value():
    """SGD (weight decay before momentum, lr after it) reads the learning rate from a tensor: each step's values are
    numpy's, and nothing is compiled after the first change."""
    start = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    p = Tensor(start, requires_grad=True)
    want, buf = start.astype(np.float64), np.zeros((4, 3))

    def check(lr: float) -> None:
        nonlocal want, buf
        buf = 0.9 * buf + 2 * want + 0.01 * want
        want = want - lr * buf
        np.testing.assert_allclose(p.numpy(), want, rtol=1e-5, atol=1e-6)

    assert _steps_under_a_schedule(SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01), p, 0.0321, check) == 0


@pytest.mark.parametrize("make_opt", [lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: Adam(ps, lr=0.1), lambda ps: optim.LAMB(ps, lr=0.1)],
                         ids=["sgd", "adam", "lamb"])
def test_a_tensor_set_as_the_learning_rate_is_used_as_it_is(make_opt):
    """`opt.lr = Tensor([x])` (tinygrad keeps lr as a tensor) steps as `opt.lr = x` does."""
    results = []
    for as_tensor in (False, True):
        p = Tensor(np.array([1.0, -2.0, 3.0], np.float32), requires_grad=True)
        opt = make_opt([p])
        opt.lr = Tensor([0.05]) if as_tensor else 0.05
        for _ in range(3):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step()
        results.append(p.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


def test_optimizer_state_is_float32_under_a_half_default_float():
    # tinygrad keeps optimizer state in OPTIM_DTYPE (float32): moments made at the half default overflowed, and an Adam
    # step of lr 1e10 gave inf (tinygrad's test_mixed_precision)
    x0, g0 = np.array([0.5, -1.5, 2.0], np.float32), np.array([0.25, -3.0, 0.125], np.float32)
    with Context(DEFAULT_FLOAT=dtypes.float16, TRAINING=1):
        x = Tensor(x0.copy(), requires_grad=True)
        opt = Adam([x], lr=1e10)
        assert all(s.dtype is dtypes.float32 for s in opt.state)
        opt.zero_grad()
        (x * Tensor(g0)).sum().backward()
        opt.step()
        got = x.numpy()
    m, v = 0.1 * g0.astype(np.float64), 0.001 * g0.astype(np.float64) ** 2
    want = x0 - 1e10 * (m / 0.1) / (np.sqrt(v / 0.001) + 1e-8)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_optim_dtype_names_the_state_dtype(monkeypatch):
    from uop_scheduler import ArgumentError

    monkeypatch.setenv("OPTIM_DTYPE", "float64")
    assert all(s.dtype is dtypes.float64 for s in SGD([Tensor([1.0, 2.0], requires_grad=True)], momentum=0.9).state)
    monkeypatch.setenv("OPTIM_DTYPE", "int8")
    with pytest.raises(ArgumentError, match="float dtype"):
        Adam([Tensor([1.0], requires_grad=True)])


def test_adam_steps_every_plain_parameter_in_one_kernel():
    """The in-place step of several parameters (of one device and dtype) is one kernel with a loop per parameter. In the
    first step one parameter is a computed value, which cannot be written in place: the others are stepped in place
    one by one and it takes the step graph (then it holds a buffer of its own and joins them). Values are the step
    graph's, bit for bit."""
    from uop_scheduler.realizer import counters

    results, counts = [], []
    for fused in (True, False):
        rng = np.random.default_rng(5)
        params = [Tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in ((7, 3), (5,), (2, 2, 2))]
        lazy = Tensor(rng.standard_normal((4,)).astype(np.float32)) * 1.0  # a computed value: no buffer of its own
        lazy.requires_grad = True
        opt = Adam([*params, lazy], lr=0.05)
        opt.fused_steps = fused
        for _ in range(3):
            opt.zero_grad()
            sum(((p * p).sin()).sum() for p in (*params, lazy)).backward()
            opt.step()
        Tensor.realize(*params)
        opt.zero_grad()
        sum(((p * p).sin()).sum() for p in (*params, lazy)).backward()
        Tensor.realize(*[p.grad for p in (*params, lazy)])
        before = counters.kernels
        opt.step()
        counts.append(counters.kernels - before)
        results.append([t.numpy() for t in (*params, lazy, *opt.m, *opt.v)])
    for a, b in zip(*results):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    # the bias corrections' two writes, then one kernel for the four parameters (the graph: three per parameter)
    assert counts == [3, 2 + 3 * 4], counts


@pytest.mark.parametrize("wd", [0.0, 0.1], ids=["adam", "adamw"])
def test_the_in_place_adam_kernel_divides_once_per_element(wd):
    """Per element the fused step takes one division and one square root: the bias corrections are reciprocals of
    scalars the loop does not change (three divisions per element made the step of an MLP's 200k parameters 103 us,
    one 55 us on AVX-512)."""
    from uop_scheduler.nn.optim import _adam_kernel
    from uopir import Ops
    from uopir.codegen.kernel import kernel_ranges

    kernel, _ = _adam_kernel((((12, 12, 12, 12), 12), ((5, 5, 5, 5), 5)), (1, 1, 1), dtypes.float32, 0.9, 0.999, 1e-8, wd)
    loops = set(kernel_ranges(kernel))
    per_element = {op: [n for n in kernel.toposort() if n.op is op and loops & set(n.toposort())] for op in (Ops.FDIV, Ops.SQRT)}
    assert len(per_element[Ops.FDIV]) == 2 and len(per_element[Ops.SQRT]) == 2, per_element
