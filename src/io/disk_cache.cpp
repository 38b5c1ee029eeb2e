// io/disk_cache.cpp — manifest reading, artifact validation and signing, atomic updates.
#include "io/disk_cache.hpp"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/artifact_trust.hpp"
#include "tensor/random.hpp"

namespace sheaf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Trouble = DiskCache::Trouble;

constexpr size_t kMaxManifestBytes = size_t{64} << 20;

// The manifest of `dir`; an empty object when it is missing, fails the file checks (a FIFO,
// someone else's) or does not parse, and then `why` (when given) says which.
json read_manifest(const std::string& dir, std::string* why = nullptr) {
  trust::Candidate c = trust::read_candidate((fs::path(dir) / "manifest.json").string(), kMaxManifestBytes);
  json m = c.problem.empty() ? json::parse(c.bytes, nullptr, /*allow_exceptions=*/false) : json();
  if (m.is_object() && m.contains("functions") && m["functions"].is_object()) return m;
  if (why) *why = c.problem.empty() ? "is not a Sheaf cache manifest" : c.problem;
  return json::object();
}

std::string str(const json& j, const char* field) {
  auto it = j.find(field);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The artifact entries of function `fn` in `m` (null when there are none).
json* artifacts_of(json& m, const std::string& fn) {
  if (!m.contains("functions") || !m["functions"].is_object() || !m["functions"].contains(fn)) return nullptr;
  json& f = m["functions"][fn];
  if (!f.is_object() || !f.contains("artifacts") || !f["artifacts"].is_object()) return nullptr;
  return &f["artifacts"];
}

bool same_size(const json& a, size_t size) {
  auto it = a.find("bytes");
  return it != a.end() && it->is_number_unsigned() && it->get<uint64_t>() == size;
}

// The file of entry `a` (of function `fn` under `key`) when it is the name find() reads,
// "<fn>.<backend>.<key>.<ext>" with no '/'; else "" (a manifest may name any file).
std::string own_file(const std::string& fn, const std::string& key, const json& a) {
  std::string file = a.is_object() ? str(a, "file") : "";
  const std::string prefix = fmt::format("{}.{}.{}.", fn, str(a, "backend"), key);
  bool own = file.size() > prefix.size() && file.compare(0, prefix.size(), prefix) == 0 && file.find('/') == std::string::npos;
  return own ? file : "";
}

void write_manifest(const std::string& dir, const json& m) {
  trust::replace_file((fs::path(dir) / "manifest.json").string(), m.dump(2) + "\n");
}

// The entry `a` of `function` under `key`, checked for `sheaf trust`: `bytes` receives the
// artifact's bytes when the file passes the checks (problem empty).
DiskCache::Listed check_for_signing(const std::string& dir, const std::string& function, const std::string& key, const json& a,
                                    std::string& bytes) {
  DiskCache::Listed l;
  l.function = function;
  l.file = key;
  if (!a.is_object()) {
    l.problem = "is not a manifest entry";
    return l;
  }
  l.backend = str(a, "backend"), l.compiler = str(a, "compiler"), l.file = str(a, "file");
  if (own_file(function, key, a).empty()) {
    l.problem = fmt::format("names a file other than its own ({}.{}.{}.*)", function, l.backend, key);
    return l;
  }
  trust::Candidate c = trust::read_candidate((fs::path(dir) / l.file).string());
  if (!c.problem.empty()) {
    l.problem = c.problem;
  } else if (!same_size(a, c.bytes.size())) {
    l.problem = fmt::format("holds {} bytes where the manifest says {} (an incomplete copy?)", c.bytes.size(), a.value("bytes", json()).dump());
  } else {
    l.bytes = c.bytes.size();
    bytes = std::move(c.bytes);
  }
  return l;
}

}  // namespace

std::string DiskCache::path_of(const ArtifactId& id) const {
  return (fs::path(dir_) / fmt::format("{}.{}.{}.{}", id.function, id.backend, id.key, id.ext)).string();
}

