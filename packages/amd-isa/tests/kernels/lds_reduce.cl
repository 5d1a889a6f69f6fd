// Sum of 256 floats per workgroup through LDS: a tree reduction with a barrier between levels.
#define BARRIER() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)
__kernel void lds_reduce(__global const float *x, __global float *out) {
  __local float tile[256];
  int lid = __builtin_amdgcn_workitem_id_x();
  int gid = __builtin_amdgcn_workgroup_id_x();
  tile[lid] = x[gid * 256 + lid];
  BARRIER();
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (lid < stride) tile[lid] += tile[lid + stride];
    BARRIER();
  }
  if (lid == 0) out[gid] = tile[0];
}
