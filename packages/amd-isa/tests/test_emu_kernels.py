"""Real kernels compiled by clang-15 and linked by ld.lld-15 for gfx1100 (RDNA3, wave32 and wave64) and for gfx90a /
gfx940 (CDNA, wave64), and by a newer LLVM (18+) for gfx1201 (RDNA4), run in the emulator and compared with numpy.
Skipped when the LLVM tools are absent."""

import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from amd_isa.emu import EmulatorError, Memory, run_kernel

KERNELS = Path(__file__).parent / "kernels"
CLANG, LLD = shutil.which("clang-15"), shutil.which("ld.lld-15")
pytestmark = pytest.mark.skipif(CLANG is None or LLD is None, reason="clang-15 and ld.lld-15 are needed to build the test kernels")


#: an LLVM that knows gfx12 (RDNA4)
GFX12_TOOLS = next(((c, lld) for v in ("21", "20", "19", "18") if (c := shutil.which(f"clang-{v}")) and (lld := shutil.which(f"ld.lld-{v}"))),
                   None)


CDNA_TARGETS = ("gfx90a", "gfx940")


def build(name: str, tmp_path_factory: pytest.TempPathFactory, extra: tuple[str, ...] = (), target: str = "gfx1100",
          tools: tuple[str, str] | None = None) -> bytes:
    clang, lld = tools or (CLANG, LLD)
    out = tmp_path_factory.mktemp(name)
    obj, lib = out / f"{name}.o", out / f"{name}.so"
    subprocess.run([clang, "-target", "amdgcn-amd-amdhsa", f"-mcpu={target}", *extra, "-nogpulib", "-O2", "-x", "cl", "-c",
                    str(KERNELS / f"{name}.cl"), "-o", str(obj)], check=True, capture_output=True)
    subprocess.run([lld, "-shared", str(obj), "-o", str(lib)], check=True, capture_output=True)
    return lib.read_bytes()


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    names = ("vector_add", "lds_reduce", "tiled_matmul", "wmma_matmul", "scratch_spill")
    built = {name: build(name, tmp_path_factory) for name in names}
    built["vector_add_w64"] = build("vector_add", tmp_path_factory, ("-Xclang", "-target-feature", "-Xclang", "+wavefrontsize64"))
    for target in CDNA_TARGETS:
        for name in ("vector_add", "lds_reduce", "tiled_matmul", "scratch_spill"):
            built[f"{name}_{target}"] = build(name, tmp_path_factory, target=target)
    built["mfma32_matmul_gfx90a"] = build("mfma32_matmul", tmp_path_factory, target="gfx90a")
    return built


@pytest.mark.parametrize(("kernel", "dtype", "k"), [("mfma32_f16", np.float16, 8), ("mfma32_f32", np.float32, 2)])
def test_cdna_mfma_32x32_builtin(compiled: dict[str, bytes], kernel: str, dtype, k: int) -> None:
    # clang places the operands by the builtin's register layout; the kernel reads and writes memory by the documented one,
    # so C == A @ B + C0 holds only if the emulator's 32x32 layout is the hardware's.
    rng = np.random.default_rng(11)
    a, b = rng.normal(size=(32, k)).astype(dtype), rng.normal(size=(k, 32)).astype(dtype)
    c0 = rng.normal(size=(32, 32)).astype(np.float32)
    c = c0.copy()
    mem = Memory()
    run = run_kernel(compiled["mfma32_matmul_gfx90a"], struct.pack("<QQQ", mem.map(a), mem.map(b), mem.map(c)), 64, 64, mem,
                     kernel=kernel, count_mix=True)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64) + c0, rtol=1e-5, atol=1e-5)
    assert any(name.startswith("v_mfma_f32_32x32") for name in run.mix)


@pytest.mark.parametrize("variant", ["vector_add", "vector_add_w64", "vector_add_gfx90a", "vector_add_gfx940"])
def test_vector_add_with_a_partial_last_workgroup(compiled: dict[str, bytes], variant: str) -> None:
    rng = np.random.default_rng(1)
    n = 1000
    a, b = rng.normal(size=1024).astype(np.float32), rng.normal(size=1024).astype(np.float32)
    c = np.full(1024, -7.0, np.float32)
    mem = Memory()
    run = run_kernel(compiled[variant], struct.pack("<QQQi", mem.map(a), mem.map(b), mem.map(c), n), 1024, 64, mem)
    np.testing.assert_array_equal(c[:n], a[:n] + b[:n])
    assert (c[n:] == -7.0).all(), "work-items past n must not store"
    assert run.workgroups == 16 and run.waves == (32 if variant == "vector_add" else 16)


