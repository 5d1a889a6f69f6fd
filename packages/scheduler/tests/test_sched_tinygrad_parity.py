"""Behaviour tinygrad's public tests pin down where numpy has no answer or raises: reductions of nothing, dtype errors
a user may catch as AttributeError, Python lists converted as C converts."""

import numpy as np
import pytest
from uop_scheduler import Tensor, dtypes


def test_reductions_of_nothing():
    assert Tensor([]).max().item() == -np.inf and Tensor([]).min().item() == np.inf
    assert Tensor([]).sum().item() == 0 and np.isnan(Tensor([]).mean().item())
    np.testing.assert_array_equal(Tensor.zeros(0, 3, dtype=dtypes.int32).max(0).numpy(), [np.iinfo(np.int32).min] * 3)
    assert Tensor.zeros(2, 0).max(1, keepdim=True).shape == (2, 1)


def test_bad_dtypes_are_attribute_errors_too():
    with pytest.raises(AttributeError, match="unknown dtype name 'typo'"):
        Tensor([3], dtype="typo")
    with pytest.raises(AttributeError, match="a dtype is a DType or its name"):
        Tensor([3], dtype=(dtypes.int,))


def test_python_lists_convert_as_c_does():
    np.testing.assert_array_equal(Tensor([-1, 0, 1, 300], dtype=dtypes.uint8).numpy(), np.array([-1, 0, 1, 300]).astype(np.uint8))
    np.testing.assert_array_equal(Tensor([True, False], dtype=dtypes.int32).numpy(), [1, 0])
    np.testing.assert_array_equal(Tensor([-3.5, 2.5], dtype=dtypes.int32).numpy(), [-3, 2])


def test_sequential_applies_layers_in_turn_and_trains():
    from uop_scheduler import nn
    layers = [nn.Conv2d(1, 2, 3), Tensor.relu, lambda x: x.flatten(1), nn.Linear(2 * 4 * 4, 3)]
    x = Tensor(np.random.default_rng(0).standard_normal((2, 1, 6, 6)).astype(np.float32))
    want = layers[3](layers[2](layers[1](layers[0](x))))
    np.testing.assert_allclose(x.sequential(layers).numpy(), want.numpy(), rtol=1e-6)
    x.sequential(layers).sum().backward()
    assert all(p.grad is not None for p in nn.state.get_parameters(layers))


def test_disjoint_writes_into_invalids():
    z = Tensor.invalids(10, dtype="int").realize()
    z[2:5] = 2
    z[6:7] = 3
    assert z[2:5].tolist() == [2, 2, 2] and z[6:7].tolist() == [3]


def test_none_is_an_empty_float_tensor():
    t = Tensor(None)
    assert t.shape == (0,) and t.dtype == dtypes.weakfloat  # weakly typed, as tinygrad's; read back as the default float
    np.testing.assert_array_equal(t.numpy(), np.array([], np.float32))


def test_max_shape_of_a_symbolic_tensor():
    from uopir import UOp

    t = Tensor.empty(2, UOp.variable("v", 1, 32), 4)
    assert t.max_shape == (2, 32, 4) and t.max_numel() == 2 * 32 * 4
    assert Tensor.empty(2, 3).max_shape == (2, 3) and Tensor.empty(2, 3).max_numel() == 6


def test_from_blob_reads_the_memory_as_it_is_when_computed():
    import array
    import ctypes

    from uop_scheduler.helpers import mv_address

    x = memoryview(bytearray(16)).cast("I")
    assert mv_address(x) == ctypes.addressof(ctypes.c_char.from_buffer(x))
    t = Tensor.from_blob(mv_address(x), (4,), dtype=dtypes.uint32, device="CPU")
    z = t + 1
    np.testing.assert_array_equal(z.numpy(), [1, 1, 1, 1])
    x[:] = array.array("I", [0, 1, 2, 3])
    z = t + 1  # the same graph as before: computed again, not the remembered result
    np.testing.assert_array_equal(z.numpy(), [1, 2, 3, 4])
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2, 3])
    t.assign(t * 2).realize()  # writes go to the caller's memory
    assert list(x) == [0, 2, 4, 6]


def test_is_param_is_whether_backward_fills_the_gradient():
    w, frozen = Tensor([1.0, 2.0]).clone(), Tensor([3.0, 4.0]).is_param_(False)
    assert w.is_param and not frozen.is_param and frozen.requires_grad is False
    (w * frozen).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3, 4])
    assert frozen.grad is None
