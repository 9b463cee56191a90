// The CUDA matrix fragments: 16x16 tiles of one warp built from mma.sync
// (sm_80 and later), one type per role: A (row operand), B (column operand)
// and the fp32 accumulator C. The generic Tile and tile ops see the same
// contract as for Metal's SimdgroupFrag (see simdgroup_frag.h); what differs
// is the shape (16x16 instead of 8x8), the lane layout, and the element type
// of the operand roles (the input type here, fp32 on Metal).
//
// Layout. Lane = 4 g + t (g = 0..7, t = 0..3) holds rows g and g + 8 and,
// in each, the column pairs (2t, 2t+1) and (2t+8, 2t+9): register e sits at
//   row g + 8 * ((e >> 1) & 1),  column 2t + (e & 1) + 8 * (e >> 2).
// For A and C this is exactly the m16n8k16 operand / accumulator layout (the
// C fragment is two m16n8 accumulators side by side), so an accumulator
// converts to an A operand register for register (tile_to_operand: P stays
// in registers between the two matrix products). B is the same with its
// rows and columns exchanged (lane g holds columns g and g + 8).
//
// Element types:
// - half / bfloat: m16n8k16 with fp32 accumulation; B fragments come from
//   shared memory through ldmatrix (.trans when the B rows are contiguous).
// - float: three tf32 products per step ("3xTF32": a = a_hi + a_lo, and
//   a b ~ a_hi b_hi + a_hi b_lo + a_lo b_hi), which keeps fp32 accuracy
//   (relative error ~2^-21 per product, against 2^-11 for plain tf32) at a
//   sixth of the fp16 rate. m16n8k8's tf32 operands hold columns (t, t+4)
//   where this layout has (2t, 2t+1); a product sums over k, so the same
//   renumbering of k on both operands leaves it unchanged, and every role
//   keeps the one layout above.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/platform.h"

namespace fa {

/// The lane layout shared by the A and C roles (B swaps rows and columns).
struct MmaLayout {
  FA_CONST int kRows = 16;
  FA_CONST int kCols = 16;
  FA_CONST int kElems = kRows * kCols / kSimdWidth;
  FA_CONST int kRowsPerLane = 2;

  static FA_FUNC int row(lane_t lane, int e) {
    return int(lane / 4) + 8 * ((e >> 1) & 1);
  }
  static FA_FUNC int col(lane_t lane, int e) {
    return 2 * int(lane % 4) + (e & 1) + 8 * (e >> 2);
  }
  static FA_FUNC int row_slot(int e) {
    return (e >> 1) & 1;
  }
  /// The four lanes sharing a row differ in lane bits 0 and 1.
  template <typename Op, typename U>
  static FA_FUNC U reduce_row_lanes(U x) {
    x = Op::apply(x, FA_SHUFFLE_XOR(x, 1));
    return Op::apply(x, FA_SHUFFLE_XOR(x, 2));
  }
};

// ------------------------------------------------------------- intrinsics

FA_FUNC unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The products are plain asm (register operands only), so the compiler may
// interleave them with the fragment loads; ldmatrix stays volatile, as it
// reads shared memory and must not move across a barrier.

/// Four 8x8 b16 matrices; lane i gives the address of row i % 8 of matrix
/// i / 8, and register j receives matrix j in the m16n8k16 operand layout
/// (lane 4 g + t: row g, columns 2t, 2t+1), transposed with kTrans.
template <bool kTrans>
FA_FUNC void ldmatrix_x4(unsigned* r, const void* row_address) {
  const unsigned a = smem_address(row_address);
  if constexpr (kTrans) {
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(a));
  } else {
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(a));
  }
}

/// The m16n8k16 product and the fp32 -> T pair conversion for one 16-bit T.
template <typename T>
struct Mma16;
template <>
struct Mma16<half_t> {
  FA_FUNC static void mma(float* d, const unsigned* a, const unsigned* b) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  FA_FUNC static unsigned pack(float x, float y) {
    __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<unsigned*>(&h);
  }
};
template <>
struct Mma16<bfloat_t> {
  FA_FUNC static void mma(float* d, const unsigned* a, const unsigned* b) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  FA_FUNC static unsigned pack(float x, float y) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<unsigned*>(&h);
  }
};

/// d += a b for one m16n8k8 tf32 step (operands already tf32 bit patterns).
FA_FUNC void mma_tf32(float* d, const unsigned* a, const unsigned* b) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// x = hi + lo with hi and lo tf32 (rounded to nearest).
FA_FUNC void split_tf32(float x, unsigned& hi, unsigned& lo) {
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(hi) : "f"(x));
  const float rest = x - __uint_as_float(hi);
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(lo) : "f"(rest));
}

// -------------------------------------------------------------- fragments

/// The fp32 accumulator.
struct MmaFragC : MmaLayout {
  typedef float elem_type;
  float v[kElems];

