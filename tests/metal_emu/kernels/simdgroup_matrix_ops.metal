// simdgroup_matrix operations: fragment layout, load/store with stride,
// origin and transpose, and multiply-accumulate, each small enough that the
// test can check every element against numpy.
#include <metal_simdgroup_matrix>
#include <metal_stdlib>

using namespace metal;

struct MoveParams {
  uint src_row_stride;
  uint dst_row_stride;
  uint src_origin_x;
  uint src_origin_y;
  uint dst_origin_x;
  uint dst_origin_y;
  uint load_transposed;
  uint store_transposed;
};

// Each lane writes the two elements it holds after loading src.
[[kernel]] void fragment_elements(
    const device float* src [[buffer(0)]],
    device float* out [[buffer(1)]],
    ushort lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, src);
  out[2 * lane] = m.thread_elements()[0];
  out[2 * lane + 1] = m.thread_elements()[1];
}

// Builds a matrix from per-lane values placed by the documented layout.
[[kernel]] void fragment_from_layout(
    const device float* src [[buffer(0)]],
    device float* dst [[buffer(1)]],
    ushort lane [[thread_index_in_simdgroup]]) {
  const ushort qid = lane / 4;
  const ushort row = (qid & 4) + (lane / 2) % 4;
  const ushort col = (qid & 2) * 2 + (lane % 2) * 2;
  simdgroup_float8x8 m;
  m.thread_elements() = float2(src[row * 8 + col], src[row * 8 + col + 1]);
  simdgroup_store(m, dst);
}

// The same with a wrong idea of the layout (lane i holds row i / 4): the
// stored matrix must then differ from the source.
[[kernel]] void fragment_wrong_layout(
    const device float* src [[buffer(0)]],
    device float* dst [[buffer(1)]],
    ushort lane [[thread_index_in_simdgroup]]) {
  const ushort row = lane / 4;
  const ushort col = (lane % 4) * 2;
  simdgroup_float8x8 m;
  m.thread_elements() = float2(src[row * 8 + col], src[row * 8 + col + 1]);
  simdgroup_store(m, dst);
}

[[kernel]] void move(
    const device float* src [[buffer(0)]],
    device float* dst [[buffer(1)]],
    constant MoveParams& p [[buffer(2)]]) {
  simdgroup_float8x8 m;
  simdgroup_load(
      m,
      src,
      p.src_row_stride,
      ulong2(p.src_origin_x, p.src_origin_y),
      p.load_transposed != 0);
  simdgroup_store(
      m,
      dst,
      p.dst_row_stride,
      ulong2(p.dst_origin_x, p.dst_origin_y),
      p.store_transposed != 0);
}

// C[M, N] = A[M, K] * B (+ C), B given as [K, N] or, transposed, as [N, K].
// One simdgroup per 8x8 tile of C; the grid is (N / 8, M / 8).
template <typename T, typename AccT>
[[kernel]] void tile_matmul(
    const device T* A [[buffer(0)]],
    const device T* B [[buffer(1)]],
    device AccT* C [[buffer(2)]],
    constant uint3& mnk [[buffer(3)]],
    constant uint& b_transposed [[buffer(4)]],
    uint2 tile [[threadgroup_position_in_grid]]) {
  const uint N = mnk.y;
  const uint K = mnk.z;
  simdgroup_matrix<AccT, 8, 8> acc;
  simdgroup_load(acc, C + tile.y * 8 * N + tile.x * 8, N);
  for (uint k = 0; k < K; k += 8) {
    simdgroup_matrix<T, 8, 8> a;
    simdgroup_matrix<T, 8, 8> b;
    simdgroup_load(a, A, K, ulong2(k, tile.y * 8));
    if (b_transposed != 0) {
      simdgroup_load(b, B, K, ulong2(k, tile.x * 8), true);
    } else {
      simdgroup_load(b, B, N, ulong2(tile.x * 8, k));
    }
    simdgroup_multiply_accumulate(acc, a, b, acc);
  }
  simdgroup_store(acc, C + tile.y * 8 * N + tile.x * 8, N);
}

template [[host_name("tile_matmul_float")]] [[kernel]] decltype(tile_matmul<float, float>) tile_matmul<float, float>;
template [[host_name("tile_matmul_half")]] [[kernel]] decltype(tile_matmul<half, half>) tile_matmul<half, half>;
template [[host_name("tile_matmul_half_float")]] [[kernel]] decltype(tile_matmul<half, float>) tile_matmul<half, float>;
template [[host_name("tile_matmul_bfloat_float")]] [[kernel]] decltype(tile_matmul<bfloat, float>) tile_matmul<bfloat, float>;

[[kernel]] void diagonal_and_fill(
    device float* out [[buffer(0)]],
    constant float2& values [[buffer(1)]]) {
  simdgroup_float8x8 d = simdgroup_float8x8(values.x);
  simdgroup_float8x8 f = make_filled_simdgroup_matrix<float, 8, 8>(values.y);
  simdgroup_float8x8 p;
  simdgroup_multiply(p, d, f);
  simdgroup_store(d, out);
  simdgroup_store(f, out + 64);
  simdgroup_store(p, out + 128);
}
