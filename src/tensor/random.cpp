// tensor/random.cpp — Threefry-2x32-20 (SPEC §6.7) and the bit-generating primitive.
// The per-element loop is straight-line 32-bit integer code (rounds fully unrolled), so the
// compiler vectorises it across elements; the samplers are plain loops over the bits.
#include "tensor/random.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/error.hpp"

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
inline float unit(uint32_t b) { return static_cast<float>(b >> 8) * kUnit; }
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

Tensor uniform_from_bits(const Tensor& b0) {
  Tensor out = Tensor::empty(DType::F32, b0.shape());
  const uint32_t* __restrict b = b0.data<uint32_t>();
  float* __restrict u = out.mutable_data<float>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) u[i] = unit(b[i]);
  return out;
}

Tensor normal_from_bits(const Tensor& b0, const Tensor& b1) {
  Tensor out = Tensor::empty(DType::F32, b0.shape());
  const uint32_t* __restrict p0 = b0.data<uint32_t>();
  const uint32_t* __restrict p1 = b1.data<uint32_t>();
  float* __restrict z = out.mutable_data<float>();
  constexpr float two_pi = 6.28318530717958647692f;
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    float u1 = std::max(unit(p0[i]), kUnit), u2 = unit(p1[i]);
    z[i] = std::sqrt(std::log(u1) * -2.0f) * std::cos(u2 * two_pi);
  }
  return out;
}

Tensor randint_from_bits(const Tensor& b0, int64_t low, int64_t high) {
  Tensor out = Tensor::empty(DType::I32, b0.shape());
  const float lo = static_cast<float>(low), hi = static_cast<float>(high);
  const float span = hi - lo, top = hi - 1.0f;
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
