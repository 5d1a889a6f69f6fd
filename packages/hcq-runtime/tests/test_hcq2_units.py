"""The generic hcq2 pieces against independent oracles: dependency tracking against a brute-force overlap check, and
the runtime pool's wrapping over a fake device."""

import numpy as np
import pytest
from hcq_runtime.hcq2 import CommandBuffer, DepsTracker, HCQError, PatchKind, RuntimePool, runtime
from hypothesis import given, settings
from hypothesis import strategies as st

ACCESS = st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(1, 20), st.booleans(), st.integers(0, 2))


@settings(max_examples=120, derandomize=True)
@given(st.lists(ACCESS, min_size=1, max_size=25))
def test_deps_wait_for_the_latest_conflict_on_each_other_queue(accesses):
    tracker = DepsTracker()
    for point, (buffer, start, length, write, queue) in enumerate(accesses):
        expected: dict[int, int] = {}
        for prior_point, (b, s, n, w, q) in enumerate(accesses[:point]):
            if b == buffer and q != queue and (w or write) and s < start + length and start < s + n:
                expected[q] = prior_point
        assert tracker.access(buffer, start, start + length, write, queue, point) == expected


class FakeDevice:
    """The memory edge of a queue device: numpy memory at a fake address, and a count of synchronizations."""

    name, rt_nbytes = "FAKE", 4096

    def __init__(self):
        self.synchronized = 0

    def alloc_memory(self, nbytes):
        class Memory:
            va, size, view = 0x10_0000, nbytes, np.zeros(nbytes, np.uint8)
        return Memory()

    def synchronize(self):
        self.synchronized += 1


def test_runtime_pool_carves_aligned_pieces_and_wraps_after_a_synchronize():
    dev = FakeDevice()
    pool = RuntimePool(dev)
    pieces = [pool.carve(1000) for _ in range(4)]
    assert [p.va - 0x10_0000 for p in pieces] == [0, 1024, 2048, 3072] and dev.synchronized == 0
    wrapped = pool.carve(10)
    assert wrapped.va == 0x10_0000 and dev.synchronized == 1 and pool.wraps == 1
    pool.size = 1024  # a shrunken pool wraps sooner
    assert pool.carve(700).va == 0x10_0000 + 256 and pool.carve(700).va == 0x10_0000 and pool.wraps == 2
    with pytest.raises(HCQError, match="exceed the runtime pool"):
        pool.carve(2000)


def test_patch_kinds_split_link_and_runtime_names():
    cmd = CommandBuffer()
    cmd.emit([runtime("input:0", 8), 7])
    assert cmd.names(PatchKind.RUNTIME) == {"input:0"} and cmd.names(PatchKind.LINK) == set()
