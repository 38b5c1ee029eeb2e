// builtins/random.cpp — random numbers with explicit, functional keys (SPEC §5.8, §6.7) and
// `dropout` (§5.3). Every sampler draws the bits of its whole result from one key with the
// random_bits primitive (element e ↔ counter (e, 0)) and maps them elementwise
// (tensor/random.hpp). A key argument is a key value (f32[4] of 16-bit limbs), an integer seed,
// or a list (or 1-D tensor) of two 32-bit words.
//
// choice: with replacement, result element e uses the bits of element e: without :p it is
// (random-randint key shape 0 n); with :p it is the inverse CDF of §6.7. Without replacement
// (interpreter only) it is an exponential race (Efraimidis–Spirakis): candidate j gets
// E_j = −ln(u_j)/w_j, with u_j = (top 53 bits of (b0_j, b1_j) + 0.5)·2^−53 from the bits of
// element j of a draw of shape [n] (w_j = 1 without :p); the k smallest E_j (ties: lower j
// first), in increasing order, are the sample. Zero weights are never drawn.
//
// Traced keys: while a function is compiled, a key argument may be a symbolic tensor (SPEC
// §6.7: compiled code draws the same bits). Its words are then computed with primitives and the
// bits by the primitive version of random_bits (tensor/random.hpp), so the samplers record IR;
// a concrete key keeps the fast host loop. A symbolic f32[4] is taken to be a valid key value
// (its limbs cannot be checked); a symbolic rank-0 integer is a seed, a symbolic [2] two words.
#include <algorithm>
#include <cmath>

#include "builtins/random.hpp"
#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/promote.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/gather.hpp"
#include "tensor/layout.hpp"
#include "tensor/random.hpp"
#include "tensor/reduce.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

std::optional<uint32_t> word_of(std::optional<double> d) {
  if (!d || !(*d >= 0 && *d <= 4294967295.0) || std::trunc(*d) != *d) return std::nullopt;
  return static_cast<uint32_t>(*d);
}

RandomKey arg_key(const CallArgs& a, size_t i) {
  const Value& v = a[i];
  if (v.is(Kind::Int)) return key_from_seed(v.as_int());
  std::optional<uint32_t> w0, w1;
  if (v.is(Kind::Tensor)) {
    const Tensor& t = v.as_tensor();
    if (auto k = key_of_limbs(t)) return *k;
    if (t.rank() == 0 && is_int(t.dtype())) return key_from_seed(static_cast<int64_t>(t.get(0)));
    if (t.rank() == 1 && t.numel() == 2) w0 = word_of(t.get(0)), w1 = word_of(t.get(1));
  } else if (v.is_list() && v.as_list().items.size() == 2) {
    w0 = word_of(number_of(v.as_list().items[0])), w1 = word_of(number_of(v.as_list().items[1]));
  }
  if (w0 && w1) return {*w0, *w1};
  type_error(a, i, "a key (from random-key), an integer seed or a list of two 32-bit words");
}

Tensor u32c(uint32_t v) { return Tensor::scalar(DType::U32, v); }

// Rank-0 u32 word from element i of a 1-D tensor (by primitives).
Tensor word_at(const Tensor& t, int64_t i) { return convert(reshape(slice(t, {i}, {i + 1}, {1}), {}), DType::U32); }

// key_from_seed on a rank-0 integer tensor: w0 = the seed's low 32 bits, w1 = its sign extension.
// Built from non-negative pieces because convert saturates negative values to u32.
KeyWords seed_words(const Tensor& seed) {
  if (seed.dtype() == DType::U32) return {seed, u32c(0)};
  auto piece = [&](Binary op, uint32_t v) { return convert(binary(op, seed, Tensor::scalar(DType::I32, v)), DType::U32); };
  Tensor w0 = binary(Binary::Or, piece(Binary::And, 0xffff), binary(Binary::ShiftLeft, piece(Binary::ShiftRightLogical, 16), u32c(16)));
  Tensor negative = binary(Binary::Lt, seed, Tensor::scalar(DType::I32, 0));
  return {w0, select(negative, u32c(0xffffffff), u32c(0))};
}

