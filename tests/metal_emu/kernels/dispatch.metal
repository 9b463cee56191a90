// Builtin thread coordinates and [[threadgroup(n)]] memory set by the host.
#include <metal_stdlib>

using namespace metal;

// Every thread writes its coordinates, 16 values, at its global index.
[[kernel]] void coordinates(
    device uint* out [[buffer(0)]],
    uint3 gpos [[thread_position_in_grid]],
    uint3 lpos [[thread_position_in_threadgroup]],
    uint3 tgpos [[threadgroup_position_in_grid]],
    uint3 tgsize [[threads_per_threadgroup]],
    uint3 ngroups [[threadgroups_per_grid]],
    uint lindex [[thread_index_in_threadgroup]],
    ushort lane [[thread_index_in_simdgroup]],
    ushort sg [[simdgroup_index_in_threadgroup]],
    uint nsg [[simdgroups_per_threadgroup]]) {
  const uint3 gsize = tgsize * ngroups;
  const uint g = (gpos.z * gsize.y + gpos.y) * gsize.x + gpos.x;
  device uint* o = out + 16 * g;
  o[0] = gpos.x;
  o[1] = gpos.y;
  o[2] = gpos.z;
  o[3] = lpos.x;
  o[4] = lpos.y;
  o[5] = lpos.z;
  o[6] = tgpos.x;
  o[7] = tgpos.y;
  o[8] = tgpos.z;
  o[9] = lindex;
  o[10] = lane;
  o[11] = sg;
  o[12] = nsg;
  o[13] = tgsize.x * tgsize.y * tgsize.z;
  o[14] = ngroups.x * ngroups.y * ngroups.z;
  o[15] = 7;
}

// Sums each threadgroup's slice through host-sized threadgroup memory.
[[kernel]] void group_sum(
    const device float* in [[buffer(0)]],
    device float* out [[buffer(1)]],
    threadgroup float* partial [[threadgroup(0)]],
    uint gid [[thread_position_in_grid]],
    uint tg [[threadgroup_position_in_grid]],
    ushort lane [[thread_index_in_simdgroup]],
    ushort sg [[simdgroup_index_in_threadgroup]],
    ushort nsg [[simdgroups_per_threadgroup]]) {
  const float s = simd_sum(in[gid]);
  if (lane == 0) {
    partial[sg] = s;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    const float t = simd_sum(lane < nsg ? partial[lane] : 0.0f);
    if (lane == 0) {
      out[tg] = t;
    }
  }
}
