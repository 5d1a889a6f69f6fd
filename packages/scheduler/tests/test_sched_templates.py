"""Graph templates of composite ops (templates.py): a rebuilt graph is the graph the op builds as written, node for node,
for every signature; what a template cannot stand for runs as written."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Context, Tensor, TinyJit, Variable, dtypes
from uop_scheduler.errors import SchedulerError
from uop_scheduler.nn_ops import NNMixin
from uop_scheduler.templates import _RUN_AS_WRITTEN, _Template, templated

RNG = np.random.default_rng(0)


def _t(*shape: int, dtype=np.float32, requires_grad: bool | None = None) -> Tensor:
    return Tensor(RNG.standard_normal(shape).astype(dtype), requires_grad=requires_grad).realize()


@contextlib.contextmanager
def _templates_off():
    """Every templated op runs as written inside the block (UOP_TEMPLATES=0)."""
    os.environ["UOP_TEMPLATES"] = "0"
    try:
        yield
    finally:
        del os.environ["UOP_TEMPLATES"]


def _both(build):
    """`build()`'s tensor with templates (twice: traced, then rebuilt) and as written."""
    first, second = build(), build()
    with _templates_off():
        written = build()
    return first, second, written


@settings(max_examples=40, deadline=None)
@given(bs=st.integers(1, 3), cin=st.integers(1, 4), cout=st.integers(1, 4), h=st.integers(3, 9), w=st.integers(3, 9),
       k=st.integers(1, 3), stride=st.integers(1, 3), dilation=st.integers(1, 2), padding=st.integers(0, 2),
       groups=st.sampled_from([1, 2]), bias=st.booleans(), pool=st.sampled_from(["max", "avg", None]))
