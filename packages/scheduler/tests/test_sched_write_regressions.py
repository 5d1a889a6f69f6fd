"""Programs the write fuzzer (tests/write_fuzz.py) found wrong, each reduced by hand, with numpy as the oracle: every
statement is run on numpy arrays too, views aliasing their base as in numpy."""

from __future__ import annotations

import numpy as np
import pytest
from uop_scheduler import Tensor


def f32(*values) -> np.ndarray:
    return np.array(values, np.float32)


def test_write_through_flipped_view_of_a_lazy_base_reads_the_old_values():
    # the base is computed, not yet in a buffer: the write realizes it, and its kernel then read elements it had
    # already written through the flip (the realized value and the buffer were not seen as one version)
    a = Tensor(f32(1, 2, 3, 4)) * 1
    v = a.flip(0)
    v += a
    want = f32(1, 2, 3, 4)
    np.flip(want, 0).__iadd__(want.copy())
    np.testing.assert_array_equal(a.numpy(), want)


def test_assign_of_a_flipped_self_through_a_reshape_of_a_lazy_value():
    t0 = Tensor(np.zeros((3, 4), np.float32))
    t1 = t0 + t0
    t3 = t1.reshape((3, 4))
    t3.assign(t3.flip(0) + 1)
    np.testing.assert_array_equal(t1.numpy(), np.ones((3, 4), np.float32))


def test_setitem_into_a_padded_value_writes_its_padding():
    # a.pad() is a value of its own: writing into it must not land in (or be cut to) a's buffer
    a = Tensor(f32(7, 5))
    p = a.pad(((1, 1),))
    p[0] = 3.0
    p[1] = 9.0
    np.testing.assert_array_equal(p.numpy(), f32(3, 9, 5, 0))
    np.testing.assert_array_equal(a.numpy(), f32(7, 5))
    m = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    q = m.pad(((2, 1), (1, 2)))
    q[[0, 4]] = 3.0
    want = np.pad(np.arange(6, dtype=np.float32).reshape(2, 3), ((2, 1), (1, 2)))
    want[[0, 4]] = 3.0
    np.testing.assert_array_equal(q.numpy(), want)


def test_zero_pad_is_a_copy_not_an_alias():
    # pad by zero builds the same graph node as its source: the tensor shares the buffer, and its first write must copy
    a = Tensor(f32(-3, 8, 5, -4))
    a += a
    p = a.pad(((0, 0),))
    p += p
    a += p
    p *= -3.0
    x = f32(-3, 8, 5, -4)
    x += x
    y = x.copy()
    y += y
    x += y
    y *= -3.0
    np.testing.assert_array_equal(a.numpy(), x)
    np.testing.assert_array_equal(p.numpy(), y)


def test_two_tensors_realized_to_one_buffer_write_separately():
    base = Tensor(f32(1, 2, 3))
    b, c = base * 2, base * 2  # one graph node: realized once, into one buffer
    Tensor.realize(b, c)
    b += 1
    c += 10
    np.testing.assert_array_equal(b.numpy(), f32(3, 5, 7))
    np.testing.assert_array_equal(c.numpy(), f32(12, 14, 16))


def test_a_value_that_is_a_view_of_a_buffer_keeps_the_old_value_across_a_write():
    # p is a padded view of a's buffer that realize leaves as a view: the write into a must wait for (or copy for) it
    for realize_first in (False, True):
        a = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).realize()
        p = a.pad(((1, 0), (0, 1)))
        if realize_first:
            p.realize()
        a += 1
        np.testing.assert_array_equal(p.numpy(), np.pad(np.arange(6, dtype=np.float32).reshape(2, 3), ((1, 0), (0, 1))))
        np.testing.assert_array_equal(a.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3) + 1)


