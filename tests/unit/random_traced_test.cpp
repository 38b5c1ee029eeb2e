// tests/unit/random_traced_test.cpp — the PRNG built from tensor primitives (SPEC §6.7: compiled
// code draws the same bits as the interpreter). Checks, bit for bit against the host loops of
// tensor/random.cpp: the primitive block on the spec's known answers, random_bits over keys,
// shapes and streams (eagerly on concrete keys), and the recorded IR of symbolic keys and bits
// run by the reference executor — the samplers on 2^19 draws covering both ends of u exhaustively.
// A small Recorder stands in for the tracer: it appends each recorded op to an ir::Graph.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>

#include "backend/ref/executor.hpp"
#include "builtins/registry.hpp"
#include "eval/interp.hpp"
#include "tensor/random.hpp"
#include "tensor/recorder.hpp"

namespace sheaf {
namespace {

// Records into `g` while alive; parameters are made with param(), results named by run().
class GraphRecorder : public ir::Recorder {
 public:
  ir::Graph g;
  GraphRecorder() { ir::set_active_recorder(this); }
  ~GraphRecorder() override { ir::set_active_recorder(nullptr); }

  Tensor param(DType d, Shape s) {
    ir::Attrs a;
    a.index = static_cast<int64_t>(g.params.size());
    int32_t id = g.add(ir::Op::Parameter, {}, a, {ir::Type{d, s}});
    return Tensor::symbolic(d, std::move(s), id);
  }
  std::vector<Tensor> record(ir::Op op, const std::vector<Tensor>& operands, const ir::Attrs& attrs,
                             const ir::Type* declared) override {
    std::vector<int32_t> ids;
    std::vector<ir::Type> in;
    for (const Tensor& t : operands) {
      ids.push_back(lift(t).symbol_id());
      in.push_back(g.type(ids.back()));
    }
    std::vector<ir::Type> out = ir::infer_types(op, in, attrs, declared);
    int32_t first = g.add(op, ids, attrs, out);
    std::vector<Tensor> r;
    for (size_t i = 0; i < out.size(); ++i) r.push_back(Tensor::symbolic(out[i].dtype, out[i].shape, first + static_cast<int32_t>(i)));
    return r;
  }
  Tensor lift(const Tensor& t) override {
    return t.is_symbolic() ? t : Tensor::symbolic(t.dtype(), t.shape(), g.emit_constant(t));
  }
  // Names the results (once) and runs the verified graph on `args`.
  std::vector<Tensor> run(const std::vector<Tensor>& results, const std::vector<Tensor>& args) {
    if (g.results.empty()) {
      for (const Tensor& r : results) g.results.push_back(lift(r).symbol_id());
      ir::verify(g);
    }
    return ref::run(g, args);
  }
  int count(ir::Op op) const {
    int n = 0;
    for (const ir::Node& node : g.nodes) n += node.op == op;
    return n;
  }
};

void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_FALSE(got.is_symbolic()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  if (std::memcmp(got.bytes(), want.bytes(), want.nbytes()) == 0) return;
  size_t es = dtype_size(want.dtype());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ(0, std::memcmp(got.bytes() + i * es, want.bytes() + i * es, es))
        << what << ": first difference at element " << i << " of " << want.numel() << ": " << got.get(i) << " vs " << want.get(i);
}

Tensor u32s(std::initializer_list<uint32_t> v) {
  Tensor t = Tensor::empty(DType::U32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.mutable_data<uint32_t>());
  return t;
}

KeyWords words(RandomKey k) { return {Tensor::scalar(DType::U32, k.w0), Tensor::scalar(DType::U32, k.w1)}; }

const RandomKey kKeys[] = {{0, 0}, {0xffffffff, 0xffffffff}, {0x13198a2e, 0x03707344}, {42, 0}, {0xdeadbeef, 0x01234567}};

TEST(RandomPrimitives, BlockOnTensorsGivesTheKnownAnswersOfSpec) {
  RandomBits a = threefry2x32(words({0, 0}), u32s({0}), u32s({0}));
  RandomBits b = threefry2x32(words({0xffffffff, 0xffffffff}), u32s({0xffffffff}), u32s({0xffffffff}));
  RandomBits c = threefry2x32(words({0x13198a2e, 0x03707344}), u32s({0x243f6a88}), u32s({0x85a308d3}));
  EXPECT_EQ(a.b0.data<uint32_t>()[0], 0x6b200159u);
  EXPECT_EQ(a.b1.data<uint32_t>()[0], 0x99ba4efeu);
  EXPECT_EQ(b.b0.data<uint32_t>()[0], 0x1cb996fcu);
  EXPECT_EQ(b.b1.data<uint32_t>()[0], 0xbb002be7u);
  EXPECT_EQ(c.b0.data<uint32_t>()[0], 0xc4923a9cu);
  EXPECT_EQ(c.b1.data<uint32_t>()[0], 0x483df7a0u);
}

TEST(RandomPrimitives, BitsEqualTheHostLoopOnConcreteKeys) {
  const Shape shapes[] = {{}, {1}, {7}, {3, 5}, {2, 3, 4}, {0, 4}, {1000}};
  const uint32_t streams[] = {kSampleStream, kSplitStream, 0x85a308d3};
  for (RandomKey k : kKeys)
    for (const Shape& s : shapes)
      for (uint32_t stream : streams) {
        RandomBits want = random_bits(k, s, stream), got = random_bits(key_tensor(k), s, stream);
        std::string what = fmt::format("key ({:#x}, {:#x}) shape [{}] stream {}", k.w0, k.w1, fmt::join(s, " "), stream);
        expect_same_bits(got.b0, want.b0, what + " b0");
        expect_same_bits(got.b1, want.b1, what + " b1");
      }
}

TEST(RandomPrimitives, KeyWordsAndLimbsRoundTrip) {
  for (RandomKey k : kKeys) {
    KeyWords w = key_words(key_tensor(k));
    EXPECT_EQ(w.w0.shape(), Shape{});
    EXPECT_EQ(w.w0.get(0), k.w0);
    EXPECT_EQ(w.w1.get(0), k.w1);
    Tensor limbs = key_limbs_of_words(w.w0, w.w1);
    expect_same_bits(limbs, key_tensor(k), "limbs");
  }
  RandomBits children = random_bits(key_from_seed(7), {5}, kSplitStream);
  Tensor limbs = key_limbs_of_words(children.b0, children.b1);
  ASSERT_EQ(limbs.shape(), (Shape{5, 4}));
  for (int64_t i = 0; i < 5; ++i) {
    RandomKey child{children.b0.data<uint32_t>()[i], children.b1.data<uint32_t>()[i]};
    Tensor want = key_tensor(child);
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(limbs.get(i * 4 + j), want.get(j)) << i << " " << j;
  }
}

TEST(RandomTraced, SymbolicKeyRecordsBitsThatMatchTheHostLoop) {
  GraphRecorder rec;
  Tensor key = rec.param(DType::F32, {4});
  RandomBits bits = random_bits(key, {3, 50}, kSampleStream);
  ASSERT_TRUE(bits.b0.is_symbolic());
  ASSERT_EQ(bits.b1.shape(), (Shape{3, 50}));
  Tensor children = key_limbs_of_words(random_bits(key, {4}, kSplitStream).b0, random_bits(key, {4}, kSplitStream).b1);
  EXPECT_EQ(rec.count(ir::Op::Iota), 3);  // the counters are an op, not a baked-in constant
  for (const ir::Node& n : rec.g.nodes) {
    if (n.op == ir::Op::Constant) {
      EXPECT_EQ(n.attrs.value.rank(), 0) << ir::print(rec.g);
    }
  }
  for (RandomKey k : kKeys) {
    std::vector<Tensor> out = rec.run({bits.b0, bits.b1, children}, {key_tensor(k)});
    RandomBits want = random_bits(k, {3, 50}, kSampleStream), split = random_bits(k, {4}, kSplitStream);
    expect_same_bits(out[0], want.b0, "b0");
    expect_same_bits(out[1], want.b1, "b1");
    for (int64_t i = 0; i < 4; ++i) {
      Tensor child = key_tensor({split.b0.data<uint32_t>()[i], split.b1.data<uint32_t>()[i]});
      for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(out[2].get(i * 4 + j), child.get(j));
    }
  }
}

// 2^19 bit patterns whose top 24 bits (all that u depends on) cover the first and the last 2^16
// values of u exhaustively (the clamp at 2^-24, the top of every randint range) and the rest of
// [0, 2^24) evenly with random jitter; the low 8 bits are random. `other` is a random word each.
struct UnitCoverage {
  static constexpr int64_t kN = int64_t{1} << 19, kEnd = int64_t{1} << 16;
  Tensor every, other;
  UnitCoverage() {
    RandomBits r = random_bits(key_from_seed(31337), {kN}, kSampleStream);
    const uint32_t* noise = r.b0.data<uint32_t>();
    every = Tensor::empty(DType::U32, {kN});
    uint32_t* e = every.mutable_data<uint32_t>();
    constexpr int64_t middle = kN - 2 * kEnd, step = ((int64_t{1} << 24) - 2 * kEnd) / middle;
    for (int64_t i = 0; i < kN; ++i) {
      int64_t v = i < kEnd ? i
                  : i >= kN - kEnd ? (int64_t{1} << 24) - (kN - i)
                                   : kEnd + (i - kEnd) * step + static_cast<int64_t>(noise[i] >> 8) % step;
      e[i] = (static_cast<uint32_t>(v) << 8) | (noise[i] & 0xff);
    }
    other = r.b1;
  }
};

TEST(RandomTraced, SamplersOnSymbolicBitsEqualTheHostLoops) {
  const UnitCoverage bits;
  const Shape shape = bits.every.shape();
  GraphRecorder rec;
  Tensor b0 = rec.param(DType::U32, shape), b1 = rec.param(DType::U32, shape);
  Tensor u = uniform_from_bits(b0), z = normal_from_bits(b0, b1);
  ASSERT_TRUE(u.is_symbolic() && z.is_symbolic());
  const std::pair<int64_t, int64_t> ranges[] = {
      {0, 10}, {-3, 7}, {0, 3}, {-1000003, 999983}, {0, (int64_t{1} << 24) + 1}, {INT32_MIN, int64_t{1} << 31}, {INT32_MAX - 9, int64_t{1} << 31}};
  std::vector<Tensor> results{u, z};
  for (auto [lo, hi] : ranges) results.push_back(randint_from_bits(b0, lo, hi));
  // Both orders: every u1 against random u2, and every u2 against random u1.
  for (bool swap : {false, true}) {
    const Tensor& x0 = swap ? bits.other : bits.every;
    const Tensor& x1 = swap ? bits.every : bits.other;
    std::vector<Tensor> out = rec.run(results, {x0, x1});
    expect_same_bits(out[0], uniform_from_bits(x0), "uniform");
    expect_same_bits(out[1], normal_from_bits(x0, x1), "normal");
    for (size_t i = 0; i < std::size(ranges); ++i)
      expect_same_bits(out[2 + i], randint_from_bits(x0, ranges[i].first, ranges[i].second),
                       fmt::format("randint [{}, {})", ranges[i].first, ranges[i].second));
  }
}

TEST(RandomTraced, WholeSamplerFromASymbolicKey) {
  GraphRecorder rec;
  Tensor key = rec.param(DType::F32, {4});
  RandomBits bits = random_bits(key, {400, 300}, kSampleStream);
  Tensor z = normal_from_bits(bits.b0, bits.b1), r = randint_from_bits(bits.b0, -5, 17);
  for (RandomKey k : {key_from_seed(0), key_from_seed(42), key_from_seed(-1)}) {
    std::vector<Tensor> out = rec.run({z, r}, {key_tensor(k)});
    RandomBits want = random_bits(k, {400, 300}, kSampleStream);
    expect_same_bits(out[0], normal_from_bits(want.b0, want.b1), "normal");
    expect_same_bits(out[1], randint_from_bits(want.b0, -5, 17), "randint");
  }
}

// The builtins with symbolic key arguments record IR that gives the interpreter's values.
class RandomBuiltinsTraced : public ::testing::Test {
 protected:
  std::ostringstream sink;
  Interp in{sink};
  Value call(std::string_view name, std::vector<Value> args) {
    const BuiltinDef* d = in.builtin_def(name);
    return d->fn(in, CallArgs{args, {}, d->name});
  }
  static Value shape(std::initializer_list<int64_t> dims) {
    std::vector<Value> v;
    for (int64_t d : dims) v.push_back(Value::integer(d));
    return Value::list(std::move(v));
  }
};

TEST_F(RandomBuiltinsTraced, SamplersSplitChoiceAndDropout) {
  GraphRecorder rec;
  Value key = Value::tensor(rec.param(DType::F32, {4}));
  Value x = Value::tensor(rec.param(DType::F32, {6, 5}));
  const std::vector<std::pair<std::string, std::vector<Value>>> calls = {
      {"random-uniform", {key, shape({6, 5})}},
      {"random-normal", {key, shape({30}), Value::keyword("dtype"), Value::keyword("bf16")}},
      {"random-randint", {key, shape({2, 7}), Value::integer(-4), Value::integer(9)}},
      {"choice", {key, Value::integer(10), shape({3, 3})}},
      {"choice", {key, Value::integer(4), shape({50}), Value::keyword("p"), Value::list({Value::real(0.1f), Value::real(0), Value::real(2.5f), Value::real(1)})}},
      {"dropout", {x, key, Value::real(0.3f)}},
  };
  std::vector<Tensor> results;
  for (const auto& [name, args] : calls) results.push_back(call(name, args).as_tensor());
  Value children = call("random-split", {key, Value::integer(3)});
  for (const Value& c : children.as_list().items) results.push_back(c.as_tensor());
  for (const Tensor& t : results) EXPECT_TRUE(t.is_symbolic());
  Tensor xs = Tensor::empty(DType::F32, {6, 5});
  for (int64_t i = 0; i < 30; ++i) xs.set(i, 1 + 0.5 * static_cast<double>(i));
  for (int64_t seed : {0, 42, -7}) {
    Value k = Value::tensor(key_tensor(key_from_seed(seed)));
    std::vector<Tensor> out = rec.run(results, {k.as_tensor(), xs});
    size_t i = 0;
    for (const auto& [name, args] : calls) {
      std::vector<Value> concrete = args;
      for (Value& v : concrete)
        if (v.is(Kind::Tensor)) v = v.as_tensor().symbol_id() == key.as_tensor().symbol_id() ? k : Value::tensor(xs);
      expect_same_bits(out[i++], call(name, concrete).as_tensor(), fmt::format("{} seed {}", name, seed));
    }
    Value split = call("random-split", {k, Value::integer(3)});
    for (const Value& c : split.as_list().items)
      expect_same_bits(out[i++], c.as_tensor(), fmt::format("random-split seed {}", seed));
  }
}

TEST_F(RandomBuiltinsTraced, SeedAndWordKeys) {
  GraphRecorder rec;
  Value seed = Value::tensor(rec.param(DType::I32, {}));
  Value pair = Value::tensor(rec.param(DType::U32, {2}));
  Tensor a = call("random-uniform", {seed, shape({64})}).as_tensor();
  Tensor b = call("random-uniform", {pair, shape({64})}).as_tensor();
  for (int32_t s : {0, 1, 42, -1, INT32_MIN, INT32_MAX}) {
    std::vector<Tensor> out = rec.run({a, b}, {Tensor::scalar(DType::I32, s), u32s({0xdeadbeef, 0x01234567})});
    expect_same_bits(out[0], uniform_from_bits(random_bits(key_from_seed(s), {64}, kSampleStream).b0), fmt::format("seed {}", s));
    expect_same_bits(out[1], uniform_from_bits(random_bits({0xdeadbeef, 0x01234567}, {64}, kSampleStream).b0), "words");
  }
}

TEST_F(RandomBuiltinsTraced, ChoiceWithoutReplacementStaysInTheInterpreter) {
  GraphRecorder rec;
  Value key = Value::tensor(rec.param(DType::F32, {4}));
  EXPECT_THROW(call("choice", {key, Value::integer(10), shape({3}), Value::keyword("replace"), Value::boolean(false)}), TraceAbort);
}

}  // namespace
}  // namespace sheaf
