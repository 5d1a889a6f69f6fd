"""Compiling SMEM instructions: scalar loads (dwords, and RDNA4's sign/zero-extended bytes and shorts), gfx9 scalar
stores and atomics, and the cache controls, prefetches and probes that have no effect in the emulator.

The address is the 64-bit SGPR-pair base (48 bits of a buffer descriptor for s_buffer_*) plus the immediate offset and
the SOFFSET SGPR; dword accesses ignore the low two address bits, as the hardware does.
"""

from collections.abc import Callable

import numpy as np

from ..inst import Inst
from .errors import unsupported
from .names import canonical
from .vmem import _signed, atomic_op
from .wave_state import WaveState

Op = Callable[[WaveState], None]
M64 = 0xFFFFFFFFFFFFFFFF
NO_EFFECT = ("s_dcache_inv", "s_gl1_inv", "s_dcache_wb", "s_icache_inv", "s_dcache_inv_vol", "s_dcache_wb_vol", "s_dcache_discard",
             "s_dcache_discard_x2", "s_atc_probe", "s_atc_probe_buffer", "s_prefetch_data", "s_prefetch_inst", "s_prefetch_data_pc_rel",
             "s_prefetch_inst_pc_rel", "s_buffer_prefetch_data")
# Sub-dword loads (RDNA4): suffix -> (bytes, signed).
NARROW = {"u8": (1, False), "i8": (1, True), "u16": (2, False), "i16": (2, True)}


def _address_fn(inst: Inst, name: str) -> Callable[[WaveState], int]:
    """The byte address of an SMEM access, before alignment."""
    fields = inst.fields
    sbase = fields["sbase"] << 1
    soffset = fields.get("soffset", inst.arch.null_code)
    use_soffset = soffset != inst.arch.null_code
    if "ioffset" in fields:
        offset = _signed(fields["ioffset"], 24)
    elif inst.arch.name == "cdna":
        # gfx9: with IMM clear the offset field names an SGPR; SOFFSET_EN adds the soffset SGPR to an immediate.
        if fields.get("imm", 0):
            offset, use_soffset = _signed(fields["offset"], 21), bool(fields.get("soffset_en", 0))
        else:
            offset, soffset, use_soffset = 0, fields["offset"] & 0x7F, True
    else:
        offset = _signed(fields.get("offset", 0), 21)
    buffer = name.startswith("s_buffer")

    def address(st: WaveState) -> int:
        base = st.s[sbase] | (st.s[sbase + 1] << 32)
        if buffer:
            base &= 0xFFFFFFFFFFFF
        return (base + offset + (st.s[soffset] if use_soffset else 0)) & M64
    return address


def compile_smem(inst: Inst, pc: int) -> Op:
    """A closure executing one SMEM instruction."""
    name = canonical(inst)
    if name in NO_EFFECT:
        return lambda st: None
    sdata = inst.fields["sdata"]
    if name in ("s_memtime", "s_memrealtime"):
        def run_time(st: WaveState) -> None:
            # A monotonic clock: the wave's executed instruction count.
            st.write_s(sdata, st.steps & 0xFFFFFFFF)
            st.write_s(sdata + 1, st.steps >> 32)
        return run_time
    if name.startswith("s_scratch_"):
        raise unsupported(inst, pc, "scalar scratch accesses are not emulated")
    address = _address_fn(inst, name)
    if "_atomic_" in name:
        return _compile_atomic(inst, pc, name, address, sdata)
    kind = name.rsplit("_", 1)[1]
    store = "_store_" in name
    if kind in NARROW and not store:
        nbytes, signed = NARROW[kind]

        def run_narrow(st: WaveState) -> None:
            value = int.from_bytes(st.memory.read(address(st), nbytes).tobytes(), "little")
            st.write_s(sdata, (_signed(value, 8 * nbytes) if signed else value) & 0xFFFFFFFF)
        return run_narrow
    dwords = int(kind.removeprefix("b")) // 32
    if store:
        def run_store(st: WaveState) -> None:
            words = np.array([st.s[sdata + i] for i in range(dwords)], np.uint32)
            st.memory.write(address(st) & ~3, words)
        return run_store

    def run_load(st: WaveState) -> None:
        words = st.memory.read(address(st) & ~3, 4 * dwords).view(np.uint32).tolist()
        for i, word in enumerate(words):
            st.write_s(sdata + i, word)
    return run_load


def _compile_atomic(inst: Inst, pc: int, name: str, address: Callable[[WaveState], int], sdata: int) -> Op:
    """gfx9 s_atomic_* / s_buffer_atomic_*: one read-modify-write of the scalar data; GLC returns the old value."""
    op = name.split("_atomic_", 1)[1]
    kind, fn, bits, words = atomic_op(inst, pc, op)
    returns = bool(inst.fields.get("glc", 0))
    is_cmpswap = kind.startswith("cmpswap")

    def run(st: WaveState) -> None:
        addr = address(st) & ~3
        old = int.from_bytes(st.memory.read(addr, bits // 8).tobytes(), "little")
        data = sum(st.s[sdata + w] << (32 * w) for w in range(words))
        cmp = sum(st.s[sdata + words + w] << (32 * w) for w in range(words)) if is_cmpswap else 0
        new = fn(old, data, cmp, bits) & ((1 << bits) - 1)
        st.memory.write(addr, new.to_bytes(bits // 8, "little"))
        if returns:
            for w in range(words):
                st.write_s(sdata + w, (old >> (32 * w)) & 0xFFFFFFFF)
    return run
