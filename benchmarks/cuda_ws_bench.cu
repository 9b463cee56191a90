// Measures a warp-specialised Hopper forward against the library's D = 128
// kernel, before it is built into the library: is FlashAttention-3's
// producer/consumer split worth its launch changes (tensor maps)?
// Standalone: no MLX; nvcc builds it on the GPU machine (sm_90a).
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. \
//     benchmarks/cuda_ws_bench.cu -o ws_bench
//   ./ws_bench          # case: library us, then both loops' us and error
//
// The design: a block of 128 queries is three warpgroups. The first is the
// producer: it gives up its registers (setmaxnreg) and one of its threads
// copies Q and the K and V blocks (128 keys) into shared memory with the
// tensor memory accelerator (cp.async.bulk.tensor, 128-byte swizzle: the
// layout the warpgroup products read, smem_layout.h's SwizzledRows), each
// copy completing on an mbarrier. The two consumer warpgroups (64 queries
// each, 240 registers a thread) run the library's step over the tile ops:
// the products of swizzled_block.h, the online softmax. K and V stages are
// a ring of three; a consumer warp arrives on a stage's `empty` barrier
// once its P V has read it, and the producer waits for all eight before it
// copies the stage again. No thread computes an address or waits on its own
// copies. Two consumer loops: the library's order (each product waited for
// as it is issued), and FlashAttention-3's overlap (a block's softmax under
// the next block's S and this one's P V).
//
// Bottom-right causal (MLX's), GQA; whole blocks of 128 queries and keys.
// Each case's output is checked against the library kernel's.
#include <cuda.h>
#include <cudaTypedefs.h>

#include "benchmarks/cuda_attention_case.cuh"

namespace ws {
using namespace fa;

typedef bfloat_t T;
// Three stages: the overlapped loop releases a stage a block later (after
// the next block's softmax), and two left the producer too little time to
// refill it (measured); 224 KB of the 227 a block may have.
constexpr int D = 128, BQ = 128, BK = 128, kStages = 3;
constexpr int kConsumerThreads = 256, kThreads = 384;
typedef SwizzledBlock<T, BK, D, D, kConsumerThreads> KVBlock;
typedef QInShared<T, BQ, D, kConsumerThreads> QOperand;
typedef AttnStep<CudaWgmmaSharedQTarget, T, 16, BK, D> Step;

// Each array starts 1024-byte aligned (the swizzle is anchored to address
// bits): Q 32 KB, then 32 KB blocks.
struct __align__(1024) Smem {
  T q[BQ * D];
  T k[kStages][BK * D];
  T v[kStages][BK * D];
  unsigned long long full_k[kStages], full_v[kStages], empty[kStages], q_full;
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(unsigned long long* b, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(arrivals));
}
/// The producer's arrival, with the bytes the copies that follow will bring.
__device__ __forceinline__ void mbar_expect_bytes(unsigned long long* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* b, unsigned parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(b)), "r"(parity)
        : "memory");
  } while (!done);
}
/// One box of the 4-D tensor `map` at (column, row, head, batch) into dst.
__device__ __forceinline__ void tma_copy(void* dst, const CUtensorMap* map,
                                         unsigned long long* bar, int col, int row, int head,
                                         int batch) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(bar)), "r"(col), "r"(row),
      "r"(head), "r"(batch)
      : "memory");
}

/// The producer's one thread: Q, then key block kb into stage kb % kStages
/// once the consumers have released that stage's previous block.
__device__ void produce(Smem& sm, const CUtensorMap& q_map, const CUtensorMap& k_map,
                        const CUtensorMap& v_map, int q_block, int head, int kv_head, int batch,
                        int n_blocks) {
  // A swizzle panel is 64 columns (128 bytes); Q is one panel pair a warpgroup.
  constexpr unsigned kQPanel = 64 * 64 * sizeof(T), kBlock = BK * D * sizeof(T);
  mbar_expect_bytes(&sm.q_full, 4 * kQPanel);
  for (int g = 0; g < 2; ++g) {
    for (int c = 0; c < 2; ++c) {
      tma_copy(sm.q + g * 64 * D + c * 64 * 64, &q_map, &sm.q_full, c * 64,
               q_block * BQ + g * 64, head, batch);
    }
  }
  for (int kb = 0; kb < n_blocks; ++kb) {
    const int s = kb % kStages;
    if (kb >= kStages) {
      mbar_wait(&sm.empty[s], (kb / kStages - 1) & 1);
    }
    mbar_expect_bytes(&sm.full_k[s], kBlock);
    mbar_expect_bytes(&sm.full_v[s], kBlock);
    for (int c = 0; c < 2; ++c) {
      tma_copy(sm.k[s] + c * BK * 64, &k_map, &sm.full_k[s], c * 64, kb * BK, kv_head, batch);
    }
    for (int c = 0; c < 2; ++c) {
      tma_copy(sm.v[s] + c * BK * 64, &v_map, &sm.full_v[s], c * 64, kb * BK, kv_head, batch);
    }
  }
}

