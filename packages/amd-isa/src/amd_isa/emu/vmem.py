"""Compiling vector memory instructions: GLOBAL/FLAT/SCRATCH loads, stores and atomics, and DS (LDS) operations.

Every access works on the active lanes only: addresses are computed per lane, bytes are gathered or scattered through
the segment (flat memory, the wave's private scratch, the workgroup's LDS), and register data moves as (dword, lane)
blocks of the VGPR array.
"""

from collections.abc import Callable

import numpy as np

from ..inst import Inst
from .errors import MemoryFaultError, unsupported
from .fp import f32_to_bf16
from .names import canonical
from .operand_access import PRIVATE_APERTURE_HI, SHARED_APERTURE_HI
from .wave_state import WaveState

Op = Callable[[WaveState], None]
U32, U64 = np.uint32, np.uint64


# --- segments -------------------------------------------------------------------------------------------------------
def _lds_gather(st: WaveState, offsets: np.ndarray, nbytes: int) -> np.ndarray:
    # Out-of-range LDS reads return zero on the hardware.
    offsets = offsets.astype(np.int64)
    ok = offsets + nbytes <= st.lds.size
    idx = np.where(ok, offsets, 0)[:, None] + np.arange(nbytes)
    data = st.lds[idx] if st.lds.size else np.zeros(idx.shape, np.uint8)
    return np.where(ok[:, None], data, 0).astype(np.uint8)


def _lds_scatter(st: WaveState, offsets: np.ndarray, payload: np.ndarray) -> None:
    # Out-of-range LDS writes are dropped on the hardware.
    offsets = offsets.astype(np.int64)
    ok = offsets + payload.shape[1] <= st.lds.size
    st.lds[offsets[ok][:, None] + np.arange(payload.shape[1])] = payload[ok]


def _scratch_index(st: WaveState, lanes: np.ndarray, offsets: np.ndarray, nbytes: int) -> tuple:
    offsets = offsets.astype(np.int64)
    if offsets.size and (offsets.min() < 0 or offsets.max() + nbytes > st.scratch.shape[1]):
        raise MemoryFaultError(f"scratch access at offset {int(offsets.max())} is outside the wave's {st.scratch.shape[1]}-byte "
                               "private segment; give the kernel descriptor (or run_program's scratch_size) enough scratch")
    return lanes[:, None], offsets[:, None] + np.arange(nbytes)


def _scratch_gather(st: WaveState, lanes: np.ndarray, offsets: np.ndarray, nbytes: int) -> np.ndarray:
    return st.scratch[_scratch_index(st, lanes, offsets, nbytes)]


def _scratch_scatter(st: WaveState, lanes: np.ndarray, offsets: np.ndarray, payload: np.ndarray) -> None:
    st.scratch[_scratch_index(st, lanes, offsets, payload.shape[1])] = payload


