"""Random programs, differentiated: chains of unary, binary, reduce, movement, scan, indexing, sort and matmul ops on
float64 tensors, built twice from one drawn recipe (as Tensor ops, and as numpy on the inputs), with a weighted sum as
the loss. The forward value must match numpy's, and every input's gradient from `backward()` the central differences
of the numpy program. numpy is the only oracle: each op's numpy form is written here, independently of the Tensor
code."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor

EPS = 1e-6


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# name -> (Tensor form, numpy form); inputs are kept away from the kinks (|x| and max(x, 0) at 0 are not
# differentiable, and a central difference across one is not a derivative)
UNARY = {
    "exp": (lambda t: (t * 0.5).exp(), lambda a: np.exp(a * 0.5)),
    "tanh": (lambda t: t.tanh(), np.tanh),
    "sigmoid": (lambda t: t.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0)),
    "sqrt": (lambda t: (t * t + 0.5).sqrt(), lambda a: np.sqrt(a * a + 0.5)),
    "log": (lambda t: (t * t + 0.5).log(), lambda a: np.log(a * a + 0.5)),
    "neg": (lambda t: -t, lambda a: -a),
    "square": (lambda t: t.square(), np.square),
    "sin": (lambda t: t.sin(), np.sin),
    "cos": (lambda t: t.cos(), np.cos),
    "reciprocal": (lambda t: (t * t + 0.5).reciprocal(), lambda a: 1 / (a * a + 0.5)),
    "softmax": (lambda t: t.softmax(-1), _softmax),
    "log_softmax": (lambda t: t.log_softmax(-1), lambda a: np.log(_softmax(a))),
    "gelu": (lambda t: t.gelu(), _gelu),
    "silu": (lambda t: t.silu(), lambda a: a / (1 + np.exp(-a))),
    "leaky": (lambda t: t.leaky_relu(0.1), lambda a: np.where(a > 0, a, 0.1 * a)),
    "clip": (lambda t: t.clip(-0.8, 0.9), lambda a: np.clip(a, -0.8, 0.9)),
}
BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "div": (lambda a, b: a / (b * b + 0.5), lambda a, b: a / (b * b + 0.5)),
    "maximum": (lambda a, b: a.maximum(b), np.maximum),
    "where": (lambda a, b: (a > b).where(a * 2, b), lambda a, b: np.where(a > b, a * 2, b)),
}


@st.composite
def programs(draw):
    n_inputs = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=3)))
    shapes = []
    for _ in range(n_inputs):
        s = list(shape)
        if len(s) > 1 and draw(st.booleans()):
            s[draw(st.integers(0, len(s) - 1))] = 1  # broadcast against the others
        shapes.append(tuple(s))
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["unary", "unary", "binary", "binary", "reduce", "move", "matmul", "scan", "index", "sort"]))
        steps.append((kind, draw(st.integers(0, 1 << 16))))
    return shapes, steps, draw(st.integers(0, 1 << 16))


def build(steps, inputs, lib: str):
    """The program on `inputs` (Tensors for lib "t", numpy arrays for "np"); its output."""
    values = list(inputs)
    for kind, seed in steps:
        rng = np.random.default_rng(seed)
        a = values[-1]
        shape = tuple(a.shape)
        if kind == "unary":
            name = sorted(UNARY)[rng.integers(len(UNARY))]
            if name in ("softmax", "log_softmax") and not shape:
                continue
            out = UNARY[name][0 if lib == "t" else 1](a)
        elif kind == "binary":
            name = sorted(BINARY)[rng.integers(len(BINARY))]
            b = values[rng.integers(len(values))]
            try:
                if len(np.broadcast_shapes(shape, tuple(b.shape))) > 3:
                    continue
            except ValueError:  # (shapes that do not broadcast: the step is left out)
                continue
            out = BINARY[name][0 if lib == "t" else 1](a, b)
        elif kind == "reduce":
            if not shape:
                continue
            axis = int(rng.integers(len(shape)))
            op = ("sum", "mean", "max")[rng.integers(3)]
            out = getattr(a, op)(axis) if lib == "t" else getattr(np, op)(a, axis=axis)
        elif kind == "move":
            if not shape:
                continue
            move = ("permute", "flip", "pad", "shrink", "expand", "reshape")[rng.integers(6)]
            if move == "permute":
                order = [int(i) for i in rng.permutation(len(shape))]
                out = a.permute(order) if lib == "t" else a.transpose(order)
            elif move == "flip":
                axis = int(rng.integers(len(shape)))
                out = a.flip(axis) if lib == "t" else np.flip(a, axis)
            elif move == "pad":
                pads = [(int(rng.integers(2)), int(rng.integers(2))) for _ in shape]
                out = a.pad(pads) if lib == "t" else np.pad(a, pads)
            elif move == "shrink":
                bounds = [(int(rng.integers(d)), d) for d in shape]
                out = a.shrink(bounds) if lib == "t" else a[tuple(slice(lo, hi) for lo, hi in bounds)]
            elif move == "expand":
                if len(shape) > 2:
                    continue
                out = a.unsqueeze(0).expand(2, *shape) if lib == "t" else np.broadcast_to(a[None], (2, *shape))
            else:
                out = a.reshape(-1) if lib == "t" else a.reshape(-1)
        elif kind == "scan":  # a running sum along an axis
            if not shape:
                continue
            axis = int(rng.integers(len(shape)))
            out = a.cumsum(axis) if lib == "t" else np.cumsum(a, axis)
        elif kind == "index":  # rows picked by an index tensor (repeats and negative indices included)
            if not shape:
                continue
            idx = rng.integers(-shape[0], shape[0], int(rng.integers(1, 5))).astype(np.int32)
            out = a[Tensor(idx)] if lib == "t" else a[idx]
        elif kind == "sort":  # the values sorted along the last axis (the gradient goes back through the permutation)
            if not shape:
                continue
            descending = bool(rng.integers(2))
            out = a.sort(-1, descending=descending)[0] if lib == "t" else (-np.sort(-a, -1) if descending else np.sort(a, -1))
        else:  # a matmul of the value (as a matrix) with itself transposed
            if len(shape) != 2:
                continue
            out = a @ (a.T if lib == "t" else a.T)
        values.append(out)
    return values[-1]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(programs())
def test_random_programs_differentiate_as_their_numpy_forms(program):
    shapes, steps, seed = program
    rng = np.random.default_rng(seed)
    # inputs away from 0 (the kinks of relu, leaky, maximum(x, 0)) and from each other (ties of max and maximum)
    xs = [(rng.uniform(0.2, 1.2, s) * rng.choice([-1, 1], s)).astype(np.float64) for s in shapes]
    want = build(steps, xs, "np")
    weights = rng.standard_normal(np.shape(want))
    tensors = [Tensor(x, requires_grad=True) for x in xs]
    out = build(steps, tensors, "t")
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-9, atol=1e-12)
    (out * Tensor(weights)).sum().backward()

    def loss(vals):
        return float((build(steps, vals, "np") * weights).sum())

    for k, x in enumerate(xs):
        numeric = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            up, down = [v.copy() for v in xs], [v.copy() for v in xs]
            up[k][idx] += EPS
            down[k][idx] -= EPS
            numeric[idx] = (loss(up) - loss(down)) / (2 * EPS)
        grad = tensors[k].grad
        got = np.zeros_like(x) if grad is None else grad.numpy()
        np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-6, err_msg=f"input {k} of {steps}")