def test_a_rebuilt_convolution_is_the_graph_built_as_written(bs, cin, cout, h, w, k, stride, dilation, padding, groups, bias, pool):
    """Generated convolutions and poolings (odd sizes, strides, dilations, padding, groups): the templated op's graph is
    the same node as the op built as written, on the first call (traced) and later ones (rebuilt over new inputs)."""
    cin, cout = cin * groups, cout * groups
    if (h + 2 * padding - dilation * (k - 1)) < 1 or (w + 2 * padding - dilation * (k - 1)) < 1:
        return
    for _ in range(2):  # new input buffers each time: a template serves every buffer of its signature
        x, wt = _t(bs, cin, h, w), _t(cout, cin // groups, k, k)
        b = _t(cout) if bias else None

        def build(x=x, wt=wt, b=b):
            out = x.conv2d(wt, b, groups=groups, stride=stride, dilation=dilation, padding=padding)
            if pool == "max" and min(out.shape[2:]) >= 2:
                out = out.max_pool2d(2)
            elif pool == "avg" and min(out.shape[2:]) >= 2:
                out = out.avg_pool2d(2, stride=1)
            return out

        got = build()
        with _templates_off():
            written = build()
        assert got.uop is written.uop
        assert got.shape == written.shape and got.dtype == written.dtype and got.device == written.device


def test_rebuilt_ops_are_the_graphs_built_as_written():
    """Each templated op, with its arguments, gives the graph it builds as written."""
    x, y = _t(6, 10), Tensor(RNG.integers(0, 10, 6).astype(np.int32))
    w, b, w6 = _t(7, 10), _t(7), _t(6, 2, 3)
    cases = [
        lambda: x.linear(w.T, b), lambda: x.linear(w.T), lambda: x.softmax(), lambda: x.log_softmax(0),
        lambda: x.softmax(dtype=dtypes.float16), lambda: x.layernorm(), lambda: x.layernorm(eps=1e-3),
        lambda: x.sparse_categorical_crossentropy(y), lambda: x.sparse_categorical_crossentropy(y, label_smoothing=0.1),
        lambda: x.sparse_categorical_crossentropy(y, ignore_index=3, reduction="sum"),
        lambda: x.cross_entropy(x.softmax()), lambda: x.reshape(6, 1, 10, 1).max_pool2d((2, 1), padding=(1, 0)),
        lambda: x.logsumexp(1), lambda: x.logsumexp(0, keepdim=True), lambda: x.sigmoid().binary_crossentropy(x.sigmoid()),
        lambda: x.binary_crossentropy_logits(x.sigmoid(), pos_weight=b[:1].expand(10)),
        lambda: x.reshape(1, 6, 10).scaled_dot_product_attention(x.reshape(1, 6, 10), x.reshape(1, 6, 10)),
        lambda: x.reshape(1, 6, 10).scaled_dot_product_attention(x.reshape(1, 6, 10), x.reshape(1, 6, 10), attn_mask=x[:, :6] > 0),
        lambda: x.reshape(2, 3, 10).batchnorm(b[:3], None, b[:3], b[:3].abs()),
        lambda: x.reshape(1, 6, 10).conv_transpose2d(w6, stride=2), lambda: x.reshape(1, 6, 10).conv_transpose2d(w6, b[:2], padding=1),
    ]
    for case in cases:
        first, second, written = _both(case)
        assert first.uop is written.uop and second.uop is written.uop
    # (each op was a template, not run as written)
    for name in ("linear", "softmax", "log_softmax", "layernorm", "sparse_categorical_crossentropy", "cross_entropy", "max_pool2d",
                 "logsumexp", "binary_crossentropy", "binary_crossentropy_logits", "scaled_dot_product_attention", "batchnorm",
                 "conv_transpose2d"):
        assert any(isinstance(v, _Template) for v in getattr(Tensor, name).templates.values()), name


def test_rebuilt_ops_compute_the_values_numpy_computes():
    """The values and gradients of a templated convolution, pooling and loss, over two calls with new inputs."""
    for _ in range(2):
        xn, wn = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32), RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
        x, w = Tensor(xn), Tensor(wn, requires_grad=True)
        out = x.conv2d(w, padding=1)
        xp = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)))
        want = np.zeros((2, 4, 6, 6))
        for i in range(6):
            for j in range(6):
                want[:, :, i, j] = np.einsum("bchw,ochw->bo", xp[:, :, i:i + 3, j:j + 3], wn)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
        pooled = out.max_pool2d(2).numpy()
        np.testing.assert_allclose(pooled, want.reshape(2, 4, 3, 2, 3, 2).max(axis=(3, 5)), rtol=1e-5, atol=1e-5)
        out.sum().backward()
        want_gw = np.zeros_like(wn, dtype=np.float64)
        for i in range(6):
            for j in range(6):
                want_gw += xp[:, :, i:i + 3, j:j + 3].sum(axis=0)[None]
        np.testing.assert_allclose(w.grad.numpy(), want_gw, rtol=1e-5, atol=1e-4)


def test_the_signature_holds_training_default_dtypes_and_requires_grad():
    """A template is per signature: Tensor.training, the default float, and whether an input asks for a gradient."""
    x, w = _t(2, 3, 5, 5), _t(4, 3, 3, 3)
    cache = NNMixin.conv2d.templates
    before = len(cache)
    x.conv2d(w)
    with Context(TRAINING=1):
        x.conv2d(w)
    with Context(DEFAULT_FLOAT="half"):
        x.conv2d(w)
    x.conv2d(_t(4, 3, 3, 3, requires_grad=True))
    x.conv2d(w)  # (the first signature again)
    assert len(cache) - before == 4