// A key argument: host words, or the words of a symbolic key (see the top of this file).
struct KeyArg {
  RandomKey host;
  std::optional<KeyWords> traced;
};

KeyArg key_arg(const CallArgs& a, size_t i) {
  const Value& v = a[i];
  if (!v.is(Kind::Tensor) || !v.as_tensor().is_symbolic()) return {arg_key(a, i), std::nullopt};
  const Tensor& t = v.as_tensor();
  if (t.shape() == Shape{4}) return {{}, key_words(t)};
  if (t.rank() == 0 && is_int(t.dtype())) return {{}, seed_words(t)};
  if (t.shape() == Shape{2}) return {{}, KeyWords{word_at(t, 0), word_at(t, 1)}};
  type_error(a, i, "a key (from random-key), an integer seed or a list of two 32-bit words");
}

RandomBits bits_of(const KeyArg& key, const Shape& shape, uint32_t stream) {
  return key.traced ? random_bits(*key.traced, shape, stream) : random_bits(key.host, shape, stream);
}

// Element count of `shape`, at most 2^32 per call (§6.7) and within the interpreter's limit.
int64_t checked_count(Interp& in, const CallArgs& a, const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) n = INT64_MAX;
  if (n > kMaxRandomElements)
    throw SheafError(fmt::format("{}: at most 2^32 elements per call, got shape [{}]", a.name, fmt::join(shape, " ")), a.site);
  in.check_elements(n, a.site);
  return n;
}

// The bits of a whole result of `shape` drawn from the key in argument `key_index`.
RandomBits draw(Interp& in, const CallArgs& a, size_t key_index, const Shape& shape) {
  KeyArg key = key_arg(a, key_index);
  checked_count(in, a, shape);
  return bits_of(key, shape, kSampleStream);
}

// Positional arguments of an option-taking call, with the arity check of its signature.
CallArgs positional(const CallArgs& a, const std::vector<Value>& pos, size_t lo, size_t hi, std::string_view sig) {
  if (pos.size() < lo || pos.size() > hi)
    throw SheafError(fmt::format("{}: expected {}, got {} positional arguments", a.name, sig, pos.size()), a.site);
  return CallArgs{pos, a.site, a.name};
}

Value b_random_key(Interp&, const CallArgs& a) { return Value::tensor(key_tensor(key_from_seed(arg_int(a, 0)))); }

Value b_random_split(Interp& in, const CallArgs& a) {
  KeyArg key = key_arg(a, 0);
  int64_t n = a.size() > 1 ? arg_int(a, 1) : 2;
  if (n < 0) throw SheafError(fmt::format("random-split: n must be non-negative, got {}", n), a.site);
  if (n > kMaxRandomElements) throw SheafError(fmt::format("random-split: at most 2^32 children per split, got {}", n), a.site);
  in.check_elements(n, a.site);
  RandomBits bits = bits_of(key, {n}, kSplitStream);  // child i: threefry(key, (i, 1))
  std::vector<Value> children;
  children.reserve(static_cast<size_t>(n));
  if (key.traced) {
    Tensor limbs = key_limbs_of_words(bits.b0, bits.b1);  // [n 4]
    for (int64_t i = 0; i < n; ++i) children.push_back(Value::tensor(reshape(slice(limbs, {i, 0}, {i + 1, 4}, {1, 1}), {4})));
  } else {
    const uint32_t* b0 = bits.b0.data<uint32_t>();
    const uint32_t* b1 = bits.b1.data<uint32_t>();
    for (int64_t i = 0; i < n; ++i) children.push_back(Value::tensor(key_tensor({b0[i], b1[i]})));
  }
  return Value::list(std::move(children));
}

}  // namespace

