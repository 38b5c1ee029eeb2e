// base/stack.hpp — stack-depth probe for the recursive reader and evaluator.
// Recursion over user input (nesting, recursive functions) must end in an error, never a stack
// overflow, whatever stack the calling thread has (CLI thread, test runner, Python binding).
#pragma once

namespace sheaf {
// True when the calling thread has less than ~1 MiB of stack left below the current frame.
bool stack_exhausted();
// The deepest nesting of lists and dicts a data file (JSON, pickle) may have when read or written;
// deeper data is an error naming the file.
constexpr int kMaxDataNesting = 10000;
}  // namespace sheaf
