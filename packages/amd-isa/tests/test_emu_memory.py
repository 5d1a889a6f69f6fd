"""Vector memory in the emulator: GLOBAL/FLAT/SCRATCH loads and stores (sizes, sign/zero extension, d16 halves,
unaligned accesses at a buffer's end), atomics with repeated addresses, and DS (LDS) operations."""

import numpy as np
import pytest
from amd_isa import assemble_insts
from amd_isa.emu import Memory, MemoryFaultError, WaveState, run_program

N = 32


def setup(asm: str, memory: Memory, vgprs: dict[int, np.ndarray] | None = None, sgprs: dict[int, int] | None = None,
          scratch_size: int = 0, lds: np.ndarray | None = None) -> WaveState:
    state = WaveState(N)
    for reg, values in (vgprs or {}).items():
        state.v[reg] = np.asarray(values, np.uint64).astype(np.uint32)
    for reg, value in (sgprs or {}).items():
        state.s[reg] = value
    if lds is not None:
        state.attach_lds(lds)
    return run_program(assemble_insts(asm, "rdna3"), N, state=state, memory=memory, scratch_size=scratch_size)


def addr_regs(addresses: list[int]) -> dict[int, list[int]]:
    return {0: [a & 0xFFFFFFFF for a in addresses], 1: [a >> 32 for a in addresses]}


def test_global_load_sizes_and_extension() -> None:
    mem = Memory()
    data = np.arange(256, dtype=np.uint8) * 7 + 3
    base = mem.map(data)
    addrs = [base + 4 + 4 * i for i in range(N)]
    st = setup("global_load_u8 v2, v[0:1], off\nglobal_load_i8 v3, v[0:1], off offset:1\nglobal_load_u16 v4, v[0:1], off\n"
               "global_load_i16 v5, v[0:1], off offset:2\nglobal_load_b32 v6, v[0:1], off\nglobal_load_b64 v[8:9], v[0:1], off offset:-4",
               mem, addr_regs(addrs))
    raw = data.tobytes()
    for lane in range(N):
        at = 4 + 4 * lane
        assert st.v[2, lane] == raw[at]
        assert st.v[3, lane] == int.from_bytes(raw[at + 1:at + 2], "little", signed=True) & 0xFFFFFFFF
        assert st.v[4, lane] == int.from_bytes(raw[at:at + 2], "little")
        assert st.v[5, lane] == int.from_bytes(raw[at + 2:at + 4], "little", signed=True) & 0xFFFFFFFF
        assert st.v[6, lane] == int.from_bytes(raw[at:at + 4], "little")
        assert int(st.v[8, lane]) | int(st.v[9, lane]) << 32 == int.from_bytes(raw[at - 4:at + 4], "little")


def test_unaligned_loads_at_the_end_of_a_buffer_read_only_their_bytes() -> None:
    # The last 2 and 4 bytes of a 10-byte buffer: an unaligned load must not touch the (unmapped) next dword.
    mem = Memory()
    data = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], np.uint8)
    base = mem.map(data)
    st = setup("global_load_u16 v2, v[0:1], off offset:8\nglobal_load_b32 v3, v[0:1], off offset:6\nglobal_load_b32 v4, v[0:1], off offset:1",
               mem, addr_regs([base] * N))
    assert int(st.v[2, 0]) == 0x0A09
    assert int(st.v[3, 0]) == 0x0A090807
    assert int(st.v[4, 0]) == 0x05040302


def test_load_outside_mapped_memory_is_a_fault() -> None:
    mem = Memory()
    base = mem.map(np.zeros(8, np.uint8))
    with pytest.raises(MemoryFaultError, match="outside every mapped region"):
        setup("global_load_b32 v2, v[0:1], off offset:6", mem, addr_regs([base] * N))


def test_d16_loads_keep_the_other_half() -> None:
    mem = Memory()
    data = np.array([0x81, 0x92, 0xA3, 0xB4], np.uint8)
    base = mem.map(data)
    st = setup("global_load_d16_b16 v2, v[0:1], off\nglobal_load_d16_hi_b16 v3, v[0:1], off offset:2\n"
               "global_load_d16_i8 v4, v[0:1], off\nglobal_load_d16_hi_u8 v5, v[0:1], off offset:1",
               mem, {**addr_regs([base] * N), 2: [0xDEAD0000] * N, 3: [0x0000BEEF] * N, 4: [0x12340000] * N, 5: [0x00005678] * N})
    assert int(st.v[2, 0]) == 0xDEAD9281
    assert int(st.v[3, 0]) == 0xB4A3BEEF
    assert int(st.v[4, 0]) == 0x1234FF81
    assert int(st.v[5, 0]) == 0x00925678