Tensor uniform_sample(Interp& in, const CallArgs& a, size_t key_index, const Shape& shape) {
  return uniform_from_bits(draw(in, a, key_index, shape).b0);
}

Tensor normal_sample(Interp& in, const CallArgs& a, size_t key_index, const Shape& shape) {
  RandomBits bits = draw(in, a, key_index, shape);
  return normal_from_bits(bits.b0, bits.b1);
}

namespace {

// A bound of random-uniform: a number, or a traced rank-0 value, as a rank-0 f32 tensor.
Tensor bound(const CallArgs& a, const Value& v, std::string_view name) {
  if (is_traced(v) && v.as_tensor().rank() == 0) return convert(v.as_tensor(), DType::F32);
  auto d = number_of(v);
  if (!d) throw SheafError(fmt::format("random-uniform: :{} must be a number, got {}", name, kind_name(v.kind())), a.site);
  return Tensor::scalar(DType::F32, *d);
}

// u in [0, 1); with :minval/:maxval (defaults 0 and 1), minval + (maxval − minval)·u in f32.
Value b_random_uniform(Interp& in, const CallArgs& a) {
  Options o = parse_options(a, {"minval", "maxval"});
  CallArgs pa = positional(a, o.positional, 2, 2, "(random-uniform key shape [:minval a] [:maxval b])");
  Tensor u = uniform_sample(in, pa, 0, arg_shape(pa, 1));
  if (!o.get("minval") && !o.get("maxval")) return Value::tensor(u);
  Tensor lo = o.get("minval") ? bound(a, *o.get("minval"), "minval") : Tensor::scalar(DType::F32, 0);
  Tensor hi = o.get("maxval") ? bound(a, *o.get("maxval"), "maxval") : Tensor::scalar(DType::F32, 1);
  return Value::tensor(binary(Binary::Add, lo, binary(Binary::Mul, binary(Binary::Sub, hi, lo), u)));
}

// `:dtype` is read here rather than by parse_options: its value is a keyword, which
// parse_options would take for a second flag.
Value b_random_normal(Interp& in, const CallArgs& a) {
  std::vector<Value> pos;
  DType d = DType::F32;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].is(Kind::Keyword) && a[i].as_str() == "dtype" && i + 1 < a.size()) {
      d = dtype_value(a[++i], a);
      if (!is_float(d)) throw SheafError(fmt::format("random-normal: :dtype must be :f32, :f16 or :bf16, got :{}", dtype_name(d)), a.site);
    } else {
      pos.push_back(a[i]);
    }
  }
  CallArgs pa = positional(a, pos, 2, 2, "(random-normal key shape [:dtype d])");
  return Value::tensor(convert(normal_sample(in, pa, 0, arg_shape(pa, 1)), d));
}

Value b_random_randint(Interp& in, const CallArgs& a) {
  int64_t low = arg_int(a, 2), high = arg_int(a, 3);
  if (high <= low) throw SheafError("random-randint: high must be > low", a.site);
  if (low < INT32_MIN || high > int64_t{1} << 31)
    throw SheafError(fmt::format("random-randint: low and high must lie in the i32 range, got {} and {}", low, high), a.site);
  return Value::tensor(randint_from_bits(draw(in, a, 0, arg_shape(a, 1)).b0, low, high));
}

