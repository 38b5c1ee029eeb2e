// tests/unit/cuda_emulator_sdpa.cpp — the emulated device's fused attention (cuda_emulator.hpp):
// cuDNN's SDPA forward and backward on the host, per (batch, head) matrix, in f32 from the f16/bf16
// operands, every tensor read and written through the problem's strides:
//   forward   S = scale·Q·Kᵀ (masked to −inf above the diagonal when causal), m and l the rows' max
//             and Σ exp(S − m), O = exp(S − m)·V / l rounded, stats = m + log l (f32)
//   backward  P = exp(S − stats), D = Σ_c dO∘O per row, dS = P∘(dO·Vᵀ − D), dQ = scale·dS·K,
//             dK = scale·dSᵀ·Q, dV = Pᵀ·dO, each rounded
#include <cmath>
#include <limits>

#include "base/error.hpp"
#include "cuda_emulator.hpp"
#include "tensor/tensor.hpp"

namespace sheaf::testing_support {
namespace {

struct Matrix {
  cuda::DevicePtr base;
  const cuda::SdpaTensor& x;
  DType dtype;
  int64_t rows, cols;
  size_t at(int64_t bi, int64_t hi, int64_t r, int64_t c) const {
    return static_cast<size_t>(bi * x.strides[0] + hi * x.strides[1] + r * x.strides[2] + c * x.strides[3]);
  }
  std::vector<float> read(int64_t bi, int64_t hi) const {
    std::vector<float> out(static_cast<size_t>(rows * cols));
    const auto* p = reinterpret_cast<const uint16_t*>(base);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const uint16_t h = p[at(bi, hi, r, c)];
        out[static_cast<size_t>(r * cols + c)] = dtype == DType::F16 ? half_to_float(h) : bf16_to_float(h);
      }
    return out;
  }
  void write(int64_t bi, int64_t hi, const std::vector<float>& m) const {
    auto* p = reinterpret_cast<uint16_t*>(base);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float f = m[static_cast<size_t>(r * cols + c)];
        p[at(bi, hi, r, c)] = dtype == DType::F16 ? float_to_half(f) : float_to_bf16(f);
      }
  }
};

// Σ_k a[i·ak + k·as] · b[j·bk + k·bs] for every (i, j) of n × m, over `depth` terms.
std::vector<float> products(const std::vector<float>& a, const std::vector<float>& b, int64_t n, int64_t m, int64_t depth,
                            bool a_t, bool b_t, int64_t a_cols, int64_t b_cols) {
  std::vector<float> c(static_cast<size_t>(n * m), 0.f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < depth; ++k)
        acc += a[static_cast<size_t>(a_t ? k * a_cols + i : i * a_cols + k)] * b[static_cast<size_t>(b_t ? j * b_cols + k : k * b_cols + j)];
      c[static_cast<size_t>(i * m + j)] = acc;
    }
  return c;
}

// Scores S (t × s) of one matrix pair, scaled and masked.
std::vector<float> scores(const cuda::Sdpa& a, const std::vector<float>& q, const std::vector<float>& k) {
  std::vector<float> sc = products(q, k, a.t, a.s, a.d, false, true, a.d, a.d);
  for (int64_t r = 0; r < a.t; ++r)
    for (int64_t c = 0; c < a.s; ++c) {
      float& x = sc[static_cast<size_t>(r * a.s + c)];
      x = a.causal && c > r ? -std::numeric_limits<float>::infinity() : x * a.scale;
    }
  return sc;
}

void forward(const cuda::Sdpa& a, const cuda::SdpaBuffers& p) {
  const Matrix q{p.q, a.q, a.dtype, a.t, a.d}, k{p.k, a.k, a.dtype, a.s, a.d}, v{p.v, a.v, a.dtype, a.s, a.dv},
      o{p.o, a.o, a.dtype, a.t, a.dv};
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t hi = 0; hi < a.h; ++hi) {
      std::vector<float> sc = scores(a, q.read(bi, hi), k.read(bi, hi));
      std::vector<float> stats(static_cast<size_t>(a.t));
      for (int64_t r = 0; r < a.t; ++r) {
        float m = -std::numeric_limits<float>::infinity(), l = 0;
        for (int64_t c = 0; c < a.s; ++c) m = std::max(m, sc[static_cast<size_t>(r * a.s + c)]);
        for (int64_t c = 0; c < a.s; ++c) l += sc[static_cast<size_t>(r * a.s + c)] = std::exp(sc[static_cast<size_t>(r * a.s + c)] - m);
        for (int64_t c = 0; c < a.s; ++c) sc[static_cast<size_t>(r * a.s + c)] /= l;
        stats[static_cast<size_t>(r)] = m + std::log(l);
      }
      o.write(bi, hi, products(sc, v.read(bi, hi), a.t, a.dv, a.s, false, false, a.s, a.dv));
      if (!a.grad) continue;
      auto* st = reinterpret_cast<float*>(p.stats);
      for (int64_t r = 0; r < a.t; ++r)
        st[bi * a.stats.strides[0] + hi * a.stats.strides[1] + r * a.stats.strides[2]] = stats[static_cast<size_t>(r)];
    }
}

