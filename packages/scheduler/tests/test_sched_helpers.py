"""uop_scheduler.helpers: the small utilities of tinygrad's public helpers module."""

import os
import tempfile

from uop_scheduler.helpers import OSX, all_same, getenv, prod, temp


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
