"""Compiling DS (LDS) instructions: loads, stores, two-address forms, atomics, swizzles and lane permutes."""

from collections.abc import Callable

import numpy as np

from ..inst import Inst
from .errors import unsupported
from .names import canonical
from .vmem import _from_registers, _lds_gather, _lds_scatter, _to_registers, atomic_op
from .wave_state import WaveState

Op = Callable[[WaveState], None]


def _aligned(addr: np.ndarray) -> bool:
    return not int(np.bitwise_or.reduce(addr)) & 3


def _dword_load(st: WaveState, addr: np.ndarray, offset: int, vdst: int, words: int) -> bool:
    """Fast path for loads of all lanes from a dword-aligned base: one fancy index of the LDS dword view. Returns False
    (and changes nothing) when an address is out of range, so the caller falls back to the zero-filling byte path."""
    index = (addr >> np.uint32(2)) + np.uint32(offset // 4)
    try:
        if words == 1:
            st.v[vdst] = st.lds32[index]
        else:
            st.v[vdst:vdst + words] = st.lds32[index[None, :] + np.arange(words, dtype=np.uint32)[:, None]]
    except IndexError:
        return False
    return True


def _dword_store(st: WaveState, addr: np.ndarray, offset: int, data: int, words: int) -> bool:
    """Fast path for stores of all lanes to a dword-aligned base (a later lane wins on a shared address)."""
    index = (addr >> np.uint32(2)) + np.uint32(offset // 4)
    if words > 1:
        index = index[None, :] + np.arange(words, dtype=np.uint32)[:, None]
    if int(index.max()) >= st.lds32.size:
        return False
    st.lds32[index] = st.v[data] if words == 1 else st.v[data:data + words]
    return True


def compile_ds(inst: Inst, pc: int) -> Op:
    """A closure executing one DS instruction against the workgroup's LDS."""
    name, f = canonical(inst), inst.fields
    if name == "ds_nop":
        return lambda st: None
    acc = bool(f.get("acc"))  # gfx90a+: the data registers are AGPRs (plain loads and stores only)
    if acc and not (name.startswith(("ds_load_", "ds_store_")) and "_2addr_" not in name):
        raise unsupported(inst, pc, "only plain DS loads and stores move accumulation registers")
    offset = f["offset0"] | (f["offset1"] << 8)
    addr_reg, vdst, data0 = f["addr"], f["vdst"], f["data0"]

    def lanes_and_addr(st: WaveState):
        lanes = st.lanes if st.exec_full else np.flatnonzero(st.exec_mask)
        return lanes, st.v[addr_reg, lanes].astype(np.int64)

    if "_2addr_" in name:
        return _compile_2addr(inst, name, f, lanes_and_addr)
    if name in ("ds_load_addtid_b32", "ds_store_addtid_b32"):
        return _compile_addtid(name, offset, vdst, data0)
    if name in ("ds_append", "ds_consume"):
        return _compile_append(name, offset, vdst)
    if name == "ds_condxchg32_rtn_b64":
        return _compile_condxchg(offset, lanes_and_addr, vdst, data0)
    if name in ("ds_permute_b32", "ds_bpermute_b32", "ds_bpermute_fi_b32"):
        return _compile_permute(name, offset, addr_reg, data0, vdst)
    if name == "ds_swizzle_b32":
        return _compile_swizzle(inst, pc, offset, addr_reg, vdst)
    if name.startswith("ds_load_") and "_tr" not in name:
        tail = name[len("ds_load_"):]
        kind_tail = tail.replace("_d16_hi", "").replace("_d16", "")
        nbytes = int(kind_tail[1:]) // 8
        kind = kind_tail[0]
        if "d16" in tail:
            kind = ("d16_hi_" if "hi" in tail else "d16_") + kind

        words = nbytes // 4 if kind == "b" and offset % 4 == 0 and not acc else 0

        def run_load(st: WaveState) -> None:
            if words and st.exec_full and _aligned(st.v[addr_reg]) and _dword_load(st, st.v[addr_reg], offset, vdst, words):
                return
            lanes, addr = lanes_and_addr(st)
            _to_registers(st, _lds_gather(st, addr + offset, nbytes), kind, vdst, lanes, st.exec_full, acc)
        return run_load
    if name.startswith("ds_store_") and "addtid" not in name:
        tail = name[len("ds_store_"):]
        hi16 = tail.endswith("d16_hi")
        nbytes = int(tail.replace("_d16_hi", "")[1:]) // 8

        words = nbytes // 4 if not hi16 and nbytes >= 4 and offset % 4 == 0 and not acc else 0

        def run_store(st: WaveState) -> None:
            if words and st.exec_full and _aligned(st.v[addr_reg]) and _dword_store(st, st.v[addr_reg], offset, data0, words):
                return
            lanes, addr = lanes_and_addr(st)
            _lds_scatter(st, addr + offset, _from_registers(st, data0, nbytes, lanes, hi16, acc))
        return run_store
    return _compile_ds_atomic(inst, pc, name, offset, lanes_and_addr)


def _compile_addtid(name: str, offset: int, vdst: int, data0: int) -> Op:
    """ds_load/store_addtid_b32: lane l accesses the dword at M0[15:0] + offset + 4*l (no address VGPR)."""
    def addresses(st: WaveState) -> tuple[np.ndarray, np.ndarray]:
        lanes = st.lanes if st.exec_full else np.flatnonzero(st.exec_mask)
        return lanes, (st.m0 & 0xFFFF) + offset + 4 * lanes.astype(np.int64)

    if name == "ds_load_addtid_b32":
        def run_load(st: WaveState) -> None:
            lanes, addr = addresses(st)
            _to_registers(st, _lds_gather(st, addr, 4), "b", vdst, lanes, st.exec_full)
        return run_load

    def run_store(st: WaveState) -> None:
        lanes, addr = addresses(st)
        _lds_scatter(st, addr, _from_registers(st, data0, 4, lanes, False))
    return run_store


def _compile_append(name: str, offset: int, vdst: int) -> Op:
    """ds_append / ds_consume: add (subtract) the number of active lanes to the dword at M0[15:0] + offset; every
    active lane gets the value before."""
    sign = 1 if name == "ds_append" else -1

    def run(st: WaveState) -> None:
        where = np.array([(st.m0 & 0xFFFF) + offset])
        old = int(_lds_gather(st, where, 4).view(np.uint32)[0, 0])
        new = (old + sign * int(st.exec_mask.sum())) & 0xFFFFFFFF
        _lds_scatter(st, where, np.array([new], np.uint32).view(np.uint8)[None, :])
        st.v[vdst] = np.where(st.exec_mask, old, st.v[vdst])
    return run


def _compile_condxchg(offset: int, lanes_and_addr, vdst: int, data0: int) -> Op:
    """ds_condxchg32_rtn_b64: at the 8-byte aligned address, each dword is replaced by the low 31 bits of its data
    dword if that dword's top bit is set; both old dwords return."""
    def run(st: WaveState) -> None:
        lanes, addr = lanes_and_addr(st)
        base = (addr + offset) & 0xFFF8
        for lane, a in zip(lanes.tolist(), base.tolist(), strict=True):
            for word in range(2):
                where = np.array([a + 4 * word])
                old = int(_lds_gather(st, where, 4).view(np.uint32)[0, 0])
                data = int(st.v[data0 + word, lane])
                if data >> 31:
                    _lds_scatter(st, where, np.array([data & 0x7FFFFFFF], np.uint32).view(np.uint8)[None, :])
                st.v[vdst + word, lane] = old
    return run


def _compile_2addr(inst: Inst, name: str, f: dict, lanes_and_addr) -> Op:
    wide = name.endswith("b64")
    size = 8 if wide else 4
    stride = size * (64 if "stride64" in name else 1)
    off0, off1 = f["offset0"] * stride, f["offset1"] * stride
    vdst, data0, data1 = f["vdst"], f["data0"], f["data1"]
    words = size // 4
    if name.startswith("ds_load"):
        # Dword offsets of the 2*words registers the pair fills, as a column to broadcast against the lane addresses.
        pair = np.array([off0 // 4 + w for w in range(words)] + [off1 // 4 + w for w in range(words)], np.uint32)[:, None]

        def run_load2(st: WaveState) -> None:
            if st.exec_full:
                addr32 = st.v[f["addr"]]
                if _aligned(addr32):
                    try:
                        st.v[vdst:vdst + 2 * words] = st.lds32[(addr32 >> np.uint32(2)) + pair]
                        return
                    except IndexError:
                        pass
            lanes, addr = lanes_and_addr(st)
            _to_registers(st, _lds_gather(st, addr + off0, size), "b", vdst, lanes, st.exec_full)
            _to_registers(st, _lds_gather(st, addr + off1, size), "b", vdst + words, lanes, st.exec_full)
        return run_load2
    if name.startswith("ds_storexchg"):
        def run_exchange2(st: WaveState) -> None:
            # Both old values return (to vdst and the registers after it) once both stores are done.
            lanes, addr = lanes_and_addr(st)
            old0, old1 = _lds_gather(st, addr + off0, size), _lds_gather(st, addr + off1, size)
            _lds_scatter(st, addr + off0, _from_registers(st, data0, size, lanes, False))
            _lds_scatter(st, addr + off1, _from_registers(st, data1, size, lanes, False))
            _to_registers(st, old0, "b", vdst, lanes, st.exec_full)
            _to_registers(st, old1, "b", vdst + words, lanes, st.exec_full)
        return run_exchange2
    if name.startswith("ds_store"):
        def run_store2(st: WaveState) -> None:
            if st.exec_full:
                addr32 = st.v[f["addr"]]
                limit = (int(addr32.max()) + max(off0, off1)) // 4 + words
                if _aligned(addr32) and limit <= st.lds32.size:
                    _dword_store(st, addr32, off0, data0, words)
                    _dword_store(st, addr32, off1, data1, words)
                    return
            lanes, addr = lanes_and_addr(st)
            _lds_scatter(st, addr + off0, _from_registers(st, data0, size, lanes, False))
            _lds_scatter(st, addr + off1, _from_registers(st, data1, size, lanes, False))
        return run_store2
    raise unsupported(inst, 0)


def _compile_permute(name: str, offset: int, addr_reg: int, data0: int, vdst: int) -> Op:
    backward = name.startswith("ds_bpermute")
    # RDNA4 ds_bpermute_fi_b32 fetches inactive source lanes too.
    fetch_inactive = name == "ds_bpermute_fi_b32"

    def run(st: WaveState) -> None:
        n = st.n_lanes
        index = ((st.v[addr_reg].astype(np.int64) + offset) // 4) % n
        data = st.v[data0].copy()
        active = st.exec_mask
        if backward:
            # Each lane reads the lane its address names (inactive source lanes read as zero).
            result = data[index] if fetch_inactive else np.where(active[index], data[index], 0)
        else:
            # Each active lane writes its data to the lane its address names; later lanes win.
            result = np.zeros(n, np.uint32)
            for lane in np.flatnonzero(active).tolist():
                result[index[lane]] = data[lane]
        st.v[vdst] = np.where(active, result, st.v[vdst])
    return run


def _compile_swizzle(inst: Inst, pc: int, offset: int, addr_reg: int, vdst: int) -> Op:
    if offset & 0x8000:
        # QDMode: each lane of a group of four picks lane ((offset >> 2*i) & 3) of its quad.
        picks = [(offset >> (2 * i)) & 3 for i in range(4)]

        def source_lane(lane: int) -> int:
            return (lane & ~3) | picks[lane & 3]
    else:
        and_mask, or_mask, xor_mask = offset & 0x1F, (offset >> 5) & 0x1F, (offset >> 10) & 0x1F

        def source_lane(lane: int) -> int:
            return (lane & ~0x1F) | ((((lane & 0x1F) & and_mask) | or_mask) ^ xor_mask)
    mapping = np.array([source_lane(lane) for lane in range(64)])

    def run(st: WaveState) -> None:
        src = mapping[: st.n_lanes]
        data = st.v[addr_reg]
        st.v[vdst] = np.where(st.exec_mask, np.where(st.exec_mask[src], data[src], 0), st.v[vdst])
    return run


def _compile_mskor(inst: Inst, name: str, offset: int, lanes_and_addr) -> Op:
    """ds_mskor: MEM = (MEM & ~data0) | data1, lane by lane; the _rtn form returns the old value."""
    f = inst.fields
    vdst, data0, data1 = f["vdst"], f["data0"], f["data1"]
    words = 2 if name.endswith("b64") else 1
    returns = "_rtn" in name

    def run(st: WaveState) -> None:
        lanes, addr = lanes_and_addr(st)
        for lane, at in zip(lanes.tolist(), (addr + offset).tolist(), strict=True):
            where = np.array([at])
            old = int.from_bytes(_lds_gather(st, where, 4 * words).tobytes(), "little")
            mask = sum(int(st.v[data0 + w, lane]) << (32 * w) for w in range(words))
            bits = sum(int(st.v[data1 + w, lane]) << (32 * w) for w in range(words))
            new = (old & ~mask) | bits
            _lds_scatter(st, where, np.frombuffer(new.to_bytes(4 * words, "little"), np.uint8)[None, :])
            if returns:
                for w in range(words):
                    st.v[vdst + w, lane] = (old >> (32 * w)) & 0xFFFFFFFF
    return run


def _compile_ds_atomic(inst: Inst, pc: int, name: str, offset: int, lanes_and_addr) -> Op:
    if name.startswith("ds_mskor"):
        return _compile_mskor(inst, name, offset, lanes_and_addr)
    op = name[3:].replace("_rtn", "")
    returns = "_rtn" in name
    op = {"storexchg_b32": "swap_b32", "storexchg_b64": "swap_b64", "cmpstore_b32": "cmpswap_b32", "cmpstore_b64": "cmpswap_b64",
          "cmpstore_f32": "cmpswap_f32", "cmpstore_f64": "cmpswap_f64"}.get(op, op)
    kind, fn, bits, words = atomic_op(inst, pc, op)
    f = inst.fields
    vdst, data0, data1 = f["vdst"], f["data0"], f["data1"]
    is_cmp = kind.startswith("cmpswap")
    mask = (1 << bits) - 1

    def run(st: WaveState) -> None:
        lanes, addr = lanes_and_addr(st)
        for lane, a in zip(lanes.tolist(), (addr + offset).tolist(), strict=True):
            where = np.array([a])
            old = int.from_bytes(_lds_gather(st, where, bits // 8).tobytes(), "little")
            # RDNA3 DS cmpstore takes the new value in data0 and the compare value in data1.
            data = sum(int(st.v[data0 + w, lane]) << (32 * w) for w in range(words))
            cmp = sum(int(st.v[data1 + w, lane]) << (32 * w) for w in range(words)) if is_cmp else 0
            new = fn(old, data, cmp, bits) & mask
            _lds_scatter(st, where, np.frombuffer(new.to_bytes(bits // 8, "little"), np.uint8)[None, :])
            if returns:
                for w in range(words):
                    st.v[vdst + w, lane] = (old >> (32 * w)) & 0xFFFFFFFF
    return run
