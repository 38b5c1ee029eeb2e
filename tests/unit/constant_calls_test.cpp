// tests/unit/constant_calls_test.cpp — builtins called again with the same known arguments while a
// function is traced return the first call's result (eval/constant_calls.hpp): the keys (known
// arguments only; small tensors by their bytes, large ones by identity; nothing for a builtin
// with effects), what is kept (large tensor results, until cleared), and a traced function that
// builds the same causal mask twice builds it once and still computes the right values.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "eval/constant_calls.hpp"
#include "eval/interp.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

const BuiltinDef kPure{"pure", "(pure ...)", "a builtin without effects", nullptr};
const BuiltinDef kEffectful{"effect", "(effect ...)", "a builtin with effects", nullptr, 0, -1, true};

Value big(float v) {  // 64 KiB of f32
  Tensor t = Tensor::empty(DType::F32, {128, 128});
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_data<float>()[i] = v;
  return Value::tensor(std::move(t));
}

TEST(ConstantCalls, KeysNameKnownArgumentsOnly) {
  const std::vector<Value> shape{Value::tensor(Tensor::scalar(DType::I32, 3)), Value::integer(2), Value::real(0.5f)};
  const std::vector<Value> same{Value::tensor(Tensor::scalar(DType::I32, 3)), Value::integer(2), Value::real(0.5f)};
  const std::vector<Value> other{Value::tensor(Tensor::scalar(DType::I32, 4)), Value::integer(2), Value::real(0.5f)};
  ASSERT_TRUE(constant_call_key(kPure, shape));
  EXPECT_EQ(constant_call_key(kPure, shape), constant_call_key(kPure, same)) << "small tensors are keyed by their bytes";
  EXPECT_NE(constant_call_key(kPure, shape), constant_call_key(kPure, other));
  EXPECT_FALSE(constant_call_key(kEffectful, shape)) << "a builtin with effects runs every time";
  const std::vector<Value> traced{Value::tensor(Tensor::symbolic(DType::F32, {2}, 0))};
  EXPECT_FALSE(constant_call_key(kPure, traced));
  const Value a = big(1), b = big(1);
  EXPECT_EQ(constant_call_key(kPure, std::vector<Value>{a}), constant_call_key(kPure, std::vector<Value>{a}));
  EXPECT_NE(constant_call_key(kPure, std::vector<Value>{a}), constant_call_key(kPure, std::vector<Value>{b}))
      << "large tensors are keyed by identity";
}

TEST(ConstantCalls, LargeTensorResultsAreKeptUntilCleared) {
  clear_constant_calls();
  const std::vector<Value> args{Value::integer(1)};
  const std::string key = *constant_call_key(kPure, args);
  keep_constant_call(key, Value::tensor(Tensor::scalar(DType::F32, 1)), args);
  EXPECT_EQ(find_constant_call(key), nullptr) << "a small result is not kept";
  const size_t reused = constant_calls_reused();
  const Value r = big(2);
  keep_constant_call(key, r, args);
  const Value* kept = find_constant_call(key);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->as_tensor().bytes(), r.as_tensor().bytes());
  EXPECT_EQ(constant_calls_reused(), reused + 1);
  clear_constant_calls();
  EXPECT_EQ(find_constant_call(key), nullptr);
}

// f builds the mask twice; traced, the second (ones, tril, ==) is the first's result. The sum
// counts the lower triangle twice (2 · 32896) and the rest once (32640).
TEST(ConstantCalls, ATracedFunctionBuildsItsMaskOnce) {
  std::ostringstream out;
  Interp in(out);
  const size_t reused = constant_calls_reused();
  const Value r = in.run_text(R"(
    (defn mask [] (== (tril (ones [256 256])) 1.0))
    (defn f [x] (sum (+ (where (mask) x 0.0) (where (mask) x 1.0))))
    (f (ones [256 256])))",
                              "<test>");
  EXPECT_EQ(print_value(r, false), "98432.0");
  EXPECT_EQ(constant_calls_reused(), reused + 3);
  EXPECT_EQ(print_value(in.run_text("(sum (mask))", "<test>"), false), "32896");
  EXPECT_EQ(constant_calls_reused(), reused + 3) << "interpreted calls are not kept";
}

}  // namespace
}  // namespace sheaf
