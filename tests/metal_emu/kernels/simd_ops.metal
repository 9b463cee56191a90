// Simdgroup collectives: each kernel writes what every lane received, so the
// test can compare against numpy lane by lane.
#include <metal_stdlib>

using namespace metal;

[[kernel]] void shuffles(
    const device float* in [[buffer(0)]],
    device float* out [[buffer(1)]],
    constant uint& param [[buffer(2)]],
    uint gid [[thread_position_in_grid]],
    ushort lane [[thread_index_in_simdgroup]]) {
  const float v = in[gid];
  device float* o = out + gid * 8;
  o[0] = simd_shuffle(v, ushort((lane * 7 + param) % 32));
  o[1] = simd_shuffle_xor(v, ushort(param));
  o[2] = simd_shuffle_down(v, ushort(param));
  o[3] = simd_shuffle_up(v, ushort(param));
  o[4] = simd_broadcast(v, ushort(param % 32));
  o[5] = simd_sum(v);
  o[6] = simd_max(v);
  o[7] = simd_min(v);
}

[[kernel]] void prefix_sums(
    const device int* in [[buffer(0)]],
    device int* out [[buffer(1)]],
    uint gid [[thread_position_in_grid]]) {
  out[2 * gid] = simd_prefix_inclusive_sum(in[gid]);
  out[2 * gid + 1] = simd_prefix_exclusive_sum(in[gid]);
}

[[kernel]] void half_sum(
    const device half* in [[buffer(0)]],
    device half* out [[buffer(1)]],
    uint gid [[thread_position_in_grid]],
    uint sg [[simdgroup_index_in_threadgroup]],
    uint tg [[threadgroup_position_in_grid]],
    uint sgs [[simdgroups_per_threadgroup]]) {
  const half s = simd_sum(in[gid]);
  if (simd_is_first()) {
    out[tg * sgs + sg] = s;
  }
}
