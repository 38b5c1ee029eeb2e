// tests/fuzz/fuzz_pickle.cpp — libFuzzer target for the restricted pickle loader
// (src/io/pickle_load.cpp). Each input is parsed as a pickle file; a SheafError is the
// expected outcome of bad input; any other exception, a crash, a sanitizer report, a hang or
// an allocation beyond a small multiple of the input is a bug. Seeds: tests/fuzz/corpus/pickle/
// (pickles of dicts, lists and NumPy arrays written by Python, protocols 2–5).
#include <cstddef>
#include <cstdint>
#include <span>

#include "harness.hpp"
#include "io/pickle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sheaf::fuzz::expect_sheaf_errors_only(
      [&] { sheaf::parse_pickle(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz.pkl"); });
  return 0;
}