def test_what_a_template_cannot_stand_for_runs_as_written():
    """A failing trace (its error comes from the op as written), a graph reading a buffer or a random number, a
    result that is a view of its input, and an unhashable or symbolic argument: the op runs as written."""
    calls = []

    def reads_a_buffer(x: Tensor) -> Tensor:
        calls.append(1)
        return x + Tensor([1.0, 2.0])

    def random_noise(x: Tensor) -> Tensor:
        calls.append(1)
        return x + Tensor.rand(*x.shape)

    def a_view(x: Tensor) -> Tensor:
        calls.append(1)
        return x.reshape(-1)

    def with_list(x: Tensor, shape: list) -> Tensor:
        calls.append(1)
        return x.reshape(shape) + 1

    x = _t(2)
    for fn in (reads_a_buffer, random_noise, a_view):
        op = templated(fn)
        calls.clear()
        op(x)
        op(x)
        assert list(op.templates.values()) == [_RUN_AS_WRITTEN]
        assert len(calls) == 3  # traced once, then as written every time
    # the trace gave back the random numbers it drew: the stream is the one the op as written draws
    op = templated(random_noise)
    Tensor.manual_seed(5)
    got = [op(x).numpy() for _ in range(2)]
    Tensor.manual_seed(5)
    want = [random_noise(x).numpy() for _ in range(2)]
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got[0], got[1])
    op = templated(with_list)
    np.testing.assert_allclose(op(x, [2, 1]).numpy(), x.numpy().reshape(2, 1) + 1)
    assert not op.templates
    v = Variable("n", 1, 4).bind(2)
    sym = _t(4)[:v]
    op = templated(lambda t: t * 2)
    np.testing.assert_allclose(op(sym).numpy(), sym.numpy() * 2)
    assert not op.templates
    with pytest.raises(SchedulerError, match="does not match the shape of the weights"):
        _t(1, 2, 4, 4).conv2d(_t(3, 5, 3, 3))


def test_a_trace_leaves_no_write_pending_and_a_writing_op_runs_as_written():
    """An op that writes into its input is not a template: its write happens once per call, as written."""

    def bump(x: Tensor) -> Tensor:
        x.assign(x + 1)
        return x * 2

    op = templated(bump)
    x = Tensor([1.0, 2.0]).realize()
    np.testing.assert_allclose(op(x).numpy(), [4.0, 6.0])
    np.testing.assert_allclose(x.numpy(), [2.0, 3.0])
    assert list(op.templates.values()) == [_RUN_AS_WRITTEN]


def test_a_jitted_step_with_templated_ops_trains_as_the_eager_one():
    """A small CNN's jitted Adam steps (templates traced outside and inside the capture) match the same steps run
    eagerly with templates off."""
    from uop_scheduler import nn

    def run(jit: bool) -> list[float]:
        rng = np.random.default_rng(3)
        c = Tensor(rng.standard_normal((4, 1, 3, 3)).astype(np.float32) * 0.3, requires_grad=True)
        lw = Tensor(rng.standard_normal((10, 36)).astype(np.float32) * 0.1, requires_grad=True)
        x = Tensor(rng.standard_normal((5, 1, 8, 8)).astype(np.float32)).realize()
        y = Tensor(rng.integers(0, 10, 5).astype(np.int32)).realize()
        opt = nn.optim.Adam([c, lw], lr=0.01)

        def step():
            Tensor.training = True
            opt.zero_grad()
            loss = x.conv2d(c).relu().max_pool2d(2).flatten(1).linear(lw.T).sparse_categorical_crossentropy(y)
            loss.backward()
            loss.realize(*opt.schedule_step())
            return loss

        fn = TinyJit(step) if jit else step
        return [float(fn().item()) for _ in range(5)]

    jitted = run(True)
    with _templates_off():
        eager = run(False)
    np.testing.assert_allclose(jitted, eager, rtol=1e-6)


_HEADS: dict[int, Tensor] = {}


def _head(n: int) -> Tensor:
    """A fixed (5, n) weight (no gradient), one per width."""
    if n not in _HEADS:
        _HEADS[n] = Tensor(np.linspace(-1, 1, 5 * n, dtype=np.float32).reshape(5, n)).realize()
    return _HEADS[n]


def _grads(build, params):
    """The gradient nodes `build()`'s backward gives `params`."""
    for p in params:
        p.grad = None
    build().backward()
    return [p.grad.uop for p in params]


