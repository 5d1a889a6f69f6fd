"""The integer-dot kernels (`llm_bench.qdot`): 8-bit activations times Q4_0/Q4_1/Q8_0 blocks.

The oracle is exact integer arithmetic: each block's dot of weight and activation integers in int64, then the block
scales applied in float64. Each instruction-set path of the one C source (AVX-512 VNNI, AVX2 maddubs, plain C) is
compiled with its own -march and checked, so a machine tests the paths it can run."""

from __future__ import annotations

import platform
import subprocess

import numpy as np
import pytest
from hcq_runtime import CCompiler, CPUDevice
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_bench.dequant import dequantize
from llm_bench.errors import ModelError
from llm_bench.ggml_types import BLOCK_LAYOUTS, GGMLType
from llm_bench.gguf_reader import read_gguf
from llm_bench.gguf_writer import GGUFWriter
from llm_bench.qdot import (
    QDOT_TYPES,
    embed_row,
    f16_kernel_source,
    f16_matmul,
    kernel_source,
    q8_roundtrip,
    q8_roundtrip_np,
    qdot_matmul,
    quantize_activations,
    quantize_activations_np,
    repack_rows,
)
from llm_bench.tensor_weights import QUANT_ROWS_PER_MATMUL, Linear, upload_matrices
from uop_scheduler import Device, Tensor

TYPES = sorted(QDOT_TYPES, key=lambda t: t.name)


