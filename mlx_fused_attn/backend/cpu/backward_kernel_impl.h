// The fused CPU attention backward (FlashAttention-2's structure). Included
// once per instruction set like the forward, whose blocks, products and
// conversions it reuses. Three parallel passes:
//
// 1. D = rowsum(dO * O) for every query row, in fp32.
// 2. A work item is one key block of one (batch, kv head). It converts its
//    K and V once, then for every query head of the GQA group and every
//    query block that sees its keys recomputes P = exp2(S - LSE) from Q, K
//    and the saved LSE, and accumulates
//        dV += P^T dO,  dP = dO V^T,  dS = P * (dP - D),  dK += dS^T Q
//    in the item's own fp32 blocks: dK and dV need no atomics, and the
//    group's query heads are summed without repeating K or V.
//    dQ += dS K goes into one fp32 dQ for the call: an item adds its share
//    of a query block's rows under that block's lock. The items of one
//    (batch, kv head) start at different query blocks (rotated by key
//    block), so they seldom wait for each other.
// 3. dQ is scaled and stored in the gradients' dtype.
//
// Scores are in the exp2 domain, as in the forward: Q is loaded times
// scale * log2(e), so dK = ln(2) dS^T Q_loaded and dQ = scale dS K.
#ifndef FA_CPU_ISA
#error "define FA_CPU_ISA before including backward_kernel_impl.h"
#endif

#include <mutex>

#include "mlx_fused_attn/backend/cpu/attention_kernel_impl.h"

