// builtins/init.cpp — parameter initializers, all (init-<name> key shape) → f32 tensor of shape:
// init-zeros init-ones init-xavier-normal init-xavier-uniform init-kaiming-normal
// init-kaiming-uniform init-lecun-normal init-lecun-uniform init-orthogonal. The random ones
// draw the bits of random-uniform / random-normal from the key (the same key gives the same
// tensor in the interpreter and in compiled code); U(±a) is a·(2u − 1), N(0, σ) is σ·z.
//
// Fans, by the shape's rank:
//   0: fan-in = fan-out = 1;   1 [n]: both n;
//   2 [in out], a weight used as x @ w: fan-in = in, fan-out = out (jax.nn.initializers:
//     in_axis −2, out_axis −1);
//   ≥ 3 [O C K ...], a convolution kernel of conv1d/conv2d: receptive field r = K·…,
//     fan-in = C·r, fan-out = O·r (PyTorch's convention for its [O C K ...] kernels).
// xavier: U(±√(6/(in+out))), N(0, √(2/(in+out)));  kaiming: U(±√(6/in)), N(0, √(2/in));
// lecun: U(±√(3/in)), N(0, √(1/in)).
//
// init-orthogonal follows jax.nn.initializers.orthogonal: with c = the last dimension and
// r = the product of the others, a standard normal matrix of shape [max(r,c) min(r,c)] is
// factored A = QR (Householder, in double), the columns of Q are multiplied by the signs of
// R's diagonal (so Q is the unique factor with a positive diagonal in R), Q is transposed when
// r < c and reshaped to `shape`: the rows (r ≤ c) or columns (r ≥ c) of the [r c] view are
// orthonormal. It runs on known keys only (interpreter).
#include <cmath>

#include "builtins/random.hpp"
#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

struct Fans {
  double in, out;
};

Fans fans(const Shape& s) {
  if (s.empty()) return {1, 1};
  if (s.size() == 1) return {static_cast<double>(s[0]), static_cast<double>(s[0])};
  if (s.size() == 2) return {static_cast<double>(s[0]), static_cast<double>(s[1])};
  double receptive = 1;
  for (size_t k = 2; k < s.size(); ++k) receptive *= static_cast<double>(s[k]);
  return {static_cast<double>(s[1]) * receptive, static_cast<double>(s[0]) * receptive};
}

Value constant(Interp& in, const CallArgs& a, double v) {
  Shape s = arg_shape(a, 1);
  in.check_elements(shape_numel(s), a.site);
  return Value::tensor(broadcast_to(Tensor::scalar(DType::F32, v), s));
}

Tensor f32(double v) { return Tensor::scalar(DType::F32, v); }

enum class Dist { Uniform, Normal };

// U(±√(k/n)) or N(0, √(k/n)) over `shape`, with n = `denominator(fans)` (0 only for a shape
// without elements).
template <Dist D>
Value scaled(Interp& in, const CallArgs& a, double k, double (*denominator)(Fans)) {
  Shape s = arg_shape(a, 1);
  double n = denominator(fans(s));
  Tensor scale = f32(n > 0 ? std::sqrt(k / n) : 0);
  if constexpr (D == Dist::Normal) return Value::tensor(binary(Binary::Mul, scale, normal_sample(in, a, 0, s)));
  Tensor u = uniform_sample(in, a, 0, s);
  return Value::tensor(binary(Binary::Mul, scale, binary(Binary::Sub, binary(Binary::Mul, f32(2), u), f32(1))));
}

double fan_in(Fans f) { return f.in; }
double fan_sum(Fans f) { return f.in + f.out; }

Value b_init_zeros(Interp& in, const CallArgs& a) { return constant(in, a, 0); }
Value b_init_ones(Interp& in, const CallArgs& a) { return constant(in, a, 1); }
Value b_xavier_normal(Interp& in, const CallArgs& a) { return scaled<Dist::Normal>(in, a, 2, fan_sum); }
Value b_xavier_uniform(Interp& in, const CallArgs& a) { return scaled<Dist::Uniform>(in, a, 6, fan_sum); }
Value b_kaiming_normal(Interp& in, const CallArgs& a) { return scaled<Dist::Normal>(in, a, 2, fan_in); }
Value b_kaiming_uniform(Interp& in, const CallArgs& a) { return scaled<Dist::Uniform>(in, a, 6, fan_in); }
Value b_lecun_normal(Interp& in, const CallArgs& a) { return scaled<Dist::Normal>(in, a, 1, fan_in); }
Value b_lecun_uniform(Interp& in, const CallArgs& a) { return scaled<Dist::Uniform>(in, a, 3, fan_in); }

