"""Autodiff as tinygrad defines it: backward() fills .grad for every live floating-point tensor of the graph that has a
device value: a buffer or a shaped constant from full/ones/zeros, not a bare scalar nor an arange/linspace/eye index
constant (requires_grad=False opts out); gradients are per tensor even when two tensors hold equal values."""

import numpy as np
import pytest
from uop_scheduler import GradientError, Tensor, function, nn


def test_backward_fills_every_float_tensor_of_the_graph():
    x = Tensor([1.0, 2.0, 3.0])
    h = x * 2
    frozen = Tensor([1.0, 1.0, 1.0], requires_grad=False)
    (h * frozen).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 2])
    np.testing.assert_array_equal(h.grad.numpy(), [1, 1, 1])
    assert frozen.grad is None


def test_constants_and_integers_get_no_gradient():
    w = Tensor(1.0)
    i = Tensor([1, 2, 3])
    x = Tensor([1.0, 2.0, 3.0])
    (x * w + i.float()).sum().backward()
    assert w.grad is None and i.grad is None
    np.testing.assert_array_equal(x.grad.numpy(), [1, 1, 1])
    with pytest.raises(GradientError, match="dtype"):
        i.sum().gradient(i)
    with pytest.raises(RuntimeError, match="constant"):
        (w * 2.0).gradient(w)
    with pytest.raises(AssertionError, match="non-scalar"):  # tinygrad asserts here
        (x * x).gradient(x)


def test_shaped_constants_get_gradients_and_index_constants_do_not():
    # tinygrad: Tensor.ones/zeros/full are buffers of a device (gradients), arange/linspace/eye are device-less
    # constants (none); an overlapping setitem's gradient reaches both values written
    z = Tensor.zeros(6)
    x = Tensor.ones(4).contiguous()
    y = Tensor.ones(4) * 2
    z[:4] = x
    z[2:] = y
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 1, 0, 0])
    np.testing.assert_array_equal(y.grad.numpy(), [1, 1, 1, 1])

    ref = Tensor.arange(0.0, 20).reshape(4, 5)
    eye, line = Tensor.eye(5), Tensor.linspace(0, 1, 5)
    first = ref.clone()
    ((first[:, [1, 3]] @ eye[[1, 3]]) * line).sum().backward()
    assert ref.grad is None and eye.grad is None and line.grad is None
    # a clone of the reference takes its (absent) gradient with it: nothing left over from the first backward
    second = ref.clone()
    assert second.grad is None
    second[[0, 2]].sum().backward()
    want = np.zeros((4, 5), np.float32)
    want[[0, 2]] = 1
    np.testing.assert_array_equal(second.grad.numpy(), want)


def test_index_constants_take_gradients_when_asked():
    a = Tensor.arange(4.0, requires_grad=True)
    (a * a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0, 2, 4, 6])
    x, y = Tensor.eye(3), Tensor([[2.0, 0, -2.0]])
    dx, dy = y.matmul(x).sum().gradient(x, y)
    np.testing.assert_array_equal(dx.numpy(), np.array([[2.0, 2, 2], [0, 0, 0], [-2, -2, -2]]))
    np.testing.assert_array_equal(dy.numpy(), [[1, 1, 1]])


def test_an_unused_target_gets_zeros_and_backward_accumulates_in_place():
    x = Tensor([3.0])
    np.testing.assert_array_equal(Tensor([1.0]).sum().gradient(x)[0].numpy(), [0])
    (x * 2)[0].backward()
    first = x.grad
    (x * 3)[0].backward()
    assert x.grad is first
    np.testing.assert_allclose(x.grad.numpy(), [5.0])


def test_equal_valued_parameters_get_their_own_gradients():
    # two Tensor.ones(3) are one graph node (and realized together share a buffer): each got the sum of both gradients
    for realize in (False, True):
        a, b = Tensor.ones(3, requires_grad=True), Tensor.ones(3, requires_grad=True)
        if realize:
            Tensor.realize(a, b)
        (a * 2 + b * 3).sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), [2, 2, 2])
        np.testing.assert_array_equal(b.grad.numpy(), [3, 3, 3])


def test_two_layer_norms_of_one_width_train_apart():
    # their weights start equal (ones): with shared gradients they stayed equal forever
    Tensor.manual_seed(0)
    n1, n2 = nn.LayerNorm(4), nn.LayerNorm(4)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
    (n1(x) * 3 + n2(x * 2) * 5).sum().backward()
    np.testing.assert_allclose(n1.bias.grad.numpy(), [6, 6, 6, 6])
    np.testing.assert_allclose(n2.bias.grad.numpy(), [10, 10, 10, 10])


