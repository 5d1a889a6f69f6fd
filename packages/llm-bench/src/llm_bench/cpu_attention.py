"""Causal grouped-query attention over a KV cache as one hand-written C kernel for CPU devices.

The graph form (`TensorModel._attention` on other devices) runs five kernels per layer: the scores, their maximum, the
sum of exponentials, the probabilities, and their product with the values. The reduce axis of the last four is the
number of live cache rows, a symbolic size the code generator leaves scalar; on SmolLM2 they took about a fifth of a
64-token prompt. Here each query head's row of scores is computed into scratch memory, turned into probabilities
(max, exp, sum, divide: the reference's `softmax`) and multiplied by the value rows, all with 8-wide vectors
(GCC vector types: any x86-64 or ARM compiler target), the query heads that share a KV head reading each key together.

Query i of the block (at position start + i) sees cache rows 0..start + i: the causal mask the graph form takes as a
tensor. `start` comes from a one-element int32 buffer (the position table sliced at the bound start variable), so one
compiled kernel and one captured graph serve every position. Values differ from the graph form only by float
summation order and the exponential's polynomial (the code generator's exp2, within about 1 ulp).
"""

from __future__ import annotations

import math

from hcq_runtime import c_program
from uop_scheduler import Tensor, dtypes

from .errors import ModelError

_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef float at_v8 __attribute__((vector_size(32)));
typedef int32_t at_i8 __attribute__((vector_size(32)));
#define N %(N)d          /* queries in the block */
#define HEADS %(HEADS)d  /* query heads */
#define KV %(KV)d        /* KV heads */
#define G (HEADS / KV)   /* query heads per KV head */
#define HD %(HD)d        /* head dimension, a multiple of 8 */
#define CTX %(CTX)d      /* cache rows */

