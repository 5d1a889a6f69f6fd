"""`router_mfma(x, weight, bias)`: olmoe's router logits by the hand-written CDNA MFMA kernel of hcq-runtime
(`hcq_runtime.router_mfma_program`, assembled by amd-isa), as a differentiable Tensor op with the seed's shape and dtype
rules and its axis-0 sharding. It lives here, beside the model that uses it (ROUTER_MFMA=1), as the Tensor-level half;
the kernel itself belongs to the runtime that owns hand-written programs.
"""

from __future__ import annotations

import math

from .errors import ModelError

#: experts the kernel is written for, rows of x per workgroup, and the K granularity the router accepts (the seed's)
EXPERTS, BLOCK_ROWS, BLOCK_K = 32, 64, 64
#: the targets whose MFMA the kernel uses
TARGETS = ("gfx942", "gfx950")


def check_shapes(x_shape: tuple[int, ...], weight_shape: tuple[int, ...], bias_shape: tuple[int, ...]) -> tuple[int, int]:
    """(rows, K) of a router product the kernel computes, else ModelError saying what it needs."""
    if len(x_shape) < 2 or len(weight_shape) != 2 or len(bias_shape) != 1:
        raise ModelError(f"router_mfma takes x (..., K), weight (E, K) and bias (E,), got {x_shape}, {weight_shape}, {bias_shape}")
    k, experts = x_shape[-1], weight_shape[0]
    if weight_shape != (experts, k) or bias_shape != (experts,):
        raise ModelError(f"router_mfma: weight must be ({experts}, {k}) and bias ({experts},) for x {x_shape}, got {weight_shape}, {bias_shape}")
    if experts != EXPERTS or k % BLOCK_K:
        raise ModelError(f"router_mfma is written for {EXPERTS} experts and K a multiple of {BLOCK_K}, got E={experts}, K={k}")
    rows = math.prod(x_shape[:-1])
    if rows % BLOCK_ROWS:
        raise ModelError(f"router_mfma computes {BLOCK_ROWS} rows per workgroup: x has {rows} rows, not a multiple of {BLOCK_ROWS}")
    return rows, k


def _target(device: str) -> str:
    from uop_scheduler import Device

    target = getattr(Device[device], "arch", None)
    if target not in TARGETS:
        raise ModelError(f"router_mfma runs on an AMD {' or '.join(TARGETS)} device (MOCKAMD:gfx950 here), not {device}")
    return target


def router_mfma(x, weight, bias):
    """olmoe's router logits `x.float() @ weight.float().T + bias.float()` (float32, shape (..., 32)) for bfloat16 x
    (..., K), weight (32, K) and bias (32,) by the MFMA kernel, with K a multiple of 64 and the rows of x a multiple of
    64. Differentiable: the gradients are those of that float32 reference. A tensor sharded over several devices must
    be split along axis 0 (each device's rows then a multiple of 64); weight and bias are then on each device."""
    from uop_scheduler import Tensor, dtypes

    rows, k = check_shapes(tuple(x.shape), tuple(weight.shape), tuple(bias.shape))
    if not (x.dtype == weight.dtype == bias.dtype == dtypes.bfloat16):
        raise ModelError(f"router_mfma takes bfloat16 x, weight and bias, got {x.dtype}, {weight.dtype}, {bias.dtype}")
    lead = tuple(x.shape[:-1])
    if isinstance(x.device, tuple):
        return _sharded(x, weight, bias)
    from hcq_runtime import router_mfma_program

    program = router_mfma_program(rows, k, _target(x.device))

    def grad(gradient, call):
        xs, ws, bs = (Tensor(u, device=x.device) for u in call.src[2:5])
        reference = xs.float() @ ws.float().T + bs.float()
        return (None, *(g.uop for g in reference.gradient(xs, ws, bs, gradient=Tensor(gradient, device=x.device))))

    # the kernel reads row-major buffers whatever their shapes: custom_kernel realizes its arguments into them (no
    # copy for one that already is one; a copy kernel would need a compiler for the target, which gfx950 lacks here)
    out = Tensor.empty(*lead, EXPERTS, dtype=dtypes.float32, device=x.device)
    return out.custom_kernel(x, weight, bias, fxn=lambda *params: program, grad_fxn=grad)[0]


def _sharded(x, weight, bias):
    """Each device's rows of x through the kernel on that device: x must be split along axis 0 (the rows), and the
    weight and bias be whole on every device (replicated, or one tensor copied to each)."""
    from uop_scheduler import ShardedTensor

    if x.axis != 0:
        raise ModelError(f"router_mfma needs x sharded along axis 0 (its rows), got axis {x.axis}")

    def on(t, i: int, device: str):
        if isinstance(t, ShardedTensor):
            if t.axis is not None:
                raise ModelError(f"router_mfma needs the weight and bias whole on every device, got one sharded along axis {t.axis}")
            return t.shards[i]
        return t if t.device == device else t.to(device)

    outs = tuple(router_mfma(xs, on(weight, i, xs.device), on(bias, i, xs.device)) for i, xs in enumerate(x.shards))
    return ShardedTensor(outs, 0)
