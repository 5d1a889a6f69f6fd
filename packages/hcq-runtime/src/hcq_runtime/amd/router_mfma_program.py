"""The MoE router's logits `x @ weight.T + bias` as one hand-written CDNA kernel on the matrix cores: the program
`router_mfma_program` gives `Tensor.custom_kernel` (llm-bench's `router_mfma` is its Tensor API, for olmoe).

bfloat16 inputs, 32 experts, float32 output. The kernel is written with amd-isa's instruction builders for gfx950 (and
gfx942, which has the same MFMA), assembled by amd-isa into a code object: no HIP or LLVM is involved, so
MOCKAMD:gfx950 runs it where no installed LLVM targets gfx950.

Layout (per workgroup of 4 waves, 64 rows of x): wave w computes rows 16w..16w+15 against all 32 experts as two 16x16
float32 accumulators of `v_mfma_f32_16x16x16_bf16`, stepping through K 16 at a time. In that instruction lane l holds
row (or expert) l % 16 and the four consecutive k values 4 (l // 16) .. + 3 of A (and of B = weight.T), which are 8
contiguous bytes of a row of x (of weight): each is one `global_load_dwordx2` straight into the operand registers.
Result register r of lane l is row 4 (l // 16) + r, column l % 16 (the CDNA3 matrix tables, as amd-isa's emulator
implements them); the bias (bfloat16, widened by a shift) is added there and each value stored.
"""

from __future__ import annotations

from uopir import UOp

from ..errors import DeviceError

#: experts the kernel is written for (two 16-wide accumulator tiles)
EXPERTS = 32
#: rows of x per workgroup (4 waves of 16)
BLOCK_ROWS = 64
#: targets whose MFMA has this form (gfx90a spells it v_mfma_f32_16x16x16bf16_1k)
TARGETS = ("gfx942", "gfx950")
#: gfx9 s_waitcnt immediates: vector memory done (vmcnt 0), scalar memory done (lgkmcnt 0); the other counters left at
#: their maxima (vmcnt bits 3:0 and 15:14, expcnt 6:4, lgkmcnt 11:8)
WAIT_VMEM, WAIT_SMEM = 0x0F70, 0xC07F


