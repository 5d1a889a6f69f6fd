"""The native ring writer (`amd.ring_code`) against a Python model of the same rules, on random rings and submits."""

import numpy as np
from hcq_runtime.amd.ring_code import native_ring_put
from hypothesis import given, settings
from hypothesis import strategies as st


def ring_model(ring: np.ndarray, rptr: int, wptr: int, words: np.ndarray, sdma: bool) -> tuple[int, int | None, list[int]]:
    """The oracle: put `words` on `ring` in place; return (write pointer after, the put's result or None when there was
    no room for the words, doorbell values stored in order). Pointers count dwords on PM4 rings, bytes on SDMA rings."""
    size, n, doorbells = len(ring), len(words), []
    if sdma:
        at = (wptr // 4) % size
        if at + n > size:  # a packet must not straddle the end: NOPs (zeros) to the end, published, then the front
            if (wptr - rptr) // 4 + (size - at) > size:
                return wptr, None, doorbells
            ring[at:] = 0
            wptr += 4 * (size - at)
            doorbells.append(wptr)
            at = 0
        if (wptr - rptr) // 4 + n > size:
            return wptr, None, doorbells
        ring[at:at + n] = words
        wptr += 4 * n
    else:  # PM4: packets may wrap around the end
        if wptr - rptr + n > size:
            return wptr, None, doorbells
        for i in range(n):
            ring[(wptr + i) % size] = words[i]
        wptr += n
    doorbells.append(wptr)
    return wptr, wptr, doorbells


@st.composite
def ring_states(draw):
    size = draw(st.integers(4, 64))
    sdma = draw(st.booleans())
    unit = 4 if sdma else 1
    used = draw(st.integers(0, size))  # dwords the engine has not read yet
    rptr = draw(st.integers(0, 5 * size)) * unit
    n = draw(st.integers(0, size))
    seed = draw(st.integers(0, 2**32 - 1))
    return size, sdma, rptr, rptr + used * unit, n, seed


@settings(max_examples=300, deadline=None)
@given(ring_states())
def test_native_ring_put_matches_the_model(state):
    size, sdma, rptr, wptr, n, seed = state
    rng = np.random.default_rng(seed)
    start = rng.integers(1, 2**32, size, dtype=np.uint32)
    words = rng.integers(1, 2**32, n, dtype=np.uint32)
    expected_ring = start.copy()
    expected_wptr, expected_result, doorbells = ring_model(expected_ring, rptr, wptr, words, sdma)

    ring = start.copy()
    pointers = np.array([rptr, wptr, 0], np.uint64)  # read pointer, write pointer, doorbell
    base = pointers.ctypes.data
    result = native_ring_put()(ring.ctypes.data, size, base, base + 8, base + 16, words.ctypes.data, n, int(sdma))
    np.testing.assert_array_equal(ring, expected_ring)
    assert int(pointers[1]) == expected_wptr
    assert result == (-1 if expected_result is None else expected_result)
    assert int(pointers[2]) == (doorbells[-1] if doorbells else 0)
