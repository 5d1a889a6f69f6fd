"""A matmul whose output columns no strip of the packed operand divides (999, 1000, 1023): `uopir.operand_packs` splits
the column axis into strips whose last one overlaps the one before, and the heuristic tiles the kernel over them. Here
the copy and the kernel are compiled for AVX-512 and AVX2 widths with clang and GCC, run one after the other on two
cores, and checked against numpy in float64 and against the kernel reading the operand in place."""

import numpy as np
import pytest
from kernel_asts import C_COMPILERS as COMPILERS
from kernel_asts import cpu_kernel
from kernel_asts import float_matmul as matmul
from uopir import CRenderer, UOp, operand_packs


def _run(cc: str, ast: UOp, vector_width: int, buffers: list[np.ndarray]) -> None:
    prog, parts, _ = cpu_kernel(cc, ast, None, 2, vector_width)
    prog([b.ctypes.data for b in buffers], [], n_cores=parts)


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("vector_width", [16, 8], ids=["avx512", "avx2"])
@pytest.mark.parametrize("n, m, k, transposed", [(300, 1000, 512, False), (128, 999, 256, False), (170, 1023, 300, False),
                                                 (256, 999, 128, True), (300, 77, 512, True)])
def test_a_matmul_over_strips_whose_last_one_overlaps(cc, vector_width, n, m, k, transposed):
    renderer = CRenderer(vector_width=vector_width)
    ast = matmul(n, m, k, transposed=transposed)
    kernel, packs = operand_packs(ast, renderer.packed_operand_bytes)
    assert len(packs) == 1 and m % (renderer.packed_operand_bytes // 4)
    rng = np.random.default_rng(n + m + k)
    a = rng.standard_normal((n, k), dtype=np.float32)
    b = rng.standard_normal((m, k) if transposed else (k, m), dtype=np.float32)
    copy = np.full(packs[0].size, np.nan, np.float32)
    _run(cc, packs[0].ast, vector_width, [copy, b])
    assert not np.isnan(copy).any()  # every element of every strip written (the last strip from real columns)
    out = np.full((n, m), np.nan, np.float32)
    _run(cc, kernel, vector_width, [out, a, copy])
    want = a.astype(np.float64) @ (b.T if transposed else b).astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    # what the kernel reading the operand in place computes (its tiles may sum in another order: to rounding)
    plain = np.full((n, m), np.nan, np.float32)
    _run(cc, ast, vector_width, [plain, a, b])
    np.testing.assert_allclose(out, plain, rtol=1e-5, atol=1e-5 * np.sqrt(k))
