// tensor/random.hpp — the counter-based PRNG of SPEC §6.7: Threefry-2x32 with 20 rounds.
// A key is two 32-bit words (w0, w1). The one bit-generating primitive, `random_bits`, hashes
// the counters (e, stream) of every element e of a shape: stream 0 gives the bits of samples,
// stream 1 the children of a split. The samplers below are pure elementwise maps of those bits,
// written as tight loops; each names the chain of elementwise primitives it equals, and computes
// exactly that chain (recording IR) when its bits are symbolic, i.e. while a function is traced.
// The generator itself also exists as a chain of primitives over tensor keys (the second
// random_bits below): that is how a traced key draws bits; it equals the host loop bit for bit.
// As a value a key is an f32[4] tensor of exact 16-bit limbs [lo16(w0) hi16(w0) lo16(w1)
// hi16(w1)], so that keys survive f32 buffers losslessly.
#pragma once
#include <array>
#include <optional>
#include <string_view>

#include "tensor/tensor.hpp"

namespace sheaf {

// Part of every cache key: changing the algorithm changes this tag.
inline constexpr std::string_view kRandomVersion = "threefry2x32-20/16bit-v1";

struct RandomKey {
  uint32_t w0 = 0, w1 = 0;
  friend bool operator==(RandomKey, RandomKey) = default;
};

// The i64 seed's low word is w0, its high word w1.
RandomKey key_from_seed(int64_t seed);

// One Threefry-2x32-20 block: (key; counter) → two words.
std::array<uint32_t, 2> threefry2x32(RandomKey key, uint32_t c0, uint32_t c1);

// Counter streams (the second counter word).
inline constexpr uint32_t kSampleStream = 0;
inline constexpr uint32_t kSplitStream = 1;
// Most elements (or children) one call may draw: the first counter word is 32 bits.
inline constexpr int64_t kMaxRandomElements = int64_t{1} << 32;

// Primitive. b0, b1: u32 tensors of `shape`; element e (row-major) holds threefry(key, (e, stream)).
// shape_numel(shape) must be ≤ kMaxRandomElements.
struct RandomBits {
  Tensor b0, b1;
};
RandomBits random_bits(RandomKey key, const Shape& shape, uint32_t stream);

// The same bits computed only with tensor primitives (iota, convert, add, xor, or, shifts,
// slice, reshape), so the key may be symbolic: then it records IR (the counters as an iota
// node) instead of running. On concrete keys it runs eagerly, much slower than the loop above.
// w0, w1: u32 rank-0 tensors (concrete or symbolic).
struct KeyWords {
  Tensor w0, w1;
};
RandomBits random_bits(const KeyWords& key, const Shape& shape, uint32_t stream);
// The block on tensors: u32 counters c0, c1 (NumPy-broadcastable) → (x0, x1) of the broadcast
// shape, element i = threefry2x32(key, (c0[i], c1[i])). random_bits is this on (iota, stream).
RandomBits threefry2x32(const KeyWords& key, const Tensor& c0, const Tensor& c1);
// key_limbs: an f32[4] key value; w = u32(limb 2k) | u32(limb 2k+1) << 16. The limbs are taken
// as valid (integral, in [0, 65535]): key_of_limbs checks that on concrete keys only.
KeyWords key_words(const Tensor& key_limbs);
RandomBits random_bits(const Tensor& key_limbs, const Shape& shape, uint32_t stream);
// Key values from words by primitives: u32 w0, w1 of one shape S → f32 S×[4] limbs (the last
// axis [lo16(w0) hi16(w0) lo16(w1) hi16(w1)]); equals key_tensor on every (w0, w1).
Tensor key_limbs_of_words(const Tensor& w0, const Tensor& w1);

// u = (b0 >> 8)·2^-24 ∈ [0, 1): f32 of b0's shape.
//   = mul(convert(shift_right_logical(b0, 8), f32), 2^-24)
Tensor uniform_from_bits(const Tensor& b0);
// z = sqrt(-2 ln u1)·cos(2π u2), u1 = max(u(b0), 2^-24), u2 = u(b1), all in f32 (one per element).
//   = mul(sqrt(mul(log(max(u(b0), 2^-24)), -2)), cos(mul(u(b1), f32(2π))))
Tensor normal_from_bits(const Tensor& b0, const Tensor& b1);
// i32 in [low, high): clamp(floor(u·(H − L)) + L, L, H − 1) in f32 with L = f32(low), H = f32(high),
// every operation rounded to f32; then converted to i32. Requires low < high, both in i32 range.
Tensor randint_from_bits(const Tensor& b0, int64_t low, int64_t high);

// Keys as values. key_tensor: f32[4] limbs. key_of_limbs: nullopt unless `t` is a 1-D tensor of
// four integral limbs in [0, 65535].
Tensor key_tensor(RandomKey key);
std::optional<RandomKey> key_of_limbs(const Tensor& t);

}  // namespace sheaf
