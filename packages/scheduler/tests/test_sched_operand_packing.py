"""Operand packing on the CPU (`uopir.operand_packs`): a matmul's operand read across its rows is copied into strips
that are contiguous over the reduce loop, and the kernel reads the copy. Values against numpy for the shapes and views
that take the path (plain, batched, transposed, sliced, inside gradients) and the ones that do not; the number of
kernels tells which path ran."""

import numpy as np
import pytest
from hcq_runtime import counters
from hypothesis import example, given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor

RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def kernels_of(fn) -> tuple[np.ndarray, int]:
    counters.reset()
    out = fn().numpy()
    return out, counters.kernels


def close(ours: np.ndarray, ref: np.ndarray, k: int) -> None:
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def realized(x: np.ndarray) -> Tensor:
    return Tensor(x).realize()


@pytest.mark.parametrize("m, k, n", [(64, 512, 256), (96, 1024, 512), (64, 256, 1024), (64, 512, 512), (512, 512, 512), (64, 128, 256),
                                     (64, 64, 4096)])
def test_a_matmul_reads_its_right_operand_packed(m, k, n):
    # k == n: the packing kernel's ranges once coincided with the matmul's own (same size and axis number), and the
    # copy was made with a wrong index (356 off at 1024^3)
    a, b = rand(m, k), rand(k, n)
    ta, tb = realized(a), realized(b)
    out, kernels = kernels_of(lambda: ta @ tb)
    close(out, a.astype(np.float64) @ b, k)
    assert kernels == 2  # the packing copy, then the matmul


@pytest.mark.parametrize("m, k, n", [(64, 32, 1024), (64, 64, 784), (32, 512, 256), (64, 512, 24)])
def test_small_or_little_reused_operands_are_read_in_place(m, k, n):
    # a reduce loop short enough to stay in cache (or, under PACK_MIN_REDUCE, rows not a multiple of 1 KiB apart), too
    # few rows to pay for the copy, an output row shorter than a cache line's strip... each keeps the single kernel
    a, b = rand(m, k), rand(k, n)
    ta, tb = realized(a), realized(b)
    out, kernels = kernels_of(lambda: ta @ tb)
    close(out, a.astype(np.float64) @ b, k)
    assert kernels == 1


def test_batched_transposed_and_sliced_operands():
    a, b = rand(3, 64, 512), rand(3, 512, 320)
    ta, tb = realized(a), realized(b)
    out, kernels = kernels_of(lambda: ta @ tb[:, :, 16:272])  # a column window: the copy holds only what is read
    close(out, a.astype(np.float64) @ b[:, :, 16:272], 512)
    assert kernels == 2
    # a transposed left operand (x.T @ g, a weight gradient) is strided along the reduce loop too, but it is not the
    # vectorized one: only the right operand is packed
    x, g = rand(512, 64), rand(512, 256)
    tx, tg = realized(x), realized(g)
    out, kernels = kernels_of(lambda: tx.T @ tg)
    close(out, x.T.astype(np.float64) @ g, 512)
    assert kernels == 2


def test_an_operand_read_transposed_is_copied_into_strips_when_enough_rows_reuse_it():
    # q @ k^T: k is contiguous along the reduce axis; with 256 query rows the transposing copy pays for itself
    q, k = rand(8, 256, 64), rand(8, 256, 64)
    tq, tk = realized(q), realized(k)
    out, kernels = kernels_of(lambda: tq @ tk.transpose(-1, -2))
    close(out, q.astype(np.float64) @ np.swapaxes(k, -1, -2), 64)
    assert kernels == 2
    # a 64-row batch times a transposed weight reads it in place, with vector lanes along the reduce axis
    x, w = rand(64, 784), rand(256, 784)
    tx, tw = realized(x), realized(w)
    out, kernels = kernels_of(lambda: tx @ tw.T)
    close(out, x.astype(np.float64) @ w.T, 784)
    assert kernels == 1


def test_gradients_through_packed_matmuls():
    x, w = rand(64, 512), rand(512, 384)
    tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
    loss = (tx @ tw).square().sum()
    loss.backward()
    y = x.astype(np.float64) @ w
    close(tx.grad.numpy(), 2 * y @ w.T, 384)
    close(tw.grad.numpy(), x.T @ (2 * y), 64)