def test_requires_grad_can_be_switched_off_again():
    t = Tensor([1.0, 2.0])
    t.requires_grad = True
    t.requires_grad = False  # the registry compared tensors with ==: TensorTypeError from __bool__
    assert t.requires_grad is False


def test_the_gradient_of_a_copy_lands_on_the_source_device():
    t = Tensor([1.0, 2, 3]).realize()
    t.to("CPU:1").square().sum().backward()
    assert t.grad.device == t.device
    np.testing.assert_array_equal(t.grad.numpy(), [2, 4, 6])


def test_gradients_flow_through_writes():
    # a write's new value takes the written elements from the value and the rest from the old value
    z = Tensor.ones(8, 8)
    x = Tensor(np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32))
    z[:] = x
    (z * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((8, 8), 3))
    z = Tensor.zeros(6)
    a, b = Tensor([1.0, 1, 1, 1]), Tensor([2.0, 2, 2, 2])
    z[:4] = a
    z[2:] = b  # overwrites a's last two elements
    (z * Tensor([1.0, 2, 3, 4, 5, 6])).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1, 2, 0, 0])
    np.testing.assert_array_equal(b.grad.numpy(), [3, 4, 5, 6])
    z = Tensor([1.0, 2.0, 3.0, 4.0])
    w = Tensor([10.0, 20.0])
    z[:2] += w
    z.sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), np.ones(4))
    np.testing.assert_array_equal(w.grad.numpy(), np.ones(2))


def test_a_write_into_a_computed_value_keeps_its_graph():
    # the write realized the computed value first, so the gradient to what it was computed from was lost
    x = Tensor([1.0, 2.0, 3.0, 4.0])
    z = x * 2
    z[:2] = Tensor([10.0, 20.0])
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 2, 2])
    np.testing.assert_array_equal(z.numpy(), [10, 20, 6, 8])
    v = z[1:3]  # a view of the written value sees later writes
    z[2] = -1.0
    np.testing.assert_array_equal(v.numpy(), [20, -1])


def test_two_clones_of_one_value_are_two_tensors():
    # tinygrad's test_const_backward_pass: clones of one constant were one hash-consed node and shared a gradient
    w1, w2 = Tensor(3.5).clone(), Tensor(3.5).clone()
    w1.add(w2).backward()
    assert w1.grad.item() == 1.0 and w2.grad.item() == 1.0


# ---- gradients through values realized on the way (printed, say) ----

def test_backward_reaches_through_realized_intermediates():
    an, bn = np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0, 6.0], np.float32)
    a, b = Tensor(an, requires_grad=True), Tensor(bn, requires_grad=True)
    y = (a * b).contiguous()
    y.numpy()  # y is now a buffer; its gradient still reaches a and b
    z = (y + 1).realize()
    (z * y).sum().backward()
    # d/da sum((ab + 1) ab) = (2ab + 1) b
    np.testing.assert_allclose(a.grad.numpy(), (2 * an * bn + 1) * bn, rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), (2 * an * bn + 1) * an, rtol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), 2 * an * bn + 1, rtol=1e-6)


def test_contiguous_backward_is_the_value_and_passes_the_gradient():
    an, bn = np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0, 6.0], np.float32)
    a, b = Tensor(an, requires_grad=True), Tensor(bn, requires_grad=True)
    y = (a * b).contiguous_backward()
    np.testing.assert_array_equal(y.numpy(), an * bn)
    (y * y).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * an * bn * bn, rtol=1e-6)


def test_gradients_of_a_function_keep_their_shape_when_realized_with_their_inputs():
    @function
    def f(a, b):
        return a @ b

    an, bn = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), np.array([[5.0, 6.0], [7.0, 8.0]], np.float32)
    a, b = Tensor(an), Tensor(bn)
    (f(a, b).contiguous() * b).sum().backward()
    Tensor.realize(a, b, a.grad, b.grad)  # a.grad was a flat (4,) buffer after this
    assert a.grad.shape == (2, 2)
    np.testing.assert_allclose(a.grad.numpy(), bn @ bn.T)
    np.testing.assert_allclose(b.grad.numpy(), an.T @ bn + an @ bn)


def test_backward_after_reading_the_loss_without_requires_grad():
    # tinygrad: loss.item() then loss.backward() reaches every float tensor, no requires_grad needed
    rng = np.random.default_rng(3)
    wn, xn = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    w, x = Tensor(wn), Tensor(xn)
    loss = (x @ w.T).square().mean()
    np.testing.assert_allclose(loss.item(), np.square(xn @ wn.T).mean(), rtol=1e-5)
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * (xn @ wn.T).T @ xn / 8, rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), 2 * (xn @ wn.T) @ wn / 8, rtol=1e-5)
