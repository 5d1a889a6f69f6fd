"""Views of a file's buffer (a DISK tensor) are read and computed with as tinygrad allows: a DISK device runs no
kernels, so the bytes a view can reach are copied to a compute device first, and only those bytes."""

import resource

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor, dtypes

DATA = np.random.default_rng(0).standard_normal(30).astype(np.float32)


@pytest.fixture
def disk(tmp_path):
    path = tmp_path / "values.bin"
    DATA.tofile(path)
    return Tensor.empty(30, device=f"disk:{path}")


def test_views_of_a_disk_tensor_read_as_numpy(disk):
    np.testing.assert_array_equal(disk[10:20].numpy(), DATA[10:20])
    np.testing.assert_array_equal(disk[10:20].to("CPU").numpy(), DATA[10:20])
    np.testing.assert_array_equal(disk.reshape(5, 6)[1:3].numpy(), DATA.reshape(5, 6)[1:3])
    np.testing.assert_array_equal(disk[::2].numpy(), DATA[::2])
    np.testing.assert_array_equal(disk.reshape(5, 6).T[2].numpy(), DATA.reshape(5, 6).T[2])
    np.testing.assert_array_equal(disk.bitcast(dtypes.int32)[2:4].numpy(), DATA.view(np.int32)[2:4])
    np.testing.assert_allclose((disk[3:5] + 1).numpy(), DATA[3:5] + 1)
    got = (disk[3:9].to("CPU") * Tensor(np.arange(6, dtype=np.float32))).sum().numpy()
    np.testing.assert_allclose(got, (DATA[3:9] * np.arange(6)).sum(), rtol=1e-6)
    # the file's own tensor still reads whole and stays on DISK
    assert disk[10:20].device.startswith("DISK")
    np.testing.assert_array_equal(disk.numpy(), DATA)


@settings(max_examples=40, deadline=None)
@given(lo=st.integers(0, 30), n=st.integers(0, 30), step=st.integers(1, 4), flip=st.booleans())
def test_any_slice_of_a_disk_tensor_matches_numpy(tmp_path_factory, lo, n, step, flip):
    path = tmp_path_factory.mktemp("disk") / "v.bin"
    DATA.tofile(path)
    t = Tensor.empty(30, device=f"disk:{path}")
    view, want = t[lo:lo + n:step], DATA[lo:lo + n:step]
    if flip:
        view, want = view.flip(0), want[::-1]
    np.testing.assert_array_equal(view.numpy(), want)


def test_a_slice_of_a_large_file_copies_only_its_bytes(tmp_path):
    path = tmp_path / "big.bin"
    n = 1 << 28  # 1 GiB of float32, a sparse file: copying it whole would take a GiB of memory
    with open(path, "wb") as f:
        f.truncate(n * 4)
        f.seek(n * 2)
        f.write(np.arange(4, dtype=np.float32).tobytes())
    t = Tensor.empty(n, device=f"disk:{path}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    np.testing.assert_array_equal((t[n // 2:n // 2 + 4] * 2).numpy(), np.arange(4) * 2)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB


@pytest.mark.parametrize("make,expected", [(lambda: Tensor.arange(12), np.arange(12)), (lambda: Tensor.full((5,), 2.5), np.full(5, 2.5)),
                                           (lambda: Tensor.arange(6) * 3 + 1, np.arange(6) * 3 + 1)])
def test_values_without_buffers_are_computed_before_a_file_copy(tmp_path, make, expected):
    # constants and index ranges belong to no device; a file runs no kernels, so they are computed on the default
    # device and copied (they were compiled for the file's device)
    on_disk = make().to(f"disk:{tmp_path / 'v.bin'}")
    np.testing.assert_array_equal(on_disk.numpy(), expected)
    np.testing.assert_array_equal(on_disk[1:4].to("CPU").numpy(), expected[1:4])


def test_random_values_copied_into_a_file(tmp_path):
    # random numbers are computed from an index range too: a slice read back from the file is the slice of the values
    # read back whole (the same bytes, through the file's copy path twice)
    on_disk = Tensor.randn(30).to(f"disk:{tmp_path / 'r.bin'}")
    whole = on_disk.numpy()
    assert whole.shape == (30,) and np.isfinite(whole).all() and whole.std() > 0.3
    np.testing.assert_array_equal(on_disk[10:20].to("CPU").numpy(), whole[10:20])