// Thin QR of the m×n matrix A (m ≥ n) by Householder reflections, both stored column-major
// (column j at [j·m, (j+1)·m): every loop runs down a contiguous column). Returns Q (m×n) with
// each column multiplied by the sign of R's diagonal entry.
std::vector<double> orthonormal_columns(std::vector<double> a, size_t m, size_t n) {
  auto col = [m](std::vector<double>& x, size_t j) { return x.data() + j * m; };
  std::vector<std::vector<double>> reflectors(n);  // v_k over rows k..m−1, unit length
  std::vector<double> sign(n, 1);
  for (size_t k = 0; k < n; ++k) {
    double* ak = col(a, k);
    double norm = 0;
    for (size_t i = k; i < m; ++i) norm += ak[i] * ak[i];
    norm = std::sqrt(norm);
    if (norm == 0) continue;  // a zero column: no reflection, diagonal 0
    double alpha = ak[k] > 0 ? -norm : norm;  // R[k][k]
    std::vector<double>& v = reflectors[k];
    v.assign(ak + k, ak + m);
    v[0] -= alpha;
    double vnorm = 0;
    for (double x : v) vnorm += x * x;
    vnorm = std::sqrt(vnorm);
    for (double& x : v) x /= vnorm;
    for (size_t j = k; j < n; ++j) {  // A[k:, j] −= 2 v (v · A[k:, j])
      double* aj = col(a, j);
      double dot = 0;
      for (size_t i = k; i < m; ++i) dot += v[i - k] * aj[i];
      for (size_t i = k; i < m; ++i) aj[i] -= 2 * v[i - k] * dot;
    }
    sign[k] = alpha < 0 ? -1 : 1;
  }
  std::vector<double> q(m * n, 0);
  for (size_t j = 0; j < n; ++j) col(q, j)[j] = 1;
  for (size_t k = n; k-- > 0;) {  // Q = H_0 H_1 … H_{n−1} applied to the first n columns of I
    const std::vector<double>& v = reflectors[k];
    if (v.empty()) continue;
    for (size_t j = 0; j < n; ++j) {
      double* qj = col(q, j);
      double dot = 0;
      for (size_t i = k; i < m; ++i) dot += v[i - k] * qj[i];
      for (size_t i = k; i < m; ++i) qj[i] -= 2 * v[i - k] * dot;
    }
  }
  for (size_t j = 0; j < n; ++j)
    for (size_t i = 0; i < m; ++i) col(q, j)[i] *= sign[j];
  return q;
}

Value b_orthogonal(Interp& in, const CallArgs& a) {
  Shape s = arg_shape(a, 1);
  if (s.size() < 2) throw SheafError(fmt::format("init-orthogonal: needs a shape of rank 2 or more, got [{}]", fmt::join(s, " ")), a.site);
  if (a[0].is(Kind::Tensor) && a[0].as_tensor().is_symbolic()) throw TraceAbort("init-orthogonal runs in the interpreter only");
  int64_t cols = s.back(), rows = shape_numel(s) / std::max<int64_t>(cols, 1);
  int64_t m = std::max(rows, cols), n = std::min(rows, cols);
  Tensor z = normal_sample(in, a, 0, {m, n});  // row-major [m n]
  auto um = static_cast<size_t>(m), un = static_cast<size_t>(n);
  std::vector<double> A(um * un);
  const float* pz = z.data<float>();
  for (size_t i = 0; i < um; ++i)
    for (size_t j = 0; j < un; ++j) A[j * um + i] = pz[i * un + j];
  std::vector<double> q = orthonormal_columns(std::move(A), um, un);
  Tensor t = Tensor::empty(DType::F32, {m, n});
  float* p = t.mutable_data<float>();
  for (size_t i = 0; i < um; ++i)
    for (size_t j = 0; j < un; ++j) p[i * un + j] = static_cast<float>(q[j * um + i]);
  if (rows < cols) t = transpose(t, {1, 0});
  return Value::tensor(reshape(t, s));
}

const BuiltinDef kInit[] = {
    {"init-zeros", "(init-zeros key shape)", "f32 zeros of shape; the key is not used.", b_init_zeros, 2, 2},
    {"init-ones", "(init-ones key shape)", "f32 ones of shape; the key is not used.", b_init_ones, 2, 2},
    {"init-xavier-normal", "(init-xavier-normal key shape)", "N(0, √(2/(fan-in+fan-out))) (Glorot).", b_xavier_normal, 2, 2},
    {"init-xavier-uniform", "(init-xavier-uniform key shape)", "U(±√(6/(fan-in+fan-out))) (Glorot).", b_xavier_uniform, 2, 2},
    {"init-kaiming-normal", "(init-kaiming-normal key shape)", "N(0, √(2/fan-in)) (He).", b_kaiming_normal, 2, 2},
    {"init-kaiming-uniform", "(init-kaiming-uniform key shape)", "U(±√(6/fan-in)) (He).", b_kaiming_uniform, 2, 2},
    {"init-lecun-normal", "(init-lecun-normal key shape)", "N(0, √(1/fan-in)).", b_lecun_normal, 2, 2},
    {"init-lecun-uniform", "(init-lecun-uniform key shape)", "U(±√(3/fan-in)).", b_lecun_uniform, 2, 2},
    {"init-orthogonal", "(init-orthogonal key shape)",
     "Orthogonal matrix (QR of a normal matrix, as JAX): rows or columns of the [r c] view orthonormal; rank ≥ 2.",
     b_orthogonal, 2, 2},
};

}  // namespace

std::span<const BuiltinDef> init_builtins() { return kInit; }

}  // namespace sheaf
