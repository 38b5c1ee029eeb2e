// tests/fuzz/fuzz_jsonl.cpp — libFuzzer target for the JSONL reader (SPEC §7.8): each input is
// split into lines and parsed with jsonl_value (what load_jsonl runs on a file's text).
#include "harness.hpp"
#include "io/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sheaf::fuzz::expect_sheaf_errors_only(
      [&] { return sheaf::fuzz::touch(sheaf::jsonl_value(sheaf::fuzz::as_text(data, size), "input.jsonl")); });
  return 0;
}
