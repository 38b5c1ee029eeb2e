// tests/unit/reference_test.cpp — the generated reference (docs/reference.hpp) covers every entry
// of the tables the interpreter dispatches on: each builtin and special form appears with its
// signature in docs/reference.md's text and in the REFERENCE of `sheaf init-ai`'s file, and
// every bundled module has its section.
#include <gtest/gtest.h>

#include "builtins/registry.hpp"
#include "docs/reference.hpp"
#include "eval/interp.hpp"
#include "eval/modules.hpp"

namespace sheaf {
namespace {

TEST(Reference, ListsEveryBuiltinAndSpecialForm) {
  std::string ref = reference_markdown();
  std::string ai = ai_context();
  size_t at = ai.find("\n## REFERENCE\n");
  ASSERT_NE(at, std::string::npos);
  std::string ai_ref = ai.substr(at);
  ASSERT_GT(builtin_table().size(), 100u);
  for (const BuiltinDef* d : builtin_table()) {
    std::string line = "- `" + std::string(d->signature) + "` — " + std::string(d->doc);
    EXPECT_NE(ref.find(line), std::string::npos) << d->name;
    EXPECT_NE(ai_ref.find(line), std::string::npos) << d->name;
    EXPECT_EQ(d->signature.rfind("(" + std::string(d->name), 0), 0u) << "signature of " << d->name << " starts with its name";
  }
  for (const SpecialForm& f : special_forms()) {
    EXPECT_NE(ref.find("- `" + std::string(f.signature) + "`"), std::string::npos) << f.name;
    EXPECT_NE(ai_ref.find("- `" + std::string(f.signature) + "`"), std::string::npos) << f.name;
  }
  for (std::string_view m : bundled_module_names()) EXPECT_NE(ref.find("\n### " + std::string(m)), std::string::npos) << m;
}

TEST(Reference, ModulesListTheirPublicFunctionsWithTheirComments) {
  std::string ref = reference_markdown();
  EXPECT_NE(ref.find("- `(sgd-step p g lr)` — p − lr·g"), std::string::npos);
  EXPECT_NE(ref.find("- `(adam-step p g m v t lr & hyper)`"), std::string::npos);
  EXPECT_NE(ref.find("- `(when c & body)` — (when c body...)"), std::string::npos);
  EXPECT_EQ(ref.find("__adam-moments"), std::string::npos) << "private helpers stay out";
}

TEST(Reference, AiContextStartsWithTheGuide) {
  std::string ai = ai_context();
  EXPECT_EQ(ai.rfind("# Sheaf — context for coding assistants", 0), 0u);
  for (const char* section : {"## Concepts", "## Syntax and idioms", "## A training recipe", "## Common mistakes"})
    EXPECT_NE(ai.find(section), std::string::npos) << section;
}

}  // namespace
}  // namespace sheaf
