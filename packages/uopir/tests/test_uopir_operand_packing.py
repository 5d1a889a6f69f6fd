"""`operand_packs`: which kernels get a packed operand, and that the copy's layout is the one the rewritten kernel reads
(every sampled element lands where the kernel looks for it). Values of whole matmuls against numpy are in the
scheduler's test_sched_operand_packing."""

import random

from uopir import AxisType, CRenderer, Ops, UOp, dtypes, operand_packs
from uopir.codegen.packing import (
    PACK_MIN_ALIASED_REDUCE,
    PACK_MIN_REDUCE,
    PACK_MIN_SPLIT_REUSE,
    PACK_MIN_TRANSPOSED_REDUCE,
    PACK_MIN_TRANSPOSED_REUSE,
)


def matmul(n: int, m: int, k: int, ldb: int | None = None, batch: int = 1, transposed: bool = False) -> UOp:
    """(batch, n, k) @ (batch, k, m) with B's rows `ldb` apart, or with `transposed` B stored (batch, m, k)."""
    ldb = ldb or m
    out, a, b = (UOp.param(i, dtypes.float32.ptr(s)) for i, s in enumerate((batch * n * m, batch * n * k, batch * k * ldb)))
    # a single matrix has no batch range, as the scheduler lowers it
    z, i, j, r = UOp.range(batch, 3) if batch > 1 else UOp.const(0), UOp.range(n, 0), UOp.range(m, 1), UOp.range(k, 2, AxisType.REDUCE)
    b_at = z * k * m + j * k + r if transposed else z * k * ldb + r * ldb + j
    value = (a.index(z * n * k + i * k + r).load() * b.index(b_at).load()).reduce(r)
    return UOp.sink(out.index(z * n * m + i * m + j).store(value).end(*([z] if batch > 1 else []), i, j))


def at(expr: UOp, values: dict[UOp, int]) -> int:
    ret = expr.substitute({r: UOp.const(v, r.dtype) for r, v in values.items()}).simplify()
    assert ret.op is Ops.CONST
    return int(ret.arg)


def index_of(ast: UOp, slot: int, *, store: bool) -> UOp:
    node = next(u for u in ast.toposort() if u.op is (Ops.STORE if store else Ops.LOAD) and u.src[0].src[0].op is Ops.PARAM
                and u.src[0].src[0].arg.slot == slot)
    return node.src[0].src[1]


def test_the_right_operand_of_a_large_matmul_is_packed_in_cache_lines():
    ast = matmul(64, 1024, 1024)
    new, packs = operand_packs(ast, CRenderer.packed_operand_bytes)
    assert [(p.slot, p.size, p.dtype) for p in packs] == [(2, 1024 * 1024, dtypes.float32)]
    loads = [u.src[0].src[1] for u in new.toposort() if u.op is Ops.LOAD and u.src[0].src[0].arg.slot == 2]
    assert len(loads) == 1 and {Ops.FLOORDIV, Ops.FLOORMOD} <= {u.op for u in loads[0].toposort()}


