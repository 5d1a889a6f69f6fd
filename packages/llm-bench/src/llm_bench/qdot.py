"""Matrix products on the CPU by hand-written C kernels: 8-bit activations times GGML blocks, and float16 matrices.

A matmul `x @ W.T` whose W is a 2-D Q4_0, Q4_1 or Q8_0 matrix (in the default "q8" activation mode) runs as one C
kernel per shape that never expands W to float:

- the kernel first rounds the activations, per row and per 32-element block, as llama.cpp's Q8 activations are and
  with the same float32 operations as `quantize_activations_np`: d = max|x| / 127, q = round-half-even(x * (1 / d))
  as int8 (q = 0 where d = 0), plus the block's integer sum of q;
- each weight block is dotted with the matching activation block in integers (`u8 x s8 -> s32`: AVX-512 VNNI
  `vpdpbusd` where the target has it, else AVX2/AVX-512BW `maddubs`/`madd`, else plain C), eight blocks at a time
  reduced to one lane each, and the blocks' float scales are applied to those integer sums: Q4_1 gives
  d_w * d_x * sum(q_w * q_x) + m_w * d_x * sum(q_x), Q4_0 and Q8_0 d_w * d_x * sum((q_w - offset) * q_x) (Q8_0 under
  VNNI carries a +128 offset so the dot is unsigned x signed, corrected exactly in integers).

The weight stays in the file's layout (row-major blocks, `(out, n_blocks * block_bytes)` bytes); the kernel splits the
rows between the cores and reuses each unpacked weight block for up to `TOKEN_BLOCK` tokens of a prompt.
Mathematically the product equals `q8_roundtrip_np(x) @ dequantize(W).T`, which is how the numpy reference computes
it; only the float summation order differs. Float16 matrices get `f16_matmul` (F16C conversion, float32 FMAs, no
rounding of x). The target's instruction set is chosen by the C preprocessor from the compiler's `-march=native` macros,
so one source serves every x86 CPU, and any other architecture in plain C. Other devices compute the same values in the
graph (`q8_roundtrip` before a dequantizing matmul).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from hcq_runtime import Buffer, Device, c_program
from uop_scheduler import Tensor, dtypes

from .errors import ModelError
from .ggml_types import BLOCK_LAYOUTS, GGMLType
from .model_api import ACTIVATION_MODES

#: elements per activation block (every supported weight type has 32-element blocks)
QBLOCK = 32
#: the weight types the kernel multiplies in integers
QDOT_TYPES = frozenset({GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q8_0})


def check_activations(mode: str) -> str:
    """`mode` if it is an activation mode (`ACTIVATION_MODES`), else ModelError naming them."""
    if mode not in ACTIVATION_MODES:
        raise ModelError(f"unknown activation mode {mode!r}: choose one of {', '.join(ACTIVATION_MODES)}")
    return mode


def int_dot_weight(ggml_type: GGMLType, shape: tuple[int, ...], activations: str = "q8") -> bool:
    """Whether a weight matrix of `ggml_type` and element shape (out, in) is multiplied with 8-bit activations: a 2-D
    Q4_0/Q4_1/Q8_0 matrix (stacks of experts are not) in "q8" mode. The numpy reference and every Tensor device follow
    this rule.

    Both backends round the same way, yet they do not agree token for token over long generations as they do in "float"
    mode: a rounding step turns a 1-ulp difference of its input (the backends sum in different orders) into a whole
    quantum, up to 1/127 of the block's largest value. On SmolLM2 the backends' logits differ by up to ~1 (teacher
    forced) in "q8" mode and ~1e-4 in "float" mode; "float" is the exact-reference mode."""
    return activations == "q8" and ggml_type in QDOT_TYPES and len(shape) == 2 and shape[-1] % QBLOCK == 0


def quantize_activations_np(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32 (..., k) with k % 32 == 0 -> (q int8 (..., k), d float32 (..., k/32), sums int32 (..., k/32))."""
    x = np.asarray(x, dtype=np.float32)
    blocks = x.reshape(*x.shape[:-1], x.shape[-1] // QBLOCK, QBLOCK)
    d = (np.abs(blocks).max(axis=-1) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d > 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.rint(blocks * inv[..., None]).astype(np.int8)
    return q.reshape(x.shape), d, q.astype(np.int32).sum(axis=-1, dtype=np.int32)


def q8_roundtrip_np(x: np.ndarray) -> np.ndarray:
    """The activations as the kernel sees them: d * q per block, float32 (the reference's documented quantization)."""
    q, d, _ = quantize_activations_np(x)
    blocks = q.reshape(*q.shape[:-1], q.shape[-1] // QBLOCK, QBLOCK).astype(np.float32) * d[..., None]
    return blocks.reshape(q.shape).astype(np.float32)


@dataclass(frozen=True)
class QuantizedActivations:
    """`quantize_activations`' result as Tensors: q int8 (n, k), d float32 (n, k/32), sums int32 (n, k/32)."""

    q: Tensor
    d: Tensor
    sums: Tensor


def quantize_activations(x: Tensor) -> QuantizedActivations:
    """The Tensor-graph form of `quantize_activations_np` (same float32 operations, so the same bits)."""
    n, k = x.shape
    if k % QBLOCK:
        raise ModelError(f"quantized activations need a multiple of {QBLOCK} elements per row, got {k}")
    blocks = x.reshape(n, k // QBLOCK, QBLOCK)
    d = blocks.abs().max(axis=-1) / 127.0
    inv = (d > 0).where(1.0 / d, 0.0)
    q = (blocks * inv.unsqueeze(-1)).round().cast(dtypes.int8)
    sums = q.cast(dtypes.int32).sum(axis=-1, dtype=dtypes.int32)
    return QuantizedActivations(q.reshape(n, k).contiguous(), d.contiguous(), sums.contiguous())


#: blocks interleaved into one group by `repack_rows`
GROUP = 8


def _header_bytes(ggml_type: GGMLType) -> int:
    """Bytes before a block's quants: its float16 scale, and Q4_1's minimum."""
    return 4 if ggml_type is GGMLType.Q4_1 else 2


def repack_rows(raw: np.ndarray, ggml_type: GGMLType) -> np.ndarray:
    """The kernel's storage of raw `ggml_type` rows (uint8, (rows, n_blocks * block_bytes)), the same size: each run of
    eight whole blocks becomes one group, their eight float16 scales first (then Q4_1's eight minimums), then their
    quants interleaved four bytes at a time (four bytes of block 0, of block 1, ... of block 7, then the next four of
    each), so one 32-byte load holds the same four quants of all eight blocks and a dot product lane is one block; the
    blocks after the last whole group stay as they are. Every row moves its bytes the same way: one gather by the
    row's byte order (`_repack_order`), 3x faster than the reshapes and copies that define it (a model's load)."""
    return np.ascontiguousarray(np.take(raw, _repack_order(ggml_type, raw.shape[1]), axis=1))


#: `repack_rows` as a CPU routine: bufs[0] the destination rows, bufs[1] the source rows (both contiguous, the same
#: size); vals: the rows, bytes per row, per block and before a block's quants. Each core takes a share of the rows.
_REPACK_SRC = r"""
#include <stdint.h>
#include <string.h>
void qd_repack(void **bufs, const long long *vals, int core_id, int n_cores) {
  uint8_t *dst = bufs[0];
  const uint8_t *src = bufs[1];
  long long rows = vals[0], row_bytes = vals[1], bb = vals[2], head = vals[3];
  long long groups = row_bytes / bb / 8, chunks = (bb - head) / 4;
  for (long long r = rows * core_id / n_cores; r < rows * (core_id + 1) / n_cores; r++) {
    const uint8_t *in = src + r * row_bytes;
    uint8_t *out = dst + r * row_bytes;
    for (long long g = 0; g < groups; g++, in += 8 * bb) {
      for (long long j = 0; j < 8; j++, out += 2) memcpy(out, in + j * bb, 2);          /* the scales */
      if (head == 4)
        for (long long j = 0; j < 8; j++, out += 2) memcpy(out, in + j * bb + 2, 2);    /* Q4_1's minimums */
      for (long long c = 0; c < chunks; c++)                                            /* the quants, 4 bytes a block */
        for (long long j = 0; j < 8; j++, out += 4) memcpy(out, in + j * bb + head + 4 * c, 4);
    }
    memcpy(out, in, (size_t)(row_bytes - groups * 8 * bb));                             /* the blocks after the groups */
  }
}
"""


def repack_rows_into(dest: Buffer, raw: np.ndarray, ggml_type: GGMLType) -> None:
    """`repack_rows(raw, ggml_type)` written into `dest`, a buffer of raw's size on a CPU device, by a native routine on
    the device's cores instead of numpy's gather and a copy after it (most of a model's load: SmolLM2's TensorModel
    0.18-0.19 -> 0.10-0.11 s)."""
    if raw.size == 0:
        return
    raw = np.ascontiguousarray(raw)
    dev = Device[dest.device]
    _repack_program(dest.device)([dest.address, raw.ctypes.data], [raw.shape[0], raw.shape[1], BLOCK_LAYOUTS[ggml_type].block_bytes,
                                                                    _header_bytes(ggml_type)], n_cores=min(dev.n_cores, max(raw.shape[0], 1)))


@functools.cache
def _repack_program(device: str):
    dev = Device[device]
    return dev.program("qd_repack", dev.compiler.compile(_REPACK_SRC))


@functools.cache
def _repack_order(ggml_type: GGMLType, row_bytes: int) -> np.ndarray:
    """Where each byte of a repacked row comes from: `_repack_blocks` applied to the positions 0..row_bytes-1."""
    order = _repack_blocks(np.arange(row_bytes, dtype=np.int64)[None, :], ggml_type)[0]
    order.flags.writeable = False  # shared by every call
    return order


def _repack_blocks(raw: np.ndarray, ggml_type: GGMLType) -> np.ndarray:
    """`repack_rows` by reshapes and copies: the definition of the layout, for arrays of any dtype."""
    bb = BLOCK_LAYOUTS[ggml_type].block_bytes
    rows, nb = raw.shape[0], raw.shape[1] // bb
    ng = nb // GROUP
    blocks = raw.reshape(rows, nb, bb)
    full = blocks[:, : ng * GROUP].reshape(rows, ng, GROUP, bb)
    head = _header_bytes(ggml_type)
    parts = [full[..., 0:2].reshape(rows, ng, 2 * GROUP)]
    if head == 4:
        parts.append(full[..., 2:4].reshape(rows, ng, 2 * GROUP))
    quants = full[..., head:].reshape(rows, ng, GROUP, (bb - head) // 4, 4).transpose(0, 1, 3, 2, 4)
    parts.append(quants.reshape(rows, ng, GROUP * (bb - head)))
    groups = np.concatenate(parts, axis=-1).reshape(rows, ng * GROUP * bb)
    return np.ascontiguousarray(np.concatenate([groups, blocks[:, ng * GROUP :].reshape(rows, -1)], axis=-1))


def q8_roundtrip(x: Tensor) -> Tensor:
    """The Tensor-graph form of `q8_roundtrip_np`: x (n, k) as the integer-dot kernel sees it, for devices without it."""
    n, k = x.shape
    acts = quantize_activations(x)
    return (acts.q.reshape(n, k // QBLOCK, QBLOCK).cast(dtypes.float32) * acts.d.unsqueeze(-1)).reshape(n, k)


# --- the C kernel -------------------------------------------------------------------------------------------------

_COMMON = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

static inline float qd_half(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);
  else if (exp != 0) bits = sign | ((exp + 112) << 23) | (man << 13);
  else if (man == 0) bits = sign;
  else {  /* subnormal half: normalize */
    int e = -1;
    do { man <<= 1; e++; } while (!(man & 0x400));
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
#endif
}

/* this core's rows [*r0, *r1) of `rows`: an even split in runs of 4, so no two cores share a cache line of y */
static inline void qd_core_rows(long rows, int core_id, int n_cores, long *r0, long *r1) {
  const long runs = (rows + 3) / 4;
  *r0 = runs * core_id / n_cores * 4;
  *r1 = runs * (core_id + 1) / n_cores * 4;
  if (*r1 > rows) *r1 = rows;
}

/* ask for the bytes [p + QD_PREFETCH_AHEAD, + n) now: a decode step streams every matrix once from memory, and with
   only the hardware prefetcher a Q8_0 matvec read 14 GB/s, with this (4 KiB ahead) 32-38 GB/s; Q4_1 26-28 -> 35, F16
   26 -> 30 GB/s (131072 x 576 matrices, past the L3 cache, 2 cores of an EPYC; 1 and 2 KiB ahead did less). SmolLM2
   decode: Q8_0 95 -> 150 tok/s. A prefetch past the end of the buffer does not fault. */
#define QD_PREFETCH_AHEAD 4096
static inline void qd_prefetch(const uint8_t *p, long n) {
  for (long o = 0; o < n; o += 64) __builtin_prefetch(p + QD_PREFETCH_AHEAD + o);
}

#if defined(__AVX__)
static inline float qd_hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#endif
"""

# The plain-C block dot per weight type: block `blk`'s float contribution given its activations x, scale and q sum.
_SCALAR = {
    GGMLType.Q4_0: r"""
static inline float qd_block(const uint8_t *blk, const int8_t *x, float dx, int32_t xsum) {
  int32_t s = 0;
  for (int j = 0; j < 16; j++) s += (blk[2 + j] & 15) * x[j] + (blk[2 + j] >> 4) * x[16 + j];
  return qd_half(blk) * dx * (float)(s - 8 * xsum);
}
""",
    GGMLType.Q4_1: r"""
static inline float qd_block(const uint8_t *blk, const int8_t *x, float dx, int32_t xsum) {
  int32_t s = 0;
  for (int j = 0; j < 16; j++) s += (blk[4 + j] & 15) * x[j] + (blk[4 + j] >> 4) * x[16 + j];
  return qd_half(blk) * dx * (float)s + qd_half(blk + 2) * (dx * (float)xsum);
}
""",
    GGMLType.Q8_0: r"""
static inline float qd_block(const uint8_t *blk, const int8_t *x, float dx, int32_t xsum) {
  (void)xsum;
  int32_t s = 0;
  const int8_t *w = (const int8_t *)(blk + 2);
  for (int j = 0; j < 32; j++) s += w[j] * x[j];
  return qd_half(blk) * dx * (float)s;
}
""",
}

_VECTOR_BODY = r"""
#if defined(__AVX2__) && defined(__F16C__)
#define QD_VECTOR 1
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define QD_VNNI 1
#endif
%(OFFSET_DEF)s
/* signed quants as the unsigned operand of the byte dot: +128 under VNNI (qd_offset takes it off again), elsewhere
   |q| with the sign moved onto the activations (maddubs' 16-bit pair sums could saturate on q + 128) */
static inline __m256i qd_unsigned(__m256i q) {
#if defined(QD_VNNI)
  return _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80));
#else
  return _mm256_sign_epi8(q, q);
#endif
}
/* a block's 32 weights as the unsigned operand of the byte dot, and the vector whose signs go onto the activations */
static inline void qd_weights(const uint8_t *blk, __m256i *w, __m256i *sign) {
%(WEIGHTS)s
}
static inline __m256i qd_acts(const int8_t *x, __m256i sign) {
  __m256i xv = _mm256_loadu_si256((const __m256i *)x);
%(ACTS)s
}
/* a block's integer dot minus QD_INT_OFFSET times its activation sum (weights stored with an unsigned offset):
   eight blocks' totals at once, or lane 0 of one block's eight partial sums */
static inline __m256i qd_offset8(__m256i totals, const int32_t *xs) {
#if QD_INT_OFFSET
  return _mm256_sub_epi32(totals, _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)xs), QD_INT_OFFSET));
#else
  (void)xs;
  return totals;
#endif
}
static inline __m256i qd_offset1(__m256i partial, int32_t xs) {
#if QD_INT_OFFSET
  return _mm256_sub_epi32(partial, _mm256_setr_epi32(xs << QD_INT_OFFSET, 0, 0, 0, 0, 0, 0, 0));
#else
  (void)xs;
  return partial;
#endif
}
#if defined(QD_VNNI)
static inline __m256i qd_dot(__m256i w, __m256i a) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, a); }
static inline __m256i qd_dot_acc(__m256i acc, __m256i w, __m256i a) { return _mm256_dpbusd_epi32(acc, w, a); }
#else
static inline __m256i qd_dot(__m256i w, __m256i a) { return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1)); }
static inline __m256i qd_dot_acc(__m256i acc, __m256i w, __m256i a) { return _mm256_add_epi32(acc, qd_dot(w, a)); }
#endif
/* the eight blocks of a group (repack_rows): the unsigned operand of its k-th 32-byte quant vector (four bytes of
   each block), and the vector whose signs go onto the activations */
