// tests/fuzz/fuzz_idx_gz.cpp — libFuzzer target for the IDX reader's gzip path (SPEC §7.7): each
// input is an IDX file that is gzip-compressed here before load_idx_bytes reads it, so the fuzzer
// explores headers and sizes (claims beyond the data, tiny files inflating to a lot) rather than
// the deflate format. The corpus holds uncompressed IDX files.
#include <zlib.h>

#include "harness.hpp"
#include "io/formats.hpp"

namespace {

std::string gzip(std::string_view in) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&zs, in.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string gz = gzip(sheaf::fuzz::as_text(data, size));
  sheaf::fuzz::expect_sheaf_errors_only([&] {
    return sheaf::fuzz::touch(sheaf::load_idx_bytes(std::move(gz), "input-idx1-ubyte.gz", 1 << 24));
  });
  return 0;
}
