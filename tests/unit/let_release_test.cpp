// tests/unit/let_release_test.cpp — a `let` frees the value of a name it binds again as soon as
// no closure can still see the old binding (eval/special_forms.cpp: release_shadowed), so a
// training loop written as `(let [s (step s) s (step s)] ...)` holds one state, not one per
// binding; a closure made in between keeps the value it saw.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>

#include "eval/interp.hpp"

namespace sheaf {
namespace {

std::weak_ptr<Obj> watched;

// (watch x): remembers x (a collection) without holding it; returns nil.
Value watch(Interp&, const CallArgs& a) {
  watched = a[0].shared();
  return Value::nil();
}
// (watched-alive): whether the watched value still exists.
Value watched_alive(Interp&, const CallArgs&) { return Value::boolean(!watched.expired()); }

const BuiltinDef kWatch{"watch", "(watch x)", "test probe", watch, 1, 1};
const BuiltinDef kAlive{"watched-alive", "(watched-alive)", "test probe", watched_alive, 0, 0};

// The value of the last form of `text`, run with the two probes defined.
Value run_with_probes(const std::string& text) {
  std::ostringstream out;
  Interp in(out);
  for (const BuiltinDef* d : {&kWatch, &kAlive})
    in.define(symbols::intern(d->name), Value::object(Kind::Builtin, std::make_shared<BuiltinObj>(d)), Interp::Global::Type::Def, {});
  watched.reset();
  return in.run_text(text, "let_release_test.shf");
}

TEST(LetRelease, ARebindingFreesTheOldValue) {
  Value v = run_with_probes("(let [s [1 2 3] _ (watch s) s (count s)] [(watched-alive) s])");
  ASSERT_TRUE(v.is_list());
  EXPECT_FALSE(v.as_list().items[0].truthy()) << "the first s is still held by the let";
  EXPECT_EQ(v.as_list().items[1].as_int(), 3);
}

TEST(LetRelease, AClosureKeepsWhatItSaw) {
  Value v = run_with_probes("(let [s [1 2 3] _ (watch s) f (fn [] s) s 0] [(watched-alive) (count (f))])");
  ASSERT_TRUE(v.is_list());
  EXPECT_TRUE(v.as_list().items[0].truthy());
  EXPECT_EQ(v.as_list().items[1].as_int(), 3);
}

}  // namespace
}  // namespace sheaf