static inline void qd_group_weight(const uint8_t *grp, int k, __m256i *w, __m256i *sign) {
%(GROUP_WEIGHTS)s
}
#endif
"""

_NIBBLES = ("  __m128i q = _mm_loadu_si128((const __m128i *)(blk + %d));\n"
            "  *w = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));\n  *sign = *w;")
_WEIGHTS = {
    GGMLType.Q4_0: _NIBBLES % 2,
    GGMLType.Q4_1: _NIBBLES % 4,
    # (w + 128) * x less 128 * sum(x) under VNNI, else |w| * (x * sign(w)), with |w| <= 128 as u8: qd_unsigned
    GGMLType.Q8_0: "  __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 2));\n  *w = qd_unsigned(q);\n  *sign = q;",
}
_NIBBLE_GROUP = ("  const __m256i q = _mm256_loadu_si256((const __m256i *)(grp + %d + 32 * (k & 3)));\n"
                 "  *w = _mm256_and_si256(k < 4 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F));\n  *sign = *w;")
_GROUP_WEIGHTS = {
    GGMLType.Q4_0: _NIBBLE_GROUP % 16,
    GGMLType.Q4_1: _NIBBLE_GROUP % 32,
    GGMLType.Q8_0: "  *sign = _mm256_loadu_si256((const __m256i *)(grp + 16 + 32 * k));\n  *w = qd_unsigned(*sign);",
}
# log2 of the unsigned offset the integer dot carries (0: none): Q4_0's quants 0..15 stand for -8..7, and Q8_0's
# signed quants get +128 under VNNI; either way the offset times the block's activation sum is taken off in integers
_OFFSET_DEF = {
    GGMLType.Q4_0: "#define QD_INT_OFFSET 3",
    GGMLType.Q4_1: "#define QD_INT_OFFSET 0",
    GGMLType.Q8_0: "#if defined(QD_VNNI)\n#define QD_INT_OFFSET 7\n#else\n#define QD_INT_OFFSET 0\n#endif",
}
_ACTS = {
    GGMLType.Q4_0: "  (void)sign;\n  return xv;",
    GGMLType.Q4_1: "  (void)sign;\n  return xv;",
    GGMLType.Q8_0: "#if defined(QD_VNNI)\n  (void)sign;\n  return xv;\n#else\n  return _mm256_sign_epi8(xv, sign);\n#endif",
}

_GATHER = r"""
/* block b of a row in the kernel's storage (repack_rows), back in the file's layout */
static inline const uint8_t *qd_block_at(const uint8_t *row, long b, uint8_t *tmp) {
  if (b >= %(NG)dL * 8) return row + b * %(BLOCK_BYTES)d;
  const uint8_t *grp = row + (b / 8) * 8 * %(BLOCK_BYTES)d;
  const int l = (int)(b %% 8);
  memcpy(tmp, grp + 2 * l, 2);
  for (int h = 2; h < %(HEAD)d; h += 2) memcpy(tmp + h, grp + 16 * (h / 2) + 2 * l, 2);
  for (int m = 0; m < %(BLOCK_BYTES)d - %(HEAD)d; m++) tmp[%(HEAD)d + m] = grp[8 * %(HEAD)d + (m / 4) * 32 + l * 4 + m %% 4];
  return tmp;
}
"""

# the kernel: rows split between the cores; each row's blocks are unpacked once for up to TB tokens
_KERNEL = r"""
#define TB %(TB)d
#define TB_EXACT %(TB_EXACT)d /* TB divides the token count: no partial groups */
/* the activations rounded as quantize_activations_np does (same float32 operations, so the same bits): per row and
   32-element block, d = max|x| / 127, q = round-half-even(x * (1 / d)) (0 where d = 0), and the block's sum of q */