DiskCache::Found DiskCache::find(const ArtifactId& id, const std::string& compiler) const {
  std::error_code ec;
  if (!fs::exists(dir_, ec)) return {};
  const std::string folder = fs::path(dir_).filename().string();
  if (std::string why = trust::folder_problem(dir_); !why.empty())
    return {"", fmt::format("{} {}, so nothing in it is loaded", folder, why), Trouble::UnsafeFolder};
  json m = read_manifest(dir_);
  const json* arts = artifacts_of(m, id.function);
  if (!arts || !arts->contains(id.key) || !(*arts)[id.key].is_object()) return {};
  const json& a = (*arts)[id.key];
  std::string path = path_of(id);
  std::string name = folder + "/" + fs::path(path).filename().string();
  auto stale = [&](const char* why) { return Found{"", name + " is " + why, Trouble::Stale}; };
  if (const json& fn = m["functions"][id.function]; str(fn, "hash") != id.hash)
    return stale(str(fn, "code") == id.code ? "stale (a `def` value it reads changed, e.g. a setting from the command line)"
                                            : "stale (its code changed, or the code of a function it calls)");
  if (str(a, "digest") != id.digest) return stale("stale (built from different code)");
  if (!compiler.empty() && str(a, "compiler") != compiler) return stale("stale (built by another compiler)");
  trust::Candidate c = trust::read_candidate(path);
  if (c.missing) return stale("missing");
  if (!c.problem.empty()) return {"", name + " " + c.problem, Trouble::Untrusted};
  if (!same_size(a, c.bytes.size())) return stale("corrupt (truncated or resized)");
  if (std::string why = trust::mac_problem(c.bytes, str(a, "mac")); !why.empty()) return {"", name + " " + why, Trouble::Untrusted};
  return {std::move(c.bytes), "", Trouble::None};
}

std::string DiskCache::store(const ArtifactId& id, const std::string& compiler, const std::string& built) const {
  try {
    trust::make_folder(dir_);
    if (std::string why = trust::folder_problem(dir_); !why.empty()) return dir_ + " " + why;
    trust::Candidate bytes = trust::read_candidate(built);
    if (!bytes.problem.empty()) return fmt::format("{} {}", built, bytes.problem);
    std::string mac = trust::sign(bytes.bytes);
    json m = read_manifest(dir_);
    m["sheaf"] = SHEAF_VERSION;
    m["prng"] = std::string(kRandomVersion);
    if (!m.contains("functions")) m["functions"] = json::object();
    json& fn = m["functions"][id.function];
    if (!fn.is_object() || str(fn, "hash") != id.hash) {  // the function changed: its old artifacts go
      if (json* arts = artifacts_of(m, id.function))
        for (const auto& [key, a] : arts->items())
          if (std::string file = own_file(id.function, key, a); !file.empty()) {
            std::error_code ec;
            fs::remove(fs::path(dir_) / file, ec);
          }
      fn = json{{"hash", id.hash}, {"code", id.code}, {"artifacts", json::object()}};
    }
    trust::replace_file(path_of(id), bytes.bytes);
    if (!fn.contains("artifacts") || !fn["artifacts"].is_object()) fn["artifacts"] = json::object();
    fn["artifacts"][id.key] = json{{"file", fs::path(path_of(id)).filename().string()},
                                   {"backend", id.backend},
                                   {"args", id.args},
                                   {"digest", id.digest},
                                   {"bytes", bytes.bytes.size()},
                                   {"compiler", compiler},
                                   {"mac", mac}};
    write_manifest(dir_, m);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::vector<DiskCache::Listed> DiskCache::sign_all() const {
  if (std::string why = trust::folder_problem(dir_); !why.empty()) throw SheafError(fmt::format("{} {}", dir_, why));
  std::string why;
  json m = read_manifest(dir_, &why);
  if (!why.empty()) throw SheafError(fmt::format("{}/manifest.json {}", dir_, why));
  std::vector<Listed> out;
  bool signed_any = false;
  for (const auto& fn : m["functions"].items()) {
    json* arts = artifacts_of(m, fn.key());
    if (!arts) continue;
    for (auto& [key, a] : arts->items()) {
      std::string bytes;
      Listed l = check_for_signing(dir_, fn.key(), key, a, bytes);
      if (l.problem.empty()) {
        l.was_trusted = trust::mac_problem(bytes, str(a, "mac")).empty();
        a["mac"] = trust::sign(bytes);
        signed_any = true;
      }
      out.push_back(std::move(l));
    }
  }
  if (signed_any) write_manifest(dir_, m);
  return out;
}

}  // namespace sheaf
