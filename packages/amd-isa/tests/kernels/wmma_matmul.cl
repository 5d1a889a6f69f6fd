// One 16x16x16 half-precision tile per wave32 through v_wmma_f32_16x16x16_f16: C = A @ B (A row-major, B row-major, C f32).
typedef half half16 __attribute__((ext_vector_type(16)));
typedef float float8 __attribute__((ext_vector_type(8)));
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
__kernel void wmma_matmul(__global const half *a, __global const half *b, __global float *c) {
  int lane = __builtin_amdgcn_workitem_id_x();
  int idx = lane & 15;
  half16 av, bv;
  for (int k = 0; k < 16; k++) {
    av[k] = a[idx * 16 + k];   // lane holds row idx of A
    bv[k] = b[k * 16 + idx];   // lane holds column idx of B
  }
  float8 acc = (float8)(0.0f);
  acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(av, bv, acc);
  for (int r = 0; r < 8; r++) c[(2 * r + (lane >> 4)) * 16 + idx] = acc[r];
}
