// base/stack.hpp — stack-depth probe for the recursive reader and evaluator.
// Recursion over user input (nesting, recursive functions) must end in an error, never a stack
// overflow, whatever stack the calling thread has (CLI thread, test runner, Python binding).
#pragma once

namespace sheaf {
// True when the calling thread has less than ~1 MiB of stack left below the current frame.
bool stack_exhausted();
}  // namespace sheaf