  template <typename U>
  static FA_FUNC void
  store_device(const MmaFragC& f, U* dst, stride_t ld, lane_t lane) {
    FA_UNROLL
    for (int e = 0; e < kElems; e += 2) {
      store_pair(dst + row(lane, e) * ld + col(lane, e), f.v[e], f.v[e + 1]);
    }
  }

  template <typename U>
  static FA_FUNC void store_device_safe(
      const MmaFragC& f,
      U* dst,
      stride_t ld,
      int lim_rows,
      int lim_cols,
      lane_t lane) {
    FA_UNROLL
    for (int e = 0; e < kElems; ++e) {
      const int r = row(lane, e);
      const int c = col(lane, e);
      if (r < lim_rows && c < lim_cols) {
        dst[r * ld + c] = static_cast<U>(f.v[e]);
      }
    }
  }

  /// dst[r * ld + c] += element (r, c) for rows r < lim_rows: fire-and-
  /// forget reductions in L2 (red), a column pair in one 8-byte red.v2 on
  /// sm_90 (its vector form starts there), two scalar ones before.
  static FA_FUNC void atomic_add_device(
      const MmaFragC& f,
      float* dst,
      stride_t ld,
      int lim_rows,
      lane_t lane) {
    FA_UNROLL
    for (int e = 0; e < kElems; e += 2) {
      if (row(lane, e) < lim_rows) {
        red_add_pair(dst + row(lane, e) * ld + col(lane, e), f.v[e], f.v[e + 1]);
      }
    }
  }

 private:
  // Columns 2t and 2t+1 are adjacent and the row starts are 16-byte aligned
  // (the host guarantees it), so a pair is one 4- or 8-byte store.
  static FA_FUNC void store_pair(half_t* p, float x, float y) {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x, y);
  }
  static FA_FUNC void store_pair(bfloat_t* p, float x, float y) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
  }
  static FA_FUNC void store_pair(float* p, float x, float y) {
    *reinterpret_cast<float2*>(p) = make_float2(x, y);
  }
  static FA_FUNC void red_add_pair(float* p, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p),
                 "f"(x), "f"(y)
                 : "memory");
#else
    atomicAdd(p, x);
    atomicAdd(p + 1, y);
#endif
  }
};

/// The row operand: a 16x16 block of T, row-major in registers.
template <typename T>
struct MmaFragA : MmaLayout {
  typedef T elem_type;
  T v[kElems];

  /// Row-major device memory; columns 2t, 2t+1 are read as one pair.
  template <typename U>
  static FA_FUNC void
  load_device(MmaFragA& f, const U* src, stride_t ld, lane_t lane) {
    FA_UNROLL
    for (int e = 0; e < kElems; e += 2) {
      load_pair(f.v + e, src + row(lane, e) * ld + col(lane, e));
    }
  }

  template <typename U>
  static FA_FUNC void load_device_safe(
      MmaFragA& f,
      const U* src,
      stride_t ld,
      int lim_rows,
      int lim_cols,
      T fill,
      lane_t lane) {
    FA_UNROLL
    for (int e = 0; e < kElems; ++e) {
      const int r = row(lane, e);
      const int c = col(lane, e);
      f.v[e] = (r < lim_rows && c < lim_cols) ? src[r * ld + c] : fill;
    }
  }

  /// Element (r, c) from src[r * kStrR + c * kStrC], rows contiguous
  /// (kStrC == 1: a row-major block of queries in shared memory). 16-bit
  /// types take one ldmatrix: matrix j = lane / 8 covers rows 8 (j % 2)..
  /// and columns 8 (j / 2).., so that register j holds elements 2j, 2j+1 of
  /// the layout above.
  template <int kStrR, int kStrC>
  static FA_FUNC void load_shared(MmaFragA& f, const T* src, lane_t lane) {
    static_assert(kStrC == 1, "A fragments are read from row-major blocks");
    if constexpr (sizeof(T) == 2) {
      const int j = lane / 8;
      const int i = lane % 8;
      ldmatrix_x4<false>(
          reinterpret_cast<unsigned*>(f.v),
          src + (8 * (j % 2) + i) * kStrR + 8 * (j / 2));
    } else {
      FA_UNROLL
      for (int e = 0; e < kElems; e += 2) {
        load_pair(f.v + e, src + row(lane, e) * kStrR + col(lane, e));
      }
    }
  }

 private:
  static FA_FUNC void load_pair(T* dst, const T* src) {
    if constexpr (sizeof(T) == 2) {
      *reinterpret_cast<unsigned*>(dst) =
          *reinterpret_cast<const unsigned*>(src);
    } else {
      *reinterpret_cast<float2*>(dst) = *reinterpret_cast<const float2*>(src);
    }
  }
};

/// The column operand: a 16x16 block of T (rows are k, columns are n).
template <typename T>
struct MmaFragB {
  typedef T elem_type;
  FA_CONST int kRows = 16;
  FA_CONST int kCols = 16;
  FA_CONST int kElems = kRows * kCols / kSimdWidth;
  T v[kElems];

