// C = A @ B for square n x n float matrices (n a multiple of 16), 16x16 tiles staged through LDS.
#define BARRIER() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)
#define TILE 16
__kernel void tiled_matmul(__global const float *a, __global const float *b, __global float *c, int n) {
  __local float ta[TILE][TILE];
  __local float tb[TILE][TILE];
  int tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y();
  int row = __builtin_amdgcn_workgroup_id_y() * TILE + ty;
  int col = __builtin_amdgcn_workgroup_id_x() * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += TILE) {
    ta[ty][tx] = a[row * n + k0 + tx];
    tb[ty][tx] = b[(k0 + ty) * n + col];
    BARRIER();
    for (int k = 0; k < TILE; k++) acc += ta[ty][k] * tb[k][tx];
    BARRIER();
  }
  c[row * n + col] = acc;
}