def kernel_insts(k: int, experts: int = EXPERTS) -> list:
    """The instructions of the kernel for rows of `k` bfloat16 values (kernel arguments: out, x, weight, bias
    pointers; one workgroup of 256 threads per 64 rows)."""
    from amd_isa import cdna as I  # noqa: N812 -- the instruction set, as a namespace

    s, v = I.s, I.v
    if k % 16 or experts != EXPERTS:
        raise DeviceError(f"the router kernel takes K a multiple of 16 and {EXPERTS} experts, got K={k}, E={experts}")
    row_bytes = 2 * k
    out: list = [
        I.s_load_dwordx8(s[4:11], s[0:1], 0),  # out, x, weight, bias
        I.v_and_b32_e32(v[1], 63, v[0]),  # lane
        I.v_lshrrev_b32_e32(v[2], 6, v[0]),  # wave
        I.v_and_b32_e32(v[3], 15, v[1]),  # lane % 16: the row (expert) of the operands, the column of the result
        I.v_lshrrev_b32_e32(v[4], 4, v[1]),  # lane // 16: which 4 k values (and which 4 result rows)
        I.s_lshl_b32(s[3], s[2], 6),  # the workgroup's first row
        I.s_mov_b32(s[12], row_bytes),  # (gfx9's three-operand instructions take no literal)
        I.v_lshlrev_b32_e32(v[5], 4, v[2]),
        I.v_add_u32_e32(v[5], s[3], v[5]),  # the wave's first row
        I.v_add_u32_e32(v[6], v[5], v[3]),  # this lane's row of x
        I.v_lshlrev_b32_e32(v[7], 3, v[4]),  # its 4 k values' byte offset in a 16-value step
        I.v_mul_lo_u32(v[6], v[6], s[12]),
        I.v_add_u32_e32(v[6], v[6], v[7]),  # x: row * K * 2 + 8 (lane // 16)
        I.v_mul_lo_u32(v[8], v[3], s[12]),
        I.v_add_u32_e32(v[8], v[8], v[7]),  # weight rows 0..15 (experts of the first tile)
        I.v_add_u32_e32(v[9], 16 * row_bytes, v[8]),  # experts 16..31
    ]
    out += [I.v_mov_b32_e32(v[r], 0) for r in range(16, 24)]  # the two accumulators
    out.append(I.s_waitcnt(WAIT_SMEM))
    for step in range(k // 16):
        if step:  # the next 16 k values: 32 bytes further along every row
            out += [I.s_add_u32(s[6], s[6], 32), I.s_addc_u32(s[7], s[7], 0), I.s_add_u32(s[8], s[8], 32), I.s_addc_u32(s[9], s[9], 0)]
        out += [
            I.global_load_dwordx2(v[24:25], v[6], s[6:7]),
            I.global_load_dwordx2(v[26:27], v[8], s[8:9]),
            I.global_load_dwordx2(v[28:29], v[9], s[8:9]),
            I.s_waitcnt(WAIT_VMEM),
            I.v_mfma_f32_16x16x16_bf16(v[16:19], v[24:25], v[26:27], v[16:19]),
            I.v_mfma_f32_16x16x16_bf16(v[20:23], v[24:25], v[28:29], v[20:23]),
        ]
    # the accumulators are read by vector ALU instructions next: let the matrix pipeline drain first
    out += [I.s_nop(7), I.s_nop(7), I.s_nop(7)]
    # result rows 4 (lane // 16) + r of the wave's 16, column lane % 16 of each tile
    out += [
        I.v_lshlrev_b32_e32(v[10], 2, v[4]),
        I.v_add_u32_e32(v[10], v[5], v[10]),  # the lane's first result row
        I.v_lshlrev_b32_e32(v[10], 7, v[10]),  # * 32 experts * 4 bytes
    ]
    for tile in range(2):
        out += [
            I.v_add_u32_e32(v[11], 16 * tile, v[3]),  # the expert
            I.v_lshlrev_b32_e32(v[12], 1, v[11]),
            I.global_load_ushort(v[13], v[12], s[10:11]),  # its bias, bfloat16
            I.v_lshlrev_b32_e32(v[12], 2, v[11]),
            I.v_add_u32_e32(v[12], v[10], v[12]),  # out byte offset of (first row, expert)
            I.s_waitcnt(WAIT_VMEM),
            I.v_lshlrev_b32_e32(v[13], 16, v[13]),  # bfloat16 -> float32
        ]
        for r in range(4):
            out += [I.v_add_f32_e32(v[14], v[16 + 4 * tile + r], v[13]),
                    I.global_store_dword(v[12], v[14], s[4:5], offset=r * EXPERTS * 4)]
    out.append(I.s_endpgm())
    return out


def code_object(k: int, target: str = "gfx950", experts: int = EXPERTS) -> bytes:
    """The kernel as a loadable code object for `target` (see `kernel_insts`), its kernel named `router_mfma`."""
    from amd_isa import CodeObject

    if target not in TARGETS:
        raise DeviceError(f"the router kernel is for {', '.join(TARGETS)}, not {target}")
    co = CodeObject.from_code(b"".join(inst.to_bytes() for inst in kernel_insts(k, experts)), target, kernel="router_mfma")
    co.descriptors["router_mfma"].kernarg_size = 32
    return co.to_bytes()




def router_mfma_program(rows: int, k: int, target: str) -> UOp:
    """The PROGRAM computing out (rows, 32) float32 = x (rows, k) @ weight.T + bias for bfloat16 x, weight (32, k) and
    bias (32,) on a `target` device (buffers out, x, weight, bias); rows a multiple of 64, k of 16."""
    from ..cpu import binary_program

    if rows <= 0 or rows % BLOCK_ROWS:
        raise DeviceError(f"the router kernel computes {BLOCK_ROWS} rows per workgroup: {rows} rows is not a multiple of {BLOCK_ROWS}")
    text = "\n".join(str(inst) for inst in kernel_insts(k))
    return binary_program("router_mfma", text, code_object(k, target), n_buffers=4, outs=(0,), global_size=(rows // BLOCK_ROWS, 1, 1),
                          local_size=(4 * 64, 1, 1), target=target)
