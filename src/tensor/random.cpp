// tensor/random.cpp — Threefry-2x32-20 (SPEC §6.7) and the bit-generating primitive.
// The per-element loop is straight-line 32-bit integer code (rounds fully unrolled), so the
// compiler vectorises it across elements; the samplers are plain loops over the bits. The same
// generator and samplers are also written as chains of tensor primitives (for traced keys and
// bits); both versions must agree bit for bit, which tests/unit/random_traced_test.cpp checks.
#include "tensor/random.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/error.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "tensor/recorder.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

constexpr uint32_t kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
constexpr uint32_t kParity = 0x1BD11BDA;

constexpr uint32_t rotl(uint32_t x, uint32_t r) { return (x << r) | (x >> (32 - r)); }

// Four rounds starting at round r0, then key injection s (SPEC §6.7).
template <int R0>
inline void four_rounds(uint32_t& x0, uint32_t& x1, const uint32_t ks[3], uint32_t s) {
  x0 += x1; x1 = rotl(x1, kRotations[R0 % 8]);       x1 ^= x0;
  x0 += x1; x1 = rotl(x1, kRotations[(R0 + 1) % 8]); x1 ^= x0;
  x0 += x1; x1 = rotl(x1, kRotations[(R0 + 2) % 8]); x1 ^= x0;
  x0 += x1; x1 = rotl(x1, kRotations[(R0 + 3) % 8]); x1 ^= x0;
  x0 += ks[s % 3];
  x1 += ks[(s + 1) % 3] + s;
}

inline void block(const uint32_t ks[3], uint32_t c0, uint32_t c1, uint32_t& x0, uint32_t& x1) {
  x0 = c0 + ks[0];
  x1 = c1 + ks[1];
  four_rounds<0>(x0, x1, ks, 1);
  four_rounds<4>(x0, x1, ks, 2);
  four_rounds<8>(x0, x1, ks, 3);
  four_rounds<12>(x0, x1, ks, 4);
  four_rounds<16>(x0, x1, ks, 5);
}

// Built for AVX-512 and AVX2 as well as the baseline ISA, picked at load time: the rounds
// vectorise across elements, and 32-bit rotations are single instructions with AVX-512.
__attribute__((target_clones("avx512f", "avx2", "default")))
void fill_bits(RandomKey key, uint32_t stream, int64_t n, uint32_t* __restrict b0, uint32_t* __restrict b1) {
  const uint32_t ks[3] = {key.w0, key.w1, key.w0 ^ key.w1 ^ kParity};
  for (int64_t e = 0; e < n; ++e) {
    uint32_t x0, x1;
    block(ks, static_cast<uint32_t>(e), stream, x0, x1);
    b0[e] = x0;
    b1[e] = x1;
  }
}

constexpr float kUnit = 0x1p-24f;
constexpr float kTwoPi = 6.28318530717958647692f;
inline float unit(uint32_t b) { return static_cast<float>(b >> 8) * kUnit; }

// ---- The primitive versions (they record IR on symbolic operands) ----

Tensor u32c(uint32_t v) { return Tensor::scalar(DType::U32, v); }
Tensor f32c(float v) { return Tensor::scalar(DType::F32, static_cast<double>(v)); }  // exact

Tensor rotl_prim(const Tensor& x, uint32_t r) {
  return binary(Binary::Or, binary(Binary::ShiftLeft, x, u32c(r)), binary(Binary::ShiftRightLogical, x, u32c(32 - r)));
}

// The counter word c0 of every element: its row-major flat index as u32, of `shape`. An iota
// node when tracing (a symbolic key), so the counters are not baked into the graph as a constant.
Tensor counters(const Shape& shape, bool symbolic) {
  Shape flat{shape_numel(shape)};
  Tensor e;
  if (symbolic) {
    ir::Type t{DType::U32, flat};
    e = ir::record1(ir::Op::Iota, {}, {.dtype = DType::U32, .axis = 0}, &t);
  } else {
    e = iota(DType::U32, flat, 0);
  }
  return reshape(e, shape);
}

