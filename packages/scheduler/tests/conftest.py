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


@pytest.fixture(autouse=True)
def _training_flag_restored():
    """Each test starts with Tensor.training as the one before it found it: a test that trains sets it and may not reset
    it (a later test's dropout then dropped elements outside training)."""
    from uop_scheduler import Tensor

    before = Tensor.training
    yield
    Tensor.training = before