@settings(max_examples=25, deadline=None)
@given(bs=st.integers(1, 3), cin=st.integers(1, 3), cout=st.integers(1, 3), h=st.integers(3, 8), k=st.integers(1, 3),
       stride=st.integers(1, 2), padding=st.integers(0, 1), pool=st.booleans(), bias=st.booleans(), x_grad=st.booleans())
def test_an_instances_gradients_are_the_gradients_built_as_written(bs, cin, cout, h, k, stride, padding, pool, bias, x_grad):
    """The gradients a templated convolution, pooling, linear layer and loss pass on (rebuilt from their traced
    gradient pass) are the nodes the gradient pass builds through the op as written, whichever inputs want one."""
    if h + 2 * padding < k:
        return
    x = _t(bs, cin, h, h, requires_grad=True if x_grad else None)
    w, b = _t(cout, cin, k, k, requires_grad=True), _t(cout, requires_grad=True)
    y = Tensor(RNG.integers(0, 5, bs).astype(np.int32))
    params = [p for p in (x, w, b) if (p is not x or x_grad) and (p is not b or bias)]

    def build():
        out = x.conv2d(w, b if bias else None, stride=stride, padding=padding).relu()
        if pool and min(out.shape[2:]) >= 2:
            out = out.max_pool2d(2)
        flat = out.flatten(1)
        return flat.linear(_head(flat.shape[1]).T).sparse_categorical_crossentropy(y)

    for _ in range(2):  # traced, then rebuilt
        got = _grads(build, params)
    with _templates_off():
        assert got == _grads(build, params)


