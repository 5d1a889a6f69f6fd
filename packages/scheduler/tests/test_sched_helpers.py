"""uop_scheduler.helpers: the small utilities of tinygrad's public helpers module."""

import os
import tempfile

import pytest
from uop_scheduler.helpers import OSX, all_same, dedup, getenv, prod, temp


def test_getenv_converts_to_the_default_s_type(monkeypatch):
    monkeypatch.setenv("UOP_TEST_KNOB_A", "7")
    monkeypatch.setenv("UOP_TEST_KNOB_B", "x")
    assert getenv("UOP_TEST_KNOB_A") == 7
    assert getenv("UOP_TEST_KNOB_A", 0.5) == 7.0
    assert getenv("UOP_TEST_KNOB_B", "") == "x"
    assert getenv("UOP_TEST_KNOB_UNSET", 3) == 3


def test_small_helpers():
    assert temp("x.bin") == os.path.join(tempfile.gettempdir(), "x.bin")
    assert all_same([2, 2, 2]) and all_same([]) and not all_same([1, 2])
    assert dedup([3, 1, 3, 2, 1]) == [3, 1, 2] and dedup([]) == []
    assert prod((2, 3, 4)) == 24 and prod(()) == 1
    assert isinstance(OSX, bool)


def test_global_counters_count_kernels_since_reset():
    from uop_scheduler import Tensor
    from uop_scheduler.helpers import GlobalCounters
    a = Tensor([1.0, 2.0]).realize()
    GlobalCounters.reset()
    assert GlobalCounters.kernel_count == 0
    (a * 3 + 1).realize()
    assert GlobalCounters.kernel_count == 1 and GlobalCounters.time_sum_s > 0


@pytest.mark.parametrize("m, k, n", [(64, 32, 16), (7, 5, 3), (1, 128, 1)])
def test_global_ops_and_mem_of_kernels(m, k, n):
    # a matmul is m*n*k multiplies and as many accumulations; its buffers are the two operands and the output
    import numpy as np
    from uop_scheduler import Tensor, TinyJit
    from uop_scheduler.helpers import GlobalCounters

    a, b = Tensor(np.ones((m, k), np.float32)).realize(), Tensor(np.ones((k, n), np.float32)).realize()
    GlobalCounters.reset()
    (a @ b).realize()
    assert GlobalCounters.global_ops == 2 * m * n * k
    assert GlobalCounters.global_mem == 4 * (m * k + k * n + m * n)
    GlobalCounters.reset()
    (a + 1).realize()  # one add per element; the input and the output
    assert (GlobalCounters.global_ops, GlobalCounters.global_mem) == (m * k, 8 * m * k)
    step = TinyJit(lambda x: (x * 2).realize())
    for _ in range(3):
        step(a)
    GlobalCounters.reset()
    step(a)  # a replay's kernels count too
    assert (GlobalCounters.global_ops, GlobalCounters.global_mem) == (m * k, 8 * m * k)