def test_global_stores_with_saddr_and_exec() -> None:
    mem = Memory()
    words, low_bytes, high_halves = np.zeros(N, np.uint32), np.zeros(N, np.uint8), np.zeros(N, np.uint16)
    regions = [mem.map(words), mem.map(low_bytes), mem.map(high_halves)]
    values = [0x11223344 + 0x01010101 * lane for lane in range(N)]
    exec_mask = 0x5555FFFF
    sgprs = {}
    for i, base in enumerate(regions):
        sgprs[4 + 2 * i], sgprs[5 + 2 * i] = base & 0xFFFFFFFF, base >> 32
    setup(f"s_mov_b32 exec_lo, {exec_mask:#x}\nglobal_store_b32 v0, v2, s[4:5]\nglobal_store_b8 v1, v2, s[6:7]\n"
          "global_store_d16_hi_b16 v3, v2, s[8:9]", mem, {0: [4 * lane for lane in range(N)], 1: list(range(N)), 2: values,
                                                       3: [2 * lane for lane in range(N)]}, sgprs=sgprs)
    for lane in range(N):
        active = (exec_mask >> lane) & 1
        assert int(words[lane]) == (values[lane] if active else 0)
        assert int(low_bytes[lane]) == (values[lane] & 0xFF if active else 0)
        assert int(high_halves[lane]) == (values[lane] >> 16 if active else 0)


def test_atomics_apply_lane_by_lane_and_return_the_old_value() -> None:
    mem = Memory()
    counter = np.array([10, 0, 0xFFFFFFF0, 5], np.uint32)
    base = mem.map(counter)
    st = setup("global_atomic_add_u32 v2, v[0:1], v3, off glc\nglobal_atomic_max_i32 v[0:1], v4, off offset:4\n"
               "global_atomic_cmpswap_b32 v5, v[0:1], v[6:7], off offset:12 glc",
               mem, {**addr_regs([base] * N), 3: list(range(1, N + 1)), 4: [(lane - 16) & 0xFFFFFFFF for lane in range(N)], 6: [99] * N,
                     7: [5] * N})
    assert counter[0] == 10 + sum(range(1, N + 1))
    # Old values returned in lane order: 10, 11, 13, 16, ...
    olds = [10 + sum(range(1, lane + 1)) for lane in range(N)]
    assert [int(x) for x in st.v[2]] == olds
    assert counter[1] == N - 17
    assert counter[3] == 99, "the first lane's compare matches and swaps; the others see 99"
    assert int(st.v[5, 0]) == 5 and int(st.v[5, 1]) == 99


def test_scratch_is_private_per_lane() -> None:
    st = setup("v_mov_b32 v3, 16\nscratch_store_b32 off, v2, off offset:8\nscratch_store_b32 v3, v2, off offset:4\n"
               "scratch_load_b32 v4, off, off offset:8\nscratch_load_u16 v5, v3, off offset:6", Memory(),
               {2: [0xA0B0C0D0 + lane for lane in range(N)]}, scratch_size=64)
    assert [int(x) for x in st.v[4]] == [0xA0B0C0D0 + lane for lane in range(N)]
    assert [int(x) for x in st.v[5]] == [(0xA0B0C0D0 + lane) >> 16 for lane in range(N)]
    with pytest.raises(MemoryFaultError, match="private segment"):
        setup("scratch_load_b32 v4, off, off offset:64", Memory(), scratch_size=64)


def test_ds_loads_stores_two_address_and_out_of_range() -> None:
    lds = np.zeros(1024, np.uint8)
    values = [0x01020304 * (lane + 1) & 0xFFFFFFFF for lane in range(N)]
    st = setup("ds_store_b32 v0, v2 offset:4\nds_store_2addr_b32 v0, v2, v3 offset0:64 offset1:96\n"
               "ds_load_b32 v4, v0 offset:4\nds_load_2addr_stride64_b32 v[6:7], v8 offset1:1\nds_load_u8 v9, v0 offset:5\n"
               "ds_load_i16 v10, v0 offset:6\nds_load_b32 v11, v12\nds_store_b32 v12, v2",
               Memory(), {0: [4 * lane for lane in range(N)], 2: values, 3: [~v & 0xFFFFFFFF for v in values], 8: [0] * N,
                          12: [2000] * N, 11: [7] * N}, lds=lds)
    words = lds.view(np.uint32)
    assert [int(x) for x in words[1:1 + N]] == values
    assert [int(x) for x in words[64:64 + N]] == values
    assert [int(x) for x in words[96:96 + N]] == [~v & 0xFFFFFFFF for v in values]
    assert [int(x) for x in st.v[4]] == values
    assert int(st.v[6, 0]) == int(words[0]) and int(st.v[7, 0]) == int(words[64])
    assert [int(x) for x in st.v[9]] == [(v >> 8) & 0xFF for v in values]
    assert [int(x) for x in st.v[10]] == [(((v >> 16) ^ 0x8000) - 0x8000) & 0xFFFFFFFF for v in values]
    assert [int(x) for x in st.v[11]] == [0] * N, "out-of-range LDS loads return zero"


