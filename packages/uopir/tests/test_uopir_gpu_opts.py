"""GPU opts without a GPU: the tensor-core rewrite (lane layouts from the RDNA3 ISA guide), its linear program and
OpenCL source, GROUPTOP's split, PADTO on derived axes, and the errors of opts that do not apply."""

import itertools
import math

import pytest
from uopir import AMDOpenCLRenderer, AxisType, CodegenError, CRenderer, DType, Ops, Opt, OptOps, UOp, apply_opts, dtypes, to_program
from uopir.codegen.kernel import kernel_ranges
from uopir.codegen.tc import RDNA3_TENSOR_CORES, find_matmuls
from uopir.renderer.cvector import find_vector_block

M, K, N = 32, 48, 16


def matmul(m: int, k: int, n: int, dtype_in: DType = dtypes.float16, acc: DType = dtypes.float32, swap: bool = False) -> UOp:
    out, a, b = UOp.param(0, acc.ptr(m * n)), UOp.param(1, dtype_in.ptr(m * k)), UOp.param(2, dtype_in.ptr(k * n))
    i, j, r = UOp.range(m, 0), UOp.range(n, 1), UOp.range(k, 2, AxisType.REDUCE)
    x, y = a.index(i * k + r).load(), b.index(r * n + j).load()
    if acc != dtype_in:
        x, y = x.cast(acc), y.cast(acc)
    return UOp.sink(out.index(i * n + j).store((y * x if swap else x * y).reduce(r)).end(i, j))


def value_at(expr: UOp, values: dict[UOp, int]) -> int:
    return int(expr.substitute({r: UOp.const(v, r.dtype) for r, v in values.items()}).simplify().arg)


@pytest.mark.parametrize("swap", [False, True])
def test_find_matmuls_names_the_axes(swap):
    (mm,) = find_matmuls(matmul(M, K, N, swap=swap), RDNA3_TENSOR_CORES)
    assert (mm.m.arg[0], mm.n.arg[0], mm.k.arg[0]) == ((0, 1, 2) if not swap else (1, 0, 2))
    assert mm.tc.dtype_in == dtypes.float16 and mm.tc.dtype_out == dtypes.float32


