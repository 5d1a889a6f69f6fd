"""Adreno CP packet encodings checked by an independent decoder written from the adreno_pm4.xml bit layouts (parity
computed by counting bits), the kernel-argument layout against a byte-by-byte model, and the compute queue's stream."""

import struct

import pytest
from hcq_runtime.hcq2.cmdbuf import link  # (the package attribute `link` is shadowed by its link module)
from hcq_runtime.qcom import Image, QCOMComputeQueue, QCOMError, QCOMProgramInfo, build_lib, layout_kernargs, packets, parse_lib
from hypothesis import given, settings
from hypothesis import strategies as st

# facts, restated from adreno_pm4.xml / a6xx.xml rather than imported
CP_NOP, CP_WAIT_FOR_IDLE, CP_RUN_OPENCL, CP_LOAD_STATE6_FRAG, CP_WAIT_REG_MEM, CP_REG_TO_MEM, CP_EVENT_WRITE, CP_SET_MARKER = \
    0x10, 0x26, 0x31, 0x34, 0x3C, 0x3E, 0x46, 0x65
REG_SP_CS_NDRANGE_0, REG_SP_CS_CNTL_0, REG_SP_CS_CONFIG, REG_SP_CS_PVT_MEM_STACK_OFFSET = 0xB990, 0xA9B0, 0xA9BB, 0xA9BD
REG_SP_REG_PROG_ID_0, REG_CP_ALWAYS_ON_COUNTER = 0xB983, 0x980
CACHE_FLUSH_TS, CACHE_INVALIDATE = 4, 0x31


def odd_parity_bit(value: int) -> int:
    return 1 - bin(value).count("1") % 2


def decode(words):
    """[(kind, opcode or register, body)] of a stream of type-4 / type-7 packets, checking every parity bit."""
    out, i = [], 0
    while i < len(words):
        head = words[i]
        if head >> 28 == 4:
            count, reg = head & 0x7F, (head >> 8) & 0x3FFFF
            assert (head >> 7) & 1 == odd_parity_bit(count) and (head >> 27) & 1 == odd_parity_bit(reg)
            out.append(("reg", reg, words[i + 1:i + 1 + count]))
        else:
            assert head >> 28 == 7, f"header {head:#x}"
            count, opcode = head & 0x3FFF, (head >> 16) & 0x7F
            assert (head >> 15) & 1 == odd_parity_bit(count) and (head >> 23) & 1 == odd_parity_bit(opcode)
            out.append(("cmd", opcode, words[i + 1:i + 1 + count]))
        assert i + 1 + count <= len(words), "truncated packet"
        i += 1 + count
    return out


def registers(decoded):
    regs = {}
    for kind, reg, body in decoded:
        if kind == "reg":
            regs.update({reg + k: v for k, v in enumerate(body)})
    return regs


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 0x3FFFF), st.lists(st.integers(0, 0xFFFFFFFF), min_size=1, max_size=0x7F))
def test_pkt4_header_fields_and_parity(register, values):
    words = packets.pkt4(register, *values)
    assert decode(words) == [("reg", register, values)]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 0x7F), st.lists(st.integers(0, 0xFFFFFFFF), max_size=64))
def test_pkt7_header_fields_and_parity(opcode, body):
    words = packets.pkt7(opcode, *body)
    assert decode(words) == [("cmd", opcode, body)]


def test_encoders_refuse_what_does_not_fit():
    with pytest.raises(ValueError, match="1..127"):
        packets.pkt4(0xA9B0, *[0] * 128)
    with pytest.raises(ValueError, match="18-bit"):
        packets.pkt4(0x40000, 0)
    with pytest.raises(ValueError, match="1..1023"):
        packets.load_state6(1, 13, 1024, 0)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_kernargs_runs_land_at_their_offsets_with_zero_gaps(data):
    size = data.draw(st.sampled_from([0x100, 0x200, 0x900]))
    model = bytearray(size)
    runs, taken = [], set()
    for _ in range(data.draw(st.integers(0, 6))):
        offset = data.draw(st.integers(0, size - 8))
        kind = data.draw(st.sampled_from(["dwords", "u16", "u64"]))
        pieces = ([data.draw(st.integers(0, 0xFFFFFFFF))] if kind == "dwords" else
                  [struct.pack("<H", data.draw(st.integers(0, 0xFFFF)))] if kind == "u16" else
                  [v & 0xFFFFFFFF for v in [data.draw(st.integers(0, 2**64 - 1))] for v in (v, v >> 32)])
        raw = b"".join(p if isinstance(p, bytes) else struct.pack("<I", p) for p in pieces)
        span = set(range(offset, offset + len(raw)))
        if span & taken or offset + len(raw) > size:
            continue
        taken |= span
        model[offset:offset + len(raw)] = raw
        runs.append((offset, pieces))
    data.draw(st.randoms()).shuffle(runs)
    assert bytes(layout_kernargs(runs, size).data) == bytes(model)