def test_a_write_into_the_operand_after_the_matmul_is_not_seen_by_it():
    # the copy is a new version read by the matmul alone: the write still has to wait for the copy, not only the matmul
    a, b = rand(64, 512), rand(512, 256)
    ta, tb = realized(a), realized(b)
    out = ta @ tb
    tb.assign(tb * 2)
    close(out.numpy(), a.astype(np.float64) @ b, 512)
    close(tb.numpy(), b * 2, 1)


@settings(max_examples=12, deadline=None)
@given(m=st.sampled_from([16, 64, 65, 256]), k=st.sampled_from([64, 256, 300, 512]), n=st.sampled_from([32, 48, 256, 272]),
       batch=st.sampled_from([(), (2,)]), transpose_b=st.booleans())
@example(m=64, k=256, n=256, batch=(), transpose_b=False)
def test_matmuls_equal_numpy(m, k, n, batch, transpose_b):
    a = rand(*batch, m, k)
    b = rand(*batch, n, k) if transpose_b else rand(*batch, k, n)
    ta, tb = realized(a), realized(b)
    tb_view = tb.transpose(-1, -2) if transpose_b else tb
    b_ref = np.swapaxes(b, -1, -2) if transpose_b else b
    close((ta @ tb_view).numpy(), a.astype(np.float64) @ b_ref, k)


@pytest.mark.parametrize("m, k, n, transposed, batch", [(128, 1024, 1000, False, 1), (300, 512, 1023, False, 1), (197, 256, 999, False, 1),
                                                        (256, 300, 999, True, 1), (300, 512, 77, True, 1), (128, 512, 300, False, 3),
                                                        (170, 256, 1030, False, 2)])
def test_operands_whose_columns_no_strip_divides_are_packed_too(m, k, n, transposed, batch):
    # 1000 or 1023 output columns (a 1000-class head, an odd width): the last strip of the copy overlaps the one before,
    # as the kernel's last column tile does; before, the operand was read in place (1023x1024 @ 1024x1023 9.9 -> 7.3 ms)
    a = rand(batch, m, k)
    b = rand(batch, n, k) if transposed else rand(batch, k, n)
    ta, tb = realized(a), realized(b)
    out, kernels = kernels_of(lambda: ta @ (tb.transpose(-1, -2) if transposed else tb))
    want = a.astype(np.float64) @ (np.swapaxes(b, -1, -2) if transposed else b)
    close(out, want, k)
    assert kernels == 2  # the packing copy, then the matmul


def test_few_rows_read_an_operand_no_strip_divides_in_place():
    # its rows are not a power of two apart (no cache aliasing): 64 rows do not pay for the copy (0.77 ms in place, 1.05
    # with it, for 64x1024 @ 1024x1000)
    a, b = rand(64, 1024), rand(1024, 1000)
    out, kernels = kernels_of(lambda: realized(a) @ realized(b))
    close(out, a.astype(np.float64) @ b, 1024)
    assert kernels == 1


def test_operands_split_in_strips_get_gradients_and_epilogues():
    # a bias added and an activation applied in the matmul's kernel read the clamped columns too
    x, w, bias = rand(128, 512), rand(512, 1000) * 0.1, rand(1000)
    tx, tw, tb = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True), Tensor(bias, requires_grad=True)
    y = (tx @ tw + tb).relu()
    y.square().sum().backward()
    pre = x.astype(np.float64) @ w + bias
    want = np.maximum(pre, 0)
    close(y.numpy(), want, 512)
    g = 2 * want * (pre > 0)
    np.testing.assert_allclose(tw.grad.numpy(), x.T.astype(np.float64) @ g, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(tx.grad.numpy(), g @ w.T.astype(np.float64), rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(tb.grad.numpy(), g.sum(0), rtol=1e-3, atol=1e-2)


def test_a_matmul_adding_into_its_output_keeps_its_operand_in_place_when_no_strip_divides_it():
    # C += A @ B: the overlapped columns would add A @ B twice, so that operand is not split into strips
    a, b, c = rand(128, 1024), rand(1024, 1000), rand(128, 1000)
    tc = realized(c.copy())
    tc += realized(a) @ realized(b)
    close(tc.numpy(), c + a.astype(np.float64) @ b, 1024)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(m=st.sampled_from([64, 100, 257]), n=st.integers(17, 300), k=st.sampled_from([256, 320]))
def test_any_column_count_against_numpy(m, n, k):
    a, b = rand(m, k), rand(k, n)
    close((realized(a) @ realized(b)).numpy(), a.astype(np.float64) @ b, k)
