"""`router_mfma`: olmoe's router logits by a hand-written CDNA MFMA kernel (hcq-runtime's, assembled by amd-isa) run on
the mock GPU (amd-isa's emulator), against numpy on the same bfloat16 values; its gradients, its sharding rule, its
errors, and olmoe routed by it. The kernel's own encoding is checked in hcq-runtime's test_amd_router_mfma."""

import numpy as np
import pytest
from hcq_runtime import CompileError
from llm_bench.errors import ModelError
from llm_bench.router_mfma import EXPERTS, router_mfma
from uop_scheduler import Tensor, dtypes

GFX950 = "MOCKAMD:gfx950"


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """The bfloat16 values of `a` (truncated), as their uint16 bits."""
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def on(device, bits: np.ndarray) -> Tensor:
    """A bfloat16 tensor on `device` (made on the CPU and copied: gfx950 has no compiler here for a conversion kernel)."""
    return Tensor(bits).bitcast(dtypes.bfloat16).to(device).realize()


def router_inputs(rng, shape, k):
    return bf16_bits(rng.standard_normal((*shape, k))), bf16_bits(rng.standard_normal((EXPERTS, k))), bf16_bits(rng.standard_normal(EXPERTS))


@pytest.mark.parametrize("shape, k", [((64,), 64), ((128,), 192), ((192,), 320), ((2, 64), 128)])
def test_forward_equals_the_float_reference_of_the_bf16_inputs(shape, k):
    rng = np.random.default_rng(k)
    x, w, b = router_inputs(rng, shape, k)
    out = router_mfma(on(GFX950, x), on(GFX950, w), on(GFX950, b))
    assert out.shape == (*shape, EXPERTS) and out.dtype == dtypes.float32
    want = bf16_values(x) @ bf16_values(w).T + bf16_values(b)
    # float32 accumulation of K exact bf16 products
    np.testing.assert_allclose(out.numpy(), want, rtol=0, atol=2e-6 * k)


def test_bad_shapes_dtypes_and_devices_are_model_errors():
    rng = np.random.default_rng(1)
    x, w, b = router_inputs(rng, (64,), 64)
    tx, tw, tb = on(GFX950, x), on(GFX950, w), on(GFX950, b)
    with pytest.raises(ModelError, match="not a multiple of 64"):
        router_mfma(on(GFX950, x[:48]), tw, tb)
    with pytest.raises(ModelError, match="32 experts and K a multiple of 64"):
        router_mfma(on(GFX950, x[:, :32]), on(GFX950, w[:, :32]), tb)
    with pytest.raises(ModelError, match="32 experts"):
        router_mfma(tx, on(GFX950, w[:16]), on(GFX950, b[:16]))
    with pytest.raises(ModelError, match=r"weight must be \(32, 64\)"):
        router_mfma(tx, on(GFX950, w[:, :32]), tb)
    with pytest.raises(ModelError, match="bfloat16"):
        router_mfma(Tensor(np.zeros((64, 64), np.float32)), tw, tb)
    with pytest.raises(ModelError, match="runs on an AMD gfx942 or gfx950 device"):
        router_mfma(on("CPU", x), on("CPU", w), on("CPU", b))


def test_sharded_rows_run_on_each_device():
    rng = np.random.default_rng(2)
    x, w, b = router_inputs(rng, (256,), 128)
    devices = (GFX950, "MOCKAMD:gfx950:1")
    tx = Tensor(x).bitcast(dtypes.bfloat16).shard(devices, axis=0)
    tw, tb = (Tensor(a).bitcast(dtypes.bfloat16).shard(devices) for a in (w, b))
    out = router_mfma(tx, tw, tb)
    assert out.device == devices and out.shape == (256, EXPERTS)
    np.testing.assert_allclose(out.numpy(), bf16_values(x) @ bf16_values(w).T + bf16_values(b), rtol=0, atol=2e-6 * 128)
    with pytest.raises(ModelError, match="axis 0"):
        router_mfma(Tensor(x).bitcast(dtypes.bfloat16).shard(devices, axis=1), tw, tb)
    with pytest.raises(ModelError, match="not a multiple of 64"):  # 96 rows per device
        router_mfma(Tensor(x[:192]).bitcast(dtypes.bfloat16).shard(devices, axis=0), tw, tb)


def _compiling(target: str) -> str:
    """MOCKAMD:`target`, when an installed LLVM compiles the graph kernels a backward pass or a model runs there (gfx942:
    LLVM 18+; gfx950: LLVM 20+, clang-22 on Debian 12), else skip."""
    from hcq_runtime import AMDCompiler

    try:
        AMDCompiler(target)
    except CompileError as err:
        pytest.skip(f"no compiler for {target}'s graph kernels: {err}")
    return f"MOCKAMD:{target}"


@pytest.mark.parametrize("target", ["gfx950", "gfx942"])
def test_gradients_are_the_float_references(target):
    device = _compiling(target)
    rng = np.random.default_rng(3)
    x, w, b = router_inputs(rng, (64,), 128)
    g = rng.standard_normal((64, EXPERTS)).astype(np.float32)
    tx, tw, tb = on(device, x), on(device, w), on(device, b)
    for t in (tx, tw, tb):
        t.requires_grad = True
    (router_mfma(tx, tw, tb) * Tensor(g).to(device)).sum().backward()
    xs, ws = bf16_values(x), bf16_values(w)
    for got, want in ((tx.grad, g @ ws), (tw.grad, g.T @ xs), (tb.grad, g.sum(0))):
        assert got.dtype == dtypes.bfloat16
        # the gradients are bfloat16 like their tensors: within a rounding of the float reference
        np.testing.assert_allclose(got.float().numpy(), want, rtol=2**-7, atol=1e-2)


def test_olmoe_with_router_mfma_picks_the_same_tokens(tmp_path, monkeypatch):
    # a one-layer olmoe with 32 experts on MOCKAMD:gfx950 (its other kernels compiled by LLVM 20+): ROUTER_MFMA=1 routes
    # by the kernel, from bfloat16 activations and weights, and picks the same tokens for a prompt and the step after it
    import dataclasses

    from llm_bench import TensorModel, read_gguf
    from llm_bench.tiny_models import TINY_SPECS, write_random_model

    device = _compiling("gfx950")
    spec = TINY_SPECS["tiny-olmoe"]
    config = dataclasses.replace(spec.config, n_experts=EXPERTS, n_experts_used=4, n_layers=1)
    gguf = read_gguf(write_random_model("tiny-olmoe-32", dataclasses.replace(spec, config=config), tmp_path / "olmoe32.gguf"))
    runs = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("ROUTER_MFMA", flag)
        model = TensorModel(gguf, 16, device=device, jit=False)
        assert (model.layers[0].router_bf16 is not None) == (flag == "1")
        prompt = model.forward([1, 17, 42], 0)
        step = model.forward([int(prompt[-1].argmax())], 3)
        runs[flag] = (prompt, step)
    for float_run, mfma_run in zip(runs["0"], runs["1"]):
        np.testing.assert_array_equal(float_run.argmax(-1), mfma_run.argmax(-1))
        # the same model, routed from bfloat16 logits: close, and not the float path's bits
        np.testing.assert_allclose(mfma_run, float_run, atol=5e-2)
        assert not np.array_equal(mfma_run, float_run)