// mul(convert(shift_right_logical(b, 8), f32), 2^-24)
Tensor uniform_prim(const Tensor& b) {
  return binary(Binary::Mul, convert(binary(Binary::ShiftRightLogical, b, u32c(8)), DType::F32), f32c(kUnit));
}
}  // namespace

RandomKey key_from_seed(int64_t seed) {
  auto bits = static_cast<uint64_t>(seed);
  return {static_cast<uint32_t>(bits), static_cast<uint32_t>(bits >> 32)};
}

std::array<uint32_t, 2> threefry2x32(RandomKey key, uint32_t c0, uint32_t c1) {
  const uint32_t ks[3] = {key.w0, key.w1, key.w0 ^ key.w1 ^ kParity};
  std::array<uint32_t, 2> x;
  block(ks, c0, c1, x[0], x[1]);
  return x;
}

RandomBits random_bits(RandomKey key, const Shape& shape, uint32_t stream) {
  RandomBits r{Tensor::empty(DType::U32, shape), Tensor::empty(DType::U32, shape)};
  int64_t n = r.b0.numel();
  if (n > kMaxRandomElements) throw SheafError("internal: random_bits over 2^32 elements");
  fill_bits(key, stream, n, r.b0.mutable_data<uint32_t>(), r.b1.mutable_data<uint32_t>());
  return r;
}

// block() on tensors. While one operand is rank 0 the first round broadcasts it to the shape.
// Round r uses rotation R[r mod 8]; key injection s follows round 4s.
RandomBits threefry2x32(const KeyWords& key, const Tensor& c0, const Tensor& c1) {
  if (key.w0.dtype() != DType::U32 || key.w1.dtype() != DType::U32 || key.w0.rank() != 0 || key.w1.rank() != 0)
    throw SheafError("internal: threefry2x32 needs rank-0 u32 key words");
  const Tensor ks[3] = {key.w0, key.w1, binary(Binary::Xor, binary(Binary::Xor, key.w0, key.w1), u32c(kParity))};
  Tensor x0 = binary(Binary::Add, c0, ks[0]);
  Tensor x1 = binary(Binary::Add, c1, ks[1]);
  for (uint32_t s = 1; s <= 5; ++s) {
    for (uint32_t r = 4 * (s - 1); r < 4 * s; ++r) {
      x0 = binary(Binary::Add, x0, x1);
      x1 = binary(Binary::Xor, rotl_prim(x1, kRotations[r % 8]), x0);
    }
    x0 = binary(Binary::Add, x0, ks[s % 3]);
    x1 = binary(Binary::Add, x1, binary(Binary::Add, ks[(s + 1) % 3], u32c(s)));
  }
  return {x0, x1};
}

RandomBits random_bits(const KeyWords& key, const Shape& shape, uint32_t stream) {
  if (shape_numel(shape) > kMaxRandomElements) throw SheafError("internal: random_bits over 2^32 elements");
  RandomBits x = threefry2x32(key, counters(shape, key.w0.is_symbolic() || key.w1.is_symbolic()), u32c(stream));
  return {broadcast_to(x.b0, shape), broadcast_to(x.b1, shape)};
}

KeyWords key_words(const Tensor& key_limbs) {
  if (key_limbs.shape() != Shape{4}) throw SheafError("internal: a key value is 1-D with 4 limbs, got " + type_str(key_limbs));
  auto limb = [&](int64_t i) { return convert(reshape(slice(key_limbs, {i}, {i + 1}, {1}), {}), DType::U32); };
  auto word = [&](int64_t i) { return binary(Binary::Or, limb(i), binary(Binary::ShiftLeft, limb(i + 1), u32c(16))); };
  return {word(0), word(2)};
}

RandomBits random_bits(const Tensor& key_limbs, const Shape& shape, uint32_t stream) {
  return random_bits(key_words(key_limbs), shape, stream);
}

