"""Stashes (`uopir.codegen.linearize`, `Linearizer.plan_stashes`): a costly value a fused row kernel's reduction loop
computes and its output loop computes again (softmax's exp(x - max)) is computed once, kept in a REG array and read
back. Each kernel of generated row programs is compiled twice, with the CPU renderer's stash on and off, and both run
over the same random inputs: the outputs must agree bit for bit (the stash holds the very value the output loop
computed before). Values against numpy are `test_sched_row_fusion`'s; here, what changes is only where a value comes
from."""

import copy

import numpy as np
import pytest
from hcq_runtime import Device, kernel_cache
from hypothesis import given, settings
from hypothesis import strategies as st
from uop_scheduler import Tensor
from uop_scheduler.schedule import row_fusion
from uopir import Ops, dtypes, to_program
from uopir.dtypes import AddrSpace

pytestmark = pytest.mark.skipif(not row_fusion("CPU"), reason="row fusion is off (UOP_ROW_FUSION=0)")

# the first coefficient of the exp2 polynomial the CPU's decomposition emits: one occurrence per exp computed
EXP_MARK = "1.5252733646775596e-05f"


def _softmax(t: Tensor, ax: tuple[int, ...]) -> Tensor:
    e = (t - t.max(ax, keepdim=True)).exp()
    return e / e.sum(ax, keepdim=True)


PROGRAMS = {
    "softmax": lambda t, ax: t.softmax(ax[0]) if len(ax) == 1 else _softmax(t, ax),
    "scaled_softmax": lambda t, ax: _softmax(t / 8, ax),
    "exp_share": lambda t, ax: t.exp() / t.exp().sum(ax, keepdim=True),
    "sigmoid_share": lambda t, ax: t.sigmoid() / t.sigmoid().sum(ax, keepdim=True).add(1),
    "softmax_times_input": lambda t, ax: _softmax(t, ax) * t,
    "two_shares": lambda t, ax: (e := (t - t.max(ax, keepdim=True)).exp()) / e.sum(ax, keepdim=True)
    + (e * e) / (e * e).sum(ax, keepdim=True),
    "log_softmax": lambda t, ax: t.log_softmax(ax[0]) if len(ax) == 1 else t - t.exp().sum(ax, keepdim=True).log(),
}


class _Recorder:
    """The kernel bodies the CPU compiles while it is installed (the compile cache is bypassed: every body is seen)."""

    def __init__(self, monkeypatch):
        self.bodies = []
        monkeypatch.setattr(kernel_cache, "_kernels", {})
        original = kernel_cache._program

        def record(body, device):
            self.bodies.append((body, device))
            return original(body, device)

        monkeypatch.setattr(kernel_cache, "_program", record)


def _run(program, arrays: list[np.ndarray], n_cores: int) -> list[np.ndarray]:
    dev = Device["CPU"]
    prog = dev.program(program.arg.function_name, dev.compiler.compile(program.src[2].arg))
    out = [a.copy() for a in arrays]
    prog([a.ctypes.data for a in out], [], n_cores=n_cores)
    return out


def _compare_stash_on_and_off(body) -> bool:
    """Run `body` compiled with the stash and without over the same inputs; True when the stash changed its source."""
    dev = Device["CPU"]
    off = copy.copy(dev.renderer)
    off.stash = False
    with_stash = to_program(body, dev.renderer, n_cores=dev.n_cores)
    without = to_program(body, off, n_cores=dev.n_cores)
    if with_stash.src[2].arg == without.src[2].arg:
        return False
    params = sorted((u for u in body.toposort() if u.op is Ops.PARAM and u.dtype.addrspace is AddrSpace.GLOBAL),
                    key=lambda u: u.arg.slot)
    assert all(p.dtype.base == dtypes.float32 for p in params), "the row programs here read and write float32 only"
    rng = np.random.default_rng(len(params))
    arrays = [(rng.standard_normal(p.dtype.size) * 4).astype(np.float32) for p in params]
    a = _run(with_stash, arrays, dev.n_cores)
    b = _run(without, arrays, dev.n_cores)
    for slot in with_stash.arg.outs:
        np.testing.assert_array_equal(a[slot].view(np.uint32), b[slot].view(np.uint32))
    return True


@st.composite
def row_programs(draw):
    lead = draw(st.lists(st.integers(1, 6), min_size=1, max_size=2))
    row = draw(st.lists(st.sampled_from([1, 3, 5, 8, 16, 17, 32, 48, 64, 256]), min_size=1, max_size=2))
    return tuple(lead), tuple(row), draw(st.sampled_from(sorted(PROGRAMS))), draw(st.integers(0, 2**16))


@given(row_programs())
@settings(max_examples=40, deadline=None, derandomize=True)
def test_stashed_kernels_compute_the_same_bits(case):
    lead, row, name, seed = case
    with pytest.MonkeyPatch.context() as mp:
        recorder = _Recorder(mp)
        x = (np.random.default_rng(seed).standard_normal((*lead, *row)) * 3).astype(np.float32)
        PROGRAMS[name](Tensor(x), tuple(range(len(lead), len(lead) + len(row)))).realize()
        for body, device in recorder.bodies:
            if device == "CPU" and body.op is Ops.SINK:
                _compare_stash_on_and_off(body)


def test_attention_softmax_computes_each_exp_once(monkeypatch):
    recorder = _Recorder(monkeypatch)
    rng = np.random.default_rng(0)
    q, k = (Tensor(rng.standard_normal((2, 64, 16)).astype(np.float32)) for _ in range(2))
    out = ((q @ k.transpose(-1, -2)) / 4).softmax(-1)
    np.testing.assert_allclose(out.numpy(), _np_softmax(q.numpy() @ k.numpy().transpose(0, 2, 1) / 4), rtol=1e-5, atol=1e-7)
    rows = [b for b, d in recorder.bodies if d == "CPU" and sum(u.op is Ops.REDUCE for u in b.toposort()) >= 2
            and EXP_MARK in to_program(b, Device["CPU"].renderer, n_cores=Device["CPU"].n_cores).src[2].arg]
    assert len(rows) == 1, "the softmax is one fused row kernel"
    src = to_program(rows[0], Device["CPU"].renderer, n_cores=Device["CPU"].n_cores).src[2].arg
    assert src.count(EXP_MARK) == 1, "exp(x - max) is computed in the sum's loop only"
    assert _compare_stash_on_and_off(rows[0])


def test_cheap_values_are_computed_again():
    """A norm's centered value (a load and a subtraction) costs less to compute again than to keep: no stash."""
    with pytest.MonkeyPatch.context() as mp:
        recorder = _Recorder(mp)
        x = Tensor(np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32))
        (x - x.mean(-1, keepdim=True)).div((x - x.mean(-1, keepdim=True)).square().mean(-1, keepdim=True).add(1e-5).sqrt()).realize()
        bodies = [b for b, d in recorder.bodies if d == "CPU" and b.op is Ops.SINK]
    assert bodies and not any(_compare_stash_on_and_off(b) for b in bodies)


def _np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