  static FA_FUNC int row(lane_t lane, int e) {
    return 2 * int(lane % 4) + (e & 1) + 8 * ((e >> 1) & 1);
  }
  static FA_FUNC int col(lane_t lane, int e) {
    return int(lane / 4) + 8 * (e >> 2);
  }

  /// Element (r, c) from src[r * kStrR + c * kStrC]; one stride must be 1.
  /// kStrR == 1 (each column contiguous, e.g. K^T from K stored a key per
  /// row) is ldmatrix's natural layout; kStrC == 1 (each row contiguous,
  /// e.g. V) needs its transpose.
  template <int kStrR, int kStrC>
  static FA_FUNC void load_shared(MmaFragB& f, const T* src, lane_t lane) {
    static_assert(kStrR == 1 || kStrC == 1, "B fragments need a unit stride");
    if constexpr (sizeof(T) == 2) {
      // Matrix j = lane / 8 covers rows 8 (j % 2).. and columns 8 (j / 2)..,
      // so that registers 0-1 and 2-3 are the two n8 halves' operands.
      const int j = lane / 8;
      const int i = lane % 8;
      unsigned* r = reinterpret_cast<unsigned*>(f.v);
      if constexpr (kStrR == 1) {
        ldmatrix_x4<false>(r, src + (8 * (j / 2) + i) * kStrC + 8 * (j % 2));
      } else {
        ldmatrix_x4<true>(r, src + (8 * (j % 2) + i) * kStrR + 8 * (j / 2));
      }
    } else {
      FA_UNROLL
      for (int e = 0; e < kElems; e += 2) {
        const T* p = src + row(lane, e) * kStrR + col(lane, e) * kStrC;
        if constexpr (kStrR == 1) {
          const float2 x = *reinterpret_cast<const float2*>(p);
          f.v[e] = x.x;
          f.v[e + 1] = x.y;
        } else {
          f.v[e] = p[0];
          f.v[e + 1] = p[kStrR];
        }
      }
    }
  }
};

static_assert(
    MmaLayout::kCols == fragment_size(Backend::Cuda) &&
        MmaFragB<half_t>::kRows == fragment_size(Backend::Cuda),
    "fragment_size (platform.h) disagrees with the mma.sync fragments");

// -------------------------------------------------------------- products

/// D = A B + C for 16-bit operands: two m16n8k16 products, one per n8 half.
template <typename T>
FA_FUNC void mma(
    MmaFragC& d,
    const MmaFragA<T>& a,
    const MmaFragB<T>& b,
    const MmaFragC& c) {
  MmaFragC acc = c;
  const unsigned* ar = reinterpret_cast<const unsigned*>(a.v);
  const unsigned* br = reinterpret_cast<const unsigned*>(b.v);
  Mma16<T>::mma(acc.v, ar, br);
  Mma16<T>::mma(acc.v + 4, ar, br + 2);
  d = acc;
}

/// D = A B + C in fp32 through 3xTF32 (see the top of this file): for each
/// k8 half kh and n8 half nt, A's registers 4kh + {0, 2, 1, 3} and B's
/// 4nt + 2kh + {0, 1} are the m16n8k8 operands a0..a3 and b0, b1.
FA_FUNC void mma(
    MmaFragC& d,
    const MmaFragA<float>& a,
    const MmaFragB<float>& b,
    const MmaFragC& c) {
  MmaFragC acc = c;
  FA_UNROLL
  for (int kh = 0; kh < 2; ++kh) {
    unsigned a_hi[4], a_lo[4];
    const int order[4] = {0, 2, 1, 3};
    FA_UNROLL
    for (int i = 0; i < 4; ++i) {
      split_tf32(a.v[4 * kh + order[i]], a_hi[i], a_lo[i]);
    }
    FA_UNROLL
    for (int nt = 0; nt < 2; ++nt) {
      unsigned b_hi[2], b_lo[2];
      FA_UNROLL
      for (int i = 0; i < 2; ++i) {
        split_tf32(b.v[4 * nt + 2 * kh + i], b_hi[i], b_lo[i]);
      }
      // Small terms first: they are added before the large one rounds.
      mma_tf32(acc.v + 4 * nt, a_lo, b_hi);
      mma_tf32(acc.v + 4 * nt, a_hi, b_lo);
      mma_tf32(acc.v + 4 * nt, a_hi, b_hi);
    }
  }
  d = acc;
}

/// An accumulator as an A operand: the layouts agree register for register,
/// so this is a conversion (rounding P to T, as FlashAttention does).
template <typename T>
FA_FUNC void acc_to_operand(MmaFragA<T>& a, const MmaFragC* c) {
  FA_UNROLL
  for (int e = 0; e < MmaLayout::kElems; e += 2) {
    *reinterpret_cast<unsigned*>(a.v + e) =
        Mma16<T>::pack(c->v[e], c->v[e + 1]);
  }
}

FA_FUNC void acc_to_operand(MmaFragA<float>& a, const MmaFragC* c) {
  FA_UNROLL
  for (int e = 0; e < MmaLayout::kElems; ++e) {
    a.v[e] = c->v[e];
  }
}

} // namespace fa
