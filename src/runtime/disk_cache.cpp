// runtime/disk_cache.cpp — manifest reading, artifact validation and atomic updates.
#include "runtime/disk_cache.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/cpu/render.hpp"
#include "io/atomic_write.hpp"
#include "tensor/random.hpp"

namespace sheaf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<std::string> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json read_manifest(const std::string& dir) {
  auto text = read_bytes((fs::path(dir) / "manifest.json").string());
  if (!text) return json::object();
  json m = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!m.is_object() || !m.contains("functions") || !m["functions"].is_object()) return json::object();
  return m;
}

std::string str(const json& j, const char* field) {
  auto it = j.find(field);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string DiskCache::path_of(const ArtifactId& id) const {
  return (fs::path(dir_) / fmt::format("{}.{}.{}.{}", id.function, id.backend, id.key, id.ext)).string();
}

DiskCache::Found DiskCache::find(const ArtifactId& id, const std::string& compiler) const {
  Found f;
  json m = read_manifest(dir_);
  if (!m.contains("functions") || !m["functions"].contains(id.function)) return f;
  const json& fn = m["functions"][id.function];
  if (!fn.is_object() || !fn.contains("artifacts") || !fn["artifacts"].is_object() || !fn["artifacts"].contains(id.key)) return f;
  const json& a = fn["artifacts"][id.key];
  if (!a.is_object()) return f;
  std::string path = path_of(id);
  std::string name = fmt::format("{}/{}", fs::path(dir_).filename().string(), fs::path(path).filename().string());
  if (str(fn, "hash") != id.hash) return {"", name + " is stale (the function changed)"};
  if (str(a, "digest") != id.digest) return {"", name + " is stale (built from different code)"};
  if (!compiler.empty() && str(a, "compiler") != compiler) return {"", name + " is stale (built by another compiler)"};
  auto bytes = read_bytes(path);
  if (!bytes) return {"", name + " is missing"};
  auto expected = a.find("bytes");
  if (expected == a.end() || !expected->is_number_unsigned() || expected->get<uint64_t>() != bytes->size())
    return {"", name + " is corrupt (truncated or resized)"};
  if (str(a, "checksum") != cpu::digest_of(*bytes)) return {"", name + " is corrupt (checksum mismatch)"};
  f.path = path;
  return f;
}

std::string DiskCache::store(const ArtifactId& id, const std::string& compiler, const std::string& built) const {
  try {
    fs::create_directories(dir_);
    auto bytes = read_bytes(built);
    if (!bytes) return fmt::format("cannot read {}", built);
    json m = read_manifest(dir_);
    m["sheaf"] = SHEAF_VERSION;
    m["prng"] = std::string(kRandomVersion);
    if (!m.contains("functions")) m["functions"] = json::object();
    json& fn = m["functions"][id.function];
    if (!fn.is_object() || str(fn, "hash") != id.hash) {  // the function changed: its old artifacts go
      if (fn.is_object() && fn.contains("artifacts") && fn["artifacts"].is_object())
        for (const auto& [key, a] : fn["artifacts"].items()) {
          std::string file = a.is_object() ? str(a, "file") : "";
          if (!file.empty() && file.find('/') == std::string::npos && file != "manifest.json") {
            std::error_code ec;
            fs::remove(fs::path(dir_) / file, ec);
          }
        }
      fn = json{{"hash", id.hash}, {"artifacts", json::object()}};
    }
    write_file_atomic(path_of(id), *bytes);
    if (!fn.contains("artifacts") || !fn["artifacts"].is_object()) fn["artifacts"] = json::object();
    fn["artifacts"][id.key] = json{{"file", fs::path(path_of(id)).filename().string()},
                                   {"backend", id.backend},
                                   {"args", id.args},
                                   {"digest", id.digest},
                                   {"bytes", bytes->size()},
                                   {"checksum", cpu::digest_of(*bytes)},
                                   {"compiler", compiler}};
    write_file_atomic((fs::path(dir_) / "manifest.json").string(), m.dump(2) + "\n");
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace sheaf