namespace mlx_fused_attn::cpu::FA_CPU_ISA {

// P^T and dS^T reuse the forward's products, whose operands have rows of
// BLOCK_K entries: a query block must fit in one.
static_assert(BLOCK_Q == BLOCK_K, "the transposed blocks assume square tiles");

struct BwdScratch {
  std::vector<float> row, k, kt, vt, q, o, dout, s, dp, t, dq, dk, dv;
  BwdScratch(int D, int D_v)
      : row(D > D_v ? D : D_v),
        k(BLOCK_K * D),
        kt(D * BLOCK_K),
        vt(D_v * BLOCK_K),
        q(BLOCK_Q * D),
        o(BLOCK_Q * D_v),
        dout(BLOCK_Q * D_v),
        s(BLOCK_Q * BLOCK_K),
        dp(BLOCK_Q * BLOCK_K),
        t(BLOCK_K * BLOCK_Q),
        dq(BLOCK_Q * D),
        dk(BLOCK_K * D),
        dv(BLOCK_K * D_v) {}
};

// Row i of head h of batch b of an array with (batch, head, row) strides s.
template <typename T>
T* row_at(T* base, const stride_t* s, int b, int h, int i) {
  return base + b * s[0] + h * s[1] + i * s[2];
}

template <typename T>
struct BwdInputs {
  const T* q;
  const T* k;
  const T* v;
  const T* o;
  const T* dout;
  const float* lse;
  const float* d; ///< rowsum(dO * O), laid out as the LSE
  float* dq; ///< fp32 dQ [B, H_q, L_q, D], row-major
  std::mutex* locks; ///< one per (batch, head, query block)
};

// Pass 1: D for the rows [q0, q0 + rows) of (b, h).
template <typename T>
void row_dot(
    const BwdProblem& pr,
    const BwdInputs<T>& in,
    int b,
    int h,
    int q0,
    int rows,
    BwdScratch& sc,
    float* d) {
  const fa::AttnBwdParams& p = pr.p;
  const int D_v = p.fwd.D_v;
  load_rows(
      row_at(in.o, p.fwd.o_strides, b, h, q0), p.fwd.o_strides[2],
      pr.o_dstride, rows, D_v, 1.0f, sc.o.data());
  load_rows(
      row_at(in.dout, p.do_strides, b, h, q0), p.do_strides[2],
      pr.do_dstride, rows, D_v, 1.0f, sc.dout.data());
  for (int i = 0; i < rows; ++i) {
    const float* oi = sc.o.data() + i * D_v;
    const float* gi = sc.dout.data() + i * D_v;
    float lanes[LANES] = {};
    int c = 0;
    for (; c + LANES <= D_v; c += LANES) {
      for (int l = 0; l < LANES; ++l) {
        lanes[l] += oi[c + l] * gi[c + l];
      }
    }
    float sum = 0.0f;
    for (; c < D_v; ++c) {
      sum += oi[c] * gi[c];
    }
    for (int l = 0; l < LANES; ++l) {
      sum += lanes[l];
    }
    d[i] = sum;
  }
}

// One (query block, key block) pair of (b, h): rows [q0, q0 + rows)
// against keys [k0, k0 + n).
struct BlockPair {
  int b;
  int h;
  int q0;
  int rows;
  int k0;
  int n;
};

// P and dS of the pair `at`, in place of S and dP.
template <typename T, MaskKind MASK>
void probabilities_and_score_grads(
    const BwdProblem& pr,
    const BwdInputs<T>& in,
    const BlockPair& at,
    float* s,
    float* dp) {
  const fa::AttnParams& p = pr.p.fwd;
  const int b = at.b, h = at.h, q0 = at.q0, rows = at.rows, k0 = at.k0;
  const int n = at.n;
  // A row no key is visible to averages V: P = 1 / L_k on every key.
  const float uniform = 1.0f / static_cast<float>(p.L_k);
  for (int i = 0; i < rows; ++i) {
    const int row = q0 + i;
    const stride_t r = lse_row(p, b, h, row);
    const float lse2 = in.lse[r] * LOG2E;
    const float d = in.d[r];
    const bool sees_none = lse2 == -INFINITY &&
        (MASK == MaskKind::Bool || MASK == MaskKind::Causal);
    float* si = s + i * BLOCK_K;
    float* gi = dp + i * BLOCK_K;
    const stride_t* ms = p.mask_strides;
    const stride_t mbase = b * ms[0] + h * ms[1] + row * ms[2] + k0 * ms[3];
    for (int j = 0; j < n; ++j) {
      bool visible = true;
      if (MASK == MaskKind::Causal) {
        visible = k0 + j <= row + p.causal_offset;
      } else if (MASK == MaskKind::Bool) {
        visible = static_cast<const bool*>(pr.mask_data)[mbase + j * ms[3]];
      } else if (MASK == MaskKind::Additive) {
        si[j] += to_float(static_cast<const T*>(
                     pr.mask_data)[mbase + j * ms[3]]) *
            LOG2E;
      }
      if (visible) {
        const float pij = exp2_fast(si[j] - lse2);
        si[j] = pij;
        gi[j] = pij * (gi[j] - d);
      } else {
        si[j] = sees_none ? uniform : 0.0f;
        gi[j] = 0.0f;
      }
    }
    for (int j = n; j < BLOCK_K; ++j) {
      si[j] = 0.0f;
      gi[j] = 0.0f;
    }
  }
}

// Whether any row of the pair `at` sees one of its keys or sees no key at
// all (those average V, so they reach every key's dV): the pairs a causal
// cut or a bool mask hides whole add nothing.
template <typename T, MaskKind MASK>
bool block_matters(
    const BwdProblem& pr,
    const BwdInputs<T>& in,
    const BlockPair& at) {
  const fa::AttnParams& p = pr.p.fwd;
  const int b = at.b, h = at.h, q0 = at.q0, rows = at.rows, k0 = at.k0;
  const int n = at.n;
  if (MASK == MaskKind::Causal) {
    return q0 + rows - 1 + p.causal_offset >= k0 || q0 + p.causal_offset < 0;
  }
  if (MASK != MaskKind::Bool) {
    return true;
  }
  const stride_t* ms = p.mask_strides;
  const bool* m = static_cast<const bool*>(pr.mask_data) + b * ms[0] +
      h * ms[1] + q0 * ms[2];
  if (shows_any(m, ms, rows, k0, n)) {
    return true;
  }
  for (int i = 0; i < rows; ++i) {
    if (in.lse[lse_row(p, b, h, q0 + i)] == -INFINITY) {
      return true;
    }
  }
  return false;
}

// dQ rows [q0, q0 + rows) of (b, h) += the item's share, under their lock.
inline void add_dq(
    float* dq,
    std::mutex& lock,
    const float* share,
    int rows,
    int D) {
  std::lock_guard<std::mutex> guard(lock);
  for (int x = 0; x < rows * D; ++x) {
    dq[x] += share[x];
  }
}

// Pass 2: the key block [k0, k0 + n) of (b, h_kv).
template <typename T, MaskKind MASK>
void key_block(
    const BwdProblem& pr,
    const BwdInputs<T>& in,
    int b,
    int h_kv,
    int kb,
    BwdScratch& sc) {
  const fa::AttnBwdParams& bp = pr.p;
  const fa::AttnParams& p = bp.fwd;
  const int D = p.D, D_v = p.D_v;
  const int k0 = kb * BLOCK_K;
  const int n = std::min(BLOCK_K, p.L_k - k0);
  const int q_blocks = (p.L_q + BLOCK_Q - 1) / BLOCK_Q;

  const T* k = row_at(in.k, p.k_strides, b, h_kv, k0);
  const T* v = row_at(in.v, p.v_strides, b, h_kv, k0);
  load_rows(k, p.k_strides[2], pr.k_dstride, n, D, 1.0f, sc.k.data());
  load_transposed(
      k, p.k_strides[2], pr.k_dstride, n, D, sc.row.data(), sc.kt.data());
  load_transposed(
      v, p.v_strides[2], pr.v_dstride, n, D_v, sc.row.data(), sc.vt.data());
  std::fill(sc.dk.begin(), sc.dk.end(), 0.0f);
  std::fill(sc.dv.begin(), sc.dv.end(), 0.0f);

  for (int g = 0; g < p.gqa_factor; ++g) {
    const int h = h_kv * p.gqa_factor + g;
    for (int step = 0; step < q_blocks; ++step) {
      const int qb = (step + kb) % q_blocks;
      const int q0 = qb * BLOCK_Q;
      const int rows = std::min(BLOCK_Q, p.L_q - q0);
      const BlockPair pair = {b, h, q0, rows, k0, n};
      if (!block_matters<T, MASK>(pr, in, pair)) {
        continue;
      }
      load_rows(
          row_at(in.q, p.q_strides, b, h, q0), p.q_strides[2], pr.q_dstride,
          rows, D, p.scale_log2, sc.q.data());
      load_rows(
          row_at(in.dout, bp.do_strides, b, h, q0), bp.do_strides[2],
          pr.do_dstride, rows, D_v, 1.0f, sc.dout.data());

      // ---- S = Q K^T, dP = dO V^T, then P and dS in their place ----
      scores(sc.q.data(), sc.kt.data(), rows, D, sc.s.data());
      scores(sc.dout.data(), sc.vt.data(), rows, D_v, sc.dp.data());
      probabilities_and_score_grads<T, MASK>(
          pr, in, pair, sc.s.data(), sc.dp.data());

      // ---- dV += P^T dO, dK += dS^T Q ----
      transpose(sc.s.data(), rows, BLOCK_K, sc.t.data(), BLOCK_K);
      accumulate_pv(sc.t.data(), sc.dout.data(), n, rows, D_v, sc.dv.data());
      transpose(sc.dp.data(), rows, BLOCK_K, sc.t.data(), BLOCK_K);
      accumulate_pv(sc.t.data(), sc.q.data(), n, rows, D, sc.dk.data());

      // ---- dQ += dS K ----
      std::fill(sc.dq.begin(), sc.dq.end(), 0.0f);
      accumulate_pv(sc.dp.data(), sc.k.data(), rows, n, D, sc.dq.data());
      add_dq(
          in.dq + lse_row(p, b, h, q0) * D,
          in.locks[(stride_t(b) * p.H_q + h) * q_blocks + qb], sc.dq.data(),
          rows, D);
    }
  }

  T* dk = row_at(static_cast<T*>(pr.dk), bp.dk_strides, b, h_kv, k0);
  T* dv = row_at(static_cast<T*>(pr.dv), bp.dv_strides, b, h_kv, k0);
  const float ln2 = 1.0f / LOG2E;
  for (int j = 0; j < n; ++j) {
    store_row(sc.dk.data() + j * D, D, ln2, dk + j * bp.dk_strides[2]);
    store_row(sc.dv.data() + j * D_v, D_v, 1.0f, dv + j * bp.dv_strides[2]);
  }
}

template <typename T, MaskKind MASK>
void run_backward_typed(const BwdProblem& pr) {
  const fa::AttnBwdParams& bp = pr.p;
  const fa::AttnParams& p = bp.fwd;
  const int q_blocks = (p.L_q + BLOCK_Q - 1) / BLOCK_Q;
  const int k_blocks = (p.L_k + BLOCK_K - 1) / BLOCK_K;
  const int row_blocks = p.B * p.H_q * q_blocks;
  std::vector<float> d(size_t(p.B) * p.H_q * p.L_q);
  std::vector<float> dq(d.size() * p.D, 0.0f);
  std::vector<std::mutex> locks(row_blocks);
  const BwdInputs<T> in{
      static_cast<const T*>(pr.q),
      static_cast<const T*>(pr.k),
      static_cast<const T*>(pr.v),
      static_cast<const T*>(pr.o),
      static_cast<const T*>(pr.dout),
      pr.lse,
      d.data(),
      dq.data(),
      locks.data()};

  auto row_block = [&](int item, int& b, int& h, int& q0, int& rows) {
    const int bh = item / q_blocks;
    b = bh / p.H_q;
    h = bh % p.H_q;
    q0 = (item % q_blocks) * BLOCK_Q;
    rows = std::min(BLOCK_Q, p.L_q - q0);
  };
  parallel_for(row_blocks, [&](int item) {
    int b, h, q0, rows;
    row_block(item, b, h, q0, rows);
    row_dot(
        pr, in, b, h, q0, rows, thread_scratch<BwdScratch>(p.D, p.D_v),
        d.data() + lse_row(p, b, h, q0));
  });
  parallel_for(p.B * p.H_kv * k_blocks, [&](int item) {
    const int bh = item / k_blocks;
    key_block<T, MASK>(
        pr, in, bh / p.H_kv, bh % p.H_kv, item % k_blocks,
        thread_scratch<BwdScratch>(p.D, p.D_v));
  });
  const float scale = p.scale_log2 / LOG2E;
  parallel_for(row_blocks, [&](int item) {
    int b, h, q0, rows;
    row_block(item, b, h, q0, rows);
    T* out = row_at(static_cast<T*>(pr.dq), bp.dq_strides, b, h, q0);
    const float* acc = dq.data() + lse_row(p, b, h, q0) * p.D;
    for (int i = 0; i < rows; ++i) {
      store_row(acc + i * p.D, p.D, scale, out + i * bp.dq_strides[2]);
    }
  });
}

void run(const BwdProblem& pr) {
  for_kernel_types(pr.dtype, pr.mask, [&](auto type, auto mask) {
    run_backward_typed<typename decltype(type)::type, decltype(mask)::value>(
        pr);
  });
}

} // namespace mlx_fused_attn::cpu::FA_CPU_ISA
