// A tiled matmul in the steel style: a threadgroup of four simdgroups
// computes a 32x32 tile of C = A * B, staging 32x16 tiles of A and 16x32
// tiles of B in threadgroup memory (zero-filled past the matrix edges), each
// simdgroup owning a 16x16 quarter of C as 2x2 fragments. The result goes
// through threadgroup memory so ragged edges can be stored element by
// element. `skip_barrier` removes one barrier, for the negative tests,
// through constants derived from it at program scope.
#include <metal_stdlib>

using namespace metal;

constant int skip_barrier [[function_constant(0)]];
constant bool sync_loads = skip_barrier != 1;
constant bool sync_multiplies = skip_barrier != 2;

constexpr constant int BM = 32;
constexpr constant int BN = 32;
constexpr constant int BK = 16;

struct Dims {
  int M;
  int N;
  int K;
};

[[kernel]] void tiled_matmul(
    const device float* A [[buffer(0)]],
    const device float* B [[buffer(1)]],
    device float* C [[buffer(2)]],
    constant Dims& d [[buffer(3)]],
    uint2 tg [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]],
    uint sg [[simdgroup_index_in_threadgroup]]) {
  FA_SHARED_ARRAY_DECL float a_tile[BM * BK];
  FA_SHARED_ARRAY_DECL float b_tile[BK * BN];
  FA_SHARED_ARRAY_DECL float c_tile[BM * BN];

  const int row0 = int(tg.y) * BM;
  const int col0 = int(tg.x) * BN;
  const int sg_row = int(sg / 2) * 16;
  const int sg_col = int(sg % 2) * 16;

  simdgroup_float8x8 acc[2][2];
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }
  }

  for (int k0 = 0; k0 < d.K; k0 += BK) {
    // 128 threads load 512 elements of each tile: four apiece.
    for (int e = int(tid); e < BM * BK; e += 128) {
      const int r = e / BK;
      const int c = e % BK;
      const bool in = row0 + r < d.M && k0 + c < d.K;
      a_tile[e] = in ? A[(row0 + r) * d.K + k0 + c] : 0.0f;
    }
    for (int e = int(tid); e < BK * BN; e += 128) {
      const int r = e / BN;
      const int c = e % BN;
      const bool in = k0 + r < d.K && col0 + c < d.N;
      b_tile[e] = in ? B[(k0 + r) * d.N + col0 + c] : 0.0f;
    }
    if (sync_loads) {
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (int kk = 0; kk < BK; kk += 8) {
      simdgroup_float8x8 a[2];
      simdgroup_float8x8 b[2];
      for (int i = 0; i < 2; ++i) {
        simdgroup_load(a[i], a_tile, BK, ulong2(kk, sg_row + 8 * i));
        simdgroup_load(b[i], b_tile, BN, ulong2(sg_col + 8 * i, kk));
      }
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
          simdgroup_multiply_accumulate(acc[i][j], a[i], b[j], acc[i][j]);
        }
      }
    }
    if (sync_multiplies) {
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }

  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      simdgroup_store(
          acc[i][j], c_tile, BN, ulong2(sg_col + 8 * j, sg_row + 8 * i));
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int e = int(tid); e < BM * BN; e += 128) {
    const int r = row0 + e / BN;
    const int c = col0 + e % BN;
    if (r < d.M && c < d.N) {
      C[r * d.N + c] = c_tile[e];
    }
  }
}
