// One 32x32 tile per wave64 through the CDNA 32x32xK MFMA builtins: C = A @ B + C (A row-major 32xK, B row-major Kx32).
// Operand layout (CDNA3 ISA, "Matrix fused multiply add" dependent layouts): lane l holds row (A) / column (B) l%32 and
// the K/2 consecutive k values of block l/32; accumulator register r of lane l is C[8*(r/4) + 4*(l/32) + r%4][l%32].
typedef half half4 __attribute__((ext_vector_type(4)));
typedef float float16 __attribute__((ext_vector_type(16)));
#pragma OPENCL EXTENSION cl_khr_fp16 : enable

#define C_INDEX(r, lane) ((8 * ((r) >> 2) + 4 * ((lane) >> 5) + ((r) & 3)) * 32 + ((lane) & 31))

__kernel void mfma32_f16(__global const half *a, __global const half *b, __global float *c) {
  int lane = __builtin_amdgcn_workitem_id_x();
  int idx = lane & 31, kb = (lane >> 5) * 4;
  half4 av, bv;
  for (int k = 0; k < 4; k++) {
    av[k] = a[idx * 8 + kb + k];
    bv[k] = b[(kb + k) * 32 + idx];
  }
  float16 acc;
  for (int r = 0; r < 16; r++) acc[r] = c[C_INDEX(r, lane)];
  acc = __builtin_amdgcn_mfma_f32_32x32x8f16(av, bv, acc, 0, 0, 0);
  for (int r = 0; r < 16; r++) c[C_INDEX(r, lane)] = acc[r];
}

__kernel void mfma32_f32(__global const float *a, __global const float *b, __global float *c) {
  int lane = __builtin_amdgcn_workitem_id_x();
  int idx = lane & 31, k = lane >> 5;
  float16 acc;
  for (int r = 0; r < 16; r++) acc[r] = c[C_INDEX(r, lane)];
  acc = __builtin_amdgcn_mfma_f32_32x32x2f32(a[idx * 2 + k], b[k * 32 + idx], acc, 0, 0, 0);
  for (int r = 0; r < 16; r++) c[C_INDEX(r, lane)] = acc[r];
}
