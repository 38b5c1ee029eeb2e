// tests/unit/init_runtime_env.cpp — the unit tests' entry point (GoogleTest's main) gets the
// evaluator's hooks like every other entry point: init_runtime() runs before any test, and
// before parameter generators that read the builtin table.
#include "builtins/init_runtime.hpp"

namespace {

[[maybe_unused]] const bool kRuntimeReady = (sheaf::init_runtime(), true);

}  // namespace
