// half and bfloat conversions and arithmetic, element by element.
#include <metal_stdlib>

using namespace metal;

[[kernel]] void to_narrow(
    const device float* in [[buffer(0)]],
    device half* h [[buffer(1)]],
    device bfloat* b [[buffer(2)]],
    device float* back [[buffer(3)]],
    uint i [[thread_position_in_grid]]) {
  h[i] = half(in[i]);
  b[i] = static_cast<bfloat>(in[i]);
  back[2 * i] = float(h[i]);
  back[2 * i + 1] = float(b[i]);
}

// Arithmetic in half rounds every result to half.
[[kernel]] void half_arithmetic(
    const device half* x [[buffer(0)]],
    const device half* y [[buffer(1)]],
    device half* out [[buffer(2)]],
    uint i [[thread_position_in_grid]]) {
  out[4 * i] = x[i] + y[i];
  out[4 * i + 1] = x[i] * y[i];
  out[4 * i + 2] = fma(x[i], y[i], x[i]);
  out[4 * i + 3] = max(x[i], y[i]) - half(2) * min(x[i], y[i]);
}

[[kernel]] void vector_math(
    const device float4* x [[buffer(0)]],
    device float4* out [[buffer(1)]],
    device half2* narrow [[buffer(2)]],
    uint i [[thread_position_in_grid]]) {
  const float4 v = x[i];
  float4 r = exp2(v) * 2.0f + float4(v.xy, v.zw) - abs(v);
  r.xy = r.yx;
  out[2 * i] = r;
  out[2 * i + 1] = float4(
      clamp(v.x, -1.0f, 1.0f), fast::exp(v.y), precise::log2(abs(v.z) + 1.0f),
      select(0.0f, 1.0f, isinf(v.w) || isnan(v.w)));
  narrow[i] = half2(v.xy);
}
