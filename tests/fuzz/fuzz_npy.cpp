// tests/fuzz/fuzz_npy.cpp — libFuzzer target for the npy reader (SPEC §7.5): each input is
// written to a file in the scratch directory and loaded with load_npy; a handle that loads has
// its first and last rows, a slice and the whole array read.
#include "harness.hpp"
#include "io/formats.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = (sheaf::fuzz::scratch_dir() / "input.npy").string();
  sheaf::fuzz::write_file(path, sheaf::fuzz::as_text(data, size));
  sheaf::fuzz::expect_sheaf_errors_only([&] {
    sheaf::Value v = sheaf::load_npy({path});
    if (!v.is(sheaf::Kind::Handle)) return sheaf::fuzz::touch(v);
    const auto& handle = v.as<sheaf::HandleObj>();
    uint64_t sum = handle.describe().size();
    if (handle.length() > 0) {
      sum += sheaf::fuzz::touch(handle.read(sheaf::Value::integer(0), {}));
      sum += sheaf::fuzz::touch(handle.read(sheaf::Value::integer(-1), {}));
      sum += sheaf::fuzz::touch(handle.read(sheaf::Value::slice(1, 3), {}));
    }
    return sum + sheaf::fuzz::touch(v);
  });
  return 0;
}
