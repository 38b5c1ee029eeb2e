// tests/unit/random_test.cpp — the PRNG of SPEC §6.7: the Threefry-2x32-20 block against the
// spec's known answers, keys as limbs, the bit primitive, determinism, and the distributions of
// the samplers over 10^6 draws. Expected sample values come from tests/tools/threefry_ref.py,
// an independent Python implementation of the spec. Distribution bounds are 6 standard errors
// (or more) wide, so a correct implementation fails them with probability < 10^-8 per check.
#include "tensor/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sheaf {
namespace {

constexpr int64_t kSamples = 1'000'000;

TEST(Threefry, KnownAnswersOfSpec) {
  using W = std::array<uint32_t, 2>;
  EXPECT_EQ(threefry2x32({0, 0}, 0, 0), (W{0x6b200159, 0x99ba4efe}));
  EXPECT_EQ(threefry2x32({0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff), (W{0x1cb996fc, 0xbb002be7}));
  EXPECT_EQ(threefry2x32({0x13198a2e, 0x03707344}, 0x243f6a88, 0x85a308d3), (W{0xc4923a9c, 0x483df7a0}));
}

TEST(RandomKey, SeedWordsAndLimbs) {
  EXPECT_EQ(key_from_seed(42), (RandomKey{42, 0}));
  EXPECT_EQ(key_from_seed(-1), (RandomKey{0xffffffff, 0xffffffff}));
  EXPECT_EQ(key_from_seed((int64_t{1} << 40) + 7), (RandomKey{7, 256}));
  RandomKey k{0xdeadbeef, 0x01234567};
  Tensor t = key_tensor(k);
  ASSERT_EQ(t.dtype(), DType::F32);
  ASSERT_EQ(t.shape(), (Shape{4}));
  EXPECT_EQ(t.get(0), 0xbeef);
  EXPECT_EQ(t.get(1), 0xdead);
  EXPECT_EQ(t.get(2), 0x4567);
  EXPECT_EQ(t.get(3), 0x0123);
  EXPECT_EQ(key_of_limbs(t), k);
}

TEST(RandomKey, RejectsNonLimbs) {
  Tensor big = key_tensor({0, 0});
  big.set(0, 65536);
  EXPECT_FALSE(key_of_limbs(big));
  Tensor frac = key_tensor({0, 0});
  frac.set(1, 0.5);
  EXPECT_FALSE(key_of_limbs(frac));
  Tensor neg = key_tensor({0, 0});
  neg.set(2, -1);
  EXPECT_FALSE(key_of_limbs(neg));
  EXPECT_FALSE(key_of_limbs(Tensor(DType::F32, {2, 2})));
  EXPECT_FALSE(key_of_limbs(Tensor(DType::F32, {3})));
}

TEST(RandomBits, ElementEUsesCounterE0AndStreamIsSecondWord) {
  RandomKey k = key_from_seed(42);
  RandomBits bits = random_bits(k, {2, 3}, kSampleStream);
  ASSERT_EQ(bits.b0.dtype(), DType::U32);
  ASSERT_EQ(bits.b0.shape(), (Shape{2, 3}));
  ASSERT_EQ(bits.b1.shape(), (Shape{2, 3}));
  for (uint32_t e = 0; e < 6; ++e) {
    auto x = threefry2x32(k, e, 0);
    EXPECT_EQ(bits.b0.data<uint32_t>()[e], x[0]);
    EXPECT_EQ(bits.b1.data<uint32_t>()[e], x[1]);
  }
  // threefry_ref.py: bits of key 42, elements 0 and 1.
  EXPECT_EQ(bits.b0.data<uint32_t>()[0], 0xde79f4b9u);
  EXPECT_EQ(bits.b1.data<uint32_t>()[0], 0x4f6cc618u);
  EXPECT_EQ(bits.b0.data<uint32_t>()[1], 0x268fd86cu);
  RandomBits split = random_bits(k, {3}, kSplitStream);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(split.b0.data<uint32_t>()[i], threefry2x32(k, i, 1)[0]);
  EXPECT_EQ(split.b0.data<uint32_t>()[0], 44451u | (59069u << 16));  // child 0 of key 42
}

TEST(RandomBits, RankZeroAndEmpty) {
  RandomBits s = random_bits({1, 2}, {}, kSampleStream);
  ASSERT_EQ(s.b0.numel(), 1);
  EXPECT_EQ(s.b0.data<uint32_t>()[0], threefry2x32({1, 2}, 0, 0)[0]);
  EXPECT_EQ(random_bits({1, 2}, {0, 5}, kSampleStream).b0.numel(), 0);
}

TEST(RandomBits, DeterministicAndKeysDiffer) {
  RandomBits a = random_bits(key_from_seed(7), {1000}, kSampleStream);
  RandomBits b = random_bits(key_from_seed(7), {1000}, kSampleStream);
  EXPECT_EQ(0, std::memcmp(a.b0.bytes(), b.b0.bytes(), a.b0.nbytes()));
  EXPECT_EQ(0, std::memcmp(a.b1.bytes(), b.b1.bytes(), a.b1.nbytes()));
  RandomBits children = random_bits(key_from_seed(7), {2}, kSplitStream);
  RandomKey c0{children.b0.data<uint32_t>()[0], children.b1.data<uint32_t>()[0]};
  RandomKey c1{children.b0.data<uint32_t>()[1], children.b1.data<uint32_t>()[1]};
  EXPECT_NE(c0, c1);
  RandomBits x = random_bits(c0, {1000}, kSampleStream), y = random_bits(c1, {1000}, kSampleStream);
  int same = 0;
  for (int i = 0; i < 1000; ++i)
    same += (x.b0.data<uint32_t>()[i] == y.b0.data<uint32_t>()[i]) + (x.b0.data<uint32_t>()[i] == a.b0.data<uint32_t>()[i]);
  EXPECT_EQ(same, 0);
}

TEST(Samplers, ReferenceValues) {
  RandomBits bits = random_bits(key_from_seed(42), {6}, kSampleStream);
  Tensor u = uniform_from_bits(bits.b0);
  const float expect_u[] = {0.86904836f, 0.15063238f, 0.52032065f, 0.2499373f, 0.623079f, 0.26339322f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(u.data<float>()[i], expect_u[i]) << i;
  Tensor z = normal_from_bits(bits.b0, bits.b1);
  const float expect_z[] = {-0.19582549f, 1.9437034f, 0.89668626f, 1.0669457f, 0.9416119f, 0.8635134f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(z.data<float>()[i], expect_z[i]) << i;
  RandomBits ten = random_bits(key_from_seed(42), {10}, kSampleStream);
  Tensor r = randint_from_bits(ten.b0, 0, 10);
  ASSERT_EQ(r.dtype(), DType::I32);
  const int32_t expect_r[] = {8, 1, 5, 2, 6, 2, 8, 6, 0, 9};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(r.data<int32_t>()[i], expect_r[i]) << i;
}

TEST(Samplers, EdgesOfTheBitRange) {
  Tensor b0 = Tensor::empty(DType::U32, {2}), b1 = Tensor::empty(DType::U32, {2});
  b0.mutable_data<uint32_t>()[0] = 0;  // u = 0: clamped to 2^-24 for the normal
  b0.mutable_data<uint32_t>()[1] = 0xffffffff;
  b1.mutable_data<uint32_t>()[0] = 0;
  b1.mutable_data<uint32_t>()[1] = 0x40000000;  // u2 = 1/4
  Tensor u = uniform_from_bits(b0);
  EXPECT_EQ(u.data<float>()[0], 0.0f);
  EXPECT_EQ(u.data<float>()[1], 1.0f - 0x1p-24f);
  Tensor z = normal_from_bits(b0, b1);
  EXPECT_EQ(z.data<float>()[0], 5.7681074f);  // sqrt(-2 ln 2^-24)
  EXPECT_LT(std::fabs(z.data<float>()[1]), 1e-6f);
  Tensor r = randint_from_bits(b0, 0, 3);
  EXPECT_EQ(r.data<int32_t>()[0], 0);
  EXPECT_EQ(r.data<int32_t>()[1], 2);
  Tensor wide = randint_from_bits(b0, INT32_MIN, int64_t{1} << 31);  // floor(u·2^32) − 2^31
  EXPECT_EQ(wide.data<int32_t>()[0], INT32_MIN);
  EXPECT_EQ(wide.data<int32_t>()[1], 2147483392);
  Tensor top = randint_from_bits(b0, INT32_MAX - 9, int64_t{1} << 31);  // f32(low) = 2^31: saturates
  EXPECT_EQ(top.data<int32_t>()[0], INT32_MAX);
  EXPECT_EQ(top.data<int32_t>()[1], INT32_MAX);
}

// Mean and (population) variance in double.
std::pair<double, double> moments(const float* x, int64_t n) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  double mean = s / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) s2 += (x[i] - mean) * (x[i] - mean);
  return {mean, s2 / static_cast<double>(n)};
}

TEST(Distribution, UniformMomentsAndRange) {
  Tensor u = uniform_from_bits(random_bits(key_from_seed(2024), {kSamples}, kSampleStream).b0);
  const float* p = u.data<float>();
  float lo = *std::min_element(p, p + kSamples), hi = *std::max_element(p, p + kSamples);
  EXPECT_GE(lo, 0.0f);
  EXPECT_LT(hi, 1.0f);
  EXPECT_LT(lo, 1e-4f);  // P(fail) = (1 - 1e-4)^1e6 ≈ e^-100
  EXPECT_GT(hi, 1 - 1e-4f);
  auto [mean, var] = moments(p, kSamples);
  // s.e. of the mean: sqrt(1/12 / n) = 2.9e-4; of the variance: sqrt((1/80 - 1/144) / n) = 7.5e-5.
  EXPECT_NEAR(mean, 0.5, 6 * 2.9e-4);
  EXPECT_NEAR(var, 1.0 / 12, 6 * 7.5e-5);
}

TEST(Distribution, NormalMoments) {
  RandomBits bits = random_bits(key_from_seed(99), {kSamples}, kSampleStream);
  Tensor z = normal_from_bits(bits.b0, bits.b1);
  const float* p = z.data<float>();
  for (int64_t i = 0; i < kSamples; ++i) ASSERT_TRUE(std::isfinite(p[i])) << i;
  auto [mean, var] = moments(p, kSamples);
  // s.e. of the mean: 1/sqrt(n) = 1e-3; of the variance: sqrt(2/n) = 1.42e-3.
  EXPECT_NEAR(mean, 0.0, 6 * 1e-3);
  EXPECT_NEAR(var, 1.0, 6 * 1.42e-3);
  int64_t beyond2 = std::count_if(p, p + kSamples, [](float x) { return std::fabs(x) > 2; });
  // P(|z| > 2) = 0.0455; s.e. sqrt(p(1-p)/n) = 2.08e-4.
  EXPECT_NEAR(static_cast<double>(beyond2) / kSamples, 0.0455, 6 * 2.08e-4);
}

TEST(Distribution, RandintCoversTheRangeUniformly) {
  Tensor r = randint_from_bits(random_bits(key_from_seed(5), {kSamples}, kSampleStream).b0, -3, 7);
  std::vector<int64_t> counts(10, 0);
  for (int64_t i = 0; i < kSamples; ++i) {
    int32_t v = r.data<int32_t>()[i];
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 7);
    ++counts[static_cast<size_t>(v + 3)];
  }
  // Each bin: expected 1e5, s.e. sqrt(n·0.1·0.9) = 300.
  for (int64_t c : counts) EXPECT_NEAR(static_cast<double>(c), 1e5, 6 * 300);
  double chi2 = 0;
  for (int64_t c : counts) chi2 += (c - 1e5) * (c - 1e5) / 1e5;
  EXPECT_LT(chi2, 50.0);  // chi-square, 9 d.o.f.: P(> 50) ≈ 1e-7
}

}  // namespace
}  // namespace sheaf