def test_fancy_index_write_into_an_empty_view_writes_nothing():
    a = Tensor(np.arange(12, dtype=np.int32).reshape(3, 4)).realize()
    e = a[:, 4:1:3]  # shape (3, 0)
    e[[0, 2]] = 1
    np.testing.assert_array_equal(a.numpy(), np.arange(12, dtype=np.int32).reshape(3, 4))
    assert e.shape == (3, 0)


def _numpy_flip_assign(x: np.ndarray) -> np.ndarray:
    w = x.copy()
    np.flip(w, 0)[...] = w.copy()
    return w


def test_assign_of_self_into_a_flipped_view_of_a_buffer():
    # the value is the buffer itself (a leaf): its kernel read elements it had already written
    x = f32(1, 2, 3, 4)
    t = Tensor(x).realize()
    t.flip(0).assign(t)
    np.testing.assert_array_equal(t.numpy(), _numpy_flip_assign(x))


def test_assign_of_self_into_a_flipped_view_of_a_pending_write():
    # the value is the pending version (an AFTER): it could not be lowered inside the write's kernel
    t = Tensor(f32(1, 2, 3, 4)).realize()
    t[0:2] = 5.0
    t.flip(0).assign(t)
    np.testing.assert_array_equal(t.numpy(), _numpy_flip_assign(f32(5, 5, 3, 4)))


def test_write_through_detach_of_a_pending_version_reads_it_in_place():
    a = Tensor(f32(-1, 2, 7, -1, -1, 5)) * 1
    d = a.detach()
    r = a.reshape((1, 6))
    r *= 0.0
    d[:] = a + 1
    np.testing.assert_array_equal(a.numpy(), np.ones(6, np.float32))
    np.testing.assert_array_equal(d.numpy(), np.ones(6, np.float32))


def test_value_viewing_a_pending_version_keeps_it_when_a_later_write_lands_in_the_same_schedule():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = Tensor(x).realize()
    t[:, 0:0] = -1  # a pending (empty) write: t is now a written version
    p = t.pad(((1, 1), (0, 2)))  # a value over that version
    t[0, :] = 1
    Tensor.realize(p, t)
    np.testing.assert_array_equal(p.numpy(), np.pad(x, ((1, 1), (0, 2))))
    want = x.copy()
    want[0, :] = 1
    np.testing.assert_array_equal(t.numpy(), want)


def test_writes_ordered_whatever_order_they_are_planned_in():
    # a reader of the first version that the second write also reads: the ordering used to add the write-after-write
    # edge after it had already put the reader after the first write, a cycle ("cannot be ordered")
    x = np.array([0, 6, 0, -3, 1, 7], np.float32).reshape((2, 3))
    t0 = Tensor(x).contiguous()
    t1 = t0.maximum(t0)
    t0[1:1, 1:1] = 1.0  # an empty write: t0 is realized and gets a new version
    t0.assign(t1 * 2)
    t1.assign(t1.flip(1) + 1)
    n0, n1 = x.copy(), np.maximum(x, x)
    n0[...] = n1 * 2
    n1[...] = np.flip(n1, 1) + 1
    np.testing.assert_array_equal(t0.numpy(), n0)
    np.testing.assert_array_equal(t1.numpy(), n1)


def test_a_tensor_realized_into_a_buffer_another_tensor_realized_first_copies_before_writing():
    # t2 and t3 are one graph node; t3 realized it, t2's write realized into the same buffer and then wrote in place
    x = f32(8, -4, 7, 8, 4, 9)
    t0 = Tensor(x).contiguous()
    t2, t3 = t0 - t0, t0 - t0
    t3.realize()
    t2[1:2, None] = -1.0
    t3[3:2:-2] = 5.0
    n2, n3 = np.zeros(6, np.float32), np.zeros(6, np.float32)
    n2[1:2, None] = -1.0
    n3[3:2:-2] = 5.0
    np.testing.assert_array_equal(t2.numpy(), n2)
    np.testing.assert_array_equal(t3.numpy(), n3)


