// A private array indexed by a runtime value lives in scratch; a barrier between the writes and the reads checks
#define BARRIER() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)
// that each wave's scratch survives the other waves running.
__kernel void scratch_spill(__global const int *x, __global int *out, int k) {
  int lid = __builtin_amdgcn_workitem_id_x();
  int gid = __builtin_amdgcn_workgroup_id_x() * 64 + lid;
  volatile int priv[32];
  for (int i = 0; i < 32; i++) priv[i] = x[gid] * (i + 1);
  BARRIER();
  int s = 0;
  for (int i = 0; i < 32; i++) s += priv[(i + k) & 31];
  out[gid] = s;
}
