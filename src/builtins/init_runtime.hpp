// builtins/init_runtime.hpp — start-up: fills the evaluator's hooks (eval/hooks.hpp) with the
// layers above it: the builtin table, tracing, the JIT, observability and the special forms
// those layers define. Every entry point (the CLI, the Python module, the test runners, the
// fuzz and bench programs) calls it once before its first Interp; later calls do nothing.
#pragma once

namespace sheaf {

void init_runtime();

}  // namespace sheaf
