// tests/fuzz/fuzz_eval.cpp — libFuzzer target for the reader and the evaluator.
// Each input is registered as a source, read with a nesting limit and evaluated form by form
// in a fresh interpreter with small depth/step/element limits. A SheafError is the expected
// outcome of bad input; any other exception, a crash, a sanitizer report or a hang is a bug.
// Build and run with scripts/run_fuzz.sh.
#include <sstream>

#include "builtins/init_runtime.hpp"
#include "eval/interp.hpp"
#include "harness.hpp"
#include "reader/reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sheaf::init_runtime();
  std::string text(sheaf::fuzz::as_text(data, size));
  uint32_t file = sheaf::sources::add("fuzz.shf", text);
  std::ostringstream out;
  sheaf::fuzz::expect_sheaf_errors_only([&] {
    sheaf::Interp in(out, sheaf::Limits{.max_depth = 200, .max_steps = 20000, .max_elements = 1 << 16});
    for (const sheaf::Form& form : sheaf::read_forms(text, file, sheaf::ReaderOptions{.max_depth = 200}))
      in.eval_toplevel(form.value);
  });
  return 0;
}