static inline at_v8 at_load(const float *p) { at_v8 v; memcpy(&v, p, sizeof v); return v; }
static inline void at_store(float *p, at_v8 v) { memcpy(p, &v, sizeof v); }
static inline float at_hsum(at_v8 v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

/* lanes of a where mask is set (all ones), else of b */
static inline at_v8 at_select(at_i8 mask, at_v8 a, at_v8 b) {
  at_i8 ai, bi;
  memcpy(&ai, &a, sizeof ai);
  memcpy(&bi, &b, sizeof bi);
  const at_i8 r = (ai & mask) | (bi & ~mask);
  at_v8 out;
  memcpy(&out, &r, sizeof out);
  return out;
}

/* e^x for x <= 0, 8 at a time: 2^t with t = x log2(e) split into an integer n (round to nearest even) and f in
   [-0.5, 0.5]; 2^f from the code generator's exp2 polynomial, 2^n put into the exponent bits. t is held at -126 or
   above (e^x < 1.2e-38 there: nothing next to the largest term, which is 1) */
static inline at_v8 at_exp(at_v8 x) {
  const at_v8 zero = {0}, low = zero - 126.0f, magic = zero + 12582912.0f;
  at_v8 t = x * 1.4426950216293335f;
  t = at_select((at_i8)(t < low), low, t);
  const at_v8 n = (t + magic) - magic;
  const at_v8 f = t - n;
  at_v8 p = zero + 1.5252733646775596e-05f;
  p = p * f + 0.0001540352968731895f;
  p = p * f + 0.0013333557872101665f;
  p = p * f + 0.009618128649890423f;
  p = p * f + 0.05550410971045494f;
  p = p * f + 0.24022650718688965f;
  p = p * f + 0.6931471824645996f;
  p = p * f + 1.0f;
  const at_i8 bits = (__builtin_convertvector(n, at_i8) + 127) << 23;
  at_v8 scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/* out (N, HEADS * HD) = softmax(q k^T * scale over rows 0..start + i) v for each query i and head */
void %(NAME)s(void **bufs, const long long *vals, int core_id, int n_cores) {
  (void)vals;
  float *out = (float *)bufs[0];
  const float *q = (const float *)bufs[1];   /* (N, HEADS, HD) */
  const float *kc = (const float *)bufs[2];  /* (CTX, KV, HD) */
  const float *vc = (const float *)bufs[3];  /* (CTX, KV, HD) */
  const long start = ((const int32_t *)bufs[4])[0];
  float *s = malloc(sizeof(float) * G * (CTX + 8));
  if (!s) return;
  /* (query, KV head) pairs dealt round-robin: later queries see more rows, so each core gets early and late ones */
  for (long job = core_id; job < (long)N * KV; job += n_cores) {
    const long i = job / KV, h = job %% KV;
    long rows = start + i + 1;
    if (rows > CTX) rows = CTX;
    const float *qh = q + (i * HEADS + h * G) * HD;
    /* scores: each key row is read once for the G query heads */
    float mx[G];
    for (int g = 0; g < G; g++) mx[g] = -__builtin_inff();
    for (long j = 0; j < rows; j++) {
      const float *kr = kc + (j * KV + h) * HD;
      for (int g = 0; g < G; g++) {
        at_v8 acc = {0};
        for (int d = 0; d < HD; d += 8) acc += at_load(qh + g * HD + d) * at_load(kr + d);
        const float v = at_hsum(acc) * %(SCALE)s;
        s[g * (CTX + 8) + j] = v;
        mx[g] = v > mx[g] ? v : mx[g];
      }
    }
    for (int g = 0; g < G; g++) {
      float *sg = s + g * (CTX + 8);
      /* probabilities: e^(s - max), their sum, then each divided by it (the reference's order) */
      const at_i8 lane = {0, 1, 2, 3, 4, 5, 6, 7};
      at_v8 total = {0};
      for (long j = 0; j < rows; j += 8) {
        /* the last vector's lanes past the rows hold no score: they add 0 */
        const at_v8 e = at_select(lane + (int32_t)j < (int32_t)rows, at_exp(at_load(sg + j) - mx[g]), (at_v8){0});
        at_store(sg + j, e);
        total += e;
      }
      const float sum = at_hsum(total);
      for (long j = 0; j < rows; j += 8) at_store(sg + j, at_load(sg + j) / sum);
      /* times the value rows */
      at_v8 o[HD / 8];
      for (int d = 0; d < HD / 8; d++) o[d] = (at_v8){0};
      for (long j = 0; j < rows; j++) {
        const float *vr = vc + (j * KV + h) * HD;
        const float p = sg[j];
        for (int d = 0; d < HD / 8; d++) o[d] += p * at_load(vr + 8 * d);
      }
      float *dst = out + i * HEADS * HD + (h * G + g) * HD;
      for (int d = 0; d < HD / 8; d++) at_store(dst + 8 * d, o[d]);
    }
  }
  free(s);
}
"""


def attention_source(name: str, n: int, n_heads: int, n_kv_heads: int, head_dim: int, context: int) -> str:
    """C source of the kernel `name` (CPU program ABI; buffers out, q, k cache, v cache, start as int32)."""
    if head_dim % 8 or n_heads % n_kv_heads:
        raise ModelError(f"the CPU attention kernel needs a head size that is a multiple of 8 and query heads a multiple of the KV "
                         f"heads, got {head_dim} and {n_heads} / {n_kv_heads}")
    scale = 1.0 / math.sqrt(head_dim)
    return _SOURCE % dict(NAME=name, N=n, HEADS=n_heads, KV=n_kv_heads, HD=head_dim, CTX=context, SCALE=f"{scale!r}f")


def cpu_attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, start: Tensor, n_cores: int) -> Tensor:
    """(n, heads * head_dim) float32: causal attention of q (n, heads, head_dim) at positions start.. over the caches
    (context, kv_heads, head_dim), whose rows up to start + n are written; `start` is a one-element int32 tensor."""
    n, n_heads, head_dim = q.shape
    context, n_kv_heads = k_cache.shape[0], k_cache.shape[1]
    name = f"attn_{n}_{n_heads}_{n_kv_heads}_{head_dim}_{context}"
    program = c_program(name, attention_source(name, n, n_heads, n_kv_heads, head_dim, context), n_buffers=5, outs=(0,),
                        n_cores=max(1, min(n_cores, n * n_kv_heads)))
    out = Tensor.empty(n, n_heads * head_dim, dtype=dtypes.float32, device=q.device)
    return out.custom_kernel(q, k_cache, v_cache, start, fxn=lambda *params: program)[0]