/// Grid: (L_q / 128, H_q, B), causal ones heaviest first. kOverlap: each
/// block's softmax runs while the tensor cores compute the next block's S
/// and this one's P V (issued together, waited for apart).
template <bool kCausal, bool kOverlap>
__global__ void __launch_bounds__(kThreads, 1)
    ws_attention_kernel(const __grid_constant__ CUtensorMap q_map,
                        const __grid_constant__ CUtensorMap k_map,
                        const __grid_constant__ CUtensorMap v_map, T* out,
                        const AttnParams p) {
  extern __shared__ __align__(1024) unsigned char smem[];
  Smem& sm = *reinterpret_cast<Smem*>(smem);
  const int warp = threadIdx.x / kSimdWidth, lane = threadIdx.x % kSimdWidth;
  const int q_block = kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int head = blockIdx.y, batch = blockIdx.z;
  const AttnKeyBlocks blocks = attention_key_blocks<BQ, BK>(p, kCausal, q_block);

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&sm.full_k[s], 1);
      mbar_init(&sm.full_v[s], 1);
      mbar_init(&sm.empty[s], kConsumerThreads / kSimdWidth);
    }
    mbar_init(&sm.q_full, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp < 4) {
    // 24 + 2 x 240 registers a thread over the three warpgroups fill 64K.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
    if (threadIdx.x == 0) {
      produce(sm, q_map, k_map, v_map, q_block, head, head / p.gqa_factor, batch, blocks.end);
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
  const int cwarp = warp - 4;  // 16 query rows each, warpgroup cwarp / 4
  const int q_row0 = q_block * BQ + cwarp * 16;
  QOperand q;
  q.smem = sm.q + (cwarp / 4) * 64 * D;
  Step st;
  attention_step_begin(st, false, T(0));
  // Block kb's scores in st.s, masked, into weights; factor: O's rescale.
  float factor[Step::STile::kRowSlots];
  auto weights = [&](int kb) {
    float score_scale = p.scale_log2;
    if (kCausal && kb >= blocks.causal) {
      tile_scalar_op<MulOp>(st.s, p.scale_log2);
      const CausalMaskOp op = {p.causal_offset};
      tile_map_coords(st.s, op, q_row0, kb * BK, lane);
      score_scale = 1.0f;
    }
    return softmax_weights(st.softmax, st.s, score_scale, factor);
  };
  // The products have returned: this warp is done with stage s.
  auto release = [&](int s) {
    __syncwarp();
    if (lane == 0) {
      mbar_arrive(&sm.empty[s]);
    }
  };
  mbar_wait(&sm.q_full, 0);
  if (!kOverlap) {
    for (int kb = 0; kb < blocks.end; ++kb) {
      const int s = kb % kStages;
      const unsigned parity = (kb / kStages) & 1;
      tile_fill(st.s, 0.0f);
      mbar_wait(&sm.full_k[s], parity);
      KVBlock::mma_abt(st.s, q, sm.k[s], lane);
      softmax_rescale(st.o, factor, weights(kb));
      tile_to_operand(st.p, st.s);
      mbar_wait(&sm.full_v[s], parity);
      KVBlock::mma_ab(st.o, st.p, sm.v[s], lane);
      release(s);
    }
  } else {
    tile_fill(st.s, 0.0f);
    mbar_wait(&sm.full_k[0], 0);
    KVBlock::issue_mma_abt(st.s, q, sm.k[0]);
    KVBlock::retire<0>(st.s);
    weights(0);  // O is still zero: nothing to rescale
    tile_to_operand(st.p, st.s);
    for (int kb = 1; kb < blocks.end; ++kb) {
      const int s = kb % kStages, prev = (kb - 1) % kStages;
      tile_fill(st.s, 0.0f);
      mbar_wait(&sm.full_k[s], (kb / kStages) & 1);
      KVBlock::issue_mma_abt(st.s, q, sm.k[s]);
      mbar_wait(&sm.full_v[prev], ((kb - 1) / kStages) & 1);
      KVBlock::issue_mma_ab(st.o, st.p, sm.v[prev]);
      KVBlock::retire<1>(st.s);  // S, committed first
      const bool moved = weights(kb);
      KVBlock::retire<0>(st.o);  // P V
      KVBlock::keep_until_done(st.p);
      release(prev);
      softmax_rescale(st.o, factor, moved);
      tile_to_operand(st.p, st.s);
    }
    const int last = (blocks.end - 1) % kStages;
    mbar_wait(&sm.full_v[last], ((blocks.end - 1) / kStages) & 1);
    KVBlock::issue_mma_ab(st.o, st.p, sm.v[last]);
    KVBlock::retire<0>(st.o);
    KVBlock::keep_until_done(st.p);
    release(last);
  }
  attention_step_end(st);
  tile_store_device(out + (size_t(batch) * p.H_q + head) * p.L_q * D + size_t(q_row0) * D, st.o,
                    stride_t(D), lane);
}

/// [B, H, L, D] bf16, boxes of 64 columns (one swizzle panel) by `rows`.
CUtensorMap tensor_map(const T* base, int B, int H, int L, int rows) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled",
                                           reinterpret_cast<void**>(&fn), 12000,
                                           cudaEnableDefault, &found));
    return fn;
  }();
  CUtensorMap map;
  const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(L), cuuint64_t(H), cuuint64_t(B)};
  const cuuint64_t row_bytes = D * sizeof(T);
  const cuuint64_t strides[3] = {row_bytes, row_bytes * L, row_bytes * L * H};
  const cuuint32_t box[4] = {64, cuuint32_t(rows), 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<T*>(base),
                            dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled: error %d\n", int(r));
    std::exit(1);
  }
  return map;
}

