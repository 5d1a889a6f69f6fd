import numpy as np
import pytest


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path_factory, monkeypatch):
    """Every test compiles into its session's own cache, never the user's."""
    monkeypatch.setenv("UOP_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "uop-cache"))


class Float32:
    """A dtype stand-in with the two attributes Buffer uses (the real ones come from uopir)."""

    itemsize, fmt, name = 4, "f", "float"


class BFloat16:
    itemsize, fmt, name = 2, None, "bfloat16"


@pytest.fixture
def f32():
    return Float32()


@pytest.fixture
def bf16():
    return BFloat16()


@pytest.fixture
def rng():
    return np.random.default_rng(0)
