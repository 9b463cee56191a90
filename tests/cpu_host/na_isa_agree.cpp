// Runs the generic and the AVX2 builds of the CPU neighborhood kernel on the
// same problems and prints, per case, the largest difference between them.
// The Python tests reach only the build that run_best() picks (AVX2 on CI),
// so this is what checks the generic one, which other x86-64 machines and
// every non-x86 build run. Outputs start as NaN so an unwritten element
// shows. Exit status: the number of cases that disagree.
#include <cmath>
#include <cstdio>
#include <vector>

#include "mlx_fused_attn/backend/cpu/problem.h"

using namespace mlx_fused_attn::cpu;

namespace {

struct Case {
  int n_axes;
  fa::NaAxis axes[fa::kNaMaxAxes]; // {n, k, d, causal}; unused: {1, 1, 1, 0}
  int H;
  int D;
};

// The tile cases of tests/test_neighborhood.py: tile edges, ragged tiles,
// unequal dilation groups, every score tile, head-dim tails.
const Case kCases[] = {
    {1, {{200, 13, 1, 0}, {1, 1, 1, 0}, {1, 1, 1, 0}}, 2, 64},
    {1, {{200, 13, 3, 0}, {1, 1, 1, 0}, {1, 1, 1, 0}}, 2, 32},
    {1, {{150, 9, 1, 1}, {1, 1, 1, 0}, {1, 1, 1, 0}}, 2, 80},
    {1, {{130, 130, 1, 0}, {1, 1, 1, 0}, {1, 1, 1, 0}}, 1, 16},
    {2, {{3, 3, 1, 0}, {140, 33, 2, 1}, {1, 1, 1, 0}}, 2, 24},
    {3, {{4, 3, 1, 1}, {5, 5, 1, 0}, {70, 5, 1, 0}}, 2, 40},
    {2, {{6, 5, 1, 0}, {67, 7, 1, 0}, {1, 1, 1, 0}}, 3, 96},
    {2, {{9, 7, 1, 0}, {66, 6, 1, 0}, {1, 1, 1, 0}}, 2, 13},
};

} // namespace

int main() {
  int bad = 0;
  unsigned seed = 1;
  auto uniform = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(seed >> 8) / 16777216.0f * 4.0f - 2.0f;
  };
  for (const Case& c : kCases) {
    NaProblem pr{};
    fa::NaParams& p = pr.p;
    p.B = 2;
    p.H = c.H;
    p.D = c.D;
    p.D_v = c.D;
    p.n_axes = c.n_axes;
    p.L = 1;
    for (int a = 0; a < fa::kNaMaxAxes; ++a) {
      p.axes[a] = c.axes[a];
      p.L *= c.axes[a].n;
    }
    p.scale_log2 = 1.4426950f / std::sqrt(static_cast<float>(c.D));
    // Row-major [B, *spatial, H, D]; strides of [batch, axis 0..2, head].
    fa::stride_t strides[5] = {0, 0, 0, 0, c.D};
    fa::stride_t run = static_cast<fa::stride_t>(c.H) * c.D;
    for (int a = c.n_axes - 1; a >= 0; --a) {
      strides[1 + a] = run;
      run *= c.axes[a].n;
    }
    strides[0] = run;
    for (int i = 0; i < 5; ++i) {
      p.q_strides[i] = p.k_strides[i] = p.v_strides[i] = p.o_strides[i] =
          strides[i];
    }
    pr.q_dstride = pr.k_dstride = pr.v_dstride = 1;
    pr.dtype = Dtype::Float32;
    const size_t size = static_cast<size_t>(run) * p.B;
    std::vector<float> q(size), k(size), v(size);
    for (size_t i = 0; i < size; ++i) {
      q[i] = uniform();
      k[i] = uniform();
      v[i] = uniform();
    }
    std::vector<float> generic_out(size, NAN), avx2_out(size, NAN);
    pr.q = q.data();
    pr.k = k.data();
    pr.v = v.data();
    pr.out = generic_out.data();
    generic::run(pr);
    pr.out = avx2_out.data();
    avx2::run(pr);
    double diff = 0.0;
    bool nan = false;
    for (size_t i = 0; i < size; ++i) {
      nan = nan || std::isnan(generic_out[i]) || std::isnan(avx2_out[i]);
      diff = std::fmax(diff, std::fabs(generic_out[i] - avx2_out[i]));
    }
    const bool ok = !nan && diff <= 1e-5;
    std::printf(
        "%s n_axes=%d k_fast=%d D=%d: max |generic - avx2| = %.3g%s\n",
        ok ? "ok " : "BAD", c.n_axes, c.axes[c.n_axes - 1].k, c.D, diff,
        nan ? ", NaN" : "");
    bad += ok ? 0 : 1;
  }
  return bad;
}