void %(NAME)s_quantize(const float *x, int8_t *q, float *d, int32_t *sums) {
  for (long i = 0; i < %(TOKENS)dL * %(NB)dL; i++) {
    const float *xb = x + i * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
      const float a = fabsf(xb[j]);
      amax = a > amax ? a : amax;
    }
    const float db = amax / 127.0f;
    const float inv = db > 0.0f ? 1.0f / db : 0.0f;
    int32_t total = 0;
    for (int j = 0; j < 32; j++) {
      const int v = (int)nearbyintf(xb[j] * inv);
      q[i * 32 + j] = (int8_t)v;
      total += v;
    }
    d[i] = db;
    sums[i] = total;
  }
}

void %(NAME)s(void **bufs, const long long *vals, int core_id, int n_cores) {
  (void)vals;
  float *y = (float *)bufs[0];
  const float *x = (const float *)bufs[1];
  const uint8_t *w = (const uint8_t *)bufs[2];
  /* every core rounds all the activations for itself (a few microseconds for a token): no core waits for another */
  char *scratch = malloc(%(TOKENS)dL * (2L * %(K)dL + 8L * %(NB)dL) + 64);
  if (!scratch) return;
  int8_t *xq = (int8_t *)scratch;
  float *xd = (float *)(scratch + %(TOKENS)dL * %(K)dL);
  int32_t *xsum = (int32_t *)(scratch + %(TOKENS)dL * (%(K)dL + 4L * %(NB)dL));
  %(NAME)s_quantize(x, xq, xd, xsum);
  /* the whole groups' activations again, interleaved as repack_rows interleaves the quants */
  int8_t *xg = (int8_t *)(scratch + %(TOKENS)dL * (%(K)dL + 8L * %(NB)dL));
  for (long t = 0; t < %(TOKENS)dL; t++)
    for (long g = 0; g < %(NG)dL; g++)
      for (int k = 0; k < 8; k++)
        for (int l = 0; l < 8; l++)
          memcpy(xg + t * %(K)dL + g * 256 + k * 32 + l * 4, xq + t * %(K)dL + (g * 8 + l) * 32 + k * 4, 4);
  long r0, r1;
  qd_core_rows(%(ROWS)dL, core_id, n_cores, &r0, &r1);
  for (long r = r0; r < r1; r++) {
    const uint8_t *row = w + r * %(ROW_BYTES)dL;
    for (long t0 = 0; t0 < %(TOKENS)dL; t0 += TB) {
#if defined(QD_VECTOR)
      /* blocks eight at a time: each block's integer dot reduced to one lane, so one vector of eight block totals is
         scaled by eight block scales at once (the minimum / offset terms likewise, in `mins`) */
      __m256 acc[TB], mins[TB];
      float rest[TB];
      for (int j = 0; j < TB; j++) { acc[j] = _mm256_setzero_ps(); mins[j] = _mm256_setzero_ps(); rest[j] = 0.0f; }
      long b = 0;
      for (; b + 8 <= %(NB)dL; b += 8) {
        const uint8_t *grp = row + b * %(BLOCK_BYTES)d;
        if (t0 == 0) qd_prefetch(grp, 8 * %(BLOCK_BYTES)d);
        /* lane l of totals[j]: block l's whole integer dot with token j's activations (interleaved the same way); each
           quant vector is unpacked once for the TB tokens, so only TB accumulators and one vector stay live (AVX2's 16
           registers held all eight unpacked vectors before, and spilled) */
        __m256i totals[TB];
        for (int j = 0; j < TB; j++) totals[j] = _mm256_setzero_si256();
        for (int k = 0; k < 8; k++) {
          __m256i wk, sk;
          qd_group_weight(grp, k, &wk, &sk);
          for (int j = 0; j < TB; j++)
            if (TB_EXACT || t0 + j < %(TOKENS)dL) totals[j] = qd_dot_acc(totals[j], wk, qd_acts(xg + (t0 + j) * %(K)dL + b * 32 + 32 * k, sk));
        }
        const __m256 dwv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)grp));
        const __m256 mwv = %(GROUP_MIN)s;
        (void)mwv;
        for (int j = 0; j < TB; j++) {
          const long t = t0 + j;
          if (TB_EXACT || t < %(TOKENS)dL) {
            const __m256 dxv = _mm256_loadu_ps(xd + t * %(NB)dL + b);
            const __m256 xsv = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(xsum + t * %(NB)dL + b)));
            (void)xsv;
            const __m256i exact = qd_offset8(totals[j], xsum + t * %(NB)dL + b);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(exact), _mm256_mul_ps(dwv, dxv), acc[j]);
