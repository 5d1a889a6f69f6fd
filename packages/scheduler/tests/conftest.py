"""Shared helpers for uop_scheduler tests: a seeded rng and a numpy comparison that checks dtype and shape too."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def assert_matches(t, expected, rtol=1e-5, atol=1e-6):
    """`t` (a Tensor) has numpy's shape and values for `expected`."""
    got = t.numpy()
    expected = np.asarray(expected)
    assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.fixture
def close():
    return assert_matches
