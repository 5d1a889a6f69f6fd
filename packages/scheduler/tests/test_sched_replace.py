"""Tensor.replace: the tensor object stands for another tensor's value; nothing else changes (numpy: rebinding a name)."""

import numpy as np
import pytest
from uop_scheduler import Tensor
from uop_scheduler.errors import ShapeError, TensorTypeError


def test_replace_takes_the_value_dtype_and_device():
    a = Tensor([1.0, 2.0, 3.0]).realize()
    b = Tensor(np.array([7, 8, 9], np.int32))
    assert a.replace(b) is a
    np.testing.assert_array_equal(a.numpy(), [7, 8, 9])
    assert a.dtype == b.dtype and a.device == b.device


def test_a_write_after_replace_changes_only_the_written_tensor():
    a = Tensor.zeros(4).contiguous().realize()
    b = Tensor.ones(4).contiguous().realize()
    a.replace(b)
    a[1] = 5.0
    np.testing.assert_array_equal(a.numpy(), [1, 5, 1, 1])
    np.testing.assert_array_equal(b.numpy(), [1, 1, 1, 1])
    b += 1
    np.testing.assert_array_equal(a.numpy(), [1, 5, 1, 1])
    np.testing.assert_array_equal(b.numpy(), [2, 2, 2, 2])


def test_views_of_the_replaced_tensor_keep_their_values():
    a = Tensor(np.arange(6, dtype=np.float32)).contiguous().realize()
    v = a[2:5]
    a.replace(Tensor.zeros(6).contiguous())
    np.testing.assert_array_equal(v.numpy(), [2, 3, 4])
    v += 10
    np.testing.assert_array_equal(v.numpy(), [12, 13, 14])
    np.testing.assert_array_equal(a.numpy(), np.zeros(6))
    a += 1  # a write to the new value reaches no old view
    np.testing.assert_array_equal(v.numpy(), [12, 13, 14])


def test_a_replaced_view_no_longer_writes_its_old_base():
    base = Tensor(np.arange(4, dtype=np.float32)).contiguous().realize()
    v = base[1:3]
    v.replace(Tensor([-1.0, -2.0]))
    v += 1
    np.testing.assert_array_equal(v.numpy(), [0, -1])
    np.testing.assert_array_equal(base.numpy(), [0, 1, 2, 3])


def test_replace_checks_its_argument():
    a = Tensor.zeros(3)
    with pytest.raises(ShapeError, match=r"replace shape mismatch \(3,\) != \(4,\)"):
        a.replace(Tensor.zeros(4))
    assert a.replace(Tensor.zeros(4), allow_shape_mismatch=True).shape == (4,)
    with pytest.raises(TensorTypeError, match="replace takes a Tensor"):
        a.replace(np.zeros(4))