void backward(const cuda::Sdpa& a, const cuda::SdpaBuffers& p) {
  const Matrix q{p.q, a.q, a.dtype, a.t, a.d}, k{p.k, a.k, a.dtype, a.s, a.d}, v{p.v, a.v, a.dtype, a.s, a.dv},
      o{p.o, a.o, a.dtype, a.t, a.dv}, d_o{p.d_o, a.d_o, a.dtype, a.t, a.dv}, dq{p.dq, a.dq, a.dtype, a.t, a.d},
      dk{p.dk, a.dk, a.dtype, a.s, a.d}, dv{p.dv, a.dv_, a.dtype, a.s, a.dv};
  const auto* st = reinterpret_cast<const float*>(p.stats);
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t hi = 0; hi < a.h; ++hi) {
      const std::vector<float> qm = q.read(bi, hi), km = k.read(bi, hi), vm = v.read(bi, hi), om = o.read(bi, hi), gm = d_o.read(bi, hi);
      std::vector<float> pm = scores(a, qm, km);
      for (int64_t r = 0; r < a.t; ++r)
        for (int64_t c = 0; c < a.s; ++c) {
          float& x = pm[static_cast<size_t>(r * a.s + c)];
          x = std::exp(x - st[bi * a.stats.strides[0] + hi * a.stats.strides[1] + r * a.stats.strides[2]]);
        }
      std::vector<float> ds = products(gm, vm, a.t, a.s, a.dv, false, true, a.dv, a.dv);  // dP = dO·Vᵀ
      for (int64_t r = 0; r < a.t; ++r) {
        float dr = 0;
        for (int64_t c = 0; c < a.dv; ++c) dr += gm[static_cast<size_t>(r * a.dv + c)] * om[static_cast<size_t>(r * a.dv + c)];
        for (int64_t c = 0; c < a.s; ++c) {
          float& x = ds[static_cast<size_t>(r * a.s + c)];
          x = pm[static_cast<size_t>(r * a.s + c)] * (x - dr) * a.scale;
        }
      }
      dq.write(bi, hi, products(ds, km, a.t, a.d, a.s, false, false, a.s, a.d));
      dk.write(bi, hi, products(ds, qm, a.s, a.d, a.t, true, false, a.s, a.d));
      dv.write(bi, hi, products(pm, gm, a.s, a.dv, a.t, true, false, a.s, a.dv));
    }
}

}  // namespace

bool EmulatedDevice::prepare_sdpa(const cuda::Sdpa& a, std::string* why) {
  if (!library_attention) return Device::prepare_sdpa(a, why);
  ++counters.sdpa_prepared;
  if (refuse_at_prepare) {
    if (why) *why = "the emulated library builds no plan";
    return false;
  }
  sdpa_problems.push_back(a);
  return true;
}

void EmulatedDevice::sdpa(const cuda::Sdpa& a, bool backward_pass, const cuda::SdpaBuffers& p) {
  if (!library_attention) return Device::sdpa(a, backward_pass, p);
  if (std::none_of(sdpa_problems.begin(), sdpa_problems.end(), [&](const cuda::Sdpa& x) { return cuda::same_plan(x, a); }))
    throw SheafError("internal: attention " + cuda::sdpa_key(a) + " was not prepared for the emulated library");
  ++(backward_pass ? counters.sdpa_backward : counters.sdpa_forward);
  submit([a, backward_pass, p] { backward_pass ? backward(a, p) : forward(a, p); });
}

}  // namespace sheaf::testing_support