def test_no_pack_where_it_would_not_pay():
    for ast in (matmul(64, 1024, PACK_MIN_ALIASED_REDUCE // 2),  # a short reduce loop
                matmul(64, 784, PACK_MIN_REDUCE // 2),  # a shortish one whose rows do not alias in the cache
                matmul(32, 1024, 1024),  # too few rows reuse the copy
                matmul(64, 24, 1024),  # rows of 24 floats: 96 bytes apart, close enough for the prefetchers
                matmul(64, 32, 256, ldb=32)):  # a small operand
        assert operand_packs(ast, 64) == (ast, ())
    assert operand_packs(matmul(64, 1024, 1024), 0)[1] == ()


def test_a_short_reduce_loop_is_packed_only_where_its_strip_aliases_in_the_cache():
    # 256 floats a row: a strip's lines fall into 4 of the 64 cache sets, so 64 of them evict each other
    (pack,) = operand_packs(matmul(256, 256, PACK_MIN_ALIASED_REDUCE, batch=8), CRenderer.packed_operand_bytes)[1]
    assert pack.slot == 2 and pack.size == 8 * PACK_MIN_ALIASED_REDUCE * 256
    for ast in (matmul(256, 784, PACK_MIN_ALIASED_REDUCE, batch=8),  # rows spread over every set
                matmul(256, 256, PACK_MIN_ALIASED_REDUCE // 2, batch=8)):  # a strip that fits
        assert operand_packs(ast, CRenderer.packed_operand_bytes) == (ast, ())


def test_an_operand_read_transposed_is_packed_when_enough_rows_reuse_it():
    (pack,) = operand_packs(matmul(PACK_MIN_TRANSPOSED_REUSE, 256, 64, batch=8, transposed=True), CRenderer.packed_operand_bytes)[1]
    assert pack.slot == 2 and pack.size == 8 * 64 * 256
    for ast in (matmul(PACK_MIN_TRANSPOSED_REUSE // 2, 256, 64, batch=8, transposed=True),  # too few rows
                matmul(PACK_MIN_TRANSPOSED_REUSE, 256, PACK_MIN_TRANSPOSED_REDUCE // 2, batch=8, transposed=True)):  # short loop
        assert operand_packs(ast, CRenderer.packed_operand_bytes) == (ast, ())


def test_the_copy_holds_each_element_where_the_kernel_reads_it():
    random.seed(0)
    cases = ((8, 256, 256, 64, None, False), (1, 64, 256, 512, 256, False), (2, 64, 64, 256, 272, False), (3, 80, 256, 512, None, False),
             (1, 64, 512, 512, None, False), (8, 256, 256, 64, None, True), (2, 512, 128, 256, None, True))
    for batch, n, m, k, ldb, transposed in cases:
        ast = matmul(n, m, k, ldb, batch, transposed)
        new, packs = operand_packs(ast, 64)
        assert len(packs) == 1
        (pack,) = packs
        orig_off = index_of(ast, 2, store=False)
        new_off = index_of(new, 2, store=False)
        dest, src = index_of(pack.ast, 0, store=True), index_of(pack.ast, 1, store=False)
        kernel_ranges = {r.arg[0]: r for r in ast.toposort() if r.op is Ops.RANGE}
        pack_ranges = sorted((r for r in pack.ast.toposort() if r.op is Ops.RANGE), key=lambda r: r.arg[0])
        seen = set()
        for _ in range(60):
            point = {r: random.randrange(int(r.src[0].arg)) for r in pack_ranges}
            d = at(dest, point)
            assert 0 <= d < pack.size and d not in seen  # the copy writes each element once
            seen.add(d)
            # the kernel, at the loop values that read the same source element, reads that position of the copy
            i, j, r = (kernel_ranges[a] for a in (0, 1, 2))
            # the copy loops over the operand's rows outside its strips, a transposed operand's strips outside its rows
            strip, kk, lane = pack_ranges[-3:] if transposed else (pack_ranges[-2], pack_ranges[-3], pack_ranges[-1])
            values = {i: 0, j: point[strip] * 16 + point[lane], r: point[kk]}
            if batch > 1:
                values[kernel_ranges[3]] = point[pack_ranges[0]]
            assert at(src, point) == at(orig_off, values)
            assert at(new_off, values) == d


def test_columns_no_strip_divides_are_packed_in_strips_whose_last_one_overlaps():
    random.seed(1)
    for batch, n, m, k, transposed in ((1, 128, 1000, 512, False), (2, 128, 999, 256, False), (1, 300, 300, 1024, False),
                                       (1, PACK_MIN_TRANSPOSED_REUSE, 1023, 64, True)):
        ast = matmul(n, m, k, None, batch, transposed)
        new, (pack,) = operand_packs(ast, 64)
        strips = -(-m // 16)
        assert pack.size == batch * k * strips * 16
        # the kernel's column axis became strips (the axis's number) and lanes (a new one), as the copy's
        kernel_ranges = {r.arg[0]: r for r in ast.toposort() if r.op is Ops.RANGE}
        new_ranges = {r.arg[0]: r for r in new.toposort() if r.op is Ops.RANGE}
        t, lane_axis = new_ranges[1], max(new_ranges.values(), key=lambda r: r.arg[0])
        assert int(t.src[0].arg) == strips and int(lane_axis.src[0].arg) == 16
        orig_off, new_off = index_of(ast, 2, store=False), index_of(new, 2, store=False)
        out_off, new_out = index_of(ast, 0, store=True), index_of(new, 0, store=True)
        dest, src = index_of(pack.ast, 0, store=True), index_of(pack.ast, 1, store=False)
        pack_ranges = sorted((r for r in pack.ast.toposort() if r.op is Ops.RANGE), key=lambda r: r.arg[0])
        strip, kk, lane = pack_ranges[-3:] if transposed else (pack_ranges[-2], pack_ranges[-3], pack_ranges[-1])
        seen = set()
        for _ in range(80):
            point = {r: random.randrange(int(r.src[0].arg)) for r in pack_ranges}
            point[strip] = random.choice([strips - 1, strips - 2, point[strip]])  # the last strips more often
            d = at(dest, point)
            assert 0 <= d < pack.size and d not in seen
            seen.add(d)
            column = min(point[strip] * 16, m - 16) + point[lane]
            values = {kernel_ranges[0]: 0, kernel_ranges[1]: column, kernel_ranges[2]: point[kk]}
            split = {kernel_ranges[0]: 0, t: point[strip], lane_axis: point[lane], kernel_ranges[2]: point[kk]}
            if batch > 1:
                values[kernel_ranges[3]] = split[kernel_ranges[3]] = point[pack_ranges[0]]
            assert at(src, point) == at(orig_off, values)  # the copy holds that column's element...
            assert at(new_off, split) == d  # ...where the kernel reads it, at the strip and lane that compute that column
            assert at(new_out, split) == at(out_off, values)


def test_a_kernel_that_reads_its_output_is_not_split_in_overlapping_strips():
    ast = matmul(64, 1000, 512)
    out = next(u for u in ast.toposort() if u.op is Ops.STORE)
    idx = out.src[0]
    accumulate = ast.substitute({out: idx.store(out.src[1] + idx.load())})
    assert operand_packs(accumulate, 64) == (accumulate, ())
    assert operand_packs(matmul(64, 1024, 512), 64)[1]  # (a whole number of strips is packed as before)


def test_few_rows_keep_an_operand_no_strip_divides_in_place():
    assert operand_packs(matmul(PACK_MIN_SPLIT_REUSE // 2, 1000, 512), 64)[1] == ()
    assert operand_packs(matmul(PACK_MIN_SPLIT_REUSE, 1000, 512), 64)[1]