def test_in_place_add_of_a_value_reading_the_flipped_target():
    # the self-read check walked the value in an order that saw FLIP before its source: the flip went unnoticed
    x = f32(9, 7, 9, 1)
    t0 = Tensor(x).contiguous().realize()
    t4 = t0.flip(0) - t0
    t0 += t4
    np.testing.assert_array_equal(t0.numpy(), x + (np.flip(x, 0) - x))
    np.testing.assert_array_equal(t4.numpy(), np.flip(x, 0) - x)


def test_in_place_add_through_an_identity_permute_of_a_value_reading_the_flipped_base():
    x = f32(3, 4, 1, 8)
    t0 = Tensor(x)
    t2 = t0.permute((0,))
    t2 += t0.flip(0).maximum(t0.permute((0,)))
    np.testing.assert_array_equal(t0.numpy(), x + np.maximum(np.flip(x, 0), x))


def test_a_rebuilt_graph_node_does_not_read_a_buffer_overwritten_since_it_was_realized():
    # q's graph keeps w's node alive (through s's pending write); w's buffer is then overwritten in place with nothing
    # reading it, and a new graph built from the same constants found the node "realized" in that buffer
    s = Tensor.zeros(3).contiguous().realize()
    w = Tensor.full((3,), 2.0).contiguous()
    s.assign(w + 1)
    q = s * 1
    Tensor.realize(w)
    w += 1
    w.realize()
    z = Tensor.full((3,), 2.0).contiguous()
    np.testing.assert_array_equal(z.numpy(), np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(q.numpy(), np.full(3, 3.0, np.float32))
    np.testing.assert_array_equal(w.numpy(), np.full(3, 3.0, np.float32))


def test_a_realized_constant_is_not_read_from_its_buffer_on_another_device():
    # a graph of constants alone was remembered as realized in a CPU buffer; the same constant in a CPU:1 graph was
    # then loaded from that CPU buffer
    Tensor(0.0).realize()
    Tensor.zeros(4).realize()
    x = np.array([-1, 2, -3, 4], np.float32)
    b = Tensor(x, device="CPU:1")
    np.testing.assert_array_equal(b.relu().numpy(), np.maximum(x, 0))
    np.testing.assert_array_equal((b + Tensor.zeros(4, device="CPU:1")).numpy(), x)


def test_a_read_kept_across_an_assign_of_a_fresh_value_reads_the_old_value():
    # tinygrad raises "cycle" here (test_assign_diamond_cycle); numpy's answer is 2 + (3 - 1)
    a = Tensor.ones(4).contiguous().realize()
    times_a = a * 3
    a.assign(Tensor.full((4,), 2.0).contiguous())
    np.testing.assert_allclose((a + (times_a - 1)).numpy(), 4)
    b = Tensor.ones(4).contiguous().realize()
    times_b = b * 3
    b.assign(Tensor.full((4,), 2.0))
    np.testing.assert_allclose((b.contiguous() + times_b - 1).numpy(), 4)


def test_crossed_in_place_adds_read_the_versions_numpy_reads():
    # tinygrad raises "cycle" here (test_crossunder_assign)
    a = Tensor.full((4,), 2.0).contiguous().realize()
    b = Tensor.full((4,), 3.0).contiguous().realize()
    c = a + 9
    a += b
    b += c
    Tensor.realize(a, b)
    np.testing.assert_allclose(a.numpy(), 2 + 3)
    np.testing.assert_allclose(b.numpy(), 3 + 2 + 9)


def test_an_order_that_cannot_exist_is_a_tensor_write_error():
    from uop_scheduler import TensorWriteError
    from uop_scheduler.schedule import _toposort
    x, y = Tensor([1.0]).uop, Tensor([2.0]).uop
    with pytest.raises(TensorWriteError, match="cycle in the kernel order"):
        _toposort([x, y], {x: {y}, y: {x}}, lambda n: 0)
