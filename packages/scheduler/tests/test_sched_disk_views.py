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


# ---- writes into views of a file: one contiguous range of its bytes, in order ----
def test_writes_into_contiguous_views_of_a_file(tmp_path):
    path = tmp_path / "m.bin"
    ref = np.arange(24, dtype=np.float32).reshape(4, 6)
    m = Tensor(ref.copy()).to(f"disk:{path}")  # not realized yet: the first write puts its bytes in the file first
    m[1] = Tensor.full((6,), -1.0)
    m[2:4] = Tensor(np.ones((2, 6), np.float32))
    m.reshape(24)[3:5].assign(Tensor([7.5, 8.5]))
    m[0, 1:3] = [4.25, 5.25]
    ref[1], ref[2:4], ref.reshape(24)[3:5], ref[0, 1:3] = -1.0, 1.0, [7.5, 8.5], [4.25, 5.25]
    np.testing.assert_array_equal(np.fromfile(path, np.float32).reshape(4, 6), ref)
    np.testing.assert_array_equal(m.numpy(), ref)


def test_writes_through_bitcast_views_of_a_file(tmp_path):
    raw = Tensor.empty(24, device=f"disk:{tmp_path / 'b.bin'}", dtype=dtypes.uint8)
    raw[0:8].bitcast(dtypes.int64).assign([123456789012])
    raw[8:24].bitcast(dtypes.float32).assign(Tensor([1.0, 2.0, 3.0, 4.0]))
    got = np.fromfile(tmp_path / "b.bin", np.uint8)
    assert got[:8].view(np.int64)[0] == 123456789012
    np.testing.assert_array_equal(got[8:].view(np.float32), [1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("view", [lambda t: t[:, 1:3], lambda t: t.T, lambda t: t.flip(1), lambda t: t.reshape(24)[::2]])
def test_writes_into_strided_views_of_a_file_are_refused_and_change_nothing(tmp_path, view):
    path = tmp_path / "s.bin"
    ref = np.arange(24, dtype=np.float32).reshape(4, 6)
    ref.tofile(path)
    t = Tensor.empty(4, 6, device=f"disk:{path}")
    v = view(t)
    with pytest.raises(RuntimeError, match="non-contiguous view"):
        v.assign(Tensor.zeros(*v.shape))
    np.testing.assert_array_equal(np.fromfile(path, np.float32).reshape(4, 6), ref)


def test_a_host_value_written_into_a_file_slice_does_not_touch_the_files_start(tmp_path):
    # the value of `t[2:4] = [7, 8]` was made as a new buffer on the file's device, which maps the file's first bytes:
    # the file became [7, 8, 2, 3] (and the write raised)
    path = tmp_path / "h.bin"
    t = Tensor(np.arange(4, dtype=np.int32)).to(f"disk:{path}").realize()
    t[2:4] = [7, 8]
    np.testing.assert_array_equal(np.fromfile(path, np.int32), [0, 1, 7, 8])


def test_a_tensor_of_a_path_is_the_files_bytes(tmp_path):
    import pathlib

    path = pathlib.Path(tmp_path / "p.bin")
    data = np.arange(100, dtype=np.uint8)
    data.tofile(path)
    t = Tensor(path)
    assert t.shape == (100,) and t.dtype is dtypes.uint8 and t.device.startswith("DISK:")
    np.testing.assert_array_equal(t.numpy(), data)
    np.testing.assert_array_equal(t[16:18].numpy(), data[16:18])
    c = Tensor(path, device="CPU")
    assert c.device == "CPU"
    np.testing.assert_array_equal(c.numpy(), data)
    np.testing.assert_array_equal(Tensor(path, dtype=dtypes.int16).numpy(), data.view(np.int16))
    (tmp_path / "empty.bin").touch()
    assert Tensor(pathlib.Path(tmp_path / "empty.bin")).shape == (0,)
    with pytest.raises(FileNotFoundError):
        Tensor(pathlib.Path(tmp_path / "missing.bin"))
    with pytest.raises(RuntimeError, match="not a whole number"):
        Tensor(path, dtype=dtypes.int64)
    with pytest.raises(RuntimeError, match="is a directory"):
        Tensor(pathlib.Path(tmp_path))