%(GROUP_REST)s
          }
        }
      }
      /* the last blocks one at a time: eight lanes of partial sums each */
      for (; b < %(NB)dL; b++) {
        const uint8_t *blk = row + b * %(BLOCK_BYTES)d;
        __m256i wv, sign;
        qd_weights(blk, &wv, &sign);
        const float dw = qd_half(blk);
%(MIN_LOAD)s
        for (int j = 0; j < TB; j++) {
          const long t = t0 + j;
          if (TB_EXACT || t < %(TOKENS)dL) {
            __m256i s8 = qd_offset1(qd_dot(wv, qd_acts(xq + t * %(K)dL + b * 32, sign)), xsum[t * %(NB)dL + b]);
            const float dx = xd[t * %(NB)dL + b];
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s8), _mm256_set1_ps(dw * dx), acc[j]);
%(REST)s
          }
        }
      }
      for (int j = 0; j < TB; j++)
        if (TB_EXACT || t0 + j < %(TOKENS)dL) y[(t0 + j) * %(ROWS)dL + r] = qd_hsum(acc[j]) + qd_hsum(mins[j]) + rest[j];
#else
      uint8_t tmp[%(BLOCK_BYTES)d];
      for (long t = t0; t < t0 + TB && t < %(TOKENS)dL; t++) {
        float acc = 0.0f;
        for (long b = 0; b < %(NB)dL; b++)
          acc += qd_block(qd_block_at(row, b, tmp), xq + t * %(K)dL + b * 32, xd[t * %(NB)dL + b], xsum[t * %(NB)dL + b]);
        y[t * %(ROWS)dL + r] = acc;
      }