// :p of choice: n finite non-negative f32 weights with a positive sum.
std::vector<float> choice_weights(const CallArgs& a, const Value& p, int64_t n) {
  std::vector<float> w;
  if (p.is(Kind::Tensor) && p.as_tensor().rank() == 1) {
    Tensor t = convert(p.as_tensor(), DType::F32);
    w.assign(t.data<float>(), t.data<float>() + t.numel());
  } else if (p.is_list()) {
    for (const Value& x : p.as_list().items) {
      auto d = number_of(x);
      if (!d) throw SheafError("choice: :p must be a 1-D tensor or a list of numbers", a.site);
      w.push_back(static_cast<float>(*d));
    }
  } else {
    throw SheafError("choice: :p must be a 1-D tensor or a list of numbers", a.site);
  }
  if (static_cast<int64_t>(w.size()) != n)
    throw SheafError(fmt::format("choice: :p has {} weights for a population of {}", w.size(), n), a.site);
  float total = 0;
  for (float x : w) {
    if (!(x >= 0) || std::isinf(x)) throw SheafError("choice: :p weights must be finite and non-negative", a.site);
    total += x;
  }
  if (total == 0) throw SheafError("choice: :p weights sum to zero", a.site);
  return w;
}

// index_e = min(n−1, #{j : c_j ≤ u_e·c_{n−1}}), c the running f32 sums of w (§6.7). On
// symbolic u the count is a sum over a [shape n] comparison, by primitives.
Tensor inverse_cdf(const Tensor& u, const std::vector<float>& w) {
  std::vector<float> c(w.size());
  float s = 0;
  for (size_t j = 0; j < w.size(); ++j) c[j] = s += w[j];  // non-decreasing: w_j ≥ 0
  if (u.is_symbolic()) {
    Tensor cs = Tensor::empty(DType::F32, {static_cast<int64_t>(c.size())});
    std::copy(c.begin(), c.end(), cs.mutable_data<float>());
    Shape column = u.shape();
    column.push_back(1);
    Tensor t = reshape(binary(Binary::Mul, u, Tensor::scalar(DType::F32, c.back())), column);
    Tensor count = reduce(Reduce::Sum, convert(binary(Binary::Le, cs, t), DType::I32), {u.rank()});
    return binary(Binary::Min, count, Tensor::scalar(DType::I32, static_cast<double>(c.size() - 1)));
  }
  Tensor out = Tensor::empty(DType::I32, u.shape());
  const float* pu = u.data<float>();
  int32_t* po = out.mutable_data<int32_t>();
  auto last = static_cast<int64_t>(c.size()) - 1;
  for (int64_t e = 0; e < out.numel(); ++e) {
    int64_t count = std::upper_bound(c.begin(), c.end(), pu[e] * c.back()) - c.begin();
    po[e] = static_cast<int32_t>(std::min(last, count));
  }
  return out;
}

// Sampling without replacement: the exponential race described at the top of this file.
Tensor exponential_race(const CallArgs& a, const RandomBits& bits, const std::vector<float>& w, const Shape& shape) {
  const uint32_t* b0 = bits.b0.data<uint32_t>();
  const uint32_t* b1 = bits.b1.data<uint32_t>();
  std::vector<std::pair<double, int64_t>> race;  // (E_j, j)
  for (int64_t j = 0; j < bits.b0.numel(); ++j) {
    double wj = w.empty() ? 1.0 : w[static_cast<size_t>(j)];
    if (wj == 0) continue;
    double u = (static_cast<double>((uint64_t{b0[j]} << 21) | (b1[j] >> 11)) + 0.5) * 0x1p-53;
    race.emplace_back(-std::log(u) / wj, j);
  }
  auto k = static_cast<size_t>(shape_numel(shape));
  if (k > race.size())
    throw SheafError(fmt::format("choice: cannot draw {} samples without replacement from {} candidates", k, race.size()), a.site);
  std::partial_sort(race.begin(), race.begin() + static_cast<std::ptrdiff_t>(k), race.end());
  Tensor out = Tensor::empty(DType::I32, shape);
  int32_t* po = out.mutable_data<int32_t>();
  for (size_t i = 0; i < k; ++i) po[i] = static_cast<int32_t>(race[i].second);
  return out;
}

