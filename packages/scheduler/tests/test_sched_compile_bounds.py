"""The structural bounds that keep kernel compile times short (#36): the benchmark's workloads (an MLP and a CNN
training step with Adam, attention, a convolution, a row softmax) run through the Tensor API, then every CPU kernel
this process has compiled is read back: its nests of unrolled scalar loops stay within the renderer's unroll budget
(nests of vector bodies within VECTOR_NEST_MAX), each unrolled loop within MAX_UNROLL, and its register accumulators
within ACC_MAX floats. Wall-clock compile times are
what `benchmarks/vs_torch.py` reports; these are the properties that bound them."""

import re

import numpy as np
from hcq_runtime.kernel_cache import _kernels
from uop_scheduler import Tensor, nn
from uopir.codegen.linearize import MAX_UNROLL
from uopir.renderer.cstyle import UNROLL_BUDGET

# the longest accumulator the CPU heuristic keeps: a matrix-vector kernel's row of up to 16 KiB of floats
ACC_MAX = 4096
# copies of a vector body a nest may unroll: the most the heuristic makes is 320 (a prompt's 8-row tile of a 10-vector
# accumulator row, 4 weight rows per pass), which clang-15 compiles in 0.39 s; scalar nests keep the renderer's budget
VECTOR_NEST_MAX = 512
_UNROLL = re.compile(r"GCC unroll (\d+)")
_ACC = re.compile(r"\bacc\d+\[(\d+)\]")


def unroll_nests(src: str) -> list[tuple[int, bool]]:
    """For every loop a C kernel unrolls: the product of the unroll factors of its nest there, and whether the nest
    holds a vector body (a block of lanes written as one vector) rather than scalar statements."""
    stack: list[tuple[int, int]] = []  # (brace depth inside the loop, index into nests)
    depth, nests = 0, []
    for line in src.splitlines():
        if (m := _UNROLL.search(line)) and line.rstrip().endswith("{"):
            outer = nests[stack[-1][1]][0] if stack else 1
            stack.append((depth + 1, len(nests)))
            nests.append([outer * int(m.group(1)), False])
        if "lanes as one vector" in line:
            for _, i in stack:
                nests[i][1] = True
        depth += line.count("{") - line.count("}")
        while stack and stack[-1][0] > depth:
            stack.pop()
    return [(n, v) for n, v in nests]


def test_unroll_nests_are_read_from_the_source():
    src = ('_Pragma("GCC unroll 8") for (a) {\n  _Pragma("GCC unroll 4") for (b) {\n    x;\n  }\n}\n'
           '_Pragma("GCC unroll 16") for (c) {\n  { const long long u = 0;  /* 16 lanes as one vector */\n  }\n}\n')
    assert unroll_nests(src) == [(8, False), (32, False), (16, True)]


def _workloads() -> None:
    rng = np.random.default_rng(0)

    def normal(*shape, scale=1.0):
        return Tensor((rng.standard_normal(shape) * scale).astype(np.float32))

    x, y = normal(64, 784), Tensor(rng.integers(0, 10, 64).astype(np.int32))
    w1, b1, w2, b2 = normal(256, 784, scale=0.05), Tensor.zeros(256), normal(10, 256, scale=0.05), Tensor.zeros(10)
    opt = nn.optim.Adam([w1, b1, w2, b2], lr=1e-3)
    Tensor.training, was = True, Tensor.training
    for _ in range(2):
        opt.zero_grad()
        x.linear(w1.T, b1).relu().linear(w2.T, b2).sparse_categorical_crossentropy(y).backward()
        opt.step()
    img, yc = normal(16, 1, 28, 28), Tensor(rng.integers(0, 10, 16).astype(np.int32))
    c1, c2, w = normal(8, 1, 3, 3, scale=0.3), normal(16, 8, 3, 3, scale=0.1), normal(10, 400, scale=0.05)
    opt = nn.optim.Adam([c1, c2, w], lr=1e-3)
    opt.zero_grad()
    h = img.conv2d(c1).relu().max_pool2d(2).conv2d(c2).relu().max_pool2d(2)
    h.flatten(1).linear(w.T).sparse_categorical_crossentropy(yc).backward()
    opt.step()
    Tensor.training = was
    q, k, v = normal(8, 256, 64), normal(8, 256, 64), normal(8, 256, 64)
    ((q @ k.transpose(-1, -2)) / 8).softmax(-1).matmul(v).realize()
    normal(8, 32, 32, 32).conv2d(normal(64, 32, 3, 3, scale=0.05), padding=1).realize()
    normal(512, 1000).log_softmax(-1).realize()


def test_every_compiled_kernel_stays_within_the_compile_time_bounds():
    _workloads()
    sources = {k.source for k in _kernels.values() if isinstance(k.source, str) and "bufs" in k.source}
    assert len(sources) >= 30  # the workloads' kernels (and every earlier test's) were compiled here
    for src in sources:
        name = re.search(r"void (\w+)\(void \*\*bufs", src)
        nests = unroll_nests(src)
        assert max((n for n, vector in nests if not vector), default=1) <= UNROLL_BUDGET, (name and name.group(1), nests)
        assert max((n for n, vector in nests if vector), default=1) <= VECTOR_NEST_MAX, (name and name.group(1), nests)
        assert max(map(int, _UNROLL.findall(src)), default=1) <= MAX_UNROLL, name and name.group(1)
        assert max(map(int, _ACC.findall(src)), default=1) <= ACC_MAX, name and name.group(1)