#endif
    }
  }
  free(scratch);
}
"""

# per block and token: the minimum (Q4_1) or offset (Q4_0) term, from the block's activation sum, kept in a scalar
_MIN_LOAD = {GGMLType.Q4_0: "", GGMLType.Q4_1: "        const float mw = qd_half(blk + 2);", GGMLType.Q8_0: ""}
_REST = {
    GGMLType.Q4_0: "",
    GGMLType.Q4_1: "            rest[j] += mw * (dx * (float)xsum[t * %(NB)dL + b]);",
    GGMLType.Q8_0: "",
}
# the same terms for eight blocks at once (dwv, mwv: the blocks' scales and minimums; dxv, xsv: the activations')
_GROUP_MIN = {GGMLType.Q4_0: "_mm256_setzero_ps()", GGMLType.Q4_1: "_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(grp + 16)))",
              GGMLType.Q8_0: "_mm256_setzero_ps()"}
_GROUP_REST = {
    GGMLType.Q4_0: "",
    GGMLType.Q4_1: "            mins[j] = _mm256_fmadd_ps(mwv, _mm256_mul_ps(dxv, xsv), mins[j]);",
    GGMLType.Q8_0: "",
}
#: tokens sharing one pass over a row's blocks (each unpacked weight block is reused this many times). SmolLM2's 64-token
#: gate/up product (3072 x 576) on 2 cores, blocks eight at a time: 4 tokens 1.46-2.08 ms, 2 tokens 1.98-2.16 ms (noisy VM)
TOKEN_BLOCK = 4


def kernel_source(name: str, ggml_type: GGMLType, rows: int, k: int, tokens: int) -> str:
    """C source of the kernel `name` computing y (tokens, rows) = x (tokens, k) @ W.T for a `ggml_type` W (rows, k),
    with the CPU program ABI (`void name(void **bufs, const long long *vals, int core_id, int n_cores)`; buffers y,
    x (float32), W), and of `void name_quantize(const float *x, int8_t *q, float *d, int32_t *sums)`, the rounding it
    applies to x."""
    if ggml_type not in QDOT_TYPES:
        raise ModelError(f"no integer-dot kernel for {ggml_type.name}: supported are {', '.join(sorted(t.name for t in QDOT_TYPES))}")
    if k % QBLOCK:
        raise ModelError(f"the input size {k} is not a multiple of {QBLOCK}")
    layout = BLOCK_LAYOUTS[ggml_type]
    nb = k // QBLOCK
    group = min(tokens, TOKEN_BLOCK)
    values = dict(NAME=name, ROWS=rows, K=k, NB=nb, TOKENS=tokens, TB=group, TB_EXACT=int(tokens % group == 0), BLOCK_BYTES=layout.block_bytes,
                  ROW_BYTES=nb * layout.block_bytes, MIN_LOAD=_MIN_LOAD[ggml_type], REST=_REST[ggml_type] % dict(NB=nb),
                  GROUP_MIN=_GROUP_MIN[ggml_type], GROUP_REST=_GROUP_REST[ggml_type], NG=nb // GROUP)
    vector = _VECTOR_BODY % dict(WEIGHTS=_WEIGHTS[ggml_type], ACTS=_ACTS[ggml_type], OFFSET_DEF=_OFFSET_DEF[ggml_type],
                                 GROUP_WEIGHTS=_GROUP_WEIGHTS[ggml_type])
    gather = _GATHER % dict(NG=nb // GROUP, BLOCK_BYTES=layout.block_bytes, HEAD=_header_bytes(ggml_type))
    return _COMMON + _SCALAR[ggml_type] + gather + vector + _KERNEL % values


# a row of a rows-layout matrix decoded to float32, as `dequant.dequantize` decodes it (the same float32 operations:
# scale * q, scale * (q - 8), scale * q + min; -ffp-contract=off keeps the last two operations apart)
_EMBED_VALUE = {
    GGMLType.Q8_0: "qd_half(blk) * (float)(int8_t)blk[2 + j]",
    GGMLType.Q4_0: "qd_half(blk) * ((float)(j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4) - 8.0f)",
    GGMLType.Q4_1: "qd_half(blk) * (float)(j < 16 ? blk[4 + j] & 15 : blk[4 + j - 16] >> 4) + qd_half(blk + 2)",
}
_EMBED_KERNEL = r"""
/* y (1, K) float32 = row ids[0] of W (ROWS, K) in the rows layout (repack_rows' groups for quantized types) */
void %(NAME)s(void **bufs, const long long *vals, int core_id, int n_cores) {
  (void)vals; (void)core_id; (void)n_cores;
  float *y = (float *)bufs[0];
  const int id = ((const int *)bufs[1])[0];
  if (id < 0 || id >= %(ROWS)d) return;
  const uint8_t *row = (const uint8_t *)bufs[2] + (long)id * %(ROW_BYTES)dL;
%(BODY)s
}
"""


#: the rows-layout matrix types `embed_row` reads
EMBED_TYPES = frozenset((*_EMBED_VALUE, GGMLType.F16))


def embed_kernel_source(name: str, ggml_type: GGMLType, rows: int, k: int) -> str:
    """C source of the kernel `name` reading one row of a rows-layout matrix (buffers y (1, k) float32, the row's index
    as one int32, W): a tied model's embedding lookup from its output matrix, inside the decode step."""
    if ggml_type is GGMLType.F16:
        body = f"  for (long j = 0; j < {k}L; j++) y[j] = qd_half(row + 2 * j);"
        return _COMMON + _EMBED_KERNEL % dict(NAME=name, ROWS=rows, ROW_BYTES=2 * k, BODY=body)
    if ggml_type not in _EMBED_VALUE or k % QBLOCK:
        raise ModelError(f"no embedding kernel for {ggml_type.name} rows of {k}")
    layout = BLOCK_LAYOUTS[ggml_type]
    nb = k // QBLOCK
    gather = _GATHER % dict(NG=nb // GROUP, BLOCK_BYTES=layout.block_bytes, HEAD=_header_bytes(ggml_type))
    body = (f"  uint8_t tmp[{layout.block_bytes}];\n  for (long b = 0; b < {nb}L; b++) {{\n"
            f"    const uint8_t *blk = qd_block_at(row, b, tmp);\n"
            f"    for (int j = 0; j < 32; j++) y[b * 32 + j] = {_EMBED_VALUE[ggml_type]};\n  }}")
    return _COMMON + gather + _EMBED_KERNEL % dict(NAME=name, ROWS=rows, ROW_BYTES=nb * layout.block_bytes, BODY=body)


def embed_row(ids: Tensor, weight: Tensor, ggml_type: GGMLType) -> Tensor:
    """(1, k) float32: the row `ids[0]` (a one-element int32 tensor) of `weight`, a rows-layout matrix (repacked
    `ggml_type` blocks as uint8 (rows, row_bytes), or float16 (rows, k)), decoded as `dequantize` decodes the file's row."""
    rows = weight.shape[0]
    k = weight.shape[1] if ggml_type is GGMLType.F16 else weight.shape[1] // BLOCK_LAYOUTS[ggml_type].block_bytes * QBLOCK
    name = f"embed_{ggml_type.name.lower()}_{rows}_{k}"
    program = c_program(name, embed_kernel_source(name, ggml_type, rows, k), n_buffers=3, outs=(0,), n_cores=1)
    out = Tensor.empty(1, k, dtype=dtypes.float32, device=weight.device)
    return out.custom_kernel(ids, weight, fxn=lambda *params: program)[0]


@dataclass(frozen=True, eq=False)
class Fused:
    """What a matmul kernel computes around its product, in the same launch (a decoding layer's norms, SwiGLU and
    residual adds were kernels of their own: 7 of 16 per SmolLM2 layer). `norm`: the input is the residual stream,
    RMS-normalized first (x / sqrt(mean(x^2) + eps) * norm, `rms_norm`'s operations); `swiglu`: the input is (n, 2k),
    gate then up, and the product's input silu(gate) * up; `residual`: (n, rows) added to the product."""

    norm: Tensor | None = None
    eps: float = 0.0
    swiglu: bool = False
    residual: Tensor | None = None

    @property
    def tag(self) -> str:
        return ("_rms" if self.norm is not None else "") + ("_swiglu" if self.swiglu else "") + ("_res" if self.residual is not None else "")


NOT_FUSED = Fused()

_FUSED = r"""
/* e^x for the SiLU of the SwiGLU input, in operations the C compiler vectorizes (libm's expf is a call per element:
   with it, fusing a 64-token SmolLM2 F16 prompt's SwiGLU took its prefill from 92 to 103 ms, 97 with this):
   x = n ln2 + r with |r| <= ln2/2 (Cody-Waite), e^r by its degree-7 Taylor polynomial (relative error below 1e-7),
   2^n from the exponent bits. Clamped to [-87, 88]: e^x stays a normal float (the SiLU of such inputs is 0 or x) */
static inline float qd_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = nearbyintf(x * 1.44269504088896341f);
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, 4);
  return p * scale;
}

/* the product's input, computed by every core for itself (a few microseconds for a token) */
static void %(NAME)s_input(const float *x, const float *nw, float *xs) {
  for (long t = 0; t < %(TOKENS)dL; t++) {
#if %(NORM)d
    const float *xt = x + t * %(K)dL;
    float ss = 0.0f;
    for (long j = 0; j < %(K)dL; j++) ss += xt[j] * xt[j];
    const float inv = 1.0f / sqrtf(ss / (float)%(K)dL + %(EPS)s);
    for (long j = 0; j < %(K)dL; j++) xs[t * %(K)dL + j] = xt[j] * inv * nw[j];
#elif %(SWIGLU)d
    const float *g = x + t * 2L * %(K)dL, *u = g + %(K)dL;
    for (long j = 0; j < %(K)dL; j++) xs[t * %(K)dL + j] = g[j] * (1.0f / (1.0f + qd_exp(-g[j]))) * u[j];
#endif
  }
}

void %(NAME)s(void **bufs, const long long *vals, int core_id, int n_cores) {
  float *y = (float *)bufs[0];
  const float *x = (const float *)bufs[1];
  int next = 3;
  const float *nw = %(NORM)d ? (const float *)bufs[next++] : 0;
  const float *res = %(RESIDUAL)d ? (const float *)bufs[next++] : 0;
  (void)nw; (void)res; (void)next;
  float *xs = 0;
  void *inner[3] = {bufs[0], bufs[1], bufs[2]};
#if %(NORM)d || %(SWIGLU)d
  xs = (float *)malloc(%(TOKENS)dL * %(K)dL * sizeof(float));
  if (!xs) return;
  %(NAME)s_input(x, nw, xs);
  inner[1] = xs;
#endif
  %(NAME)s_product(inner, vals, core_id, n_cores);
#if %(RESIDUAL)d
  /* the rows this core's product wrote (the same split) */
  long r0, r1;
  qd_core_rows(%(ROWS)dL, core_id, n_cores, &r0, &r1);
  for (long t = 0; t < %(TOKENS)dL; t++)
    for (long r = r0; r < r1; r++) y[t * %(ROWS)dL + r] += res[t * %(ROWS)dL + r];
#endif
  free(xs);
}
"""


def fused_source(name: str, product_source, rows: int, k: int, tokens: int, fused: Fused) -> str:
    """C source of the kernel `name`: the product `product_source(inner_name)` (a kernel_source / f16_kernel_source
    over buffers y, x, W) wrapped in what `fused` asks for; buffers y, x, W, then the norm weight and the residual when
    present."""
    if not fused.tag:
        return product_source(name)
    values = dict(NAME=name, ROWS=rows, K=k, TOKENS=tokens, NORM=int(fused.norm is not None), SWIGLU=int(fused.swiglu),
                  RESIDUAL=int(fused.residual is not None), EPS=f"{float(fused.eps)!r}f")
    return product_source(f"{name}_product") + _FUSED % values


def _check_fused(x: Tensor, k: int, rows: int, fused: Fused) -> None:
    if fused.norm is not None and fused.swiglu:
        raise ModelError("a fused matmul normalizes its input or forms SwiGLU of it, not both")
    if fused.swiglu and x.shape[1] != 2 * k:
        raise ModelError(f"SwiGLU input for {k} inputs must be (n, {2 * k}), got {x.shape}")
    if not fused.swiglu and x.shape[1] != k:
        raise ModelError(f"input must be (n, {k}), got {x.shape}")
    if fused.norm is not None and fused.norm.shape != (k,):
        raise ModelError(f"norm weight must be ({k},), got {fused.norm.shape}")
    if fused.residual is not None and fused.residual.shape != (x.shape[0], rows):
        raise ModelError(f"residual must be ({x.shape[0]}, {rows}), got {fused.residual.shape}")


def qdot_matmul(x: Tensor, weight: Tensor, ggml_type: GGMLType, n_cores: int, fused: Fused = NOT_FUSED) -> Tensor:
    """y (n, rows) float32 = x (n, k) float32 @ W.T with x rounded to 8 bits per 32-element block as
    `quantize_activations_np` rounds it (inside the kernel), for `weight` the blocks of W as `repack_rows` stores them
    (uint8 (rows, n_blocks * block_bytes)), on a CPU device with `n_cores` cores; `fused` adds a norm or SwiGLU before
    the product and a residual after it (see `Fused`)."""
    n, k = x.shape[0], x.shape[1] // (2 if fused.swiglu else 1)
    layout = BLOCK_LAYOUTS[ggml_type]
    rows = weight.shape[0]
    if k % QBLOCK or weight.dtype is not dtypes.uint8 or weight.ndim != 2 or weight.shape[1] != k // QBLOCK * layout.block_bytes:
        raise ModelError(f"{ggml_type.name} weight for {k} inputs must be uint8 (rows, {k // QBLOCK * layout.block_bytes}), "
                         f"got {weight.dtype} {weight.shape}")
    _check_fused(x, k, rows, fused)
    name = f"qdot_{ggml_type.name.lower()}_{n}_{rows}_{k}{fused.tag}"
    return _launch(name, fused_source(name, lambda nm: kernel_source(nm, ggml_type, rows, k, n), rows, k, n, fused), x, weight, n_cores, fused)


def _launch(name: str, source: str, x: Tensor, weight: Tensor, n_cores: int, fused: Fused = NOT_FUSED) -> Tensor:
    """y (n, rows) float32 from the C kernel `name` over buffers (y, x as float32, weight, then the fused norm weight
    and residual), on `n_cores` cores."""
    extra = [t.cast(dtypes.float32) for t in (fused.norm, fused.residual) if t is not None]
    program = c_program(name, source, n_buffers=3 + len(extra), outs=(0,), n_cores=n_cores)
    out = Tensor.empty(x.shape[0], weight.shape[0], dtype=dtypes.float32, device=weight.device)
    return out.custom_kernel(x.cast(dtypes.float32), weight, *extra, fxn=lambda *params: program)[0]


# --- float16 matrices --------------------------------------------------------------------------------------------
# F16 weights need no activation rounding: the kernel converts each run of 16 (or 8) halves to float32 (F16C) and
# multiplies in float32, the product the numpy reference computes, in another summation order. A prompt works on tiles
# of RT rows x TT tokens: each converted weight vector and each activation vector feed RT x TT independent accumulators.
# A partial tile repeats its last row / token and stores only the real ones, so the inner loop has no conditions.

_F16_KERNEL = r"""
#define RT %(RT)s
#define TT %(TT)d
#if defined(__AVX512F__)
#define F16_LANES 16
#define F16_PROMPT_ROWS 4 /* 4 x 4 accumulators + 4 weight vectors of 32 registers */
typedef __m512 f16_vec;
static inline f16_vec f16_load_w(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline f16_vec f16_load_x(const float *p) { return _mm512_loadu_ps(p); }
static inline f16_vec f16_fma(f16_vec a, f16_vec b, f16_vec c) { return _mm512_fmadd_ps(a, b, c); }
static inline f16_vec f16_zero(void) { return _mm512_setzero_ps(); }
static inline float f16_total(f16_vec v) { return _mm512_reduce_add_ps(v); }
#elif defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#define F16_LANES 8
/* 16 registers: 3 x 4 accumulators, 3 weight vectors and the activation vector. 4 x 4 spilled the weights to the stack:
   41 GMAC/s against 82 for 3 x 4 (3072 x 576 by 64 tokens, 2 Zen 3 cores; 4 x 2 also 82, 2 x 4 54) */
#define F16_PROMPT_ROWS 3
typedef __m256 f16_vec;
static inline f16_vec f16_load_w(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline f16_vec f16_load_x(const float *p) { return _mm256_loadu_ps(p); }
static inline f16_vec f16_fma(f16_vec a, f16_vec b, f16_vec c) { return _mm256_fmadd_ps(a, b, c); }
static inline f16_vec f16_zero(void) { return _mm256_setzero_ps(); }
static inline float f16_total(f16_vec v) { return qd_hsum(v); }
#else
#define F16_PROMPT_ROWS 4
#endif
void %(NAME)s(void **bufs, const long long *vals, int core_id, int n_cores) {
  (void)vals;
  float *y = (float *)bufs[0];
  const float *x = (const float *)bufs[1];
  const uint8_t *w = (const uint8_t *)bufs[2];
  long r0, r1;
  qd_core_rows(%(ROWS)dL, core_id, n_cores, &r0, &r1);
  for (long r = r0; r < r1; r += RT) {
    const uint8_t *rows[RT];
    for (int i = 0; i < RT; i++) rows[i] = w + (r + i < r1 ? r + i : r1 - 1) * %(K)dL * 2;
    for (int i = 0; i < RT; i++) qd_prefetch(rows[i], %(K)dL * 2);
    for (long t0 = 0; t0 < %(TOKENS)dL; t0 += TT) {
      const float *xs[TT];
      for (int j = 0; j < TT; j++) xs[j] = x + (t0 + j < %(TOKENS)dL ? t0 + j : %(TOKENS)dL - 1) * %(K)dL;
      float total[RT][TT];
      long k = 0;
#if defined(F16_LANES)
      f16_vec acc[RT][TT];
      for (int i = 0; i < RT; i++) for (int j = 0; j < TT; j++) acc[i][j] = f16_zero();
      for (; k + F16_LANES <= %(K)dL; k += F16_LANES) {
        f16_vec wv[RT];
        for (int i = 0; i < RT; i++) wv[i] = f16_load_w(rows[i] + 2 * k);
        for (int j = 0; j < TT; j++) {
          const f16_vec xv = f16_load_x(xs[j] + k);
          for (int i = 0; i < RT; i++) acc[i][j] = f16_fma(wv[i], xv, acc[i][j]);
        }
      }
      for (int i = 0; i < RT; i++) for (int j = 0; j < TT; j++) total[i][j] = f16_total(acc[i][j]);
#else
      for (int i = 0; i < RT; i++) for (int j = 0; j < TT; j++) total[i][j] = 0.0f;
#endif
      for (; k < %(K)dL; k++)
        for (int i = 0; i < RT; i++) {
          const float wk = qd_half(rows[i] + 2 * k);
          for (int j = 0; j < TT; j++) total[i][j] += wk * xs[j][k];
        }
      for (int i = 0; i < RT; i++)
        for (int j = 0; j < TT; j++)
          if (r + i < r1 && t0 + j < %(TOKENS)dL) y[(t0 + j) * %(ROWS)dL + r + i] = total[i][j];
    }
  }
}
"""


def f16_kernel_source(name: str, rows: int, k: int, tokens: int) -> str:
    """C source of the kernel `name` computing y (tokens, rows) = x (tokens, k) float32 @ W.T for a float16 W (rows,
    k) stored row-major (buffers y, x, W; the CPU program ABI)."""
    # one token streams one row at a time: four rows read side by side ran at 16-21 GB/s, one at 40 GB/s (a 113 MB
    # matrix on 2 cores); a prompt is bound by its multiply-adds, which the 4 x 4 tile keeps busy (90 GMAC/s)
    values = dict(NAME=name, ROWS=rows, K=k, TOKENS=tokens, TT=min(tokens, 4), RT="1" if tokens == 1 else "F16_PROMPT_ROWS")
    return _COMMON + _F16_KERNEL % values


def f16_matmul(x: Tensor, weight: Tensor, n_cores: int, fused: Fused = NOT_FUSED) -> Tensor:
    """y (n, rows) float32 = x (n, k) float32 @ W.T for `weight` the float16 W (rows, k) on a CPU device; `fused` as
    for `qdot_matmul`."""
    n = x.shape[0]
    if weight.dtype is not dtypes.float16 or weight.ndim != 2:
        raise ModelError(f"float16 weight must be 2-D float16 (rows, k), got {weight.dtype} {weight.shape}")
    rows, k = weight.shape
    _check_fused(x, k, rows, fused)
    name = f"f16dot_{n}_{rows}_{k}{fused.tag}"
    return _launch(name, fused_source(name, lambda nm: f16_kernel_source(nm, rows, k, n), rows, k, n, fused), x, weight, n_cores, fused)
