// tests/fuzz/fuzz_safetensors.cpp — libFuzzer target for the safetensors reader (SPEC §7.4):
// each input is written to a file in the scratch directory and loaded with load_safetensors; when
// it loads, its names are listed and every tensor is read, by name and through materialization.
#include "harness.hpp"
#include "io/formats.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = (sheaf::fuzz::scratch_dir() / "input.safetensors").string();
  sheaf::fuzz::write_file(path, sheaf::fuzz::as_text(data, size));
  sheaf::fuzz::expect_sheaf_errors_only([&] {
    sheaf::Value h = sheaf::load_safetensors({path});
    const auto& handle = h.as<sheaf::HandleObj>();
    uint64_t sum = handle.describe().size() + static_cast<uint64_t>(handle.length());
    for (const std::string& k : handle.keys()) sum += sheaf::fuzz::touch(handle.read(sheaf::Value::string(k), {}));
    sum += sheaf::fuzz::touch(h);
    return sum;
  });
  return 0;
}
