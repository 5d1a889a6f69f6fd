// c[i] = a[i] + b[i] for i < n; one work-item per element, 64-wide workgroups.
__kernel void vector_add(__global const float *a, __global const float *b, __global float *c, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  if (i < n) c[i] = a[i] + b[i];
}