def _flat_split(addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hi = addresses >> U64(32)
    return hi == U64(SHARED_APERTURE_HI), hi == U64(PRIVATE_APERTURE_HI)


def _flat_gather(st: WaveState, lanes: np.ndarray, addresses: np.ndarray, nbytes: int) -> np.ndarray:
    shared, private = _flat_split(addresses)
    if not shared.any() and not private.any():
        return st.memory.gather(addresses, nbytes)
    out = np.zeros((addresses.size, nbytes), np.uint8)
    glob = ~shared & ~private
    out[glob] = st.memory.gather(addresses[glob], nbytes)
    out[shared] = _lds_gather(st, addresses[shared] & U64(0xFFFFFFFF), nbytes)
    out[private] = _scratch_gather(st, lanes[private], addresses[private] & U64(0xFFFFFFFF), nbytes)
    return out


def _flat_scatter(st: WaveState, lanes: np.ndarray, addresses: np.ndarray, payload: np.ndarray) -> None:
    shared, private = _flat_split(addresses)
    glob = ~shared & ~private
    st.memory.scatter(addresses[glob], payload[glob])
    if shared.any():
        _lds_scatter(st, addresses[shared] & U64(0xFFFFFFFF), payload[shared])
    if private.any():
        _scratch_scatter(st, lanes[private], addresses[private] & U64(0xFFFFFFFF), payload[private])


# --- register data <-> bytes ----------------------------------------------------------------------------------------
def _load_kind(name: str) -> tuple[int, str]:
    """(bytes, kind) of a load: kind is "b" (whole dwords), "u"/"i" (extend to 32), "d16"/"d16_hi" variants."""
    tail = name.split("load_", 1)[1]
    d16 = "d16" in tail
    hi = "hi" in tail
    tail = tail.replace("d16_hi_", "").replace("d16_", "").replace("_d16_hi", "").replace("_d16", "")
    kind, size = tail[0], int(tail[1:])
    return size // 8, (("d16_hi_" if hi else "d16_") + kind) if d16 else kind


def _to_registers(st: WaveState, data: np.ndarray, kind: str, vdst: int, lanes: np.ndarray, full: bool, acc: bool = False) -> None:
    """Write loaded bytes (lanes, nbytes) to VGPRs (AGPRs when `acc`, CDNA's acc bit) starting at vdst, for the given lanes."""
    nbytes = data.shape[1]
    file = st.a if acc else st.v
    if kind == "b":
        words = np.ascontiguousarray(data).view(U32).T
        if full:
            file[vdst:vdst + words.shape[0]] = words
        else:
            file[vdst:vdst + words.shape[0], lanes] = words
        return
    raw = data[:, 0].astype(np.int64) if nbytes == 1 else data[:, 0].astype(np.int64) | (data[:, 1].astype(np.int64) << 8)
    if kind.endswith("i"):
        bits = 8 * nbytes
        raw = np.where(raw >> (bits - 1), raw - (1 << bits), raw)
    if kind.startswith("d16"):
        half = 1 if kind.startswith("d16_hi") else 0
        file.view(np.uint16)[vdst, 2 * lanes + half] = (raw & 0xFFFF).astype(np.uint16)
        return
    file[vdst, lanes] = (raw & 0xFFFFFFFF).astype(U32)


def _from_registers(st: WaveState, vdata: int, nbytes: int, lanes: np.ndarray, hi16: bool, acc: bool = False) -> np.ndarray:
    """(lanes, nbytes) bytes of store data taken from VGPRs (AGPRs when `acc`) starting at vdata (d16_hi stores take the high half)."""
    words = max(1, nbytes // 4)
    block = np.ascontiguousarray((st.a if acc else st.v)[vdata:vdata + words, lanes].T).view(np.uint8)
    if hi16:
        return block[:, 2:2 + nbytes]
    return block[:, :nbytes]


# --- GLOBAL / FLAT / SCRATCH ----------------------------------------------------------------------------------------
def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) else value


def segment_of(inst: Inst) -> str:
    """GLOBAL, FLAT or SCRATCH (RDNA4 spells the formats VGLOBAL, VFLAT, VSCRATCH)."""
    return inst.fmt.removeprefix("V")


def mem_fields(inst: Inst) -> tuple[int, int, int, int]:
    """(vaddr, vdata, vdst, signed offset) of a GLOBAL/FLAT/SCRATCH instruction, whatever the architecture names them."""
    f, layout = inst.fields, inst.layout["fields"]
    off_name = "ioffset" if "ioffset" in layout else "offset"
    width = layout[off_name][0] - layout[off_name][1] + 1
    return f.get("addr", f.get("vaddr", 0)), f.get("data", f.get("vsrc", 0)), f.get("vdst", 0), _signed(f.get(off_name, 0), width)


def _address_fn(inst: Inst) -> Callable[[WaveState, np.ndarray], np.ndarray]:
    """Per-lane address (flat address, or scratch offset) for the given lanes."""
    f, fmt = inst.fields, segment_of(inst)
    vaddr, _, _, offset = mem_fields(inst)
    null = inst.arch.null_code
    saddr = f.get("saddr", null)
    has_saddr = saddr != null and not (inst.arch.name == "cdna" and saddr == 0x7F)
    if fmt == "SCRATCH":
        use_v = bool(f.get("sve", not has_saddr))

        def scratch_addr(st: WaveState, lanes: np.ndarray) -> np.ndarray:
            base = st.s[saddr] if has_saddr else 0
            v = st.v[vaddr, lanes].astype(np.int64) if use_v else 0
            return np.broadcast_to(np.asarray(v + base + offset, np.int64) & 0xFFFFFFFF, lanes.shape)
        return scratch_addr
    if fmt == "GLOBAL" and has_saddr:
        def global_saddr(st: WaveState, lanes: np.ndarray) -> np.ndarray:
            base = st.s[saddr] | (st.s[saddr + 1] << 32)
            # All lanes active (lanes is st.lanes): a row slice, not a fancy-index copy.
            low = st.v[vaddr] if lanes is st.lanes else st.v[vaddr, lanes]
            return np.add(low, U64((base + offset) & 0xFFFFFFFFFFFFFFFF), dtype=U64)
        return global_saddr

    def vector_addr(st: WaveState, lanes: np.ndarray) -> np.ndarray:
        if lanes is st.lanes:
            low, high = st.v[vaddr], st.v[vaddr + 1]
        else:
            low, high = st.v[vaddr, lanes], st.v[vaddr + 1, lanes]
        addr = np.left_shift(high, U64(32), dtype=U64) | low
        return addr + U64(offset & 0xFFFFFFFFFFFFFFFF) if offset else addr
    return vector_addr


def _segment(fmt: str):
    if fmt == "SCRATCH":
        return _scratch_gather, _scratch_scatter
    if fmt == "FLAT":
        return _flat_gather, _flat_scatter
    return (lambda st, lanes, addr, n: st.memory.gather(addr, n)), (lambda st, lanes, addr, payload: st.memory.scatter(addr, payload))


def compile_vmem(inst: Inst, pc: int) -> Op:
    """A closure executing one GLOBAL/FLAT/SCRATCH instruction."""
    name = canonical(inst)
    if name in ("global_inv", "global_wb", "global_wbinv"):
        return lambda st: None
    address = _address_fn(inst)
    segment = segment_of(inst)
    gather, scatter = _segment(segment)
    _, vdata, vdst, _ = mem_fields(inst)
    acc = bool(inst.fields.get("acc"))  # CDNA: the data registers are AGPRs
    if name in ("global_load_addtid_b32", "global_store_addtid_b32"):
        return _compile_addtid(inst, name, vdata, vdst, acc)
    if "_load_lds_" in name and "addtid" not in name:
        return compile_load_to_lds(name, address, gather, mem_fields(inst)[3])
    if "_load_" in name and "lds" not in name and "addtid" not in name and "_tr" not in name and "block" not in name:
        nbytes, kind = _load_kind(name)

        words = nbytes // 4 if kind == "b" and segment == "GLOBAL" else 0

        def run_load(st: WaveState) -> None:
            full = st.exec_full
            lanes = st.lanes if full else np.flatnonzero(st.exec_mask)
            addresses = address(st, lanes)
            if words:
                block = st.memory.load_dwords(addresses, words)
                if block is not None:
                    file = st.a if acc else st.v
                    if full:
                        file[vdst:vdst + words] = block
                    else:
                        file[vdst:vdst + words, lanes] = block
                    return
            _to_registers(st, gather(st, lanes, addresses, nbytes), kind, vdst, lanes, full, acc)
        return run_load
    if "_store_" in name and "addtid" not in name and "block" not in name:
        tail = name.split("store_", 1)[1]
        hi16 = "d16_hi" in tail
        nbytes = int(tail.replace("d16_hi_", "")[1:]) // 8

        def run_store(st: WaveState) -> None:
            lanes = st.lanes if st.exec_full else np.flatnonzero(st.exec_mask)
            scatter(st, lanes, address(st, lanes), _from_registers(st, vdata, nbytes, lanes, hi16, acc))
        return run_store
    if "_atomic_" in name:
        if acc:
            raise unsupported(inst, pc, "atomics on accumulation registers are not emulated")
        return compile_atomic(inst, pc, address, gather, scatter, vdata, vdst)
    raise unsupported(inst, pc)


def _compile_addtid(inst: Inst, name: str, vdata: int, vdst: int, acc: bool) -> Op:
    """global_load/store_addtid_b32: lane l accesses the dword at SADDR + offset + 4*l (no address VGPR)."""
    saddr, offset = inst.fields.get("saddr", 0), mem_fields(inst)[3]

    def addresses(st: WaveState) -> tuple[np.ndarray, np.ndarray]:
        lanes = st.lanes if st.exec_full else np.flatnonzero(st.exec_mask)
        base = (st.s[saddr] | st.s[saddr + 1] << 32) + offset
        return lanes, (base + 4 * lanes.astype(np.int64)).astype(U64)

    if "_load_" in name:
        def run_load(st: WaveState) -> None:
            lanes, addr = addresses(st)
            _to_registers(st, st.memory.gather(addr, 4), "b", vdst, lanes, st.exec_full, acc)
        return run_load

    def run_store(st: WaveState) -> None:
        lanes, addr = addresses(st)
        st.memory.scatter(addr, _from_registers(st, vdata, 4, lanes, False, acc))
    return run_store


def compile_load_to_lds(name: str, address, gather, inst_offset: int) -> Op:
    """A load whose data goes to LDS instead of VGPRs (global/scratch/buffer `*_load_lds_*`): lane l's value, extended
    to a dword for bytes and shorts, is written at M0 + inst_offset + l * max(4, size) (LLVM: the immediate offset
    applies to both the memory and the LDS address)."""
    nbytes, kind = _load_kind(name.replace("_load_lds_", "_load_"))
    slot = max(4, nbytes)

    def run(st: WaveState) -> None:
        lanes = st.lanes if st.exec_full else np.flatnonzero(st.exec_mask)
        data = gather(st, lanes, address(st, lanes), nbytes)
        if kind != "b":
            raw = data[:, 0].astype(np.int64) if nbytes == 1 else data[:, 0].astype(np.int64) | (data[:, 1].astype(np.int64) << 8)
            if kind == "i":
                raw = np.where(raw >> (8 * nbytes - 1), raw - (1 << (8 * nbytes)), raw)
            data = (raw & 0xFFFFFFFF).astype(U32)[:, None].view(np.uint8)
        _lds_scatter(st, (st.m0 + inst_offset + lanes * slot) & 0xFFFFFFFF, data)
    return run


# Atomic ops on Python ints: name -> fn(old, data, compare) -> new value.
ATOMICS: dict[str, Callable[[int, int, int, int], int]] = {
    "swap": lambda old, data, cmp, bits: data, "add": lambda old, data, cmp, bits: old + data, "sub": lambda old, data, cmp, bits: old - data,
    "rsub": lambda old, data, cmp, bits: data - old,
    "min_i": lambda old, data, cmp, bits: min(_signed(old, bits), _signed(data, bits)),
    "max_i": lambda old, data, cmp, bits: max(_signed(old, bits), _signed(data, bits)),
    "min_u": lambda old, data, cmp, bits: min(old, data), "max_u": lambda old, data, cmp, bits: max(old, data),
    "and": lambda old, data, cmp, bits: old & data, "or": lambda old, data, cmp, bits: old | data, "xor": lambda old, data, cmp, bits: old ^ data,
    "inc": lambda old, data, cmp, bits: 0 if old >= data else old + 1,
    "dec": lambda old, data, cmp, bits: data if old == 0 or old > data else old - 1,
    "cmpswap": lambda old, data, cmp, bits: data if old == cmp else old,
    "csub": lambda old, data, cmp, bits: old - data if old >= data else 0,
    "add_f": lambda old, data, cmp, bits: _fbits(_fval(old, bits) + _fval(data, bits), bits),
    "min_f": lambda old, data, cmp, bits: _fbits(np.fmin(_fval(old, bits), _fval(data, bits)), bits),
    "max_f": lambda old, data, cmp, bits: _fbits(np.fmax(_fval(old, bits), _fval(data, bits)), bits),
    "cmpswap_f": lambda old, data, cmp, bits: data if _fval(old, bits) == _fval(cmp, bits) else old,
    "cond_sub_u32": lambda old, data, cmp, bits: old - data if old >= data else old,
    "pk_add_f16": lambda old, data, cmp, bits: _pk_add(old, data, np.float16),
    "pk_add_bf16": lambda old, data, cmp, bits: _pk_add(old, data, "bf16"),
}


def _pk_add(old: int, data: int, kind) -> int:
    """Two packed 16-bit float adds (each half rounded to nearest even)."""
    halves = np.array([old & 0xFFFF, old >> 16, data & 0xFFFF, data >> 16], np.uint16)
    if kind == "bf16":
        a = (halves.astype(U32) << U32(16)).view(np.float32)
        total = f32_to_bf16(a[:2] + a[2:])
    else:
        values = halves.view(np.float16)
        total = (values[:2] + values[2:]).view(np.uint16)
    return int(total[0]) | int(total[1]) << 16


def _fval(raw: int, bits: int):
    return np.array(raw, np.uint64 if bits == 64 else U32).view(np.float64 if bits == 64 else np.float32)[()]


def _fbits(value, bits: int) -> int:
    return int(np.array(value, np.float64 if bits == 64 else np.float32).view(np.uint64 if bits == 64 else U32))


def atomic_op(inst: Inst, pc: int, op: str) -> tuple[str, Callable[[int, int, int, int], int], int, int]:
    """The ATOMICS kind, its function, bit width and dword count of atomic op name `op` ("add_u32", "cmpswap_b64", ...);
    an op with no ATOMICS entry is unsupported."""
    kind = _atomic_kind(op)
    if kind not in ATOMICS:
        raise unsupported(inst, pc)
    bits = 64 if op.endswith("64") else 32
    return kind, ATOMICS[kind], bits, bits // 32


def _atomic_kind(op: str) -> str:
    """The ATOMICS key of an atomic op name such as "min_i32", "add_f32", "cmpswap_b64" (or the name itself)."""
    if op in ATOMICS:
        return op
    base, _, suffix = op.rpartition("_")
    if suffix.startswith("f"):
        return f"{base}_f" if f"{base}_f" in ATOMICS else base
    if base in ("min", "max"):
        return f"{base}_{suffix[0]}"
    return base


def compile_atomic(inst: Inst, pc: int, address, gather, scatter, vdata: int, vdst: int) -> Op:
    """A vector atomic: each active lane in turn reads its old value through `gather`, combines it with its data
    (VGPRs from `vdata`; compare-swap takes the compare value after the data) and stores through `scatter`; the old
    value goes to `vdst` when the instruction returns it."""
    name = canonical(inst)
    op = name.split("_atomic_", 1)[1]
    kind, fn, bits, words = atomic_op(inst, pc, op)
    f = inst.fields
    # The return-pre-op-value bit: GLC on RDNA3, SC0 on CDNA, TH bit 0 on RDNA4.
    returns = bool(f.get("glc", 0) or f.get("sc0", 0) or f.get("th", 0) & 1)
    is_cmpswap = kind.startswith("cmpswap")
    mask = (1 << bits) - 1

    def run(st: WaveState) -> None:
        lanes = np.flatnonzero(st.exec_mask)
        addrs = address(st, lanes)
        for j, lane in enumerate(lanes.tolist()):
            # Lanes update one after another in lane order, so repeated addresses see each other's results.
            lane_arr, addr = lanes[j:j + 1], addrs[j:j + 1]
            old = int.from_bytes(gather(st, lane_arr, addr, bits // 8).tobytes(), "little")
            data = sum(int(st.v[vdata + w, lane]) << (32 * w) for w in range(words))
            cmp = sum(int(st.v[vdata + words + w, lane]) << (32 * w) for w in range(words)) if is_cmpswap else 0
            new = fn(old, data, cmp, bits) & mask
            scatter(st, lane_arr, addr, np.frombuffer(new.to_bytes(bits // 8, "little"), np.uint8)[None, :])
            if returns:
                for w in range(words):
                    st.v[vdst + w, lane] = (old >> (32 * w)) & 0xFFFFFFFF
    return run