float run(const Problem& pr, const T* q, const T* k, const T* v, T* o, int reps, bool overlap) {
  AttnParams p{};
  p.B = pr.B; p.H_q = pr.H; p.H_kv = pr.hkv(); p.gqa_factor = pr.H / pr.hkv();
  p.L_q = pr.lq(); p.L_k = pr.L; p.D = D; p.D_v = D;
  p.causal_offset = pr.L - pr.lq();
  p.scale_log2 = (1.0f / std::sqrt(float(D))) * 1.4426950408889634f;
  const CUtensorMap q_map = tensor_map(q, pr.B, pr.H, pr.lq(), 64);
  const CUtensorMap k_map = tensor_map(k, pr.B, pr.hkv(), pr.L, BK);
  const CUtensorMap v_map = tensor_map(v, pr.B, pr.hkv(), pr.L, BK);
  auto kernel = pr.causal ? (overlap ? ws_attention_kernel<true, true>
                                     : ws_attention_kernel<true, false>)
                          : (overlap ? ws_attention_kernel<false, true>
                                     : ws_attention_kernel<false, false>);
  const int smem = sizeof(Smem);
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(pr.lq() / BQ, pr.H, pr.B);
  return launch_ms([&] { kernel<<<grid, kThreads, smem>>>(q_map, k_map, v_map, o, p); }, reps);
}

/// The library's tile past one wave at D = 128, then the warp-specialised
/// kernel on the same inputs.
void compare(const char* name, Problem pr, int reps) {
  if (pr.lq() % BQ || pr.L % BK) {
    std::fprintf(stderr, "%s: whole 128-row blocks only\n", name);
    std::exit(1);
  }
  Case<T, D> c("bf16", pr);
  c.shape<AttnTilesOf<64, 64, 4, 1, 4, true, true>>(reps);
  for (bool overlap : {false, true}) {
    CHECK(cudaMemset(c.o, 0xff, c.n * sizeof(T)));
    const float ms = run(pr, c.q, c.k, c.v, c.o, reps, overlap);
    std::printf("%-16s warp-specialised%s %9.1f us %6.1f TFLOP/s  err vs library %.2e\n", name,
                overlap ? ", overlapped" : "            ", ms * 1e3,
                flops(pr) / (ms * 1e-3) / 1e12, max_diff(c.o, c.ref, c.n));
    std::fflush(stdout);
  }
}

}  // namespace ws

int main() {
  // The workload table's chunked prefill and GQA prefill (RESULTS.md), then
  // square grids from under a wave of 128-query blocks to many.
  ws::compare("chunk B=8", {8, 32, 4096, 128, true, 128, 8}, 20);
  ws::compare("GQA prefill", {1, 32, 2048, 128, true, 0, 8}, 20);
  ws::compare("GQA prefill 8K", {1, 32, 8192, 128, true, 0, 8}, 5);
  ws::compare("square 1024", {1, 32, 1024, 128, false}, 50);
  ws::compare("square 2048", {1, 32, 2048, 128, false}, 20);
  ws::compare("square 4096", {1, 32, 4096, 128, false}, 10);
  ws::compare("4x8192 causal", {4, 32, 8192, 128, true}, 3);
  ws::compare("4x8192 full", {4, 32, 8192, 128, false}, 3);
  return 0;
}