Value b_choice(Interp& in, const CallArgs& a) {
  Options o = parse_options(a, {"p", "replace"});
  CallArgs pa = positional(a, o.positional, 2, 3, "(choice key a [shape] [:p probs] [:replace bool])");
  const Tensor* population = nullptr;
  int64_t n;
  if (pa[1].is(Kind::Tensor) && pa[1].as_tensor().rank() >= 1) {
    population = &pa[1].as_tensor();
    n = population->dim(0);
    if (n == 0) throw SheafError(fmt::format("choice: cannot sample from {}, it has no rows", type_str(*population)), a.site);
  } else {
    n = arg_int(pa, 1);
    if (n < 1 || n > INT32_MAX) throw SheafError(fmt::format("choice: a must be in [1, 2^31), got {}", n), a.site);
  }
  Shape shape = pa.size() > 2 ? arg_shape(pa, 2) : Shape{};
  std::vector<float> w;
  if (const Value* p = o.get("p")) w = choice_weights(a, *p, n);
  const Value* replace = o.get("replace");
  Tensor idx;
  if (!replace || replace->truthy()) {
    RandomBits bits = draw(in, pa, 0, shape);
    idx = w.empty() ? randint_from_bits(bits.b0, 0, n) : inverse_cdf(uniform_from_bits(bits.b0), w);
  } else {
    if (pa[0].is(Kind::Tensor) && pa[0].as_tensor().is_symbolic())
      throw TraceAbort("choice without replacement runs in the interpreter only");
    checked_count(in, pa, shape);
    idx = exponential_race(a, draw(in, pa, 0, {n}), w, shape);
  }
  if (population) in.check_elements(shape_numel(shape) * (population->numel() / n), a.site);
  return Value::tensor(population ? take(*population, idx, 0) : idx);
}

// Inverted dropout: keep where u ≥ rate (u uniform over x's shape), kept values scaled by
// 1/(1 − rate) in f32; integer x computes in f32. Rate 0 returns x itself.
Value b_dropout(Interp& in, const CallArgs& a) {
  Operand x = operand(a, 0);
  double r = arg_number(a, 2);
  if (!(r >= 0 && r <= 1)) throw SheafError(fmt::format("dropout: rate must be in [0, 1], got {}", static_cast<float>(r)), a.site);
  key_arg(a, 1);
  if (r == 0) return a[0];
  RandomBits bits = draw(in, a, 1, x.t.shape());
  auto rate = static_cast<float>(r);
  DType d = float_dtype(x.t.dtype());
  Tensor keep = binary(Binary::Ge, uniform_from_bits(bits.b0), Tensor::scalar(DType::F32, rate));
  Tensor kept = binary(Binary::Mul, convert(x.t, d), Tensor::scalar(d, 1.0f / (1.0f - rate)));
  return Value::tensor(select(keep, kept, Tensor::scalar(d, 0)));
}

const BuiltinDef kRandom[] = {
    {"random-key", "(random-key seed)", "Key from an integer seed (an f32[4] of 16-bit limbs).", b_random_key, 1, 1},
    {"random-split", "(random-split key [n])", "List of n child keys (default 2).", b_random_split, 1, 2},
    {"random-uniform", "(random-uniform key shape [:minval a] [:maxval b])",
     "f32 samples uniform in [minval, maxval), by default [0, 1).", b_random_uniform, 2, 6},
    {"random-normal", "(random-normal key shape [:dtype d])", "Standard normal samples (generated in f32, then cast).", b_random_normal, 2, 4},
    {"random-randint", "(random-randint key shape low high)", "i32 samples uniform in [low, high).", b_random_randint, 4, 4},
    {"choice", "(choice key a [shape] [:p probs] [:replace bool])",
     "Samples from (arange a) or the rows of tensor a; optional weights; with replacement by default.", b_choice, 2, 7},
    {"dropout", "(dropout x key rate)", "Inverted dropout: zero with probability rate, scale kept values by 1/(1-rate).", b_dropout, 3, 3},
};

}  // namespace

std::span<const BuiltinDef> random_builtins() { return kRandom; }

}  // namespace sheaf