def test_ds_atomics_and_lane_permutes() -> None:
    lds = np.zeros(256, np.uint8)
    st = setup("ds_add_rtn_u32 v2, v0, v1\nds_max_u32 v0, v1 offset:4\nds_bpermute_b32 v3, v4, v1\nds_permute_b32 v5, v4, v1\n"
               "ds_swizzle_b32 v6, v1 offset:0x41f",
               Memory(), {0: [0] * N, 1: [lane * 3 for lane in range(N)], 4: [4 * ((lane + 5) % N) for lane in range(N)]}, lds=lds)
    words = lds.view(np.uint32)
    assert int(words[0]) == sum(lane * 3 for lane in range(N))
    assert [int(x) for x in st.v[2]] == [sum(k * 3 for k in range(lane)) for lane in range(N)]
    assert int(words[1]) == (N - 1) * 3
    assert [int(x) for x in st.v[3]] == [((lane + 5) % N) * 3 for lane in range(N)]
    assert [int(x) for x in st.v[5]] == [((lane - 5) % N) * 3 for lane in range(N)]
    assert [int(x) for x in st.v[6]] == [(lane ^ 1) * 3 for lane in range(N)]


def test_flat_addresses_reach_global_lds_and_scratch() -> None:
    mem = Memory()
    buf = np.array([0xCAFEF00D], np.uint32)
    base = mem.map(buf)
    lds = np.zeros(64, np.uint8)
    lds[8:12] = [0x44, 0x33, 0x22, 0x11]
    st = setup("s_mov_b64 s[0:1], src_shared_base\nv_mov_b32 v2, 8\nv_mov_b32 v3, s1\nflat_load_b32 v4, v[2:3]\n"
               "flat_load_b32 v5, v[0:1]\ns_mov_b64 s[2:3], src_private_base\nv_mov_b32 v6, 12\nv_mov_b32 v7, s3\n"
               "flat_store_b32 v[6:7], v5\nscratch_load_b32 v8, off, off offset:12", mem, addr_regs([base] * N), lds=lds, scratch_size=16)
    assert [int(x) for x in st.v[4]] == [0x11223344] * N
    assert [int(x) for x in st.v[5]] == [0xCAFEF00D] * N
    assert [int(x) for x in st.v[8]] == [0xCAFEF00D] * N


def test_ds_mskor() -> None:
    lds = np.zeros(64, np.uint8)
    lds[:4] = [0xFF, 0x00, 0xF0, 0x0F]
    st = setup("ds_mskor_rtn_b32 v3, v0, v1, v2", Memory(), {0: [0] * N, 1: [0x0000FFFF] * N, 2: [lane for lane in range(N)]}, lds=lds)
    old = 0x0FF000FF
    for lane in range(N):
        assert int(st.v[3, lane]) == old
        old = (old & ~0xFFFF) | lane
    assert int(lds[:4].view(np.uint32)[0]) == old


def test_memory_map_rejects_strided_arrays_and_overlaps() -> None:
    mem = Memory()
    with pytest.raises(MemoryFaultError, match="C-contiguous"):
        mem.map(np.zeros((4, 4), np.float32)[:, 1])
    base = mem.map(np.zeros(16, np.uint8))
    with pytest.raises(MemoryFaultError, match="overlaps"):
        mem.map(np.zeros(16, np.uint8), address=base + 8)


@pytest.mark.parametrize("op,size,signed", [("global_load_lds_b32", 4, False), ("global_load_lds_i8", 1, True), ("global_load_lds_u16", 2, False)])
def test_global_load_to_lds_writes_m0_plus_offset_plus_lane_slots(op: str, size: int, signed: bool) -> None:
    mem = Memory()
    data = np.random.default_rng(size).integers(0, 2**32, 512, dtype=np.uint64).astype(np.uint32)
    base = mem.map(data)
    addresses = [base + 8 * lane for lane in range(N)]
    lds = np.zeros(4096, np.uint8)
    st = setup(f"{op} v[0:1], off offset:4", mem, addr_regs(addresses), {125: 256}, lds=lds)
    raw = data.view(np.uint8)
    for lane in range(N):
        value = int.from_bytes(raw[8 * lane + 4:8 * lane + 4 + size].tobytes(), "little")
        if signed and value >> (8 * size - 1):
            value -= 1 << (8 * size)
        # LDS gets lane l's value, widened to a dword, at M0 + offset + 4*l.
        assert int(st.lds32[(256 + 4 + 4 * lane) // 4]) == value & 0xFFFFFFFF