def random_weight(rng: np.random.Generator, ggml_type: GGMLType, rows: int, k: int) -> np.ndarray:
    """Random blocks, (rows, k/32 * block_bytes) uint8, with finite float16 scales (and minimums)."""
    layout = BLOCK_LAYOUTS[ggml_type]
    raw = rng.integers(0, 256, (rows, k // 32, layout.block_bytes), dtype=np.uint8)
    halves = (0, 2) if ggml_type is GGMLType.Q4_1 else (0,)
    for off in halves:
        raw[..., off : off + 2] = rng.uniform(-0.1, 0.1, (rows, k // 32)).astype("<f2").view(np.uint8).reshape(rows, k // 32, 2)
    return raw.reshape(rows, -1)


def oracle(ggml_type: GGMLType, raw: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x @ W.T in float64 from exact integer block dots, the sum of the products' magnitudes for a tolerance)."""
    q, d, sums = quantize_activations_np(x)
    rows, nb = raw.shape[0], q.shape[1] // 32
    blocks = raw.reshape(rows, nb, -1)
    scale = blocks[..., 0:2].copy().view("<f2")[..., 0].astype(np.float64)
    if ggml_type is GGMLType.Q8_0:
        w = blocks[..., 2:34].view(np.int8).astype(np.int64)
    else:
        start = 4 if ggml_type is GGMLType.Q4_1 else 2
        nibbles = blocks[..., start : start + 16].astype(np.int64)
        w = np.concatenate([nibbles & 15, nibbles >> 4], axis=-1) - (8 if ggml_type is GGMLType.Q4_0 else 0)
    qb = q.reshape(q.shape[0], nb, 32).astype(np.int64)
    dots = np.einsum("rbj,tbj->trb", w, qb)  # exact
    block_scale = scale[None] * d[:, None, :].astype(np.float64)
    terms = dots * block_scale
    # the kernel may sum a block's products in float partial sums: bound its rounding by the products' magnitudes
    magnitude = np.einsum("rbj,tbj->trb", np.abs(w), np.abs(qb)) * np.abs(block_scale)
    if ggml_type is GGMLType.Q4_1:
        minimum = blocks[..., 2:4].copy().view("<f2")[..., 0].astype(np.float64)
        terms = terms + minimum[None] * d[:, None, :] * sums[:, None, :]
        magnitude = magnitude + np.abs(minimum[None] * d[:, None, :] * sums[:, None, :])
    return terms.sum(-1), magnitude.sum(-1)


def test_activation_quantization_matches_numpy_bit_for_bit():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 96)).astype(np.float32) * 5
    x[0, :32] = 0  # an all-zero block: d = 0, q = 0
    x[1, 32:64] = np.arange(32) - 15.5  # halves of a quantum: ties round to even
    x[2, 64] = 1e30  # one huge value in a block
    acts = quantize_activations(Tensor(x))
    q, d, sums = quantize_activations_np(x)
    np.testing.assert_array_equal(acts.q.numpy(), q)
    np.testing.assert_array_equal(acts.d.numpy(), d)
    np.testing.assert_array_equal(acts.sums.numpy(), sums)
    assert (q[0, :32] == 0).all() and d[0, 0] == 0 and np.abs(q).max() == 127
    np.testing.assert_array_equal(q8_roundtrip(Tensor(x)).numpy(), q8_roundtrip_np(x))


@pytest.mark.parametrize("ggml_type", TYPES, ids=lambda t: t.name)
@settings(max_examples=10, deadline=None, derandomize=True)
@given(rows=st.integers(1, 70), nb=st.integers(1, 21), tokens=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_kernel_matches_the_integer_oracle(ggml_type, rows, nb, tokens, seed):
    rng = np.random.default_rng(seed)
    k = nb * 32
    raw = random_weight(rng, ggml_type, rows, k)
    x = (rng.standard_normal((tokens, k)) * rng.uniform(0.01, 10)).astype(np.float32)
    got = qdot_matmul(Tensor(x), Tensor(repack_rows(raw, ggml_type)), ggml_type, Device["CPU"].n_cores).numpy()
    want, magnitude = oracle(ggml_type, raw, x)
    assert np.all(np.abs(got - want) <= 1e-5 * magnitude + 1e-30)
    # and the value the numpy reference computes for it: the rounded activations times the dequantized matrix
    ref = q8_roundtrip_np(x) @ dequantize(raw, ggml_type, (rows, k)).T
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * magnitude.max())


def _compiles(flags: tuple[str, ...]) -> bool:
    try:
        cc = CCompiler(flags)
    except Exception:
        return False
    probe = subprocess.run([cc.cc, *flags, "-x", "c", "-c", "-", "-o", "/dev/null"], input=b"int x;", capture_output=True)
    return probe.returncode == 0


def _runs(flags: tuple[str, ...]) -> bool:
    """Whether this CPU runs code built with `flags` (the -march's features are all present)."""
    needed = {"-march=x86-64-v3": ("avx2", "fma", "f16c"), "-march=x86-64-v4": ("avx512f", "avx512bw", "avx512vl")}
    extra = {"-mavx512vnni": ("avx512_vnni",)}
    try:
        cpu_flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    features = [f for flag in flags for f in needed.get(flag, ()) + extra.get(flag, ())]
    return all(f" {f}" in cpu_flags for f in features)


ISA_PATHS = {
    "plain-C": ("-O2", "-march=x86-64"),
    "AVX2": ("-O2", "-march=x86-64-v3"),
    "AVX-512-VNNI": ("-O2", "-march=x86-64-v4", "-mavx512vnni"),
}


@pytest.mark.parametrize("path", list(ISA_PATHS))
@pytest.mark.parametrize("ggml_type", TYPES, ids=lambda t: t.name)
def test_every_instruction_set_path_matches_the_oracle(path, ggml_type):
    flags = ISA_PATHS[path]
    if platform.machine() not in ("x86_64", "AMD64") or not _compiles(flags):
        pytest.skip(f"this machine cannot build the {path} path")
    rng = np.random.default_rng(11)
    rows, k, tokens = 37, 672, 3  # 21 blocks: two groups of eight and five one at a time
    raw = random_weight(rng, ggml_type, rows, k)
    x = rng.standard_normal((tokens, k)).astype(np.float32)
    binary = CCompiler(flags).compile_uncached(kernel_source("qdot_probe", ggml_type, rows, k, tokens))
    if not _runs(flags):
        pytest.skip(f"the {path} path builds, but this CPU cannot run it")
    program = Device["CPU"].program("qdot_probe", binary)
    y = np.zeros((tokens, rows), np.float32)
    packed = repack_rows(raw, ggml_type)  # held here: the kernel gets only its address
    program([a.ctypes.data for a in (y, x, packed)], [], n_cores=3)  # three threads, each its part of the rows
    want, magnitude = oracle(ggml_type, raw, x)
    assert np.all(np.abs(y - want) <= 1e-5 * magnitude + 1e-30)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(rows=st.integers(1, 40), k=st.integers(1, 300), tokens=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_f16_kernel_matches_float64(rows, k, tokens, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, k)).astype(np.float16)
    x = rng.standard_normal((tokens, k)).astype(np.float32)
    got = f16_matmul(Tensor(x), Tensor(w), Device["CPU"].n_cores).numpy()
    want = x.astype(np.float64) @ w.astype(np.float64).T
    bound = np.abs(x).astype(np.float64) @ np.abs(w.astype(np.float64)).T
    assert np.all(np.abs(got - want) <= 1e-6 * bound + 1e-30)


@pytest.mark.parametrize("path", list(ISA_PATHS))
def test_f16_kernel_on_every_instruction_set_path(path):
    flags = ISA_PATHS[path]
    if platform.machine() not in ("x86_64", "AMD64") or not _compiles(flags):
        pytest.skip(f"this machine cannot build the {path} path")
    rng = np.random.default_rng(12)
    rows, k = 21, 200  # a single token: one row at a time, then 16-, 8- and 1-wide tails; 5 tokens: partial tiles
    binaries = {tokens: CCompiler(flags).compile_uncached(f16_kernel_source("f16_probe", rows, k, tokens)) for tokens in (1, 5)}
    if not _runs(flags):
        pytest.skip(f"the {path} path builds, but this CPU cannot run it")
    for tokens in (1, 5):
        w, x = rng.standard_normal((rows, k)).astype(np.float16), rng.standard_normal((tokens, k)).astype(np.float32)
        w[0, :3] = [np.float16(6e-8), np.float16(-0.0), np.float16(65504)]  # a subnormal, a signed zero, the largest half
        program = Device["CPU"].program("f16_probe", binaries[tokens])
        y = np.zeros((tokens, rows), np.float32)
        program([a.ctypes.data for a in (y, x, w)], [], n_cores=3)
        want = x.astype(np.float64) @ w.astype(np.float64).T
        bound = np.abs(x).astype(np.float64) @ np.abs(w.astype(np.float64)).T
        assert np.all(np.abs(y - want) <= 1e-6 * bound)


def test_int_dot_matrices_keep_the_files_rows_in_one_kernel(tmp_path):
    rng = np.random.default_rng(3)
    rows, k = QUANT_ROWS_PER_MATMUL + 64, 64  # wider than a dequantizing matmul may be: still one part
    writer = GGUFWriter()
    raw = {t: random_weight(rng, t, rows if t is GGMLType.Q4_1 else 32, k) for t in TYPES}
    for t, r in raw.items():
        writer.add_tensor(t.name, r, t, (r.shape[0], k))
    writer.add_tensor("f32", rng.standard_normal((16, k)).astype(np.float32))
    gguf = read_gguf(writer.write(tmp_path / "m.gguf"))
    tensors = [gguf.tensor(t.name) for t in TYPES] + [gguf.tensor("f32")]
    linear = Linear(upload_matrices(tensors, "CPU"))
    assert [(p.ggml_type, p.rows_layout) for p in linear.parts] == [(t, True) for t in TYPES] + [(None, False)]
    for part, t in zip(linear.parts, TYPES):
        np.testing.assert_array_equal(part.data.numpy(), repack_rows(raw[t], t))  # the file's bytes, regrouped
    x = rng.standard_normal((2, k)).astype(np.float32)
    rounded = q8_roundtrip_np(x)
    want = np.concatenate([rounded @ t.dequantize().T for t in tensors[:-1]] + [x @ tensors[-1].dequantize().T], axis=-1)
    np.testing.assert_allclose(linear(Tensor(x)).numpy(), want, rtol=1e-4, atol=1e-4)


def test_the_kernels_rounding_is_numpys_bit_for_bit():
    import ctypes

    rng = np.random.default_rng(5)
    tokens, k = 3, 256
    x = (rng.standard_normal((tokens, k)) * rng.uniform(0.01, 100, (tokens, 1))).astype(np.float32)
    x[0, :32] = 0  # d = 0
    x[1, 32:64] = np.concatenate([[127.0], np.arange(31) - 14.5])  # d = 1: every other value is a tie, to even
    x[2, 64:96] = np.float32(1e30)
    source = kernel_source("qdot_round", GGMLType.Q8_0, 4, k, tokens)
    fn = Device["CPU"].program("qdot_round", Device["CPU"].compiler.compile(source)).lib.qdot_round_quantize
    q = np.zeros((tokens, k), np.int8)
    d = np.zeros((tokens, k // 32), np.float32)
    sums = np.zeros((tokens, k // 32), np.int32)
    fn.argtypes = [ctypes.c_void_p] * 4
    fn(x.ctypes.data, q.ctypes.data, d.ctypes.data, sums.ctypes.data)
    want_q, want_d, want_sums = quantize_activations_np(x)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(d, want_d)
    np.testing.assert_array_equal(sums, want_sums)


@pytest.mark.parametrize("ggml_type", TYPES, ids=lambda t: t.name)
def test_repacking_keeps_every_byte_and_groups_whole_blocks(ggml_type):
    rng = np.random.default_rng(9)
    bb = BLOCK_LAYOUTS[ggml_type].block_bytes
    raw = rng.integers(0, 256, (3, 19 * bb), dtype=np.uint8)  # two groups of eight, three blocks as they are
    packed = repack_rows(raw, ggml_type)
    assert packed.shape == raw.shape and packed.dtype == np.uint8
    np.testing.assert_array_equal(packed[:, 16 * bb :], raw[:, 16 * bb :])
    np.testing.assert_array_equal(np.sort(packed, axis=1), np.sort(raw, axis=1))
    blocks = raw.reshape(3, 19, bb)
    # the second group: its scales first, then quant byte m of block l at 32 * (m // 4) + 4 * l + m % 4 after the header
    group = packed[:, 8 * bb : 16 * bb]
    np.testing.assert_array_equal(group[:, :16].reshape(3, 8, 2), blocks[:, 8:16, 0:2])
    head = 4 if ggml_type is GGMLType.Q4_1 else 2
    for m in (0, 5, bb - head - 1):
        for lane in (0, 3, 7):
            assert (group[:, 8 * head + 32 * (m // 4) + 4 * lane + m % 4] == blocks[:, 8 + lane, head + m]).all()


@pytest.mark.parametrize("ggml_type", [*TYPES, GGMLType.F16], ids=lambda t: t.name)
def test_embedding_rows_from_the_device_matrix_equal_the_files_rows_decoded(ggml_type):
    # a tied model's decode step reads its token's embedding from the output matrix on the device: whole groups of
    # eight blocks and the blocks after them, equal bit for bit to numpy's decoding of the file's row
    rng = np.random.default_rng(4)
    rows, k = 7, 19 * 32
    if ggml_type is GGMLType.F16:
        values = rng.standard_normal((rows, k)).astype(np.float16)
        raw, weight = values.view(np.uint8), Tensor(values)
    else:
        raw = random_weight(rng, ggml_type, rows, k)
        weight = Tensor(repack_rows(raw, ggml_type))
    for row in (0, 3, rows - 1):
        got = embed_row(Tensor(np.array([row], np.int32)), weight, ggml_type).numpy()
        want = dequantize(raw[row], ggml_type, (1, k))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_bad_shapes_are_model_errors():
    with pytest.raises(ModelError, match="multiple of 32"):
        kernel_source("k", GGMLType.Q4_1, 4, 48, 1)
    with pytest.raises(ModelError, match="no integer-dot kernel for Q6_K"):
        kernel_source("k", GGMLType.Q6_K, 4, 256, 1)
    with pytest.raises(ModelError, match=r"uint8 \(rows, 40\)"):
        qdot_matmul(Tensor(np.zeros((1, 64), np.float32)), Tensor(np.zeros((3, 36), np.uint8)), GGMLType.Q4_1, 1)
    assert isinstance(Device["CPU"], CPUDevice)


def _rms_np(x: np.ndarray, norm: np.ndarray, eps: float) -> np.ndarray:
    """The fused kernel's norm, operation for operation in float32: a sequential sum of squares, 1 / sqrt(mean + eps),
    then x * inv * norm."""
    out = np.empty_like(x)
    f = np.float32
    for t in range(x.shape[0]):
        ss = f(0)
        for v in x[t]:
            ss = f(ss + f(v * v))
        inv = f(1) / np.sqrt(f(ss / f(x.shape[1]) + f(eps)))
        out[t] = (x[t] * inv) * norm
    return out


@pytest.mark.parametrize("ggml_type", [*TYPES, GGMLType.F16], ids=lambda t: t.name)
@pytest.mark.parametrize("tokens", [1, 5])
def test_fused_norm_and_residual_equal_the_unfused_kernel_bit_for_bit(ggml_type, tokens):
    # the fused kernel normalizes its input as _rms_np does and adds the residual to each product: the same bits as the
    # unfused kernel over that input, plus the residual
    from llm_bench.qdot import Fused

    rng = np.random.default_rng(7)
    rows, k = 72, 320
    x = (rng.standard_normal((tokens, k)) * 3).astype(np.float32)
    norm = rng.uniform(0.5, 1.5, k).astype(np.float32)
    res = rng.standard_normal((tokens, rows)).astype(np.float32)
    cores = Device["CPU"].n_cores
    if ggml_type is GGMLType.F16:
        w = Tensor(rng.standard_normal((rows, k)).astype(np.float16))

        def matmul(a, fused=None):
            return f16_matmul(a, w, cores, **({"fused": fused} if fused else {}))
    else:
        w = Tensor(repack_rows(random_weight(rng, ggml_type, rows, k), ggml_type))

        def matmul(a, fused=None):
            return qdot_matmul(a, w, ggml_type, cores, **({"fused": fused} if fused else {}))
    plain = matmul(Tensor(_rms_np(x, norm, 1e-5))).numpy()
    got = matmul(Tensor(x), Fused(norm=Tensor(norm), eps=1e-5, residual=Tensor(res))).numpy()
    np.testing.assert_array_equal(got, plain + res)
    np.testing.assert_array_equal(matmul(Tensor(x), Fused(residual=Tensor(res))).numpy(), matmul(Tensor(x)).numpy() + res)


@pytest.mark.parametrize("ggml_type", [GGMLType.Q8_0, GGMLType.F16], ids=lambda t: t.name)
def test_fused_swiglu_input(ggml_type):
    from llm_bench.qdot import Fused

    rng = np.random.default_rng(8)
    rows, k, tokens = 40, 96, 3
    gu = (rng.standard_normal((tokens, 2 * k)) * 2).astype(np.float32)
    g, u = gu[:, :k].astype(np.float64), gu[:, k:].astype(np.float64)
    act = g / (1 + np.exp(-g)) * u
    cores = Device["CPU"].n_cores
    if ggml_type is GGMLType.F16:
        w = rng.standard_normal((rows, k)).astype(np.float16)
        got = f16_matmul(Tensor(gu), Tensor(w), cores, Fused(swiglu=True)).numpy()
        np.testing.assert_allclose(got, act @ w.astype(np.float64).T, rtol=1e-5, atol=1e-5)
    else:
        raw = random_weight(rng, ggml_type, rows, k)
        got = qdot_matmul(Tensor(gu), Tensor(repack_rows(raw, ggml_type)), ggml_type, cores, Fused(swiglu=True)).numpy()
        want, magnitude = oracle(ggml_type, raw, act.astype(np.float32))
        # a 1-ulp difference of expf moves an activation by at most a quantum: bounded by the block's scale
        assert np.all(np.abs(got - want) <= 2e-2 * magnitude.max())


def test_fused_inputs_are_checked():
    from llm_bench.qdot import Fused

    w = Tensor(np.zeros((8, 64), np.float16))
    with pytest.raises(ModelError, match="SwiGLU input"):
        f16_matmul(Tensor(np.zeros((1, 64), np.float32)), w, 1, Fused(swiglu=True))
    with pytest.raises(ModelError, match="norm weight"):
        f16_matmul(Tensor(np.zeros((1, 64), np.float32)), w, 1, Fused(norm=Tensor(np.ones(32, np.float32)), eps=1e-5))
    with pytest.raises(ModelError, match="residual"):
        f16_matmul(Tensor(np.zeros((2, 64), np.float32)), w, 1, Fused(residual=Tensor(np.zeros((1, 8), np.float32))))


@pytest.mark.parametrize("tokens", [1, 6])  # the kernels form a decoding step's input, the graph a prompt's
@pytest.mark.parametrize("kinds", [("F16",), ("Q8_0", "F16"), ("F32",)], ids="+".join)
def test_linear_fused_norm_swiglu_and_residual_in_every_layout(tmp_path, tokens, kinds):
    # one kernel part, several (the residual is added after their concatenation), and a graph part: each equals the
    # norm / SwiGLU / residual computed in float64 around the layer's product
    from llm_bench.qdot import Fused

    rng = np.random.default_rng(9)
    k, rows = 64, 32
    writer = GGUFWriter()
    for i, kind in enumerate(kinds):
        w = rng.standard_normal((rows, k)).astype(np.float32)
        if kind == "Q8_0":
            writer.add_tensor(f"w{i}", random_weight(rng, GGMLType.Q8_0, rows, k), GGMLType.Q8_0, (rows, k))
        else:
            writer.add_tensor(f"w{i}", w.astype(np.float16) if kind == "F16" else w)
    gguf = read_gguf(writer.write(tmp_path / "m.gguf"))
    tensors = [gguf.tensor(f"w{i}") for i in range(len(kinds))]
    linear = Linear(upload_matrices(tensors, "CPU", activations="float"))
    weights = np.concatenate([t.dequantize().astype(np.float64) for t in tensors])
    x = rng.standard_normal((tokens, k)).astype(np.float32)
    norm = rng.uniform(0.5, 1.5, k).astype(np.float32)
    res = rng.standard_normal((tokens, rows * len(kinds))).astype(np.float32)
    x64 = x.astype(np.float64)
    normed = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-5) * norm
    got = linear(Tensor(x), Fused(norm=Tensor(norm), eps=1e-5, residual=Tensor(res))).numpy()
    np.testing.assert_allclose(got, normed @ weights.T + res, rtol=1e-4, atol=1e-4)
    gu = rng.standard_normal((tokens, 2 * k)).astype(np.float32)
    g, u = gu[:, :k].astype(np.float64), gu[:, k:].astype(np.float64)
    got = linear(Tensor(gu), Fused(swiglu=True)).numpy()
    np.testing.assert_allclose(got, (g / (1 + np.exp(-g)) * u) @ weights.T, rtol=1e-4, atol=1e-4)


def test_linear_of_two_kernel_parts_normalizes_in_each_and_adds_the_residual_to_the_row(tmp_path):
    # a Q8_0 and an F16 part (two kernels, q8 activations) for one decoding row: each kernel normalizes the input as
    # _rms_np does and the residual is added to the concatenated row, bit for bit the unfused layer over that input
    from llm_bench.qdot import Fused

    rng = np.random.default_rng(10)
    k, rows = 64, 32
    writer = GGUFWriter()
    writer.add_tensor("w0", random_weight(rng, GGMLType.Q8_0, rows, k), GGMLType.Q8_0, (rows, k))
    writer.add_tensor("w1", rng.standard_normal((rows, k)).astype(np.float16))
    gguf = read_gguf(writer.write(tmp_path / "m.gguf"))
    linear = Linear(upload_matrices([gguf.tensor("w0"), gguf.tensor("w1")], "CPU", activations="q8"))
    assert [p.rows_layout for p in linear.parts] == [True, True]
    x = rng.standard_normal((1, k)).astype(np.float32)
    norm = rng.uniform(0.5, 1.5, k).astype(np.float32)
    res = rng.standard_normal((1, 2 * rows)).astype(np.float32)
    got = linear(Tensor(x), Fused(norm=Tensor(norm), eps=1e-5, residual=Tensor(res))).numpy()
    np.testing.assert_array_equal(got, linear(Tensor(_rms_np(x, norm, 1e-5))).numpy() + res)


@pytest.mark.parametrize("ggml_type", [GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q8_0])
@pytest.mark.parametrize("k", [32, 256, 288, 576, 1536])
def test_repacking_by_one_gather_equals_the_layout_definition(ggml_type, k):
    from llm_bench.qdot import _repack_blocks

    bb = BLOCK_LAYOUTS[ggml_type].block_bytes
    for rows in (0, 1, 5):
        raw = np.random.default_rng(k + rows).integers(0, 256, (rows, k // 32 * bb), dtype=np.uint8)
        got = repack_rows(raw, ggml_type)
        assert got.dtype == np.uint8 and got.flags["C_CONTIGUOUS"] and got.shape == raw.shape
        if rows:  # (the definition's reshapes cannot take zero rows; the gather can)
            np.testing.assert_array_equal(got, _repack_blocks(raw, ggml_type))


@settings(max_examples=40, deadline=None)
@given(ggml_type=st.sampled_from([GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q8_0]), rows=st.integers(1, 40), blocks=st.integers(1, 40),
       seed=st.integers(0, 2**32 - 1))
def test_the_native_repack_writes_what_the_gather_makes(ggml_type, rows, blocks, seed):
    # a model's load writes each piece of rows into the device buffer with the native routine: every byte where
    # repack_rows puts it, rows shared between the cores, whole groups and the blocks after them
    from hcq_runtime import Buffer
    from llm_bench.qdot import repack_rows_into
    from uop_scheduler import dtypes

    bb = BLOCK_LAYOUTS[ggml_type].block_bytes
    raw = np.random.default_rng(seed).integers(0, 256, (rows, blocks * bb), dtype=np.uint8)
    dest = Buffer("CPU", raw.size, dtypes.uint8)
    repack_rows_into(dest, raw, ggml_type)
    np.testing.assert_array_equal(dest.numpy().reshape(raw.shape), repack_rows(raw, ggml_type))