def check_reduce_matmul_spill(kernels: dict[str, bytes]) -> None:
    """LDS reduction with barriers, a 2-D tiled matmul (workgroup ids x and y) and a scratch spill, against numpy."""
    rng = np.random.default_rng(5)
    mem = Memory()
    x = rng.normal(size=(2, 256)).astype(np.float32)
    out = np.zeros(2, np.float32)
    run_kernel(kernels["lds_reduce"], struct.pack("<QQ", mem.map(x), mem.map(out)), 512, 256, mem)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-5)
    n = 32
    a, b = rng.normal(size=(n, n)).astype(np.float32), rng.normal(size=(n, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    run_kernel(kernels["tiled_matmul"], struct.pack("<QQQi", mem.map(a), mem.map(b), mem.map(c), n), (n, n), (16, 16), mem)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    xi = (np.arange(128, dtype=np.int32) * 13) % 97 - 40
    res = np.zeros(128, np.int32)
    run_kernel(kernels["scratch_spill"], struct.pack("<QQi", mem.map(xi), mem.map(res), 3), 128, 64, mem)
    np.testing.assert_array_equal(res, xi * sum(range(1, 33)))


@pytest.mark.parametrize("target", CDNA_TARGETS)
def test_cdna_kernels(compiled: dict[str, bytes], target: str) -> None:
    check_reduce_matmul_spill({name: compiled[f"{name}_{target}"] for name in ("lds_reduce", "tiled_matmul", "scratch_spill")})


@pytest.mark.skipif(GFX12_TOOLS is None, reason="gfx1201 needs clang and ld.lld 18 or newer")
def test_rdna4_kernels_read_the_workgroup_id_from_architected_sgprs(tmp_path_factory: pytest.TempPathFactory) -> None:
    # gfx12 kernels take their workgroup ids from TTMP9 / TTMP7 instead of user SGPRs after the descriptor's
    kernels = {name: build(name, tmp_path_factory, target="gfx1201", tools=GFX12_TOOLS)
               for name in ("lds_reduce", "tiled_matmul", "scratch_spill")}
    check_reduce_matmul_spill(kernels)


def test_lds_reduction_with_barriers(compiled: dict[str, bytes]) -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 256)).astype(np.float32)
    out = np.zeros(3, np.float32)
    mem = Memory()
    run_kernel(compiled["lds_reduce"], struct.pack("<QQ", mem.map(x), mem.map(out)), 3 * 256, 256, mem)
    # The kernel adds pairs in a fixed tree order; compare with the same tree in numpy float32.
    tree = x.copy()
    stride = 128
    while stride:
        tree[:, :stride] = tree[:, :stride] + tree[:, stride:2 * stride]
        stride //= 2
    np.testing.assert_array_equal(out, tree[:, 0])


def test_tiled_matmul(compiled: dict[str, bytes]) -> None:
    rng = np.random.default_rng(3)
    n = 48
    a, b = rng.normal(size=(n, n)).astype(np.float32), rng.normal(size=(n, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    mem = Memory()
    run = run_kernel(compiled["tiled_matmul"], struct.pack("<QQQi", mem.map(a), mem.map(b), mem.map(c), n), (n, n), (16, 16), mem,
                     count_mix=True)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert run.mix["v_fmac_f32_e32"] == n * n * n // 32, "one fmac per multiply-add, 32 lanes per wave-instruction"


def test_wmma_matmul_builtin(compiled: dict[str, bytes]) -> None:
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(16, 16)).astype(np.float16), rng.normal(size=(16, 16)).astype(np.float16)
    c = np.zeros((16, 16), np.float32)
    mem = Memory()
    run = run_kernel(compiled["wmma_matmul"], struct.pack("<QQQ", mem.map(a), mem.map(b), mem.map(c)), 32, 32, mem, count_mix=True)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
    assert run.mix["v_wmma_f32_16x16x16_f16"] == 1


def test_scratch_survives_barrier_across_waves(compiled: dict[str, bytes]) -> None:
    x = (np.arange(256, dtype=np.int32) * 37) % 1001 - 500
    out = np.zeros(256, np.int32)
    mem = Memory()
    run_kernel(compiled["scratch_spill"], struct.pack("<QQi", mem.map(x), mem.map(out), 5), 256, 64, mem)
    np.testing.assert_array_equal(out, x * sum(range(1, 33)))


def test_bad_launch_shapes_are_reported(compiled: dict[str, bytes]) -> None:
    mem = Memory()
    with pytest.raises(EmulatorError, match="not a multiple"):
        run_kernel(compiled["vector_add"], bytes(28), 100, 64, mem)
    with pytest.raises(EmulatorError, match="no kernel 'nope'"):
        run_kernel(compiled["vector_add"], bytes(28), 64, 64, mem, kernel="nope")
