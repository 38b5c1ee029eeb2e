// tests/fuzz/fuzz_json.cpp — libFuzzer target for the JSON reader (SPEC §7.8): each input is
// parsed with json_value (what load_json runs on a file's text) and the value walked.
#include "harness.hpp"
#include "io/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sheaf::fuzz::expect_sheaf_errors_only(
      [&] { return sheaf::fuzz::touch(sheaf::json_value(sheaf::fuzz::as_text(data, size), "input.json")); });
  return 0;
}