def test_find_matmuls_tiles_the_longest_shared_reduce_axis():
    out, a, b = UOp.param(0, dtypes.float32.ptr(M * N)), UOp.param(1, dtypes.float16.ptr(M * 3 * K)), UOp.param(2, dtypes.float16.ptr(3 * K * N))
    i, j = UOp.range(M, 0), UOp.range(N, 1)
    outer, r = UOp.range(3, 2, AxisType.REDUCE), UOp.range(K, 3, AxisType.REDUCE)
    product = a.index(i * 3 * K + outer * K + r).load() * b.index((outer * K + r) * N + j).load()  # half products, then cast
    ast = UOp.sink(out.index(i * N + j).store(product.cast(dtypes.float32).reduce(outer, r)).end(i, j))
    (mm,) = find_matmuls(ast, RDNA3_TENSOR_CORES)
    assert mm.k is r and mm.tc.dtype_out == dtypes.float32
    (wmma_reduce,) = [u for u in apply_opts(ast, [Opt(OptOps.TC, 0, 0)], RDNA3_TENSOR_CORES).toposort() if u.op is Ops.REDUCE]
    assert wmma_reduce.src[0].op is Ops.WMMA and [int(x.src[0].arg) for x in wmma_reduce.src[1:]] == [K // 16, 3]


def test_find_matmuls_needs_tensor_core_dtypes():
    assert find_matmuls(matmul(M, K, N, dtypes.float32, dtypes.float32), RDNA3_TENSOR_CORES) == []
    assert find_matmuls(matmul(M, K, N), ()) == []


def test_tc_lane_layout_is_rdna3_wmma():
    ast = apply_opts(matmul(M, K, N), [Opt(OptOps.TC, 0, 0)], RDNA3_TENSOR_CORES)
    ranges = kernel_ranges(ast)
    (lane,) = [r for r in ranges if r.arg[1] is AxisType.WARP]
    register = next(r for r in ranges if r.arg[1] is AxisType.UPCAST)
    tile_m, tile_n = ranges[0], ranges[1]
    assert (lane.src[0].arg, register.src[0].arg, tile_m.src[0].arg, tile_n.src[0].arg) == (32, 8, M // 16, N // 16)
    store = ast.src[0].src[0]
    (wmma,) = [u for u in ast.toposort() if u.op is Ops.WMMA]
    a_stack, b_stack, reg = wmma.src
    assert reg is register and a_stack.dtype == dtypes.float16.vec(16) and len(a_stack.src) == 16
    k_tile = next(r for r in ranges if r.arg[1] is AxisType.REDUCE)
    covered = set()
    for t_m, t_n, t_k, l, i in itertools.product(range(M // 16), range(N // 16), range(K // 16), range(32), range(8)):
        at = {tile_m: t_m, tile_n: t_n, k_tile: t_k, lane: l, register: i}
        # D: lane l holds column l % 16 and rows 2*i + l // 16 of its tile
        row, col = divmod(value_at(store.src[0].src[1], at), N)
        assert (row, col) == (16 * t_m + 2 * i + l // 16, 16 * t_n + l % 16)
        covered.add((row, col))
        if i == 0:  # A: lane l holds row l % 16, B: column l % 16, both over the 16 k of the tile
            for kk, (ea, eb) in enumerate(zip(a_stack.src, b_stack.src)):
                assert value_at(ea.src[0].src[1], at) == (16 * t_m + l % 16) * K + 16 * t_k + kk
                assert value_at(eb.src[0].src[1], at) == (16 * t_k + kk) * N + 16 * t_n + l % 16
    assert covered == set(itertools.product(range(M), range(N)))  # every output exactly once per k tile


def test_tc_linear_program_updates_all_registers_once_per_k_tile():
    program = to_program(matmul(M, K, N), AMDOpenCLRenderer(), opts=[Opt(OptOps.TC, 0, 0), Opt(OptOps.UPCAST, 1, 1)])
    linear = list(program.src[1].src)
    (wmma,) = [i for i, u in enumerate(linear) if u.op is Ops.WMMA]
    open_loops = []
    for u in linear[:wmma]:
        if u.op is Ops.RANGE:
            open_loops.append(u)
        elif u.op is Ops.END:
            open_loops.remove(u.src[0])
    assert [r.arg[1] for r in open_loops] == [AxisType.REDUCE] and open_loops[0].src[0].arg == K // 16
    assert program.arg.local_size == (32, 1, 1) and program.arg.global_size == (N // 16, M // 16, 1)
    assert "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32(stack0, stack1, (float8)(" in program.src[2].arg


@pytest.mark.parametrize("dtype_in, acc, call", [
    (dtypes.float16, dtypes.float16, "half16 wmma0 = __builtin_amdgcn_wmma_f16_16x16x16_f16_w32(stack0, stack1, (half16)("),
    (dtypes.bfloat16, dtypes.float32, "float8 wmma0 = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(stack0, stack1, (float8)("),
    (dtypes.bfloat16, dtypes.bfloat16, "short16 wmma0 = __builtin_amdgcn_wmma_bf16_16x16x16_bf16_w32(stack0, stack1, (short16)("),
])
def test_tc_renders_each_dtype_with_its_builtin(dtype_in, acc, call):
    source = to_program(matmul(M, K, N, dtype_in, acc), AMDOpenCLRenderer(), opts=[Opt(OptOps.TC, 0, 0)]).src[2].arg
    assert call in source
    assert ("short16 stack0" if dtype_in == dtypes.bfloat16 else "half16 stack0") in source


def test_tc_pads_every_operand_access():
    ast = apply_opts(matmul(17, 23, 29), [Opt(OptOps.TC, 0, 2)], RDNA3_TENSOR_CORES)
    loads = [u for u in ast.toposort() if u.op is Ops.INDEX and u.src[0].arg.slot in (1, 2)]
    stores = [u for u in ast.toposort() if u.op is Ops.INDEX and u.src[0].arg.slot == 0]
    assert len(loads) == 32 and all(len(u.src) == 3 for u in loads + stores)


@pytest.mark.parametrize("opts, renderer, message", [
    ([Opt(OptOps.TC, 0, 0)], CRenderer(), "no tensor cores"),
    ([Opt(OptOps.TC, 0, 0)], AMDOpenCLRenderer("gfx1030"), "no tensor cores"),
    ([Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.TC, 0, 0)], AMDOpenCLRenderer(), "TC must be the first opt"),
    ([Opt(OptOps.TC, 0, 0), Opt(OptOps.GROUP, 2, 3)], AMDOpenCLRenderer(), "tensor cores"),
    ([Opt(OptOps.TC, 0, 0), Opt(OptOps.PADTO, 3, 64)], AMDOpenCLRenderer(), "split off by an earlier opt"),
])
def test_tc_errors(opts, renderer, message):
    with pytest.raises(CodegenError, match=message):
        to_program(matmul(M, K, N), renderer, opts=opts)


def row_sums(rows: int, cols: int) -> UOp:
    out, a = UOp.param(0, dtypes.float32.ptr(rows)), UOp.param(1, dtypes.float32.ptr(rows * cols))
    i, r = UOp.range(rows, 0), UOp.range(cols, 1, AxisType.REDUCE)
    return UOp.sink(out.index(i).store(a.index(i * cols + r).load().reduce(r)).end(i))


@pytest.mark.parametrize("op, lane_stride, rest_stride", [(OptOps.GROUP, 1, 4), (OptOps.GROUPTOP, 6, 1)])
def test_group_and_grouptop_split(op, lane_stride, rest_stride):
    ast = apply_opts(row_sums(3, 24), [Opt(op, 1, 4)])
    _, rest, group = kernel_ranges(ast)
    index = next(u for u in ast.toposort() if u.op is Ops.INDEX and u.src[0].arg.slot == 1).src[1]
    assert group.arg[1] is AxisType.GROUP_REDUCE and (group.src[0].arg, rest.src[0].arg) == (4, 6)
    base = value_at(index, {ast.src[0].src[1]: 0, rest: 0, group: 0})
    assert value_at(index, {ast.src[0].src[1]: 0, rest: 0, group: 1}) - base == lane_stride
    assert value_at(index, {ast.src[0].src[1]: 0, rest: 1, group: 0}) - base == rest_stride


def test_padto_applies_to_locals_and_groups_only():
    ast = apply_opts(row_sums(6, 12), [Opt(OptOps.LOCAL, 0, 3), Opt(OptOps.GROUP, 1, 6), Opt(OptOps.PADTO, 2, 4), Opt(OptOps.PADTO, 3, 8)])
    assert [int(r.src[0].arg) for r in kernel_ranges(ast)] == [2, 2, 4, 8]
    with pytest.raises(CodegenError, match="only PADTO applies to LOCAL and GROUP"):
        apply_opts(row_sums(6, 12), [Opt(OptOps.UPCAST, 0, 3), Opt(OptOps.PADTO, 2, 4)])
    program = to_program(row_sums(6, 12), AMDOpenCLRenderer(), opts=[Opt(OptOps.LOCAL, 0, 0), Opt(OptOps.PADTO, 2, 8)])
    assert program.arg.local_size == (8, 1, 1) and "< 6l" in program.src[2].arg  # padded work-items gate their stores


# ---- the seed's test_gen_float4 counts, where they apply to the AMD renderer ----
def count_float4(program: UOp) -> tuple[int, int]:
    """(float4 loads, float4 stores) of a program as tinygrad counts them: vector accesses of 4-lane register blocks,
    once per iteration of the unrolled register loops around them."""
    linear, loads, stores, registers, i = list(program.src[1].src), 0, 0, [], 0
    while i < len(linear):
        node = linear[i]
        if node.op is Ops.RANGE and (found := find_vector_block(linear, i)) is not None and found[0].width == 4:
            block, end = found
            weight = math.prod(int(r.src[0].arg) for r in registers)
            loads += weight * sum(1 for u in block.values if u.op is Ops.LOAD)
            stores += weight * sum(1 for u in linear[i:end] if u.op is Ops.STORE and u.src[0] in block.accesses)
            i = end + 1
            continue
        if node.op is Ops.RANGE and node.arg[1] in (AxisType.UPCAST, AxisType.UNROLL):
            registers.append(node)
        elif node.op is Ops.END and node.src[0] in registers:
            registers.remove(node.src[0])
        i += 1
    return loads, stores


def add_2x8() -> UOp:
    out, a, b = (UOp.param(slot, dtypes.float32.ptr(16)) for slot in range(3))
    i, j = UOp.range(2, 0), UOp.range(8, 1)
    return UOp.sink(out.index(i * 8 + j).store(a.index(i * 8 + j).load() + b.index(i * 8 + j).load()).end(i, j))


@pytest.mark.parametrize("opts, expected", [
    ([Opt(OptOps.UPCAST, 1, 4)], (2, 1)),  # test_float4_basic
    ([Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 1, 2)], (4, 2)),  # test_float4_multidim
    ([], (0, 0)),
])
def test_gen_float4_counts(opts, expected):
    assert count_float4(to_program(add_2x8(), AMDOpenCLRenderer(), opts=opts)) == expected