Tensor key_limbs_of_words(const Tensor& w0, const Tensor& w1) {
  Shape one = w0.shape();
  one.push_back(1);
  auto limb = [&](const Tensor& w, bool high) {
    Tensor v = high ? binary(Binary::ShiftRightLogical, w, u32c(16)) : binary(Binary::And, w, u32c(0xffff));
    return reshape(convert(v, DType::F32), one);
  };
  return concatenate({limb(w0, false), limb(w0, true), limb(w1, false), limb(w1, true)}, w0.rank());
}

Tensor uniform_from_bits(const Tensor& b0) {
  if (b0.is_symbolic()) return uniform_prim(b0);
  Tensor out = Tensor::empty(DType::F32, b0.shape());
  const uint32_t* __restrict b = b0.data<uint32_t>();
  float* __restrict u = out.mutable_data<float>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) u[i] = unit(b[i]);
  return out;
}

Tensor normal_from_bits(const Tensor& b0, const Tensor& b1) {
  if (b0.is_symbolic() || b1.is_symbolic()) {
    Tensor u1 = binary(Binary::Max, uniform_prim(b0), f32c(kUnit));
    Tensor r = unary(Unary::Sqrt, binary(Binary::Mul, unary(Unary::Log, u1), f32c(-2.0f)));
    return binary(Binary::Mul, r, unary(Unary::Cos, binary(Binary::Mul, uniform_prim(b1), f32c(kTwoPi))));
  }
  Tensor out = Tensor::empty(DType::F32, b0.shape());
  const uint32_t* __restrict p0 = b0.data<uint32_t>();
  const uint32_t* __restrict p1 = b1.data<uint32_t>();
  float* __restrict z = out.mutable_data<float>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    float u1 = std::max(unit(p0[i]), kUnit), u2 = unit(p1[i]);
    z[i] = std::sqrt(std::log(u1) * -2.0f) * std::cos(u2 * kTwoPi);
  }
  return out;
}

Tensor randint_from_bits(const Tensor& b0, int64_t low, int64_t high) {
  const float lo = static_cast<float>(low), hi = static_cast<float>(high);
  const float span = hi - lo, top = hi - 1.0f;  // each rounded to f32, shared by both versions
  if (b0.is_symbolic()) {
    Tensor v = binary(Binary::Add, unary(Unary::Floor, binary(Binary::Mul, uniform_prim(b0), f32c(span))), f32c(lo));
    v = binary(Binary::Min, binary(Binary::Max, v, f32c(lo)), f32c(top));
    Tensor r = convert(v, DType::I32);
    if (top < 0x1p31f) return r;  // else f32(2^31 − 1) = 2^31 is reachable: saturate explicitly, as below
    return select(binary(Binary::Ge, v, f32c(0x1p31f)), Tensor::scalar(DType::I32, INT32_MAX), r);
  }
  Tensor out = Tensor::empty(DType::I32, b0.shape());
  const uint32_t* __restrict b = b0.data<uint32_t>();
  int32_t* __restrict r = out.mutable_data<int32_t>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    float v = std::min(std::max(std::floor(unit(b[i]) * span) + lo, lo), top);
    r[i] = v >= 0x1p31f ? INT32_MAX : static_cast<int32_t>(v);  // f32(2^31 − 1) rounds up: saturate
  }
  return out;
}

Tensor key_tensor(RandomKey key) {
  Tensor t = Tensor::empty(DType::F32, {4});
  float* p = t.mutable_data<float>();
  p[0] = static_cast<float>(key.w0 & 0xffff);
  p[1] = static_cast<float>(key.w0 >> 16);
  p[2] = static_cast<float>(key.w1 & 0xffff);
  p[3] = static_cast<float>(key.w1 >> 16);
  return t;
}

std::optional<RandomKey> key_of_limbs(const Tensor& t) {
  if (t.rank() != 1 || t.numel() != 4) return std::nullopt;
  uint32_t limb[4];
  for (int64_t i = 0; i < 4; ++i) {
    double v = t.get(i);
    if (!(v >= 0 && v <= 0xffff) || std::trunc(v) != v) return std::nullopt;
    limb[i] = static_cast<uint32_t>(v);
  }
  return RandomKey{limb[0] | (limb[1] << 16), limb[2] | (limb[3] << 16)};
}

}  // namespace sheaf
