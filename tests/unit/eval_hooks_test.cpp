// tests/unit/eval_hooks_test.cpp — the evaluator's hooks (eval/hooks.hpp) as init_runtime()
// leaves them: every special-form row has its handler, the upper layers' forms work through
// them, and an interpreter made with a hook missing is refused with the name of what is missing.
#include <gtest/gtest.h>

#include <sstream>

#include "eval/hooks.hpp"
#include "eval/interp.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

TEST(EvalHooks, EverySpecialFormHasItsHandler) {
  for (const SpecialForm& sf : special_forms()) EXPECT_NE(sf.fn, nullptr) << sf.name;
  EXPECT_NO_THROW(check_hooks_installed());
}

TEST(EvalHooks, FormsDefinedByUpperLayersRun) {
  std::ostringstream out;
  Interp in(out);
  EXPECT_EQ(print_value(in.run_text("(guard :range [0 2] 1)", "<test>"), false), "1");
  EXPECT_EQ(print_value(in.run_text("((value-and-grad (fn [x] (* x x))) 3.0)", "<test>"), false), "(9.0, 6.0)");
}

TEST(EvalHooks, AnInterpreterWithoutTheJitHookIsRefused) {
  auto saved = eval_hooks.make_compiler;
  eval_hooks.make_compiler = nullptr;
  std::ostringstream out;
  try {
    Interp in(out);
    ADD_FAILURE() << "an Interp was made without the JIT hook";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("init_runtime() must run before the first interpreter (missing: jit)"),
              std::string::npos)
        << e.what();
  }
  eval_hooks.make_compiler = saved;
}

TEST(EvalHooks, DefiningAnUnknownSpecialFormIsAnError) {
  EXPECT_THROW(define_special_form("no-such-form", nullptr), std::logic_error);
}

}  // namespace
}  // namespace sheaf