def test_an_inner_node_that_is_a_target_or_read_elsewhere_gets_its_gradient():
    """A live tensor whose value is a node inside an instance (the product inside `linear`) takes its gradient, and a
    node inside an instance that something else reads passes on that gradient too: values as with templates off."""
    x, w, b = _t(4, 6), _t(3, 6, requires_grad=True), _t(3, requires_grad=True)

    def shared():
        return x.linear(w.T, b).square().sum() + (x @ w.T).sin().sum()

    def target():
        product = x @ w.T  # a live tensor: backward gives it a gradient
        loss = x.linear(w.T, b).square().sum()
        return loss, product

    def run() -> tuple[list[np.ndarray], np.ndarray]:
        for p in (w, b):
            p.grad = None
        shared().backward()
        got_shared = [w.grad.numpy(), b.grad.numpy()]
        loss, product = target()
        loss.backward()
        return got_shared, product.grad.numpy()

    with_templates = run()
    with _templates_off():
        got_shared, got_target = run()
    xn, wn, bn = x.numpy().astype(np.float64), w.numpy().astype(np.float64), b.numpy().astype(np.float64)
    lin = xn @ wn.T + bn
    np.testing.assert_allclose(with_templates[0][0], 2 * lin.T @ xn + np.cos(xn @ wn.T).T @ xn, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(with_templates[0][1], 2 * lin.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(with_templates[1], 2 * lin, rtol=1e-5, atol=1e-5)
    # (the shared product's two gradients are summed after its backward instead of before: rounding differs)
    np.testing.assert_allclose(with_templates[0][0], got_shared[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(with_templates[1], got_target, rtol=1e-6)


def test_the_instance_registry_does_not_keep_a_graph_alive():
    """An instance is remembered while its root node lives: dropping the result drops the entry."""
    import gc

    from uop_scheduler.templates import instances

    x, w = _t(2, 3, 6, 6), _t(4, 3, 3, 3)
    out = x.conv2d(w)
    assert out.uop in instances
    count = len(instances)
    del out
    gc.collect()
    assert len(instances) == count - 1


# the elementwise composites that are templates: name -> a call with its arguments (each takes one tensor, `other` a
# second of the same shape where the op is binary)
_ELEMENTWISE = {
    "tan": lambda x, o: x.tan(), "sigmoid": lambda x, o: x.sigmoid(), "tanh": lambda x, o: x.tanh(), "gelu": lambda x, o: x.gelu(),
    "gelu_erf": lambda x, o: x.gelu(approximate="none"), "quick_gelu": lambda x, o: x.quick_gelu(), "silu": lambda x, o: x.silu(),
    "softplus": lambda x, o: x.softplus(beta=2.0), "erf": lambda x, o: x.erf(), "abs": lambda x, o: x.abs(), "sign": lambda x, o: x.sign(),
    "clip": lambda x, o: x.clip(-0.5, 0.25), "clip_tensor": lambda x, o: x.clip(o, None), "round": lambda x, o: x.round(),
    "lerp": lambda x, o: x.lerp(o, 0.3), "elu": lambda x, o: x.elu(0.5), "celu": lambda x, o: x.celu(), "selu": lambda x, o: x.selu(),
    "hardsigmoid": lambda x, o: x.hardsigmoid(), "hardswish": lambda x, o: x.hardswish(), "mish": lambda x, o: x.mish(),
    "logsigmoid": lambda x, o: x.logsigmoid(), "softsign": lambda x, o: x.softsign(), "asin": lambda x, o: x.asin(),
    "acos": lambda x, o: x.acos(), "atan": lambda x, o: x.atan(), "sinh": lambda x, o: x.sinh(), "cosh": lambda x, o: x.cosh(),
    "asinh": lambda x, o: x.asinh(), "acosh": lambda x, o: x.acosh(), "atanh": lambda x, o: x.atanh(), "copysign": lambda x, o: x.copysign(o),
    "fmod": lambda x, o: x.fmod(o), "logaddexp": lambda x, o: x.logaddexp(o), "isfinite": lambda x, o: x.isfinite(),
    "isclose": lambda x, o: x.isclose(o, rtol=0.5),
}
_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int32": np.int32, "uint8": np.uint8, "bool": np.bool_}


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(_ELEMENTWISE)), dtype=st.sampled_from(sorted(_DTYPES)), shape=st.sampled_from([(), (3,), (2, 5)]),
       grad=st.booleans())
def test_elementwise_templates_are_the_graphs_built_as_written(name, dtype, shape, grad):
    """Each templated elementwise op, for float, int and bool inputs: the graph (and, for a float input that wants one,
    the gradient) is the node the op builds as written, traced and rebuilt over new inputs; an op that refuses a dtype
    as written refuses it with templates too."""
    op = _ELEMENTWISE[name]
    floating = dtype.startswith("float")
    needs_grad = grad and floating

    def inputs():
        values = RNG.standard_normal((2, *shape)) * 2
        x, o = (Tensor(v.astype(_DTYPES[dtype]), requires_grad=needs_grad or None).realize() for v in values)
        return x, o

    def run(x, o):
        try:
            out = op(x, o)
        except Exception as e:  # noqa: BLE001 (the as-written error is the expected one)
            return type(e)
        if not needs_grad:
            return out.uop, None
        x.grad = o.grad = None
        out.sum().backward()
        return out.uop, (None if x.grad is None else x.grad.uop, None if o.grad is None else o.grad.uop)

    for _ in range(2):  # traced, then rebuilt over new buffers
        x, o = inputs()
        got = run(x, o)
        with _templates_off():
            assert run(x, o) == got, name


def test_elementwise_composites_are_templates():
    """Each elementwise composite above is a template for a float input (not run as written)."""
    x, o = _t(4), _t(4)
    for name, op in _ELEMENTWISE.items():
        op(x, o)
        method = name.split("_erf")[0].split("_tensor")[0]
        assert any(isinstance(v, _Template) for v in getattr(Tensor, method).templates.values()), name


def _graph_and_grads(build, *params):
    """`build()`'s graph node, and for a float result the gradient nodes its sum's backward gives `params` (None each
    for a param without one)."""
    for p in params:
        p.grad = None
    out = build()
    if not dtypes.is_float(out.dtype):
        return out.uop, None
    out.sum().backward()
    return out.uop, tuple(p.grad.uop if p.grad is not None else None for p in params)


def test_indexing_sorting_and_scans_are_the_graphs_built_as_written():
    """Indexing by int tensors, gather, sort (rank count and merge network), topk's picks and the running ops
    (short, and in blocks) are templates: traced and rebuilt over new inputs, each graph is the node the op builds as
    written, and so are its gradients."""
    from uop_scheduler import reduce as reduce_module

    def cases(x, idx, idx2, v):
        return [
            lambda: x[idx], lambda: x[:, idx2], lambda: x[idx.reshape(4, 1), idx2.reshape(1, 3)], lambda: x[idx.reshape(2, 2)],
            lambda: x.gather(1, idx2.reshape(1, 3).expand(4, 3)),
            lambda: x.sort(1)[0], lambda: x.sort(0, descending=True)[1], lambda: x.topk(2, 1)[0], lambda: x._top_by_picks(3, 1, False)[1],
            lambda: x.cumsum(1), lambda: x.cumprod(0), lambda: x.cummax(1)[0], lambda: v.cumsum(0), lambda: v.sort(0)[0],
        ]

    old = reduce_module.SORT_NETWORK_COMPARISONS
    reduce_module.SORT_NETWORK_COMPARISONS = 200 * 200  # (v's 300 elements sort by the network)
    try:
        for _ in range(2):  # traced, then rebuilt over new inputs
            x, v = _t(4, 6, requires_grad=True), _t(300, requires_grad=True)
            idx = Tensor(RNG.integers(-4, 4, 4).astype(np.int32)).realize()
            idx2 = Tensor(RNG.integers(0, 6, 3).astype(np.int32)).realize()
            for i, build in enumerate(cases(x, idx, idx2, v)):
                got = _graph_and_grads(build, x, v)
                with _templates_off():
                    assert _graph_and_grads(build, x, v) == got, i
    finally:
        reduce_module.SORT_NETWORK_COMPARISONS = old
    for method in ("_index_at", "gather", "_sort_indices", "_pick_indices", "_cumulative"):
        assert any(isinstance(t, _Template) for t in getattr(Tensor, method).templates.values()), method


def test_reductions_shapes_and_int_division_are_the_graphs_built_as_written():
    """mean, var, std, min, argmax, normalize, triu/tril, einsum, roll, one_hot, the padding modes and int floor
    division and modulo are templates: graphs and gradients as built as written, traced and rebuilt over new inputs."""

    def cases(x, y, i, j):
        return [
            lambda: x.mean(1), lambda: x.var(0, correction=0), lambda: x.std(), lambda: x.min(1, keepdim=True), lambda: x.argmax(),
            lambda: x.argmin(0), lambda: x.normalize(dim=1), lambda: x.triu(1), lambda: x.tril(-1), lambda: Tensor.einsum("ij,kj->ik", x, y),
            lambda: x.roll(2, 1), lambda: x.roll((1, -1), (0, 1)), lambda: i.one_hot(5), lambda: x.pad((1, 2), mode="reflect"),
            lambda: x.pad(((1, 0), (2, -1)), mode="replicate"), lambda: x.pad((-1, 3, 1, 1), mode="circular"), lambda: i // 3,
            lambda: i % -4, lambda: i // j, lambda: i % j, lambda: 7 // j, lambda: x // 0.5, lambda: x % y,
        ]

    for _ in range(2):  # traced, then rebuilt over new inputs
        x, y = _t(4, 6, requires_grad=True), _t(4, 6, requires_grad=True)
        i = Tensor(RNG.integers(-9, 9, 6).astype(np.int32)).realize()
        j = Tensor(RNG.choice(np.array([-3, -1, 0, 2, 5], np.int32), 6)).realize()
        for k, build in enumerate(cases(x, y, i, j)):
            got = _graph_and_grads(build, x, y)
            with _templates_off():
                assert _graph_and_grads(build, x, y) == got, k
    for method in ("mean", "var", "std", "min", "argmax", "normalize", "_tri", "einsum", "roll", "_one_hot", "_pad_by_mode", "floordiv", "mod"):
        assert any(isinstance(t, _Template) for t in getattr(Tensor, method).templates.values()), method
