// tests/unit/value_test.cpp — values nested far deeper than any stack: freeing, printing,
// comparing and hashing them use heap, not recursion. The tests run on the test runner's main
// thread (8 MiB of stack), where a recursive walk of 1M levels overflows.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "eval/interp.hpp"
#include "runtime/content_hash.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

constexpr int kDepth = 1000000;

// [[[...[leaf]...]]] with `depth` brackets.
Value nested_list(int depth, Value leaf) {
  Value v = Value::list({std::move(leaf)});
  for (int i = 1; i < depth; ++i) v = Value::list({std::move(v)});
  return v;
}

// {:a {:a ... {:a leaf}}} with `depth` dicts.
Value nested_dict(int depth, Value leaf) {
  Value v = std::move(leaf);
  for (int i = 0; i < depth; ++i) v = make_dict({{"a", std::move(v)}});
  return v;
}

TEST(DeepValues, AreFreedWithoutRecursion) {
  { Value v = nested_list(kDepth, Value::integer(1)); }
  { Value v = nested_dict(kDepth, Value::integer(1)); }
  // Lists and dicts alternating, and a chain whose middle is shared with another owner.
  Value v = Value::integer(0);
  for (int i = 0; i < kDepth; ++i) v = i % 2 ? Value::list({std::move(v)}) : make_dict({{"k", std::move(v)}});
  Value keep = nested_list(kDepth / 2, Value::integer(2));
  Value outer = Value::list({nested_list(kDepth / 2, keep), keep});
  v = Value();
  outer = Value();
  EXPECT_EQ(keep.as_list().items.size(), 1u);  // the shared part survives its other owner
}

TEST(DeepValues, PrintWithoutRecursion) {
  std::string s = print_value(nested_list(kDepth, Value::integer(7)));
  ASSERT_EQ(s.size(), 2u * kDepth + 1);
  EXPECT_EQ(s.substr(kDepth - 2, 5), "[[7]]");
  std::string d = print_value(nested_dict(3, Value::string("x")));
  EXPECT_EQ(d, "{:a {:a {:a 'x'}}}");
  EXPECT_EQ(print_value(nested_dict(kDepth, Value::nil())).size(), 5u * kDepth + 3);
  // The layout of each kind of collection, as the recursive printer wrote it.
  Value tuple1 = Value::tuple({Value::integer(1)});
  Value form = Value::list({Value::keyword("a"), Value::integer(1), Value::keyword("b"), Value::string("s")}, ListKind::Brace);
  Value mixed = Value::list({tuple1, Value::tuple({}), form, make_dict({}), Value::list({}), Value::real(0.5f)});
  EXPECT_EQ(print_value(mixed), "[(1,), (), {:a 1, :b 's'}, {}, [], 0.5]");
}

TEST(DeepValues, CompareWithoutRecursion) {
  Value a = nested_list(kDepth, Value::integer(1)), b = nested_list(kDepth, Value::real(1.0f));
  Value c = nested_list(kDepth, Value::integer(2));
  EXPECT_TRUE(equal(a, b));
  EXPECT_FALSE(equal(a, c));
  EXPECT_FALSE(equal(a, nested_list(kDepth - 1, Value::integer(1))));
  EXPECT_TRUE(equal(nested_dict(kDepth, Value::integer(3)), nested_dict(kDepth, Value::integer(3))));
  EXPECT_FALSE(equal(nested_dict(2, Value::integer(3)), make_dict({{"b", make_dict({{"a", Value::integer(3)}})}})));
  Value nan = Value::list({Value::real(NAN)});
  EXPECT_FALSE(equal(nan, nan));  // element-wise, also for the same list
}

TEST(DeepValues, HashAConstantWithoutRecursion) {
  std::ostringstream out;
  Interp in(out);
  in.define(symbols::intern("deep"), nested_list(kDepth, Value::integer(1)), Interp::Global::Type::Def, {});
  in.run_text("(defn f [x] (+ x (count deep)))", "hash.shf");
  std::string h = content_hash(in, in.global(symbols::intern("f"))->value);
  EXPECT_EQ(h.size(), 32u);
}

}  // namespace
}  // namespace sheaf
