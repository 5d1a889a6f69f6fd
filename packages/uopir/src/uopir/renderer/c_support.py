"""C helper functions the C renderer includes when a program needs them.

Emulated dtypes (bfloat16 and the fp8 formats) are stored as their bits and computed as float: a load decodes, a
store encodes, and every arithmetic result is rounded back to the dtype, so results equal a native implementation
that rounds after each op. Encoding is round-to-nearest-even from a double (exact for float and double inputs):
bfloat16 overflows to infinity as IEEE does; the fp8 formats saturate finite values to their largest finite value,
turn NaN into their NaN code and infinity into infinity (e5m2) or NaN (the formats without infinity).
"""

from __future__ import annotations

from uopir.dtypes import DType, dtypes

#: name -> (exponent bits, mantissa bits, bias, fnuz, has_inf, largest finite code) of each emulated float format
SMALL_FLOATS: dict[DType, tuple[str, int, int, int, bool, bool, int]] = {
    dtypes.bfloat16: ("bf16", 8, 7, 127, False, True, 0x7F7F),
    dtypes.fp8e4m3: ("e4m3", 4, 3, 7, False, False, 0x7E),
    dtypes.fp8e5m2: ("e5m2", 5, 2, 15, False, True, 0x7B),
    dtypes.fp8e4m3fnuz: ("e4m3fnuz", 4, 3, 8, True, False, 0x7F),
    dtypes.fp8e5m2fnuz: ("e5m2fnuz", 5, 2, 16, True, False, 0x7F),
}

GENERIC = r"""
static inline unsigned uop_encode_float(double x, int ebits, int mbits, int bias, int fnuz, int has_inf, unsigned max_code, int saturate) {
  int width = 1 + ebits + mbits;
  unsigned sign = __builtin_signbit(x) ? 1u << (width - 1) : 0u;
  unsigned exp_all = (1u << ebits) - 1;
  if (x != x) {  /* fnuz: the one NaN; IEEE-like formats: the quiet NaN; the others: all ones */
    if (fnuz) return 1u << (width - 1);
    return sign | (exp_all << mbits) | (has_inf && !saturate ? 1u << (mbits - 1) : (1u << mbits) - 1);
  }
  if (__builtin_isinf(x)) {  /* infinity, or NaN in the formats that have none */
    if (fnuz) return 1u << (width - 1);
    return sign | (has_inf ? exp_all << mbits : (exp_all << mbits) | ((1u << mbits) - 1));
  }
  double a = __builtin_fabs(x);
  if (a == 0.0) return fnuz ? 0u : sign;
  int emin = 1 - bias, e;
  __builtin_frexp(a, &e);
  e = e - 1 < emin ? emin : e - 1;
  double q = __builtin_rint(__builtin_ldexp(a, mbits - e));  /* exact scaling, ties to even */
  if (q == (double)(1u << (mbits + 1))) { e += 1; q = (double)(1u << mbits); }
  unsigned code;
  if (q == 0.0) return fnuz ? 0u : sign;
  if (q < (double)(1u << mbits)) code = (unsigned)q;
  else code = ((unsigned)(e + bias) << mbits) | ((unsigned)q - (1u << mbits));
  if (code > max_code) code = saturate ? max_code : exp_all << mbits;  /* past the top: clamp, or infinity */
  return code | sign;
}
static inline double uop_decode_float(unsigned code, int ebits, int mbits, int bias, int fnuz, int has_inf) {
  int width = 1 + ebits + mbits;
  unsigned sign = code >> (width - 1) & 1u, exp_all = (1u << ebits) - 1;
  unsigned ef = code >> mbits & exp_all, mant = code & ((1u << mbits) - 1);
  if (fnuz && code == 1u << (width - 1)) return __builtin_nan("");
  if (!fnuz && ef == exp_all) {
    if (has_inf) return mant ? __builtin_nan("") : (sign ? -__builtin_inf() : __builtin_inf());
    if (mant == (1u << mbits) - 1) return __builtin_nan("");
  }
  double v = ef == 0 ? __builtin_ldexp((double)mant, 1 - bias - mbits) : __builtin_ldexp((double)((1u << mbits) | mant), (int)ef - bias - mbits);
  return sign ? -v : v;
}
"""

BF16_FAST = r"""
static inline unsigned short uop_f32_to_bf16(float x) {
  unsigned u; __builtin_memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);  /* NaN stays NaN (quiet) */
  u += 0x7fffu + ((u >> 16) & 1u);  /* round to nearest even */
  return (unsigned short)(u >> 16);
}
static inline float uop_bf16_to_f32(unsigned short b) { unsigned u = (unsigned)b << 16; float f; __builtin_memcpy(&f, &u, 4); return f; }
"""


def small_float_helpers(dt: DType) -> str:
    """Encode/decode/round functions for one emulated dtype (named uop_to_<n>, uop_from_<n>, uop_round_<n>)."""
    name, ebits, mbits, bias, fnuz, has_inf, max_code = SMALL_FLOATS[dt]
    storage = "unsigned short" if dt.itemsize == 2 else "unsigned char"
    saturate = 0 if dt == dtypes.bfloat16 else 1
    args = f"{ebits}, {mbits}, {bias}, {int(fnuz)}, {int(has_inf)}"
    if dt == dtypes.bfloat16:
        to_fn = f"static inline {storage} uop_to_{name}(double x) {{ return ({storage})uop_encode_float(x, {args}, {max_code}u, {saturate}); }}\n"
        to_fn += f"static inline {storage} uop_to_{name}_f(float x) {{ return uop_f32_to_bf16(x); }}\n"
        from_fn = f"static inline float uop_from_{name}({storage} b) {{ return uop_bf16_to_f32(b); }}\n"
    else:
        to_fn = f"static inline {storage} uop_to_{name}(double x) {{ return ({storage})uop_encode_float(x, {args}, {max_code}u, {saturate}); }}\n"
        to_fn += f"static inline {storage} uop_to_{name}_f(float x) {{ return uop_to_{name}((double)x); }}\n"
        from_fn = f"static inline float uop_from_{name}({storage} b) {{ return (float)uop_decode_float(b, {args}); }}\n"
    round_fn = f"static inline float uop_round_{name}(float x) {{ return uop_from_{name}(uop_to_{name}_f(x)); }}\n"
    return to_fn + from_fn + round_fn