def test_kernargs_refuse_overlaps_and_overflow():
    with pytest.raises(QCOMError, match="overlaps"):
        layout_kernargs([(0, [1, 2]), (4, [3])], 0x100)
    with pytest.raises(QCOMError, match="more than"):
        layout_kernargs([(0xFC, [1, 2])], 0x100)


def kernargs_size(tex, ibo, samplers):
    """The seed's formula: 2048 bytes of arguments, 0x40 per texture / UAV descriptor, 4 per sampler word, to 0x100."""
    return -(-(2048 + (tex + ibo) * 0x40 + samplers * 4) // 0x100) * 0x100


def program(**kw):
    base = dict(name="k", image=bytes(300), prg_offset=0, branchstack=0, pvtmem=0, shmem=0, fregs=4, hregs=0, buf_offs=(0x40, 0x50, 0x60))
    return QCOMProgramInfo(**{**base, **kw})


def test_exec_stream_registers_and_constant_upload_sized_to_the_kernargs():
    prog = program(consts=((0xABCD1234, 0x20, 4), (0x5678, 0x24, 2)))
    q = QCOMComputeQueue().exec(prog, 0x7000_0000, [0x1111_2222_3333, 0x4444_5555_0000], [-3], (5, 2, 1), (32, 2, 1))
    cmd, ib_bytes = q.build()
    decoded = decode(cmd.words[:ib_bytes // 4])
    assert [op for kind, op, _ in decoded if kind == "cmd"][:2] == [CP_SET_MARKER, CP_WAIT_FOR_IDLE]
    regs = registers(decoded)
    ndrange = regs[REG_SP_CS_NDRANGE_0]
    assert (ndrange & 3, (ndrange >> 2 & 0x3FF) + 1, (ndrange >> 12 & 0x3FF) + 1, (ndrange >> 22) + 1) == (3, 32, 2, 1)
    assert [regs[REG_SP_CS_NDRANGE_0 + k] for k in (1, 3, 5)] == [160, 4, 1]
    assert [regs[0xB999 + k] for k in range(3)] == [5, 2, 1]  # SP_CS_KERNEL_GROUP_X/Y/Z
    assert regs[REG_SP_CS_CNTL_0 + 4] | regs[REG_SP_CS_CNTL_0 + 5] << 32 == 0x7000_0000  # SP_CS_BASE
    loads = [body for kind, op, body in decoded if kind == "cmd" and op == CP_LOAD_STATE6_FRAG]
    const_units = [body[0] >> 22 for body in loads if (body[0] >> 14) & 3 == 1 and (body[0] >> 18) & 0xF == 13]
    # the seed's fix: the constant load covers the kernargs (in vec4s), not the 256-vec4 constant file
    assert const_units == [kernargs_size(0, 0, 0) // 16]
    assert [op for kind, op, _ in decoded if kind == "cmd" and op != CP_NOP][-2:] == [CP_RUN_OPENCL, CP_EVENT_WRITE]
    # the tail: kernargs right after the IB, the compiler's constants and the arguments at their offsets
    tail = bytes(cmd.data[ib_bytes:])
    assert ib_bytes % 0x100 == 0 and len(tail) == kernargs_size(0, 0, 0)
    assert struct.unpack_from("<I", tail, 0x20)[0] == 0xABCD1234 and struct.unpack_from("<H", tail, 0x24)[0] == 0x5678
    assert struct.unpack_from("<QQq", tail, 0x40)[0] == 0x1111_2222_3333
    assert struct.unpack_from("<Q", tail, 0x50)[0] == 0x4444_5555_0000 and struct.unpack_from("<q", tail, 0x60)[0] == -3
    assert not any(tail[:0x20] + tail[0x26:0x40] + tail[0x68:])  # zeros between and after the runs
    # the kernargs address and the device state are link-time values
    assert {p.what for p in cmd.patches} == {"data", "stack", "dummy"}


def test_textures_uavs_and_samplers_are_loaded_from_the_tail():
    prog = program(buf_offs=(0x40,), tex_cnt=1, ibo_cnt=1, samplers=(0x6060, 0x30, 0, 0, 0, 0, 0, 0))
    images = [Image(0x8000_0000, 4, 16), Image(0x9000_0000, 8, 16, itemsize=2)]
    cmd, ib_bytes = QCOMComputeQueue().exec(prog, 0x7000_0000, [0x1000], [], (1, 1, 1), (1, 1, 1),
                                            textures=images[:1], uavs=images[1:]).build()
    decoded = decode(cmd.words[:ib_bytes // 4])
    loads = {((b[0] >> 14) & 3, (b[0] >> 18) & 0xF): b[0] >> 22 for kind, op, b in decoded if kind == "cmd" and op == CP_LOAD_STATE6_FRAG}
    assert loads[(0, 5)] == 2 and loads[(1, 5)] == 1 and loads[(3, 13)] == 1  # samplers, textures, UAVs
    assert loads[(1, 13)] == kernargs_size(1, 1, 8) // 16
    config = registers(decoded)[REG_SP_CS_CONFIG]
    assert config & 0x100 and (config >> 9 & 0xFF, config >> 17 & 0x1F, config >> 22 & 0x7F) == (1, 2, 1)
    tail = bytes(cmd.data[ib_bytes:])
    ibo_off, tex_off, samp_off = 2048, 2048 + 0x40, 2048 + 0x80  # UAVs first, then textures, then samplers
    tex = struct.unpack_from("<16I", tail, tex_off)
    assert tex[0] >> 22 & 0xFF == 130 and tex[1] == 16 | 4 << 15 and tex[4] | tex[5] << 32 == 0x8000_0000  # FMT6_32_32_32_32_FLOAT
    pitch = 16 * 4 * 4
    assert tex[2] >> 29 == 1 and (tex[2] >> 7) & 0x3FFFFF == pitch and tex[2] & 0xF == (pitch & -pitch).bit_length() - 7
    uav = struct.unpack_from("<16I", tail, ibo_off)
    assert uav[0] == 98 << 22 and uav[4] | uav[5] << 32 == 0x9000_0000  # FMT6_16_16_16_16_FLOAT, no swizzle
    assert struct.unpack_from("<8I", tail, samp_off) == (0x6060, 0x30, 0, 0, 0, 0, 0, 0)


def test_signal_wait_timestamp_and_barrier_packets():
    q = QCOMComputeQueue().wait(0x5000, 7).timestamp(0x6000).memory_barrier().signal(0x5000, link("timeline"))
    decoded = decode(q.cmd.words)
    wait = next(body for kind, op, body in decoded if op == CP_WAIT_REG_MEM)
    assert wait == [5 | 1 << 4, 0x5000, 0, 7, 0xFFFFFFFF, 32]  # WRITE_GE, POLL_MEMORY
    stamp = next(body for kind, op, body in decoded if op == CP_REG_TO_MEM)
    assert stamp == [REG_CP_ALWAYS_ON_COUNTER | 2 << 18 | 1 << 30, 0x6000, 0]
    events = [body for kind, op, body in decoded if op == CP_EVENT_WRITE]
    assert [e[0] for e in events] == [CACHE_FLUSH_TS, CACHE_INVALIDATE, CACHE_FLUSH_TS, CACHE_FLUSH_TS]
    assert events[2][1:3] == [0x5000, 0] and {p.what for p in q.cmd.patches} == {"dummy", "timeline"}


def test_exec_refuses_bad_launches():
    with pytest.raises(QCOMError, match="takes 3 arguments"):
        QCOMComputeQueue().exec(program(), 0, [1], [], (1, 1, 1), (1, 1, 1))
    with pytest.raises(QCOMError, match="too large"):
        QCOMComputeQueue().exec(program(fregs=48), 0, [1, 2], [3], (1, 1, 1), (1024, 1, 1))


@settings(max_examples=50, deadline=None)
@given(st.text("abcdefgh_0123456789", min_size=1, max_size=40), st.lists(st.integers(0, 500), max_size=12, unique=True),
       st.lists(st.tuples(st.integers(0, 0xFFFF), st.integers(0, 200), st.sampled_from([2, 4])), max_size=4),
       st.integers(0, 1 << 16), st.integers(0, 1 << 15), st.binary(min_size=1, max_size=700))
def test_library_layout_round_trips_through_the_parser(name, slots, consts, pvtmem, shmem, image):
    offsets = [4 * s for s in slots]
    consts = tuple((value, units * size, size) for value, units, size in consts)
    info = parse_lib(build_lib(name, image, offsets, consts, pvtmem=pvtmem, shmem=shmem, fregs=7, hregs=3, branchstack=2), name)
    assert (info.name, info.image, info.buf_offs, info.consts) == (name, image, tuple(offsets), consts)
    assert (info.pvtmem, info.shmem, info.fregs, info.hregs, info.branchstack, info.samplers) == (pvtmem, shmem, 7, 3, 2, ())
    assert info.instr_units == -(-len(image) // 128)
