// tests/fuzz/fuzz_idx.cpp — libFuzzer target for the IDX reader (SPEC §7.7), plain and gzip
// (detected by content, so both kinds of seed are in the corpus): each input is loaded with
// load_idx_bytes under a 2^24-element limit and the tensor read.
#include "harness.hpp"
#include "io/formats.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sheaf::fuzz::expect_sheaf_errors_only([&] {
    return sheaf::fuzz::touch(sheaf::load_idx_bytes(std::string(sheaf::fuzz::as_text(data, size)), "input.idx", 1 << 24));
  });
  return 0;
}
