// tests/fuzz/fuzz_safetensors_index.cpp — libFuzzer target for safetensors index files (SPEC §7.2,
// §7.4): each input becomes model/model.safetensors.index.json in the scratch directory, beside
// two shards, and is loaded with load_safetensors_index. Outside model/ lies secret.safetensors
// (tensor "secret"), reachable through a link model/link.safetensors and through ../: an index
// that loads must never expose it, since shard paths must stay inside the index's folder.
#include <cstdio>

#include "harness.hpp"
#include "io/formats.hpp"

namespace {

sheaf::Value tensors(std::initializer_list<std::pair<std::string, sheaf::Shape>> named) {
  std::vector<std::pair<std::string, sheaf::Value>> entries;
  for (const auto& [name, shape] : named) entries.emplace_back(name, sheaf::Value::tensor(sheaf::Tensor(sheaf::DType::F32, shape)));
  return sheaf::make_dict(std::move(entries));
}

// The index's path, after the shards, the secret and the link have been made once.
const std::string& index_path() {
  static const std::string path = [] {
    const auto& root = sheaf::fuzz::scratch_dir();
    std::filesystem::create_directory(root / "model");
    sheaf::save_safetensors((root / "model" / "a.safetensors").string(), tensors({{"a", {2}}, {"b.c", {3, 1}}}));
    sheaf::save_safetensors((root / "model" / "b.safetensors").string(), tensors({{"d", {0, 4}}, {"e", {}}}));
    sheaf::save_safetensors((root / "secret.safetensors").string(), tensors({{"secret", {1}}}));
    std::filesystem::create_symlink("../secret.safetensors", root / "model" / "link.safetensors");
    return (root / "model" / "model.safetensors.index.json").string();
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = index_path();
  sheaf::fuzz::write_file(path, sheaf::fuzz::as_text(data, size));
  sheaf::fuzz::expect_sheaf_errors_only([&] {
    sheaf::Value h = sheaf::load_safetensors_index(path);
    if (!h.as<sheaf::HandleObj>().read(sheaf::Value::string("secret"), {}).is_nil()) {
      std::fprintf(stderr, "the index reached a shard outside its folder\n");
      std::abort();
    }
    return sheaf::fuzz::touch(h);
  });
  return 0;
}
