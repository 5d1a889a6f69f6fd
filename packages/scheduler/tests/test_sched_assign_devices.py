"""assign across devices as tinygrad allows it: into a DISK tensor from any device (written to the file at once), and a
value of constants alone into a tensor on any device; a failed constructor leaves nothing behind."""

import numpy as np
import pytest
from hcq_runtime import DeviceError
from uop_scheduler import Tensor, dtypes
from uop_scheduler.errors import TensorRuntimeError
from uopir import UOp


def test_assign_into_a_disk_tensor_writes_the_file(tmp_path):
    path = tmp_path / "weights.bin"
    t = Tensor.empty(5, device=f"disk:{path}")
    np.testing.assert_array_equal(t.assign(Tensor.ones(5)).numpy(), np.ones(5))
    src = Tensor(np.arange(5, dtype=np.float32)).realize()
    t.assign(src * 2)
    np.testing.assert_array_equal(np.fromfile(path, np.float32), np.arange(5) * 2)
    t[1:3].assign(Tensor.zeros(2))  # a contiguous view writes its range of the file
    np.testing.assert_array_equal(np.fromfile(path, np.float32), [0, 0, 0, 6, 8])
    with pytest.raises(TensorRuntimeError, match="non-contiguous view"):
        t[::2].assign(Tensor.zeros(3))


def test_a_value_of_constants_alone_assigns_to_any_device():
    s = Tensor.empty(4, device="CPU:1", dtype=dtypes.float)
    s.assign(Tensor(UOp.const(2.0, dtypes.float)))
    np.testing.assert_array_equal(s.numpy(), [2, 2, 2, 2])
    s.assign(Tensor.full((4,), 3.0))
    np.testing.assert_array_equal(s.numpy(), [3, 3, 3, 3])
    with pytest.raises(TensorRuntimeError, match="assign device mismatch"):
        s.assign(Tensor([1.0, 2, 3, 4]).realize())


def test_a_constructor_that_raised_leaves_no_half_made_tensor():
    # unittest keeps a failed test's traceback, and with it the half-built tensor: the next realize looked for its
    # graph (AttributeError: no attribute 'uop')
    try:
        Tensor([1.0, 2, 3], device="NO_SUCH_DEVICE")
    except DeviceError as e:
        kept = e  # noqa: F841  (the traceback keeps the frame, and the half-built tensor, alive)
    x = Tensor([1.0]).realize()
    y = x + 10
    x.assign(x * 2)
    Tensor.realize(x, y)
    assert x.tolist() == [2.0] and y.tolist() == [11.0]
